package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/meta"
)

// Transaction keyspaces; see doc.go.
const (
	prefixTxnHalf byte = 0x60
	prefixTxnEnd  byte = 0x61
	prefixTxnOp   byte = 0x62
)

// rocketMQCheckGroup is RocketMQ's name for the progress of its
// transaction checker: the consumer offset of this group on
// meta.TransHalfTopic queue 0 is the first half it has not handled.
const rocketMQCheckGroup = "CID_RMQ_SYS_TRANS"

const (
	txnHalfValueLen = 28
	// txnEndValueLen is an end's value without the record that carried
	// it (stores before the field, rollbacks, give-ups without their
	// copy's offset); txnEndByValueLen, with it.
	txnEndValueLen   = 9
	txnEndByValueLen = 17
)

// TxnHalf is a half message whose transaction has not ended (keyspace
// 0x60): the transaction checker asks its producer group about it.
type TxnHalf struct {
	// PhyOffset is the half message's CommitLog offset, the key.
	PhyOffset int64 `json:"phyOffset"`
	// QueueOffset is its offset in RMQ_SYS_TRANS_HALF_TOPIC queue 0 (the
	// tranStateTableOffset producers send back).
	QueueOffset int64 `json:"queueOffset"`
	// StoreTimestamp is when it was stored, in Unix milliseconds.
	StoreTimestamp int64 `json:"storeTimestamp"`
	// NextCheckAt is when the checker next asks the producer, in Unix
	// milliseconds.
	NextCheckAt int64 `json:"nextCheckAt"`
	// Checks counts the checks asked so far, from the half's
	// TRANSACTION_CHECK_TIMES when it carries one (-1 for a value that is
	// no number, as RocketMQ reads it).
	Checks int32 `json:"checks"`
}

// TxnState is how a transaction ended (keyspace 0x61). Commit and
// Rollback are the commitOrRollback codes of END_TRANSACTION.
type TxnState uint8

// Transaction end states.
const (
	// TxnDiscarded: given up after transactionCheckMax checks, or born
	// longer than fileReservedTime ago, the half copied to
	// TRANS_CHECK_MAX_TIME_TOPIC.
	TxnDiscarded TxnState = 1
	// TxnCommit: the real message was stored.
	TxnCommit TxnState = 8
	// TxnRollback: the half was dropped.
	TxnRollback TxnState = 12
)

// String names the state as RocketMQ's LocalTransactionState does.
func (s TxnState) String() string {
	switch s {
	case TxnDiscarded:
		return "DISCARDED"
	case TxnCommit:
		return "COMMIT_MESSAGE"
	case TxnRollback:
		return "ROLLBACK_MESSAGE"
	}
	return fmt.Sprintf("TxnState(%d)", uint8(s))
}

// TxnEnd is the end of one transaction (keyspace 0x61).
type TxnEnd struct {
	State TxnState
	// At is when it ended, in Unix milliseconds (0 when the dispatcher
	// learnt it from a committed record).
	At int64
	// By is the CommitLog offset of the committed message of a commit,
	// or of a give-up's copy in TRANS_CHECK_MAX_TIME_TOPIC; 0 when not
	// known (rollbacks, a copy that could not be stored, ends written
	// before the field). A recovery whose CommitLog lost a commit's
	// record opens the transaction again (DropAbove); a give-up stays.
	By int64
}

// Transactions is the transaction state: the open half messages (0x60)
// and how ended transactions ended (0x61), both keyed by the half
// message's CommitLog offset.
type Transactions struct {
	db *DB
}

// Transactions returns the transaction state tables.
func (d *DB) Transactions() *Transactions { return &Transactions{db: d} }

func txnKey(prefix byte, phy int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefix}, uint64(phy))
}

func encodeTxnHalf(h TxnHalf) []byte {
	v := make([]byte, 0, txnHalfValueLen)
	v = binary.BigEndian.AppendUint64(v, uint64(h.QueueOffset))
	v = binary.BigEndian.AppendUint64(v, uint64(h.StoreTimestamp))
	v = binary.BigEndian.AppendUint64(v, uint64(h.NextCheckAt))
	return binary.BigEndian.AppendUint32(v, uint32(h.Checks))
}

func decodeTxnHalf(k, v []byte) (TxnHalf, error) {
	if len(k) != 9 || k[0] != prefixTxnHalf || len(v) != txnHalfValueLen {
		return TxnHalf{}, fmt.Errorf("txn half key %x value %x: %w", k, v, ErrBadKey)
	}
	return TxnHalf{
		PhyOffset:      int64(binary.BigEndian.Uint64(k[1:])),
		QueueOffset:    int64(binary.BigEndian.Uint64(v)),
		StoreTimestamp: int64(binary.BigEndian.Uint64(v[8:])),
		NextCheckAt:    int64(binary.BigEndian.Uint64(v[16:])),
		Checks:         int32(binary.BigEndian.Uint32(v[24:])),
	}, nil
}

