package kvindex

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Writes go into the batch in key order; of two writes of one key the
// later still wins, and nothing is left for the next batch.
func TestSortedSetsEmitInKeyOrder(t *testing.T) {
	db := openTestDB(t)
	var s sortedSets
	r := rand.New(rand.NewPCG(1, 2))
	want := map[string]string{}
	for i := range 500 {
		k := fmt.Sprintf("k%03d", r.IntN(200))
		v := fmt.Sprintf("v%d", i)
		if i%7 == 0 {
			v = "" // empty values, as the key index writes
		}
		s.add([]byte(k), []byte(v))
		want[k] = v
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := s.emit(b); err != nil {
		t.Fatal(err)
	}
	if len(s.items) != 0 || len(s.buf) != 0 {
		t.Fatalf("emit left %d writes (%d bytes)", len(s.items), len(s.buf))
	}
	var prev []byte
	rd := b.Reader()
	for n := 0; ; n++ {
		_, k, _, ok, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if n != 500 {
				t.Fatalf("batch holds %d writes, want 500", n)
			}
			break
		}
		if bytes.Compare(prev, k) > 0 {
			t.Fatalf("key %s after %s: not in key order", k, prev)
		}
		prev = append(prev[:0], k...)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		got, closer, err := db.pdb.Get([]byte(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if string(got) != v {
			t.Fatalf("%s = %q, want the last write %q", k, got, v)
		}
		_ = closer.Close()
	}
}
