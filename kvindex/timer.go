package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// prefixTimer is the timer index keyspace; see doc.go.
const prefixTimer byte = 0x70

const (
	timerKeyLen   = 17
	timerValueLen = 4
)

// TimerEntry is a timer message waiting for its delivery time (keyspace
// 0x70): the record parked in rmq_sys_wheel_timer.
type TimerEntry struct {
	// DeliverMs is when the message is due, in Unix milliseconds (its
	// TIMER_OUT_MS), or its roll point (timer.Service.Hook).
	DeliverMs int64 `json:"deliverMs"`
	// PhyOffset and Size locate the parked record in the CommitLog.
	PhyOffset int64 `json:"phyOffset"`
	Size      int32 `json:"size"`
}

// Timers is the timer index.
type Timers struct {
	db *DB
}

// Timers returns the timer index.
func (d *DB) Timers() *Timers { return &Timers{db: d} }

func timerKey(deliverMs, phy int64) []byte {
	k := make([]byte, 0, timerKeyLen)
	k = append(k, prefixTimer)
	k = binary.BigEndian.AppendUint64(k, uint64(deliverMs))
	return binary.BigEndian.AppendUint64(k, uint64(phy))
}

func decodeTimer(k, v []byte) (TimerEntry, error) {
	if len(k) != timerKeyLen || k[0] != prefixTimer || len(v) != timerValueLen {
		return TimerEntry{}, fmt.Errorf("timer key %x value %x: %w", k, v, ErrBadKey)
	}
	return TimerEntry{
		DeliverMs: int64(binary.BigEndian.Uint64(k[1:])),
		PhyOffset: int64(binary.BigEndian.Uint64(k[9:])),
		Size:      int32(binary.BigEndian.Uint32(v)),
	}, nil
}

// Add records a parked timer message in w, the dispatcher's batch that
// indexes it.
func (t *Timers) Add(w *pebble.Batch, e TimerEntry) error {
	if e.DeliverMs < 0 {
		return fmt.Errorf("timer message at %d: negative delivery time %d", e.PhyOffset, e.DeliverMs)
	}
	if err := w.Set(timerKey(e.DeliverMs, e.PhyOffset), binary.BigEndian.AppendUint32(nil, uint32(e.Size)), nil); err != nil {
		return fmt.Errorf("index timer message at %d: %w", e.PhyOffset, err)
	}
	return nil
}

// Due returns up to limit entries due at or before nowMs, earliest first.
func (t *Timers) Due(nowMs int64, limit int) ([]TimerEntry, error) {
	return t.DueFrom(0, 0, nowMs, limit)
}

// DueFrom is Due starting at the entry (fromMs, fromPhy) rather than at
// the start of the keyspace: a caller that deleted everything before it
// does not step over the deletions' tombstones again (a burst of a
// million entries due at once would otherwise cost a quadratic scan).
func (t *Timers) DueFrom(fromMs, fromPhy, nowMs int64, limit int) ([]TimerEntry, error) {
	if nowMs < 0 {
		// Nothing is due before the epoch (Add refuses negative times),
		// and the key of a negative bound sorts after every entry.
		return nil, nil
	}
	upper := prefixEnd([]byte{prefixTimer})
	if nowMs < math.MaxInt64 {
		upper = timerKey(nowMs+1, 0)
	}
	lower := []byte{prefixTimer}
	if fromMs > 0 || fromPhy > 0 {
		lower = timerKey(max(fromMs, 0), max(fromPhy, 0))
	}
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("scan due timers: %w", err)
	}
	var out []TimerEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("scan due timers: %w", err)
		}
		e, err := decodeTimer(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		out = append(out, e)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("scan due timers: %w", err)
	}
	return out, nil
}

// Count returns how many entries are due from fromMs to toMs (both
// inclusive), counting no further than limit: a cheap bound for flow
// control, which reads the keys but neither values nor records.
func (t *Timers) Count(fromMs, toMs int64, limit int) (int, error) {
	if toMs < fromMs || toMs < 0 || limit <= 0 {
		return 0, nil
	}
	upper := prefixEnd([]byte{prefixTimer})
	if toMs < math.MaxInt64 {
		upper = timerKey(toMs+1, 0)
	}
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: timerKey(max(fromMs, 0), 0), UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("count timers: %w", err)
	}
	n := 0
	for ok := it.First(); ok && n < limit; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("count timers: %w", err)
	}
	return n, nil
}

