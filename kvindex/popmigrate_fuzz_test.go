package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"
)

// FuzzPopSchemaUpgrade writes a schema-2 store holding in-flight records
// (0x50) of one pop, at offsets around its ckOffset, and one record of
// arbitrary key and value bytes, then opens it for writing, which
// upgrades it to checkpoints: the upgrade never fails or panics on what
// it reads (a record that does not decode, or of a negative offset, is
// dropped), leaves no schema-2 key and every key
// decodable, and loses no message of any other record.
func FuzzPopSchemaUpgrade(f *testing.F) {
	r := InFlight{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 7, VisibleAt: 1_060_000, PopTime: 1_000_000, InvisibleTime: 60_000, CKOffset: 5}
	f.Add("g", "T", int32(1), int64(5), int64(1_000_000), uint32(1_060_000), []byte{0, 0, 0, 1, 0, 2},
		popInFlightKey(nil, &r)[1:], popInFlightValue(nil, &r))
	f.Add("%RETRY%g", "", int32(-1), int64(math.MaxInt64-1), int64(-1), uint32(0), []byte{0x7f, 0xff, 0x80, 0, 0xff, 0xff},
		[]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff}, []byte{1, 2, 3})
	f.Add("g", "T", int32(0), int64(0), int64(0), uint32(5), []byte{0x10, 0, 0x10, 1}, []byte(nil), make([]byte, popInFlightValueLen))
	f.Fuzz(func(t *testing.T, group, topic string, queueID int32, ckOffset, popTime int64, visibleAt uint32, deltas, rawKey, rawValue []byte) {
		if len(group) > 255 || len(topic) > 255 || len(deltas) > 64 {
			return
		}
		dir := filepath.Join(t.TempDir(), "kvindex")
		db := openDBAt(t, dir)
		wb := db.pdb.NewBatch()
		type msg struct {
			group, topic string
			queueID      int32
			offset       int64
		}
		want := map[msg]bool{}
		for i := 0; i+1 < len(deltas); i += 2 {
			r := InFlight{Group: group, Topic: topic, QueueID: queueID, CKOffset: ckOffset, PopTime: popTime,
				InvisibleTime: 60_000, VisibleAt: int64(visibleAt) + int64(i), Attempts: int32(i),
				QueueOffset: ckOffset + int64(int16(binary.BigEndian.Uint16(deltas[i:])))}
			_ = wb.Set(popInFlightKey(nil, &r), popInFlightValue(nil, &r), nil)
			if holdable(r) {
				want[msg{group, topic, queueID, r.QueueOffset}] = true
			}
		}
		raw := append([]byte{prefixPopInFlight}, rawKey...)
		_ = wb.Set(raw, rawValue, nil)
		if r, err := decodePopInFlight(raw, rawValue); err == nil && holdable(r) {
			want[msg{r.Group, r.Topic, r.QueueID, r.QueueOffset}] = true
		}
		_ = wb.Set(metaKey(metaSchema), binary.BigEndian.AppendUint32(nil, 2), nil)
		if err := wb.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := Open(Options{Dir: dir, CacheSize: 8 << 20, MemTableSize: 4 << 20, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatalf("the upgrade of a schema-2 store: %v", err)
		}
		defer db.Close()
		if v := schemaVersionOf(t, db); v != schemaVersion {
			t.Fatalf("schema %d after the upgrade", v)
		}
		err = db.Scan(nil, func(k, v []byte) bool {
			if k[0] == prefixPopInFlight || k[0] == prefixPopAckIndex {
				t.Fatalf("schema-2 key %x left after the upgrade", k)
			}
			if _, err := DecodeKey(k, v); err != nil && !errors.Is(err, ErrUnknownKeyspace) {
				t.Fatalf("key %x (value %x) after the upgrade does not decode: %v", k, v, err)
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Pop().DueCheckpoints(math.MinInt64, math.MaxInt64, 0, func(c Checkpoint) bool {
			for _, off := range c.Offsets {
				delete(want, msg{c.Group, c.Topic, c.QueueID, off})
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) > 0 {
			t.Fatalf("messages in flight before the upgrade and in no checkpoint after it: %v", want)
		}
	})
}

// holdable reports whether a schema-2 record names a message a checkpoint
// can hold: one of an offset of 0 or more.
func holdable(r InFlight) bool { return r.QueueOffset >= 0 }

// The upgrade of a schema-2 store whose in-flight records include some no
// checkpoint can hold (a negative queue offset) drops them
// and opens, rather than failing the start on the first one; a record of
// a negative ckOffset with an offset of its own keeps its message in a
// checkpoint of its own.
func TestPopSchemaUpgradeDropsRecordsNoCheckpointHolds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kvindex")
	db := openDBAt(t, dir)
	wb := db.pdb.NewBatch()
	for _, r := range []InFlight{
		{Group: "g", Topic: "T", QueueID: 0, QueueOffset: -3, CKOffset: -3, PopTime: 1, VisibleAt: 10},
		{Group: "g", Topic: "T", QueueID: 1, QueueOffset: 9, CKOffset: -1, PopTime: 1, VisibleAt: 10},
		{Group: "g", Topic: "T", QueueID: 2, QueueOffset: 6, CKOffset: 5, PopTime: 1, VisibleAt: 10},
	} {
		_ = wb.Set(popInFlightKey(nil, &r), popInFlightValue(nil, &r), nil)
	}
	_ = wb.Set(metaKey(metaSchema), binary.BigEndian.AppendUint32(nil, 2), nil)
	if err := wb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("the upgrade refused the store: %v", err)
	}
	defer db.Close()
	var got []string
	err = db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(c Checkpoint) bool {
		got = append(got, fmt.Sprintf("%s/%s/%d@%d%v", c.Group, c.Topic, c.QueueID, c.CKOffset, c.Offsets))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"g/T/1@9[9]", "g/T/2@5[6]"}; !slices.Equal(got, want) {
		t.Fatalf("checkpoints after the upgrade %v, want %v", got, want)
	}
}
