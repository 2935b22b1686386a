package kvindex

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// timerBase is the delivery time the timer tests count from.
const timerBase = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z

// testTimer is the entry of the message parked at phy and due at
// deliverMs, its size derived from phy so that an entry read back with its
// fields mixed up cannot pass for another.
func testTimer(deliverMs, phy int64) TimerEntry {
	return TimerEntry{DeliverMs: deliverMs, PhyOffset: phy, Size: int32(phy%1000) + 100}
}

// addTimers records entries in one batch, as the dispatcher does for the
// timer messages of one dispatch batch.
func addTimers(t *testing.T, db *DB, entries ...TimerEntry) {
	t.Helper()
	b := db.pdb.NewBatch()
	defer b.Close()
	for _, e := range entries {
		if err := db.Timers().Add(b, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// timerLine is one entry as the timer tests compare them: "+MS phy=N
// size=N", the delivery time relative to timerBase.
func timerLine(e TimerEntry) string {
	return fmt.Sprintf("%+d phy=%d size=%d", e.DeliverMs-timerBase, e.PhyOffset, e.Size)
}

func timerLines(es []TimerEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, timerLine(e))
	}
	return out
}

// timerState lists the timer keyspace in key order, one timerLine a key.
func timerState(t *testing.T, db *DB) []string {
	t.Helper()
	var out []string
	if err := db.Scan([]byte{prefixTimer}, func(k, v []byte) bool {
		e, err := decodeTimer(k, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, timerLine(e))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Each scenario adds batches of entries to a fresh database, deletes some,
// and lists the keyspace afterwards.
func TestTimers(t *testing.T) {
	b := timerBase
	cases := []struct {
		name    string
		batches [][]TimerEntry
		del     []TimerEntry
		want    []string
	}{{
		name:    "entries are listed by delivery time, then CommitLog offset",
		batches: [][]TimerEntry{{testTimer(b+5, 100), testTimer(b, 300), testTimer(b, 1<<40), testTimer(b, 200)}, {testTimer(0, 7), testTimer(b+5, 50)}},
		want: []string{
			fmt.Sprintf("%+d phy=7 size=107", -b),
			"+0 phy=200 size=300",
			"+0 phy=300 size=400",
			"+0 phy=1099511627776 size=876",
			"+5 phy=50 size=150",
			"+5 phy=100 size=200",
		},
	}, {
		name:    "delete removes exactly the entries given",
		batches: [][]TimerEntry{{testTimer(b, 100), testTimer(b, 200), testTimer(b+1, 300), testTimer(b+2, 400)}},
		del:     []TimerEntry{testTimer(b, 200), testTimer(b+2, 400)},
		want:    []string{"+0 phy=100 size=200", "+1 phy=300 size=400"},
	}, {
		// Both fields locate the key: the offset of an entry with another
		// time, or the time of an entry with another offset, is no match.
		name:    "delete of an entry by its offset or time alone deletes nothing",
		batches: [][]TimerEntry{{testTimer(b, 100), testTimer(b+1, 200)}},
		del:     []TimerEntry{testTimer(b+1, 100), testTimer(b, 200), testTimer(b, 150), testTimer(b+7, 900)},
		want:    []string{"+0 phy=100 size=200", "+1 phy=200 size=300"},
	}, {
		name:    "delete of nothing keeps everything",
		batches: [][]TimerEntry{{testTimer(b, 100)}},
		del:     []TimerEntry{},
		want:    []string{"+0 phy=100 size=200"},
	}, {
		// A record dispatched again after a crash is indexed again.
		name:    "an entry added twice is one entry",
		batches: [][]TimerEntry{{testTimer(b, 100)}, {testTimer(b, 100), testTimer(b, 200)}},
		want:    []string{"+0 phy=100 size=200", "+0 phy=200 size=300"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openTestDB(t)
			for _, batch := range c.batches {
				addTimers(t, db, batch...)
			}
			if err := db.Timers().Delete(c.del); err != nil {
				t.Fatal(err)
			}
			if got := timerState(t, db); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
			// Due up to the end of time lists the same.
			due, err := db.Timers().Due(math.MaxInt64, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if got := timerLines(due); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Due(MaxInt64):\n got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// Due returns the entries due at or before now, earliest first, ties in
// CommitLog order, at most limit of them.
func TestTimersDue(t *testing.T) {
	db := openTestDB(t)
	b := timerBase
	addTimers(t, db, testTimer(b+1, 5), testTimer(b, 30), testTimer(b-1, 10), testTimer(b+1000, 1),
		testTimer(0, 40), testTimer(b, 20), testTimer(b, 1<<40))
	all := []string{
		fmt.Sprintf("%+d phy=40 size=140", -b),
		"-1 phy=10 size=110",
		"+0 phy=20 size=120",
		"+0 phy=30 size=130",
		"+0 phy=1099511627776 size=876",
		"+1 phy=5 size=105",
		"+1000 phy=1 size=101",
	}
	for _, c := range []struct {
		now   int64
		limit int
		want  []string
	}{
		{math.MinInt64, 10, nil},
		{-2, 10, nil},
		{-1, 10, nil},
		{0, 10, all[:1]},
		{b - 2, 10, all[:1]},
		{b - 1, 10, all[:2]},
		{b, 10, all[:5]},
		{b + 1, 10, all[:6]},
		{b + 999, 10, all[:6]},
		{b + 1000, 10, all},
		{math.MaxInt64, 10, all},
		{b, 1, all[:1]},
		{b, 3, all[:3]},
		{b, 5, all[:5]},
		{math.MaxInt64, 6, all[:6]},
	} {
		got, err := db.Timers().Due(c.now, c.limit)
		if err != nil {
			t.Fatalf("Due(%d, %d): %v", c.now, c.limit, err)
		}
		if !reflect.DeepEqual(timerLines(got), c.want) {
			t.Errorf("Due(%d, %d):\n got  %q\nwant %q", c.now, c.limit, timerLines(got), c.want)
		}
	}
}

// Count counts the entries due within a span of time, both ends
// included, up to its limit.
func TestTimersCount(t *testing.T) {
	db := openTestDB(t)
	b := timerBase
	addTimers(t, db, testTimer(b-1, 10), testTimer(b, 20), testTimer(b, 30), testTimer(b+99, 5), testTimer(b+100, 1))
	for _, c := range []struct {
		from, to int64
		limit    int
		want     int
	}{
		{b, b + 99, 10, 3},
		{b, b + 99, 2, 2},
		{b, b, 10, 2},
		{b - 1, b + 100, 10, 5},
		{b + 1, b + 98, 10, 0},
		{b + 100, b, 10, 0},
		{b, b + 99, 0, 0},
		{0, math.MaxInt64, 10, 5},
	} {
		got, err := db.Timers().Count(c.from, c.to, c.limit)
		if err != nil || got != c.want {
			t.Errorf("Count(%+d, %+d, %d) = %d, %v; want %d", c.from-b, c.to-b, c.limit, got, err, c.want)
		}
	}
}

// Due and Delete see nothing of the keyspaces next to the timer's, even
// keys that would not decode as timer entries.
func TestTimersKeepToTheirKeyspace(t *testing.T) {
	db := openTestDB(t)
	addTimers(t, db, testTimer(timerBase, 10))
	neighbours := [][]byte{{prefixTimer - 1}, {prefixTimer - 1, 0xff, 0xff}, {prefixTimer + 1}, {prefixTimer + 1, 0}}
	for _, k := range neighbours {
		if err := db.pdb.Set(k, []byte("x"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	due, err := db.Timers().Due(math.MaxInt64, 100)
	if err != nil || !reflect.DeepEqual(due, []TimerEntry{testTimer(timerBase, 10)}) {
		t.Errorf("Due next to other keyspaces: %+v %v", due, err)
	}
	if err := db.Timers().Delete(due); err != nil {
		t.Fatal(err)
	}
	if got := timerState(t, db); got != nil {
		t.Errorf("timers left: %q", got)
	}
	for _, k := range neighbours {
		if v, err := db.get(k); err != nil || string(v) != "x" {
			t.Errorf("key %x next to the timer keyspace: %q %v", k, v, err)
		}
	}
}

// An entry added to a batch is due only once the batch commits; an entry
// with a negative delivery time is refused and leaves the batch as it was.
func TestTimerAddIsPartOfTheBatch(t *testing.T) {
	db := openTestDB(t)
	tm := db.Timers()
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := tm.Add(b, testTimer(timerBase, 100)); err != nil {
		t.Fatal(err)
	}
	if err := tm.Add(b, testTimer(-1, 200)); err == nil {
		t.Error("an entry with a negative delivery time was added")
	}
	if err := tm.Add(b, testTimer(math.MinInt64, 300)); err == nil {
		t.Error("an entry due at MinInt64 was added")
	}
	if due, err := tm.Due(math.MaxInt64, 10); len(due) != 0 || err != nil {
		t.Fatalf("entry due before its batch commits: %+v %v", due, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if got, want := timerState(t, db), []string{"+0 phy=100 size=200"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after commit: %q, want %q", got, want)
	}
}

// A malformed entry stops Due with an error wrapping ErrBadKey.
func TestTimersDueMalformed(t *testing.T) {
	db := openTestDB(t)
	addTimers(t, db, testTimer(timerBase, 100))
	if err := db.pdb.Set(timerKey(timerBase-1, 5), make([]byte, timerValueLen+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if due, err := db.Timers().Due(timerBase, 10); !errors.Is(err, ErrBadKey) {
		t.Errorf("Due over a malformed entry: %+v %v", due, err)
	}
}

// DecodeKey turns the keys Add writes into timer records, with the text
// form kvdump prints.
func TestDecodeTimerKeyspace(t *testing.T) {
	db := openTestDB(t)
	addTimers(t, db, TimerEntry{DeliverMs: timerBase + 1500, PhyOffset: 4096, Size: 321}, TimerEntry{DeliverMs: 0, PhyOffset: 1 << 40, Size: 1})
	type decoded struct {
		rec  Record
		text string
	}
	want := []decoded{
		{TimerRecord{TimerEntry{DeliverMs: 0, PhyOffset: 1 << 40, Size: 1}},
			"deliverAt=1970-01-01T00:00:00.000Z phyOffset=1099511627776 size=1"},
		{TimerRecord{TimerEntry{DeliverMs: timerBase + 1500, PhyOffset: 4096, Size: 321}},
			"deliverAt=2026-01-01T00:00:01.500Z phyOffset=4096 size=321"},
	}
	var got []decoded
	if err := db.Scan([]byte{PrefixTimer}, func(k, v []byte) bool {
		r, err := DecodeKey(k, v)
		if err != nil {
			t.Fatalf("key %x: %v", k, err)
		}
		if ks := r.Keyspace(); ks.Prefix != PrefixTimer || ks.Name != "timer" {
			t.Errorf("key %x: keyspace %+v", k, ks)
		}
		got = append(got, decoded{r, r.String()})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded:\n got  %#v\nwant %#v", got, want)
	}
	if k, ok := KeyspaceOf(0x70); !ok || k.Name != "timer" {
		t.Errorf("KeyspaceOf(0x70) = %+v %v, want timer", k, ok)
	}
}

// The timer hold round-trips through its dispatch batch, is gone after
// ClearHold, and a stored value of the wrong length is an error naming
// it, not a hold read from garbage.
func TestTimerHoldRecord(t *testing.T) {
	db := openTestDB(t)
	tm := db.Timers()
	if _, ok, err := tm.Hold(); err != nil || ok {
		t.Fatalf("hold of a fresh index: ok=%v err=%v", ok, err)
	}
	b := db.pdb.NewBatch()
	if err := tm.SetHold(b, TimerHold{Phy: 4096, QueueOffset: 7}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := tm.Hold(); err != nil || !ok || h != (TimerHold{Phy: 4096, QueueOffset: 7}) {
		t.Fatalf("hold read back: %+v ok=%v err=%v", h, ok, err)
	}
	if err := tm.ClearHold(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tm.Hold(); err != nil || ok {
		t.Fatalf("hold after ClearHold: ok=%v err=%v", ok, err)
	}
	if err := db.pdb.Set(metaKey(metaTimerHold), []byte{1, 2, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tm.Hold(); ok || !errors.Is(err, ErrBadKey) {
		t.Fatalf("a 3-byte hold record: ok=%v err=%v, want ErrBadKey", ok, err)
	}
}