// Delete forgets delivered entries, in one synced batch (one sync per
// delivery round), so a crash after it does not deliver them again; a
// crash between their delivery and Delete does (at least once, as
// RocketMQ's timer).
func (t *Timers) Delete(entries []TimerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	b := t.db.pdb.NewBatch()
	defer b.Close()
	for _, e := range entries {
		if err := b.Delete(timerKey(e.DeliverMs, e.PhyOffset), nil); err != nil {
			return fmt.Errorf("delete delivered timer at %d: %w", e.PhyOffset, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("delete %d delivered timers: %w", len(entries), err)
	}
	return nil
}

// DropAbove deletes the entries of timer messages at or past end: the
// CommitLog lost those records (a tail cut at recovery), and the offsets
// will hold other records, which a delivery would read instead. It scans
// every entry (recovery only).
func (t *Timers) DropAbove(end int64) (int, error) {
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTimer}, UpperBound: []byte{prefixTimer + 1}})
	if err != nil {
		return 0, fmt.Errorf("drop timers from %d: %w", end, err)
	}
	b := t.db.pdb.NewBatch()
	defer b.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, errors.Join(fmt.Errorf("drop timers from %d: %w", end, err), it.Close())
		}
		e, err := decodeTimer(it.Key(), v)
		if err != nil {
			return 0, errors.Join(fmt.Errorf("drop timers from %d: %w", end, err), it.Close())
		}
		if e.PhyOffset < end {
			continue
		}
		if err := b.Delete(it.Key(), nil); err != nil {
			return 0, errors.Join(fmt.Errorf("drop timers from %d: %w", end, err), it.Close())
		}
		n++
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("drop timers from %d: %w", end, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("drop timers from %d: %w", end, err)
	}
	return n, nil
}

// TimerCensus counts the timer messages waiting at one moment.
type TimerCensus struct {
	// Waiting counts every entry.
	Waiting int64
	// Within counts, per bound of the bounds asked for, the entries due
	// after the previous bound (or the moment) and at most the bound
	// ahead of the moment.
	Within []int64
}

// Census counts the entries at nowMs, with the bounds (ms ahead of nowMs,
// ascending) of Within. It reads every key (a scrape's worth of work, not
// a hot path).
func (t *Timers) Census(nowMs int64, bounds []int64) (TimerCensus, error) {
	c := TimerCensus{Within: make([]int64, len(bounds))}
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTimer}, UpperBound: []byte{prefixTimer + 1}})
	if err != nil {
		return c, fmt.Errorf("count timers: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != timerKeyLen {
			return c, errors.Join(fmt.Errorf("count timers: key %x: %w", k, ErrBadKey), it.Close())
		}
		due := int64(binary.BigEndian.Uint64(k[1:9]))
		c.Waiting++
		if due <= nowMs {
			continue
		}
		for i, b := range bounds {
			if due-nowMs <= b {
				c.Within[i]++
				break
			}
		}
	}
	if err := it.Close(); err != nil {
		return c, fmt.Errorf("count timers: %w", err)
	}
	return c, nil
}

// TimerHold is where the timer began holding parked messages back
// (timerStopEnqueue): the CommitLog offset of the first record held and
// its queue offset in rmq_sys_wheel_timer.
type TimerHold struct {
	Phy         int64
	QueueOffset int64
}

// SetHold records h in w, the dispatch batch of the record it names, so
// that the hold is durable with the record's entry.
func (t *Timers) SetHold(w *pebble.Batch, h TimerHold) error {
	v := binary.BigEndian.AppendUint64(putInt64(h.Phy), uint64(h.QueueOffset))
	if err := w.Set(metaKey(metaTimerHold), v, nil); err != nil {
		return fmt.Errorf("record the timer hold at %d: %w", h.Phy, err)
	}
	return nil
}

// Hold returns the hold SetHold recorded; ok is false when none is.
func (t *Timers) Hold() (h TimerHold, ok bool, err error) {
	v, err := t.db.get(metaKey(metaTimerHold))
	if err != nil {
		return h, false, fmt.Errorf("read the timer hold: %w", err)
	}
	if v == nil {
		return h, false, nil
	}
	if len(v) != 16 {
		return h, false, fmt.Errorf("read the timer hold: %d bytes, want 16: %w", len(v), ErrBadKey)
	}
	return TimerHold{Phy: int64(binary.BigEndian.Uint64(v)), QueueOffset: int64(binary.BigEndian.Uint64(v[8:]))}, true, nil
}

// ClearHold deletes the hold (durably).
func (t *Timers) ClearHold() error {
	if err := t.db.pdb.Delete(metaKey(metaTimerHold), pebble.Sync); err != nil {
		return fmt.Errorf("delete the timer hold: %w", err)
	}
	return nil
}
