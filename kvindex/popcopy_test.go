package kvindex

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// popStateOf returns the POP state keys and values of db, in order.
func popStateOf(t testing.TB, db *DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range popStatePrefixes {
		if err := db.Scan([]byte{p}, func(k, v []byte) bool { out[string(k)] = string(v); return true }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A slave's POP state becomes its master's: checkpoints, orderly batches,
// positions and revive batches, its own of before gone; the caches read
// the new state, and a copy of the slave is byte for byte the master's.
func TestPopStateCopy(t *testing.T) {
	master, slave := openTestDB(t), openTestDB(t)
	ck := Checkpoint{Group: "G", Topic: "T", QueueID: 1, CKOffset: 10, PopTime: 1000, InvisibleTime: 60_000, VisibleAt: 61_000, Offsets: []int64{10, 12}}
	putCheckpoints(t, master.Pop(), ck)
	b := master.Pop().NewBatch()
	if err := b.SetOrder(&OrderState{Group: "G", Topic: "O", QueueID: 0, PopTime: 5, InvisibleTime: 9, Messages: []OrderMessage{{QueueOffset: 3}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPosition("G", "T", 1, 13); err != nil {
		t.Fatal(err)
	}
	if err := b.PutReviveBatch(&ReviveBatch{Checkpoint: Checkpoint{Group: "G", Topic: "T", QueueID: 2, CKOffset: 4, PopTime: 900, Offsets: []int64{4}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// The slave's own state, read once so that its caches hold it.
	stale := Checkpoint{Group: "G", Topic: "T", QueueID: 1, CKOffset: 7, PopTime: 700, InvisibleTime: 60_000, VisibleAt: 60_700, Offsets: []int64{7}}
	putCheckpoints(t, slave.Pop(), stale)
	if off, ok, err := slave.Pop().MinInFlight("G", "T", 1, 0); err != nil || !ok || off != 7 {
		t.Fatalf("slave's in-flight minimum before the copy: %d %v %v", off, ok, err)
	}

	// A request mode (0x54, between the POP keyspaces) is not the copy's.
	if err := slave.Pop().SetRequestMode("T", "G", []byte(`{"mode":"POP"}`)); err != nil {
		t.Fatal(err)
	}
	copy, n, err := master.AppendPopState(nil, 1<<20)
	if err != nil || n != 5 {
		t.Fatalf("copy of the master: %d keys, %v; want 5 (checkpoint, deadline, order, position, revive batch)", n, err)
	}
	if got, written, err := slave.ReplacePopState(copy); err != nil || got != n || written != n+2 {
		t.Fatalf("replace: %d keys, %d written, %v; want %d keys, and the slave's two deleted", got, written, err, n)
	}
	if got, written, err := slave.ReplacePopState(copy); err != nil || got != n || written != 0 {
		t.Fatalf("the same copy again: %d keys, %d written, %v; want nothing written", got, written, err)
	}
	if mode, err := slave.Pop().RequestMode("T", "G"); err != nil || string(mode) != `{"mode":"POP"}` {
		t.Fatalf("the slave's request mode after the copy: %q %v", mode, err)
	}
	if m, s := popStateOf(t, master), popStateOf(t, slave); len(m) != n || len(s) != n {
		t.Fatalf("%d keys on the master, %d on the slave, want %d", len(m), len(s), n)
	} else {
		for k, v := range m {
			if s[k] != v {
				t.Fatalf("key %x: %x on the slave, %x on the master", k, s[k], v)
			}
		}
	}
	if off, ok, err := slave.Pop().MinInFlight("G", "T", 1, 0); err != nil || !ok || off != 10 {
		t.Fatalf("slave's in-flight minimum after the copy: %d %v %v, want 10", off, ok, err)
	}
	if pos, ok, err := slave.Pop().Position("G", "T", 1); err != nil || !ok || pos != 13 {
		t.Fatalf("slave's position after the copy: %d %v %v, want 13", pos, ok, err)
	}
	again, _, err := slave.AppendPopState(nil, 1<<20)
	if err != nil || !bytes.Equal(again, copy) {
		t.Fatalf("a copy of the slave differs from the master's (%v)", err)
	}

	if _, _, err := master.AppendPopState(nil, 10); !errors.Is(err, ErrPopStateTooBig) {
		t.Fatalf("a copy past its size: %v", err)
	}
	for name, bad := range map[string][]byte{
		"no version":        nil,
		"other version":     {2},
		"cut key":           append([]byte{popCopyVersion, 5}, 0x56),
		"foreign keyspace":  {popCopyVersion, 1, 0x30, 0},
		"keys out of order": {popCopyVersion, 2, 0x56, 2, 0, 1, 0x53, 0},
	} {
		if _, _, err := slave.ReplacePopState(bad); !errors.Is(err, ErrBadPopState) {
			t.Errorf("%s: %v, want ErrBadPopState", name, err)
		}
	}
	if s := popStateOf(t, slave); len(s) != n {
		t.Fatalf("a refused copy changed the slave: %d keys", len(s))
	}
}

// A copy read in pages is the state of the moment the reader opened,
// whatever pops and acks change while the pages are read, and joined it
// is the copy AppendPopState made then.
func TestPopStatePages(t *testing.T) {
	master, slave := openTestDB(t), openTestDB(t)
	var cks []Checkpoint
	for q := range 200 {
		off := int64(q * 10)
		cks = append(cks, Checkpoint{Group: "G", Topic: "T", QueueID: int32(q), CKOffset: off, PopTime: 1000, InvisibleTime: 60_000,
			VisibleAt: 61_000 + int64(q), Offsets: []int64{off, off + 1}})
	}
	putCheckpoints(t, master.Pop(), cks...)
	whole, n, err := master.AppendPopState(nil, 1<<20)
	if err != nil || n != 400 {
		t.Fatalf("whole copy: %d keys, %v", n, err)
	}
	r := master.NewPopStateReader()
	defer r.Close()
	var joined []byte
	pages, keys := 0, 0
	for done := false; !done; pages++ {
		var page []byte
		var k int
		page, k, done, err = r.Page(nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		keys += k
		if joined, err = AppendPopStatePage(joined, page); err != nil {
			t.Fatal(err)
		}
		if pages == 0 {
			// The state changes after the first page: checkpoints go and
			// come, in keyspaces the reader has not reached yet.
			putCheckpoints(t, master.Pop(), Checkpoint{Group: "G", Topic: "T", QueueID: 999, CKOffset: 5, PopTime: 2000,
				InvisibleTime: 60_000, VisibleAt: 62_000, Offsets: []int64{5}})
			if err := master.pdb.DeleteRange([]byte{prefixPopCK}, []byte{prefixPopCK + 1}, pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pages < 10 || keys != n || !bytes.Equal(joined, whole) {
		t.Fatalf("%d pages of %d keys joined to %d bytes; the whole copy has %d keys, %d bytes", pages, keys, len(joined), n, len(whole))
	}
	if got, _, err := slave.ReplacePopState(joined); err != nil || got != n {
		t.Fatalf("replace with the joined pages: %d keys, %v", got, err)
	}
	if _, err := AppendPopStatePage(joined, []byte{2, 1, 0x56, 0}); !errors.Is(err, ErrBadPopState) {
		t.Fatalf("a page of another version: %v", err)
	}
}

// FuzzReplacePopState: arbitrary bytes never panic; a copy refused leaves
// the state alone, and one accepted is what a copy of the state gives.
func FuzzReplacePopState(f *testing.F) {
	seed := openTestDB(f)
	putCheckpoints(f, seed.Pop(), Checkpoint{Group: "G", Topic: "T", CKOffset: 1, PopTime: 2, InvisibleTime: 3, VisibleAt: 5, Offsets: []int64{1}})
	good, _, err := seed.AppendPopState(nil, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{popCopyVersion})
	f.Add([]byte{popCopyVersion, 1, 0x52, 0})
	db := openTestDB(f)
	f.Fuzz(func(t *testing.T, copy []byte) {
		before, _, err := db.AppendPopState(nil, 1<<24)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ReplacePopState(copy); err != nil {
			if after, _, _ := db.AppendPopState(nil, 1<<24); !bytes.Equal(after, before) {
				t.Fatalf("a refused copy (%v) changed the state", err)
			}
			return
		}
		if after, _, _ := db.AppendPopState(nil, 1<<24); !bytes.Equal(after, copy) {
			t.Fatalf("state after an accepted copy:\n%x\nwant\n%x", after, copy)
		}
	})
}

// FuzzAppendPopStatePage: two pages as a slave receives them (parts of a
// copy, or arbitrary bytes) join as the first page and the second's bytes
// after its version, a page without the version is refused, and the joined
// copy goes through ReplacePopState's whole check (TestPopStatePages joins
// real pages back into the copy).
func FuzzAppendPopStatePage(f *testing.F) {
	seed := openTestDB(f)
	putCheckpoints(f, seed.Pop(), Checkpoint{Group: "G", Topic: "T", CKOffset: 1, PopTime: 2, InvisibleTime: 3, VisibleAt: 5, Offsets: []int64{1}},
		Checkpoint{Group: "G", Topic: "T", QueueID: 1, CKOffset: 4, PopTime: 2, InvisibleTime: 3, VisibleAt: 5, Offsets: []int64{4}})
	good, _, err := seed.AppendPopState(nil, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, []byte{popCopyVersion})
	f.Add([]byte{popCopyVersion}, good)
	f.Add([]byte{}, good)
	f.Add([]byte{2, 1}, []byte{popCopyVersion, 1, 0x52, 0})
	db := openTestDB(f)
	versioned := func(page []byte) bool { return len(page) > 0 && page[0] == popCopyVersion }
	f.Fuzz(func(t *testing.T, first, second []byte) {
		// A page is taken only with its version byte; the first whole,
		// each later one after its version byte.
		joined, err := AppendPopStatePage(nil, first)
		if (err == nil) != versioned(first) || err != nil && !errors.Is(err, ErrBadPopState) {
			t.Fatalf("first page %x: %v", first, err)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(joined, first) {
			t.Fatalf("first page %x joined as %x", first, joined)
		}
		joined, err = AppendPopStatePage(joined, second)
		if (err == nil) != versioned(second) || err != nil && !errors.Is(err, ErrBadPopState) {
			t.Fatalf("second page %x: %v", second, err)
		}
		if err != nil {
			if !bytes.Equal(joined, first) {
				t.Fatalf("a refused page changed the copy %x to %x", first, joined)
			}
			return
		}
		if want := append(bytes.Clone(first), second[1:]...); !bytes.Equal(joined, want) {
			t.Fatalf("pages %x and %x joined as %x, want %x", first, second, joined, want)
		}
		// Checked whole; what a refusal leaves is FuzzReplacePopState's.
		if _, _, err := db.ReplacePopState(joined); err == nil {
			if after, _, _ := db.AppendPopState(nil, 1<<24); !bytes.Equal(after, joined) {
				t.Fatalf("state after an accepted joined copy:\n%x\nwant\n%x", after, joined)
			}
		}
	})
}
