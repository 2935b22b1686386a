package kvindex

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// An orderly batch's carried counts round-trip through the store; a
// batch without them keeps the value layout older versions wrote, and
// the decoder reads that layout; tails that are not a non-empty list of
// at most MaxOrderBatch counts are rejected.
func TestOrderStateCarriedCounts(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	st := OrderState{Group: "g", Topic: "T", QueueID: 1, PopTime: 5, InvisibleTime: 6, AttemptID: "a",
		Messages: []OrderMessage{{QueueOffset: 10, Consumed: 2}}, Carried: []OrderCount{{QueueOffset: 11, Consumed: 2}, {QueueOffset: 12, Consumed: 1}}}
	b := s.NewBatch()
	if err := b.SetOrder(&st); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	got, ok, err := s.Order("g", "T", 1)
	if err != nil || !ok || !reflect.DeepEqual(got, st) {
		t.Fatalf("order state %+v %v %v, want %+v", got, ok, err, st)
	}
	if str := (PopOrderRecord{got}).String(); !strings.HasSuffix(str, "messages=[10/2] carried=[11/2 12/1]") {
		t.Fatalf("text form %q does not show the carried counts", str)
	}

	key := groupTopicQueue(nil, prefixPopOrder, "g", "T", 1)
	plain := st
	plain.Carried = nil
	old := encodeOrderState(&plain)
	if n := 8 + 8 + 8 + 2 + 1 + 2 + 20; len(old) != n {
		t.Fatalf("a batch without carried counts encodes to %d bytes, want the older layout's %d", len(old), n)
	}
	if dec, err := decodeOrderState(key, old); err != nil || dec.Carried != nil || !reflect.DeepEqual(dec.Messages, plain.Messages) {
		t.Fatalf("older layout decoded to %+v, %v", dec, err)
	}
	tail := func(m int, entries int) []byte {
		v := binary.BigEndian.AppendUint16(append([]byte(nil), old...), uint16(m))
		return append(v, make([]byte, 12*entries)...)
	}
	for name, v := range map[string][]byte{
		"an empty list":         tail(0, 0),
		"a short list":          tail(2, 1),
		"a long list":           tail(1, 2),
		"a lone byte":           append(append([]byte(nil), old...), 0),
		"more than the maximum": tail(MaxOrderBatch+1, MaxOrderBatch+1),
	} {
		if _, err := decodeOrderState(key, v); !errors.Is(err, ErrBadKey) {
			t.Errorf("carried counts as %s: %v, want ErrBadKey", name, err)
		}
	}

	over := st
	over.Carried = make([]OrderCount, MaxOrderBatch+1)
	b = s.NewBatch()
	defer b.Close()
	if err := b.SetOrder(&over); err == nil {
		t.Fatal("a batch with more than MaxOrderBatch carried counts was accepted")
	}
}
