package kvindex

import "fmt"

// PrefixTimer is the prefix of the timer keyspace, for inspection tools.
const PrefixTimer = prefixTimer

// timerKeyspaces are the timer keyspaces of doc.go.
func timerKeyspaces() []Keyspace {
	return []Keyspace{{PrefixTimer, "timer", true}}
}

// TimerRecord is a timer message waiting for delivery (keyspace 0x70).
type TimerRecord struct{ TimerEntry }

// Keyspace implements Record.
func (TimerRecord) Keyspace() Keyspace { return mustKeyspace(PrefixTimer) }

// String implements Record.
func (r TimerRecord) String() string {
	return fmt.Sprintf("deliverAt=%s phyOffset=%d size=%d", FormatMillis(r.DeliverMs), r.PhyOffset, r.Size)
}

// decodeTimerKey decodes a key of the timer keyspace; ok is false for any
// other prefix.
func decodeTimerKey(key, value []byte) (rec Record, ok bool, err error) {
	if key[0] != PrefixTimer {
		return nil, false, nil
	}
	e, err := decodeTimer(key, value)
	if err != nil {
		return nil, true, err
	}
	return TimerRecord{e}, true, nil
}