func encodeTxnEnd(e TxnEnd) []byte {
	v := append(make([]byte, 0, txnEndByValueLen), byte(e.State))
	v = binary.BigEndian.AppendUint64(v, uint64(e.At))
	if e.By > 0 {
		v = binary.BigEndian.AppendUint64(v, uint64(e.By))
	}
	return v
}

func decodeTxnEnd(k, v []byte) (int64, TxnEnd, error) {
	if len(k) != 9 || k[0] != prefixTxnEnd || (len(v) != txnEndValueLen && len(v) != txnEndByValueLen) {
		return 0, TxnEnd{}, fmt.Errorf("txn end key %x value %x: %w", k, v, ErrBadKey)
	}
	e := TxnEnd{State: TxnState(v[0]), At: int64(binary.BigEndian.Uint64(v[1:]))}
	if len(v) == txnEndByValueLen {
		if e.By = int64(binary.BigEndian.Uint64(v[9:])); e.By <= 0 {
			// encodeTxnEnd writes the field only for a record's offset.
			return 0, TxnEnd{}, fmt.Errorf("txn end key %x value %x: no record at %d: %w", k, v, e.By, ErrBadKey)
		}
	}
	return int64(binary.BigEndian.Uint64(k[1:])), e, nil
}

// AddHalf records an open half message in w, the dispatcher's batch that
// indexes it.
func (t *Transactions) AddHalf(w *pebble.Batch, h TxnHalf) error {
	if err := w.Set(txnKey(prefixTxnHalf, h.PhyOffset), encodeTxnHalf(h), nil); err != nil {
		return fmt.Errorf("record half message at %d: %w", h.PhyOffset, err)
	}
	return nil
}

// AddCommitted records in w, the dispatcher's batch that indexes the
// committed record at by, that the transaction of the half at halfPhy
// committed. A crash between storing the committed message and End leaves
// the transaction ended all the same once the record is dispatched again.
func (t *Transactions) AddCommitted(w *pebble.Batch, halfPhy, by int64) error {
	if err := w.Set(txnKey(prefixTxnEnd, halfPhy), encodeTxnEnd(TxnEnd{State: TxnCommit, By: by}), nil); err != nil {
		return fmt.Errorf("record commit of the half at %d: %w", halfPhy, err)
	}
	return nil
}

