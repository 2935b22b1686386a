package kvindex

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestPopStoreInFlightLifecycle(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	recs := []InFlight{
		{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 7, VisibleAt: 3000, PopTime: 1000, InvisibleTime: 2000, CKOffset: 7, Attempts: 0},
		{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 8, VisibleAt: 3000, PopTime: 1000, InvisibleTime: 2000, CKOffset: 7},
		{Group: "g", Topic: "%RETRY%g_T", QueueID: 0, QueueOffset: 2, VisibleAt: 1500, PopTime: 1000, InvisibleTime: 500, CKOffset: 2, RetryFlag: 1, Attempts: 3},
	}
	b := s.NewBatch()
	for i := range recs {
		if err := b.AddInFlight(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetPosition("g", "T", 1, 9); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()

	var due []InFlight
	if err := s.Due(2999, 0, func(r InFlight) bool { due = append(due, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || !reflect.DeepEqual(due[0], recs[2]) {
		t.Fatalf("due before 2999: %+v", due)
	}
	due = nil
	if err := s.Due(3000, 2, func(r InFlight) bool { due = append(due, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[1].QueueOffset != 7 {
		t.Fatalf("due at 3000, max 2: %+v", due)
	}
	if at, ok, err := s.NextDue(0, math.MaxInt64); err != nil || !ok || at != 1500 {
		t.Fatalf("next due %d %v %v", at, ok, err)
	}
	if at, ok, err := s.NextDue(1501, 3000); err != nil || !ok || at != 3000 {
		t.Fatalf("next due in [1501, 3000]: %d %v %v", at, ok, err)
	}
	if at, ok, err := s.NextDue(1501, 2999); err != nil || ok {
		t.Fatalf("next due in [1501, 2999]: %d %v %v, want none", at, ok, err)
	}
	if at, ok, err := s.NextDue(0, 1499); err != nil || ok {
		t.Fatalf("next due before 1500: %d %v %v, want none", at, ok, err)
	}
	got, ok, err := s.Lookup("g", "T", 1, 8)
	if err != nil || !ok || got.VisibleAt != 3000 || got.PopTime != 1000 || got.InvisibleTime != 2000 {
		t.Fatalf("lookup: %+v %v %v", got, ok, err)
	}
	full, ok, err := s.Record(got)
	if err != nil || !ok || !reflect.DeepEqual(full, recs[1]) {
		t.Fatalf("record: %+v %v %v", full, ok, err)
	}
	if off, ok, err := s.MinInFlight("g", "T", 1, 0); err != nil || !ok || off != 7 {
		t.Fatalf("min in flight %d %v %v", off, ok, err)
	}
	if pos, ok, err := s.Position("g", "T", 1); err != nil || !ok || pos != 9 {
		t.Fatalf("position %d %v %v", pos, ok, err)
	}

	b = s.NewBatch()
	if err := b.DeleteInFlight(&recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCommitted("g", "T", 1, 8); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup("g", "T", 1, 7); ok {
		t.Fatal("acked record still indexed")
	}
	if off, ok, _ := s.MinInFlight("g", "T", 1, 8); !ok || off != 8 {
		t.Fatalf("min in flight after ack: %d %v", off, ok)
	}
	if off, ok, _ := db.ConsumerOffsets().Get("g", "T", 1); !ok || off != 8 {
		t.Fatalf("committed %d %v", off, ok)
	}
	n := 0
	if err := s.EachInFlight(func(InFlight) bool { n++; return true }); err != nil || n != 2 {
		t.Fatalf("in flight after ack: %d %v", n, err)
	}
}

func TestPopStoreOrderAndRequestMode(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	st := OrderState{Group: "g", Topic: "T", QueueID: 2, PopTime: 5, InvisibleTime: 6, Acked: 0b10, AttemptID: "a-1",
		Messages: []OrderMessage{{QueueOffset: 10, Consumed: 1}, {QueueOffset: 12, NextVisibleAt: 99}}}
	b := s.NewBatch()
	if err := b.SetOrder(&st); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	got, ok, err := s.Order("g", "T", 2)
	if err != nil || !ok || !reflect.DeepEqual(got, st) {
		t.Fatalf("order state %+v %v %v", got, ok, err)
	}
	b = s.NewBatch()
	_ = b.DeleteOrder("g", "T", 2)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, ok, _ := s.Order("g", "T", 2); ok {
		t.Fatal("order state survived delete")
	}
	body := []byte(`{"topic":"T","consumerGroup":"g","mode":"POP","popShareQueueNum":0}`)
	if err := s.SetRequestMode("T", "g", body); err != nil {
		t.Fatal(err)
	}
	if v, err := s.RequestMode("T", "g"); err != nil || string(v) != string(body) {
		t.Fatalf("request mode %s %v", v, err)
	}
	var modes []RequestMode
	_ = s.EachRequestMode(func(m RequestMode) bool { modes = append(modes, m); return true })
	if len(modes) != 1 || modes[0].Group != "g" || modes[0].Topic != "T" {
		t.Fatalf("modes %+v", modes)
	}
}

// TestDecodePopKeyspaces checks that the inspection API decodes every POP
// keyspace of doc.go, and rejects malformed values.
func TestDecodePopKeyspaces(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	b := s.NewBatch()
	r := InFlight{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 4, VisibleAt: 20, PopTime: 10, InvisibleTime: 10, CKOffset: 3, RetryFlag: 2, Attempts: 1}
	_ = b.AddInFlight(&r)
	_ = b.SetPosition("g", "T", 1, 5)
	_ = b.SetOrder(&OrderState{Group: "g", Topic: "T", QueueID: 0, Messages: []OrderMessage{{QueueOffset: 1}}})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	_ = s.SetRequestMode("T", "g", []byte(`{}`))
	seen := map[string]Record{}
	for _, ks := range popKeyspaces() {
		if err := db.Scan([]byte{ks.Prefix}, func(k, v []byte) bool {
			rec, err := DecodeKey(k, v)
			if err != nil {
				t.Errorf("decode %x: %v", k, err)
				return false
			}
			seen[rec.Keyspace().Name] = rec
			if _, err := DecodeKey(k, append(append([]byte(nil), v...), 0, 0, 0)); !errors.Is(err, ErrBadKey) && ks.Prefix != PrefixRequestMode {
				t.Errorf("%s: long value accepted: %v", ks.Name, err)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("decoded keyspaces %v", seen)
	}
	if got := seen["pop-inflight"].(PopInFlightRecord).InFlight; got != r {
		t.Fatalf("in-flight decoded %+v", got)
	}
	if got := seen["pop-ack-index"].(PopAckIndexRecord); got.VisibleAt != 20 || got.PopTime != 10 || got.QueueOffset != 4 {
		t.Fatalf("ack index decoded %+v", got)
	}
	for _, rec := range seen {
		if rec.String() == "" {
			t.Errorf("%T has no text form", rec)
		}
	}
}

// FuzzDecodePopKey feeds arbitrary bytes under the POP prefixes to the
// decoder: it must never panic and must round-trip what it accepts.
func FuzzDecodePopKey(f *testing.F) {
	r := InFlight{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 4, VisibleAt: 20, PopTime: 10, InvisibleTime: 10}
	f.Add(popInFlightKey(nil, &r), popInFlightValue(nil, &r))
	f.Add(popAckKey(nil, "g", "T", 1, 4), make([]byte, 24))
	f.Add(groupTopicQueue(nil, prefixPopPosition, "g", "T", 1), make([]byte, 8))
	st := OrderState{Group: "g", Topic: "T", Messages: []OrderMessage{{QueueOffset: 1}}}
	f.Add(groupTopicQueue(nil, prefixPopOrder, "g", "T", 0), encodeOrderState(&st))
	f.Add(requestModeKey("T", "g"), []byte("{}"))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		rec, err := DecodeKey(k, v)
		if err != nil {
			return
		}
		switch x := rec.(type) {
		case PopInFlightRecord:
			if got := popInFlightKey(nil, &x.InFlight); string(got) != string(k) {
				t.Fatalf("in-flight key does not round-trip: %x -> %x", k, got)
			}
		case PopOrderRecord:
			if got := encodeOrderState(&x.OrderState); string(got) != string(v) {
				t.Fatalf("order value does not round-trip: %x -> %x", v, got)
			}
		}
		_ = rec.String()
	})
}
