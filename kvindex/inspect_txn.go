package kvindex

import (
	"encoding/binary"
	"fmt"
)

// Prefixes of the transaction keyspaces, for inspection tools.
const (
	PrefixTxnHalf = prefixTxnHalf
	PrefixTxnEnd  = prefixTxnEnd
	PrefixTxnOp   = prefixTxnOp
)

// txnKeyspaces are the transaction keyspaces of doc.go, in prefix order.
func txnKeyspaces() []Keyspace {
	return []Keyspace{
		{PrefixTxnHalf, "txn-half", false},
		{PrefixTxnEnd, "txn-end", false},
		{PrefixTxnOp, "txn-rocketmq-op", true},
	}
}

// TxnHalfRecord is an open half message (keyspace 0x60).
type TxnHalfRecord struct{ TxnHalf }

// TxnEndRecord is how the transaction of a half message ended (keyspace
// 0x61).
type TxnEndRecord struct {
	HalfPhyOffset int64 `json:"halfPhyOffset"`
	// State is "COMMIT_MESSAGE", "ROLLBACK_MESSAGE" or "DISCARDED".
	State string `json:"state"`
	At    int64  `json:"at"`
	// By is the CommitLog offset of a commit's committed message, or of
	// a give-up's copy in TRANS_CHECK_MAX_TIME_TOPIC (0 when not
	// recorded).
	By int64 `json:"by,omitempty"`
}

// TxnOpRecord is an op message of an Apache RocketMQ store: the half at
// HalfQueueOffset ended (keyspace 0x62).
type TxnOpRecord struct {
	HalfQueueOffset int64 `json:"halfQueueOffset"`
	// OpPhyOffset is the CommitLog offset of the op message, -1 when
	// not recorded (an index written before it was).
	OpPhyOffset int64 `json:"opPhyOffset"`
}

// Keyspace implements Record.
func (TxnOpRecord) Keyspace() Keyspace { return mustKeyspace(PrefixTxnOp) }

// String implements Record.
func (r TxnOpRecord) String() string {
	if r.OpPhyOffset < 0 {
		return fmt.Sprintf("halfQueueOffset=%d", r.HalfQueueOffset)
	}
	return fmt.Sprintf("halfQueueOffset=%d opPhyOffset=%d", r.HalfQueueOffset, r.OpPhyOffset)
}

// Keyspace implements Record.
func (TxnHalfRecord) Keyspace() Keyspace { return mustKeyspace(PrefixTxnHalf) }

// Keyspace implements Record.
func (TxnEndRecord) Keyspace() Keyspace { return mustKeyspace(PrefixTxnEnd) }

// String implements Record.
func (r TxnHalfRecord) String() string {
	return fmt.Sprintf("phyOffset=%d queueOffset=%d storeTime=%s checks=%d nextCheck=%s",
		r.PhyOffset, r.QueueOffset, FormatMillis(r.StoreTimestamp), r.Checks, FormatMillis(r.NextCheckAt))
}

// String implements Record.
func (r TxnEndRecord) String() string {
	at := "-"
	if r.At != 0 {
		at = FormatMillis(r.At)
	}
	if r.By > 0 {
		return fmt.Sprintf("halfPhyOffset=%d state=%s at=%s by=%d", r.HalfPhyOffset, r.State, at, r.By)
	}
	return fmt.Sprintf("halfPhyOffset=%d state=%s at=%s", r.HalfPhyOffset, r.State, at)
}

// decodeTxnKey decodes a key of a transaction keyspace; ok is false for
// any other prefix.
func decodeTxnKey(key, value []byte) (rec Record, ok bool, err error) {
	switch key[0] {
	case PrefixTxnHalf:
		h, err := decodeTxnHalf(key, value)
		if err != nil {
			return nil, true, err
		}
		return TxnHalfRecord{h}, true, nil
	case PrefixTxnOp:
		if len(key) != 9 || (len(value) != 1 && len(value) != 8) {
			return nil, true, fmt.Errorf("txn op key %x value %x: %w", key, value, ErrBadKey)
		}
		r := TxnOpRecord{HalfQueueOffset: int64(binary.BigEndian.Uint64(key[1:])), OpPhyOffset: -1}
		if len(value) == 8 {
			if r.OpPhyOffset = int64(binary.BigEndian.Uint64(value)); r.OpPhyOffset < 0 {
				return nil, true, fmt.Errorf("txn op key %x value %x: no record at %d: %w", key, value, r.OpPhyOffset, ErrBadKey)
			}
		}
		return r, true, nil
	case PrefixTxnEnd:
		phy, e, err := decodeTxnEnd(key, value)
		if err != nil {
			return nil, true, err
		}
		return TxnEndRecord{HalfPhyOffset: phy, State: e.State.String(), At: e.At, By: e.By}, true, nil
	}
	return nil, false, nil
}