// End records durably how the transaction of the half at halfPhy ended
// and forgets the open half, in one synced batch.
func (t *Transactions) End(halfPhy int64, e TxnEnd) error {
	b := t.db.pdb.NewBatch()
	defer b.Close()
	if err := b.Set(txnKey(prefixTxnEnd, halfPhy), encodeTxnEnd(e), nil); err != nil {
		return fmt.Errorf("end transaction of the half at %d: %w", halfPhy, err)
	}
	if err := b.Delete(txnKey(prefixTxnHalf, halfPhy), nil); err != nil {
		return fmt.Errorf("end transaction of the half at %d: %w", halfPhy, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("end transaction of the half at %d: %w", halfPhy, err)
	}
	return nil
}

// Ended returns how the transaction of the half at halfPhy ended; ok is
// false while it is open (or was never seen).
func (t *Transactions) Ended(halfPhy int64) (e TxnEnd, ok bool, err error) {
	k := txnKey(prefixTxnEnd, halfPhy)
	v, err := t.db.get(k)
	if err != nil {
		return TxnEnd{}, false, fmt.Errorf("read end of the transaction of the half at %d: %w", halfPhy, err)
	}
	if v == nil {
		return TxnEnd{}, false, nil
	}
	_, e, err = decodeTxnEnd(k, v)
	return e, err == nil, err
}

// Half returns the open half at phy; ok is false when there is none.
func (t *Transactions) Half(phy int64) (h TxnHalf, ok bool, err error) {
	k := txnKey(prefixTxnHalf, phy)
	v, err := t.db.get(k)
	if err != nil {
		return TxnHalf{}, false, fmt.Errorf("read half at %d: %w", phy, err)
	}
	if v == nil {
		return TxnHalf{}, false, nil
	}
	h, err = decodeTxnHalf(k, v)
	return h, err == nil, err
}

// UpdateHalf rewrites an open half's check count and next check time. The
// write is not synced: Sync makes a pass's updates durable at once, and a
// crash before it forgets those checks, which are then asked again.
func (t *Transactions) UpdateHalf(h TxnHalf) error {
	if err := t.db.pdb.Set(txnKey(prefixTxnHalf, h.PhyOffset), encodeTxnHalf(h), pebble.NoSync); err != nil {
		return fmt.Errorf("update half at %d: %w", h.PhyOffset, err)
	}
	return nil
}

// Sync makes every earlier UpdateHalf and ForgetHalf durable (one sync of
// the index's write-ahead log for a whole checker pass).
func (t *Transactions) Sync() error {
	if err := t.db.SyncWAL(); err != nil {
		return fmt.Errorf("sync transaction state: %w", err)
	}
	return nil
}

// ForgetHalf deletes an open half without recording an end: its record is
// gone from the CommitLog. Not synced: a half brought back by a crash is
// found gone again.
func (t *Transactions) ForgetHalf(phy int64) error {
	if err := t.db.pdb.Delete(txnKey(prefixTxnHalf, phy), pebble.NoSync); err != nil {
		return fmt.Errorf("forget half at %d: %w", phy, err)
	}
	return nil
}

// OpenHalves calls fn for each open half in CommitLog order (oldest first)
// until fn returns false.
func (t *Transactions) OpenHalves(fn func(TxnHalf) bool) error {
	return t.OpenHalvesFrom(0, fn)
}

// OpenHalvesFrom is OpenHalves from the half at CommitLog offset from on.
func (t *Transactions) OpenHalvesFrom(from int64, fn func(TxnHalf) bool) error {
	var decodeErr error
	err := t.db.ScanFrom([]byte{prefixTxnHalf}, txnKey(prefixTxnHalf, max(from, 0)), func(k, v []byte) bool {
		h, err := decodeTxnHalf(k, v)
		if err != nil {
			decodeErr = err
			return false
		}
		return fn(h)
	})
	return errors.Join(err, decodeErr)
}

// DropBelow deletes the open halves and ended transactions of half
// messages below the CommitLog's new minimum offset: retention deleted
// them, so they can be neither checked nor ended again. Nothing lies below
// an offset of 0 or less. The op keys (0x62), keyed by half-queue offset,
// are DropOpsBelow's.
func (t *Transactions) DropBelow(minPhy int64) error {
	if minPhy <= 0 {
		// Keys hold offsets as uint64: a negative bound would be the
		// largest key and delete the whole keyspace.
		return nil
	}
	b := t.db.pdb.NewBatch()
	defer b.Close()
	for _, p := range []byte{prefixTxnHalf, prefixTxnEnd} {
		if err := b.DeleteRange(txnKey(p, 0), txnKey(p, minPhy), nil); err != nil {
			return fmt.Errorf("drop transactions below %d: %w", minPhy, err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("drop transactions below %d: %w", minPhy, err)
	}
	return nil
}

// DropOpsBelow deletes the op keys (0x62) of the halves below queue
// offset halfQueueMin of the half topic: retention deleted those halves,
// so no check or END_TRANSACTION can ask about them again. Nothing lies
// below an offset of 0 or less.
func (t *Transactions) DropOpsBelow(halfQueueMin int64) error {
	if halfQueueMin <= 0 {
		return nil
	}
	if err := t.db.pdb.DeleteRange(txnKey(prefixTxnOp, 0), txnKey(prefixTxnOp, halfQueueMin), pebble.NoSync); err != nil {
		return fmt.Errorf("drop transaction ops below half queue offset %d: %w", halfQueueMin, err)
	}
	return nil
}

// AddRocketMQOp records in w, the dispatcher's batch that indexes the op
// message at opPhy in RocketMQ's format (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag
// "d", written by Apache RocketMQ or by rocketkv), that the half at
// halfQueueOffset in the half topic ended.
func (t *Transactions) AddRocketMQOp(w *pebble.Batch, halfQueueOffset, opPhy int64) error {
	if halfQueueOffset < 0 {
		return nil
	}
	if err := w.Set(txnKey(prefixTxnOp, halfQueueOffset), binary.BigEndian.AppendUint64(nil, uint64(opPhy)), nil); err != nil {
		return fmt.Errorf("record RocketMQ op for half %d: %w", halfQueueOffset, err)
	}
	return nil
}

// HasRocketMQOps reports whether any op message was recorded (a store
// whose transactions never ended has none).
func (t *Transactions) HasRocketMQOps() (bool, error) {
	found := false
	err := t.db.Scan([]byte{prefixTxnOp}, func(_, _ []byte) bool { found = true; return false })
	return found, err
}

// RocketMQOpEnded reports whether an op message stored after CommitLog
// offset after ended the half at halfQueueOffset (after < 0: any op). An
// op is written once its half is stored, so one stored before the half
// (recorded when the half queue's numbering started again, over a
// queue offset an older half had) is about another half and does not
// end this one. The newest op of a queue offset is the one recorded; a
// key of an index written before the op's offset was kept ends the half
// whatever after is, as Apache RocketMQ matches ops by queue offset
// alone.
func (t *Transactions) RocketMQOpEnded(halfQueueOffset, after int64) (bool, error) {
	if halfQueueOffset < 0 {
		return false, nil
	}
	v, err := t.db.get(txnKey(prefixTxnOp, halfQueueOffset))
	if err != nil {
		return false, fmt.Errorf("read RocketMQ op for half %d: %w", halfQueueOffset, err)
	}
	if v == nil {
		return false, nil
	}
	if len(v) != 8 {
		return true, nil
	}
	return int64(binary.BigEndian.Uint64(v)) > after, nil
}

// RocketMQCheckProgress returns the progress of an Apache RocketMQ
// store's transaction checker (imported with its consumer offsets): halves
// below it were handled there, ended or stored again for a later check.
// ok is false for a store RocketMQ never checked.
func (t *Transactions) RocketMQCheckProgress() (int64, bool, error) {
	return t.db.ConsumerOffsets().Get(rocketMQCheckGroup, meta.TransHalfTopic, 0)
}

// DropAbove deletes the open halves and ended transactions of half
// messages at or past end, and the op keys (0x62) of halves at or past
// queue offset halfQueueEnd of the half topic: the CommitLog lost those
// records (a tail cut at recovery), and the offsets will hold other
// records. It also undoes what records past end recorded for halves
// before it: a commit whose committed message is past end (By) and an
// op key written by an op message past end are deleted, and a half they
// had closed is recorded open again, from half (which returns the half
// at a CommitLog offset; ok false when the log has none there), so its
// producer is asked about it. Ends written before TxnEnd.By existed, and
// rollbacks, stay. It returns how many transactions it opened again. It
// scans every end and op key (recovery only), in one synced batch.
func (t *Transactions) DropAbove(end, halfQueueEnd int64, half func(phy int64) (TxnHalf, bool, error)) (int, error) {
	end, halfQueueEnd = max(end, 0), max(halfQueueEnd, 0)
	b := t.db.pdb.NewBatch()
	defer b.Close()
	fail := func(err error) (int, error) { return 0, fmt.Errorf("drop transactions from %d: %w", end, err) }
	for _, p := range []byte{prefixTxnHalf, prefixTxnEnd} {
		if err := b.DeleteRange(txnKey(p, end), []byte{p + 1}, nil); err != nil {
			return fail(err)
		}
	}
	// An op past the half queue's end names a half the cut removed; the
	// half stored next at that queue offset would read as ended.
	if err := b.DeleteRange(txnKey(prefixTxnOp, halfQueueEnd), []byte{prefixTxnOp + 1}, nil); err != nil {
		return fail(err)
	}
	var undone []int64 // halves whose commits the log lost
	var scanErr error
	err := t.db.Scan([]byte{prefixTxnEnd}, func(k, v []byte) bool {
		phy, e, err := decodeTxnEnd(k, v)
		if err != nil || phy >= end {
			return true // a bad key is kvdump check's to report
		}
		if e.State == TxnCommit && e.By >= end {
			if scanErr = b.Delete(k, nil); scanErr != nil {
				return false
			}
			undone = append(undone, phy)
		}
		return true
	})
	if err = errors.Join(err, scanErr); err != nil {
		return fail(err)
	}
	err = t.db.Scan([]byte{prefixTxnOp}, func(k, v []byte) bool {
		if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) >= end {
			scanErr = b.Delete(k, nil)
		}
		return scanErr == nil
	})
	if err = errors.Join(err, scanErr); err != nil {
		return fail(err)
	}
	opened := 0
	for _, phy := range undone {
		if v, err := t.db.get(txnKey(prefixTxnHalf, phy)); err != nil {
			return fail(err)
		} else if v != nil {
			opened++ // open still (a slave's: the dispatcher recorded it)
			continue
		}
		h, ok, err := half(phy)
		if err != nil {
			return fail(err)
		}
		if !ok {
			continue
		}
		if err := t.AddHalf(b, h); err != nil {
			return fail(err)
		}
		opened++
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fail(err)
	}
	return opened, nil
}
