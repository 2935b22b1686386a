package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"
)

func TestPopStoreCheckpointLifecycle(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	cks := []Checkpoint{
		{Group: "g", Topic: "T", QueueID: 1, CKOffset: 7, Offsets: []int64{7, 8}, VisibleAt: 3000, PopTime: 1000, InvisibleTime: 2000},
		{Group: "g", Topic: "%RETRY%g_T", QueueID: 0, CKOffset: 2, Offsets: []int64{2}, VisibleAt: 1500, PopTime: 1000, InvisibleTime: 500, RetryFlag: 1, Attempts: 3},
	}
	b := s.NewBatch()
	for i := range cks {
		if err := b.PutCheckpoint(&cks[i]); err != nil {
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
	want := InFlight{Group: "g", Topic: "%RETRY%g_T", QueueID: 0, QueueOffset: 2, VisibleAt: 1500, PopTime: 1000, InvisibleTime: 500, CKOffset: 2, RetryFlag: 1, Attempts: 3}
	if len(due) != 1 || due[0] != want {
		t.Fatalf("due before 2999: %+v", due)
	}
	due = nil
	if err := s.Due(3000, 2, func(r InFlight) bool { due = append(due, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[1].QueueOffset != 7 {
		t.Fatalf("due at 3000, max 2 messages: %+v", due)
	}
	var dueCks []Checkpoint
	if err := s.DueCheckpoints(1501, 3000, 0, func(c Checkpoint) bool { dueCks = append(dueCks, c); return true }); err != nil {
		t.Fatal(err)
	}
	if len(dueCks) != 1 || !reflect.DeepEqual(dueCks[0], cks[0]) {
		t.Fatalf("checkpoints due in [1501, 3000]: %+v", dueCks)
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
	got, ok, err := s.Checkpoint("g", "T", 1, 7, 1000)
	if err != nil || !ok || !reflect.DeepEqual(got, cks[0]) {
		t.Fatalf("checkpoint by handle: %+v %v %v", got, ok, err)
	}
	if _, ok, err := s.Checkpoint("g", "T", 1, 7, 1001); err != nil || ok {
		t.Fatalf("checkpoint with another popTime found: %v %v", ok, err)
	}
	if r, ok, err := s.InFlightAt("g", "T", 1, 8); err != nil || !ok || r.CKOffset != 7 || r.VisibleAt != 3000 {
		t.Fatalf("in flight at 8: %+v %v %v", r, ok, err)
	}
	if off, ok, err := s.MinInFlight("g", "T", 1, 0); err != nil || !ok || off != 7 {
		t.Fatalf("min in flight %d %v %v", off, ok, err)
	}
	if pos, ok, err := s.Position("g", "T", 1); err != nil || !ok || pos != 9 {
		t.Fatalf("position %d %v %v", pos, ok, err)
	}

	// Acknowledge 7: the checkpoint keeps 8, its deadline entry stays.
	acked := cks[0]
	acked.Offsets = append([]int64(nil), acked.Offsets...)
	if removed := acked.Remove([]int64{5, 7}); !reflect.DeepEqual(removed, []int64{7}) {
		t.Fatalf("removed %v", removed)
	}
	if _, ok, _ := db.ConsumerOffsets().Get("g", "T", 1); ok {
		t.Fatal("committed offset before any was set") // and now cached as absent
	}
	b = s.NewBatch()
	if err := b.RewriteCheckpoint(&acked); err != nil {
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
	if _, ok, _ := s.InFlightAt("g", "T", 1, 7); ok {
		t.Fatal("acked message still in flight")
	}
	// The deadline entries keep the counts they were written with (a
	// sizing hint), and max counts them.
	var entries []DueEntry
	if err := s.DueEntries(0, math.MaxInt64, 0, func(d DueEntry) bool { entries = append(entries, d); return true }); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Count != 1 || entries[1].Count != 2 || entries[1].CKOffset != 7 || entries[1].VisibleAt != 3000 || entries[1].Offsets != nil {
		t.Fatalf("deadline entries %+v", entries)
	}
	entries = nil
	if err := s.DueEntries(0, math.MaxInt64, 1, func(d DueEntry) bool { entries = append(entries, d); return true }); err != nil || len(entries) != 1 {
		t.Fatalf("deadline entries up to 1 message: %+v %v", entries, err)
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

	// A failed revive moves the other checkpoint's deadline.
	moved := cks[1]
	moved.VisibleAt, moved.Attempts = 60_000, 4
	b = s.NewBatch()
	if err := b.MoveCheckpoint(&cks[1], &moved); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteCheckpoint(&acked); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	dueCks = nil
	if err := s.DueCheckpoints(0, math.MaxInt64, 0, func(c Checkpoint) bool { dueCks = append(dueCks, c); return true }); err != nil {
		t.Fatal(err)
	}
	if len(dueCks) != 1 || !reflect.DeepEqual(dueCks[0], moved) {
		t.Fatalf("after the move and the delete: %+v", dueCks)
	}
	if _, ok, _ := s.MinInFlight("g", "T", 1, 8); ok {
		t.Fatal("deleted checkpoint still in flight")
	}
}

// TestCheckpointRejectsWhatAHandleCannotName checks the bounds PutCheckpoint
// keeps: offsets ascending, within [ckOffset, ckOffset+MaxCheckpointSpan),
// at least one.
func TestCheckpointRejectsWhatAHandleCannotName(t *testing.T) {
	db := openTestDB(t)
	b := db.Pop().NewBatch()
	defer b.Close()
	for _, offs := range [][]int64{nil, {4}, {5, 5}, {6, 5}, {5, 5 + MaxCheckpointSpan}} {
		c := Checkpoint{Group: "g", Topic: "T", CKOffset: 5, Offsets: offs, PopTime: 1, InvisibleTime: 1, VisibleAt: 2}
		if err := b.PutCheckpoint(&c); err == nil {
			t.Errorf("offsets %v accepted", offs)
		}
	}
	c := Checkpoint{Group: "g", Topic: "T", CKOffset: 5, Offsets: []int64{5, 4 + MaxCheckpointSpan}, PopTime: 1, InvisibleTime: 1, VisibleAt: 2}
	if err := b.PutCheckpoint(&c); err != nil {
		t.Fatalf("widest checkpoint refused: %v", err)
	}
}

// TestMinInFlightSeeksNearTheCommittedOffset checks that MinInFlight finds
// the smallest offset in flight when it sits in a checkpoint that starts
// below the committed offset, and when a later checkpoint (a change of
// invisible time) holds a smaller offset than an earlier one.
func TestMinInFlightSeeksNearTheCommittedOffset(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	b := s.NewBatch()
	for _, c := range []Checkpoint{
		{Group: "g", Topic: "T", CKOffset: 100, Offsets: []int64{131}, PopTime: 1, InvisibleTime: 9, VisibleAt: 10},
		{Group: "g", Topic: "T", CKOffset: 120, Offsets: []int64{120}, PopTime: 2, InvisibleTime: 9, VisibleAt: 11},
		{Group: "g", Topic: "T", CKOffset: 132, Offsets: []int64{140}, PopTime: 3, InvisibleTime: 9, VisibleAt: 12},
	} {
		if err := b.PutCheckpoint(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if off, ok, err := s.MinInFlight("g", "T", 0, 120); err != nil || !ok || off != 120 {
		t.Fatalf("min in flight from 120: %d %v %v", off, ok, err)
	}
	if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 120 {
		t.Fatalf("min in flight from 0: %d %v %v", off, ok, err)
	}
	// The scans left the queue's floor at 100. A checkpoint added below
	// it (a pop after an offset reset) lowers it, and is found.
	put := func(c Checkpoint) { t.Helper(); putCheckpoints(t, s, c) }
	put(Checkpoint{Group: "g", Topic: "T", CKOffset: 40, Offsets: []int64{41}, PopTime: 4, InvisibleTime: 9, VisibleAt: 13})
	if off, ok, err := s.MinInFlight("g", "T", 0, 41); err != nil || !ok || off != 41 {
		t.Fatalf("min in flight after a checkpoint below the floor: %d %v %v", off, ok, err)
	}
	// Once every checkpoint is gone the queue is known empty; a new one
	// is found again.
	b = s.NewBatch()
	_ = s.DueCheckpoints(0, math.MaxInt64, 0, func(c Checkpoint) bool { _ = b.DeleteCheckpoint(&c); return true })
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if off, ok, err := s.MinInFlight("g", "T", 0, 41); err != nil || ok {
		t.Fatalf("min in flight with no checkpoint: %d %v %v", off, ok, err)
	}
	put(Checkpoint{Group: "g", Topic: "T", CKOffset: 500, Offsets: []int64{501}, PopTime: 5, InvisibleTime: 9, VisibleAt: 14})
	if off, ok, err := s.MinInFlight("g", "T", 0, 141); err != nil || !ok || off != 501 {
		t.Fatalf("min in flight after the queue was empty: %d %v %v", off, ok, err)
	}
}

// TestMigratePopCheckpoints checks the schema 2 -> 3 upgrade: the
// per-message in-flight records of one pop become one checkpoint, a
// record moved by a failed revive takes the pop's checkpoint to its
// earlier deadline, a changed invisible time keeps its own checkpoint,
// the old keyspaces are emptied and the store is marked version 3.
func TestMigratePopCheckpoints(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	recs := []InFlight{
		{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 7, VisibleAt: 3000, PopTime: 1000, InvisibleTime: 2000, CKOffset: 7},
		{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 9, VisibleAt: 2500, PopTime: 1000, InvisibleTime: 2000, CKOffset: 7, Attempts: 2},
		{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 8, VisibleAt: 9000, PopTime: 4000, InvisibleTime: 5000, CKOffset: 8},
	}
	wb := db.pdb.NewBatch()
	for i := range recs {
		r := &recs[i]
		_ = wb.Set(popInFlightKey(nil, r), popInFlightValue(nil, r), nil)
		v := binary.BigEndian.AppendUint64(nil, uint64(r.VisibleAt))
		v = binary.BigEndian.AppendUint64(v, uint64(r.PopTime))
		v = binary.BigEndian.AppendUint64(v, uint64(r.InvisibleTime))
		_ = wb.Set(popAckKey(nil, r.Group, r.Topic, r.QueueID, r.QueueOffset), v, nil)
	}
	// A record that does not decode (a value one byte short) is dropped,
	// and says so in the log.
	_ = wb.Set(popInFlightKey(nil, &InFlight{Group: "g", Topic: "T", QueueOffset: 99, VisibleAt: 1}), make([]byte, popInFlightValueLen-1), nil)
	_ = wb.Set(metaKey(metaSchema), binary.BigEndian.AppendUint32(nil, 2), nil)
	if err := wb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	db, err := Open(Options{Dir: dir, Logger: zerolog.New(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, want := range []string{"does not decode; dropped", `"inFlightRecords":3`, `"undecodableRecordsDropped":1`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("upgrade log lacks %s:\n%s", want, logged.String())
		}
	}
	var got []Checkpoint
	if err := db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(c Checkpoint) bool { got = append(got, c); return true }); err != nil {
		t.Fatal(err)
	}
	want := []Checkpoint{
		{Group: "g", Topic: "T", QueueID: 1, CKOffset: 7, Offsets: []int64{7, 9}, VisibleAt: 2500, PopTime: 1000, InvisibleTime: 2000, Attempts: 2},
		{Group: "g", Topic: "T", QueueID: 1, CKOffset: 8, Offsets: []int64{8}, VisibleAt: 9000, PopTime: 4000, InvisibleTime: 5000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("migrated checkpoints\n got %+v\nwant %+v", got, want)
	}
	for _, p := range []byte{prefixPopInFlight, prefixPopAckIndex} {
		_ = db.Scan([]byte{p}, func(k, _ []byte) bool { t.Errorf("key %x left in keyspace %#x", k, p); return true })
	}
	if v, _ := db.get(metaKey(metaSchema)); binary.BigEndian.Uint32(v) != schemaVersion {
		t.Fatalf("schema %x", v)
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
	// The schema-2 records only a store not yet migrated holds.
	_ = b.b.Set(popInFlightKey(nil, &r), popInFlightValue(nil, &r), nil)
	_ = b.b.Set(popAckKey(nil, "g", "T", 1, 4), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 20), 10), 10), nil)
	ck := Checkpoint{Group: "g", Topic: "T", QueueID: 1, CKOffset: 3, Offsets: []int64{4, 6}, VisibleAt: 20, PopTime: 10, InvisibleTime: 10, RetryFlag: 2, Attempts: 1}
	_ = b.PutCheckpoint(&ck)
	_ = b.SetPosition("g", "T", 1, 5)
	_ = b.SetOrder(&OrderState{Group: "g", Topic: "T", QueueID: 0, Messages: []OrderMessage{{QueueOffset: 1}}})
	own := SlaveOwn{Group: "g", Topic: "T", QueueID: 2, Committed: 7,
		Batch: &OrderState{Group: "g", Topic: "T", QueueID: 2, PopTime: 5, InvisibleTime: 9, Acked: 1, AttemptID: "a", Messages: []OrderMessage{{QueueOffset: 7, Consumed: 1}, {QueueOffset: 8}}}}
	if err := b.SetSlaveOwn(&own); err != nil {
		t.Fatal(err)
	}
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
	if len(seen) != 8 {
		t.Fatalf("decoded keyspaces %v", seen)
	}
	if got := seen["pop-slave-own"].(PopSlaveOwnRecord).SlaveOwn; !reflect.DeepEqual(got, own) {
		t.Fatalf("slave's own pop state decoded %+v, want %+v", got, own)
	}
	if got := seen["pop-checkpoint"].(PopCheckpointRecord).Checkpoint; !reflect.DeepEqual(got, ck) {
		t.Fatalf("checkpoint decoded %+v", got)
	}
	if got := seen["pop-checkpoint-due"].(PopCheckpointDueRecord); got.VisibleAt != 20 || got.CKOffset != 3 || got.PopTime != 10 || got.Count != 2 {
		t.Fatalf("checkpoint deadline decoded %+v", got)
	}
	if got := seen["pop-inflight-v2"].(PopInFlightRecord).InFlight; got != r {
		t.Fatalf("in-flight decoded %+v", got)
	}
	if got := seen["pop-ack-index-v2"].(PopAckIndexRecord); got.VisibleAt != 20 || got.PopTime != 10 || got.QueueOffset != 4 {
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
	st.Carried = []OrderCount{{QueueOffset: 2, Consumed: 3}}
	f.Add(groupTopicQueue(nil, prefixPopOrder, "g", "T", 0), encodeOrderState(&st))
	f.Add(requestModeKey("T", "g"), []byte("{}"))
	f.Add(groupTopicQueue(nil, prefixPopSlaveOwn, "g", "T", 0), slaveOwnValue(&SlaveOwn{Committed: 3}))
	f.Add(groupTopicQueue(nil, prefixPopSlaveOwn, "g", "T", 0), slaveOwnValue(&SlaveOwn{Committed: -1, Batch: &st}))
	ck := Checkpoint{Group: "g", Topic: "T", QueueID: 1, CKOffset: 3, Offsets: []int64{4, 6, 4000}, VisibleAt: 20, PopTime: 10}
	f.Add(checkpointKey(nil, "g", "T", 1, 3, 10), checkpointValue(nil, &ck))
	f.Add(checkpointDueKey(nil, &ck), []byte{3})
	in := IntentOf(&ck, 6)
	f.Add(reviveKey(nil, &in), popInFlightValue(nil, &in.InFlight))
	rb := ReviveBatch{Checkpoint: ck, Floors: ReviveFloors{RetryV1: 7, RetryV2: 0, DLQ: 1 << 33}}
	f.Add(reviveBatchKey(nil, &rb), reviveBatchValue(nil, &rb))
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
		case PopCheckpointRecord:
			if got := checkpointValue(nil, &x.Checkpoint); string(got) != string(v) {
				t.Fatalf("checkpoint value does not round-trip: %x -> %x", v, got)
			}
			if err := checkCheckpoint(&x.Checkpoint); err != nil && checkName("group", x.Group) == nil && checkName("topic", x.Topic) == nil {
				t.Fatalf("decoded checkpoint %+v cannot be stored: %v", x.Checkpoint, err)
			}
		case PopCheckpointDueRecord:
			if got := checkpointDueKey(nil, &x.Checkpoint); string(got) != string(k) {
				t.Fatalf("checkpoint deadline key does not round-trip: %x -> %x", k, got)
			}
			if got := binary.AppendUvarint(nil, uint64(x.Count)); string(got) != string(v) {
				t.Fatalf("checkpoint deadline value does not round-trip: %x -> %x", v, got)
			}
		case PopReviveBatchRecord:
			if got := reviveBatchKey(nil, &x.ReviveBatch); string(got) != string(k) {
				t.Fatalf("revive batch key does not round-trip: %x -> %x", k, got)
			}
			if got := reviveBatchValue(nil, &x.ReviveBatch); string(got) != string(v) {
				t.Fatalf("revive batch value does not round-trip: %x -> %x", v, got)
			}
		case PopReviveRecord:
			if got := reviveKey(nil, &x.ReviveIntent); string(got) != string(k) {
				t.Fatalf("revive intent key does not round-trip: %x -> %x", k, got)
			}
			if got := popInFlightValue(nil, &x.InFlight); string(got) != string(v) {
				t.Fatalf("revive intent value does not round-trip: %x -> %x", v, got)
			}
		case PopOrderRecord:
			if got := encodeOrderState(&x.OrderState); string(got) != string(v) {
				t.Fatalf("order value does not round-trip: %x -> %x", v, got)
			}
		case PopSlaveOwnRecord:
			if got := groupTopicQueue(nil, prefixPopSlaveOwn, x.Group, x.Topic, x.QueueID); string(got) != string(k) {
				t.Fatalf("slave's own pop state key does not round-trip: %x -> %x", k, got)
			}
			if got := slaveOwnValue(&x.SlaveOwn); string(got) != string(v) {
				t.Fatalf("slave's own pop state value does not round-trip: %x -> %x", v, got)
			}
		}
		_ = rec.String()
	})
}

// TestRewriteCheckpointWithoutOffsetsDeletesIt checks that rewriting a
// checkpoint whose last offset was acknowledged deletes it and its
// deadline entry.
func TestRewriteCheckpointWithoutOffsetsDeletesIt(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	c := Checkpoint{Group: "g", Topic: "T", CKOffset: 5, Offsets: []int64{5}, PopTime: 1, InvisibleTime: 9, VisibleAt: 10}
	for _, write := range []func(*PopBatch) error{
		func(b *PopBatch) error { return b.PutCheckpoint(&c) },
		func(b *PopBatch) error { c.Remove([]int64{5}); return b.RewriteCheckpoint(&c) },
	} {
		b := s.NewBatch()
		if err := write(b); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if _, ok, err := s.Checkpoint("g", "T", 0, 5, 1); err != nil || ok {
		t.Fatalf("checkpoint left: %v %v", ok, err)
	}
	n := 0
	if err := s.DueEntries(0, math.MaxInt64, 0, func(DueEntry) bool { n++; return true }); err != nil || n != 0 {
		t.Fatalf("%d deadline entries left (%v)", n, err)
	}
}

// ReadCheckpoints answers each name as a point read would, whatever the
// order of the names, with checkpoints of the same queue between and
// around them, of a neighbouring queue and of another group not mistaken
// for them.
func TestReadCheckpointsMatchesPointReads(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	b := s.NewBatch()
	put := func(c Checkpoint) {
		t.Helper()
		if err := b.PutCheckpoint(&c); err != nil {
			t.Fatal(err)
		}
	}
	for off := int64(0); off < 40; off += 4 {
		put(Checkpoint{Group: "g", Topic: "T", QueueID: 1, CKOffset: off, Offsets: []int64{off, off + 2}, VisibleAt: 5000 + off, PopTime: 1000 + off, InvisibleTime: 4000})
	}
	put(Checkpoint{Group: "g", Topic: "T", QueueID: 1, CKOffset: 8, Offsets: []int64{9}, VisibleAt: 9000, PopTime: 2000, InvisibleTime: 7000})
	put(Checkpoint{Group: "g", Topic: "T", QueueID: 2, CKOffset: 12, Offsets: []int64{12}, VisibleAt: 5012, PopTime: 1012, InvisibleTime: 4000})
	put(Checkpoint{Group: "h", Topic: "T", QueueID: 1, CKOffset: 16, Offsets: []int64{16}, VisibleAt: 5016, PopTime: 1017, InvisibleTime: 4000})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()

	names := []CheckpointName{
		{36, 1036}, // the last of the queue
		{8, 2000},  // the second pop at 8
		{12, 1013}, // another pop time: none
		{16, 1017}, // only group h has it
		{0, 1000},  // the first
		{8, 1008},
		{40, 1040}, // past the last
		{12, 1012}, // queue 2 has it too
		{8, 1008},  // twice
		{-1, 0},    // before the first
	}
	seen := make([]bool, len(names))
	var prev []byte
	err := s.ReadCheckpoints("g", "T", 1, names, func(i int, c Checkpoint, ok bool) error {
		if seen[i] {
			t.Errorf("name %d passed twice", i)
		}
		seen[i] = true
		k := checkpointKey(nil, "g", "T", 1, names[i].CKOffset, names[i].PopTime)
		if bytes.Compare(k, prev) < 0 {
			t.Errorf("name %d (%+v) passed after a greater key", i, names[i])
		}
		prev = k
		want, wantOK, err := s.Checkpoint("g", "T", 1, names[i].CKOffset, names[i].PopTime)
		if err != nil {
			t.Fatal(err)
		}
		if ok != wantOK || !reflect.DeepEqual(c, want) {
			t.Errorf("name %+v: got %+v %v, point read %+v %v", names[i], c, ok, want, wantOK)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("name %d (%+v) never passed", i, names[i])
		}
	}
	found := 0
	for i := range names {
		if _, ok, _ := s.Checkpoint("g", "T", 1, names[i].CKOffset, names[i].PopTime); ok {
			found++
		}
	}
	if found != 6 {
		t.Fatalf("the test expects 6 of its names to exist, %d do", found)
	}

	// A checkpoint value that does not decode is an error naming it, not
	// an absent checkpoint (which revive would delete as an orphan).
	bad := checkpointKey(nil, "g", "T", 1, 20, 1020)
	if err := db.pdb.Set(bad, []byte{1, 2, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	err = s.ReadCheckpoints("g", "T", 1, []CheckpointName{{16, 1016}, {20, 1020}}, func(int, Checkpoint, bool) error { return nil })
	if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), "g/T/1@20") {
		t.Fatalf("undecodable checkpoint: %v, want ErrBadKey naming g/T/1@20", err)
	}

	stop := errors.New("stop")
	calls := 0
	err = s.ReadCheckpoints("g", "T", 1, names, func(int, Checkpoint, bool) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: got %v after %d calls, want it after 1", err, calls)
	}
	if err := s.ReadCheckpoints("g", "T", 1, nil, func(int, Checkpoint, bool) error { t.Fatal("called"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// MinInFlightReplacing answers as MinInFlight will once the batch that
// rewrites a checkpoint is committed, and a batch that is never committed
// leaves MinInFlight's answer (and the floor it keeps) as it was.
func TestMinInFlightReplacing(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	low := Checkpoint{Group: "g", Topic: "T", CKOffset: 0, Offsets: []int64{0, 1, 2, 3}, PopTime: 1, InvisibleTime: 9, VisibleAt: 10}
	high := Checkpoint{Group: "g", Topic: "T", CKOffset: 4, Offsets: []int64{4, 5}, PopTime: 2, InvisibleTime: 9, VisibleAt: 11}
	b := s.NewBatch()
	for _, c := range []*Checkpoint{&low, &high} {
		if err := b.PutCheckpoint(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, tc := range []struct {
		left []int64
		want int64
	}{
		{[]int64{2, 3}, 2},
		{[]int64{3}, 3},
		{nil, 4}, // the checkpoint is deleted: the next one holds the minimum
	} {
		acked := low
		acked.Offsets = tc.left
		if off, ok, err := s.MinInFlightReplacing("g", "T", 0, 0, &acked); err != nil || !ok || off != tc.want {
			t.Fatalf("with offsets %v left: %d %v %v, want %d", tc.left, off, ok, err, tc.want)
		}
	}
	// Another checkpoint of the same queue is not replaced by it.
	other := low
	other.PopTime, other.Offsets = 7, nil
	if off, _, _ := s.MinInFlightReplacing("g", "T", 0, 0, &other); off != 0 {
		t.Fatalf("a replacement with another popTime changed the minimum to %d", off)
	}
	if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 0 {
		t.Fatalf("MinInFlight after uncommitted replacements: %d %v %v, want 0", off, ok, err)
	}
}

// A slave's own pop state (0x59) reads back as written; an entry with
// neither an offset nor a batch is deleted, and the deletion of a topic
// or a group takes the entries of it with the rest of its consumer
// state, while the POP state copy of a master neither carries nor
// replaces them.
func TestSlaveOwnPopState(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	write := func(entries ...SlaveOwn) {
		t.Helper()
		b := s.NewBatch()
		defer b.Close()
		for i := range entries {
			if err := b.SetSlaveOwn(&entries[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []string {
		t.Helper()
		var out []string
		if err := s.EachSlaveOwn(func(o SlaveOwn) bool {
			out = append(out, PopSlaveOwnRecord{o}.String())
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	batch := &OrderState{PopTime: 1000, InvisibleTime: 60000, Messages: []OrderMessage{{QueueOffset: 4}}}
	write(SlaveOwn{Group: "g", Topic: "T", QueueID: 0, Committed: 4, Batch: batch},
		SlaveOwn{Group: "g", Topic: "T", QueueID: 1, Committed: 9},
		SlaveOwn{Group: "g", Topic: "U", QueueID: 0, Committed: -1, Batch: batch},
		SlaveOwn{Group: "h", Topic: "T", QueueID: 0, Committed: 2})
	want := []string{
		`group="g" topic="T" queue=0 committed=4 batch: popTime=` + FormatMillis(1000) + ` invisibleTime=60000 acked=0x0 attemptId="" messages=[4/0]`,
		`group="g" topic="T" queue=1 committed=9`,
		`group="g" topic="U" queue=0 committed=-1 batch: popTime=` + FormatMillis(1000) + ` invisibleTime=60000 acked=0x0 attemptId="" messages=[4/0]`,
		`group="h" topic="T" queue=0 committed=2`,
	}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b := s.NewBatch()
	if err := b.SetSlaveOwn(&SlaveOwn{Group: "g", Topic: "T", QueueID: 0, Committed: -2}); err == nil {
		t.Fatal("an offset below -1 was taken")
	}
	b.Close()

	// A master's POP state copy replaces its keyspaces, not this one.
	master := openTestDB(t)
	copied, _, err := master.AppendPopState(nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.ReplacePopState(copied); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 4 {
		t.Fatalf("entries after a POP state copy: %v", got)
	}

	write(SlaveOwn{Group: "g", Topic: "T", QueueID: 1, Committed: -1})
	if err := s.DeleteTopic("U"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroupPositions("h"); err != nil {
		t.Fatal(err)
	}
	if got := read(); !reflect.DeepEqual(got, want[:1]) {
		t.Fatalf("entries after emptying g's T/1 and deleting topic U and group h: %v", got)
	}
}
