package kvindex

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestPositionCache checks the POP position cache: a queue without a
// position is remembered as such until a committed batch sets one; a
// batch closed without commit changes nothing; positions are answered
// from memory once known (a write around the store is not seen); and a
// reader's fill that raced with a commit is dropped.
func TestPositionCache(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	if _, ok, err := s.Position("G", "T", 3); err != nil || ok {
		t.Fatalf("position of a new queue: ok %v, %v", ok, err)
	}
	uncommitted := s.NewBatch()
	if err := uncommitted.SetPosition("G", "T", 3, 99); err != nil {
		t.Fatal(err)
	}
	uncommitted.Close()
	if _, ok, _ := s.Position("G", "T", 3); ok {
		t.Fatal("a batch closed without commit set the position")
	}
	b := s.NewBatch()
	if err := b.SetPosition("G", "T", 3, 42); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if pos, ok, err := s.Position("G", "T", 3); err != nil || !ok || pos != 42 {
		t.Fatalf("position after commit: %d %v %v, want 42", pos, ok, err)
	}
	// Another PopStore of the same database shares the cache.
	if pos, ok, _ := db.Pop().Position("G", "T", 3); !ok || pos != 42 {
		t.Fatalf("second store sees %d %v", pos, ok)
	}
	// Served from memory: a delete around the store is not seen.
	if err := db.pdb.Delete(groupTopicQueue(nil, prefixPopPosition, "G", "T", 3), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if pos, ok, _ := s.Position("G", "T", 3); !ok || pos != 42 {
		t.Fatalf("position not cached: %d %v", pos, ok)
	}
	if err := s.NewBatch().SetPosition("G", "T", 3, -1); err == nil {
		t.Fatal("negative position accepted")
	}

	// A fill from a read that started before a commit applied is dropped.
	c := newPositionCache(8)
	key := []byte("k")
	_, hit, gen := c.get(key)
	if hit {
		t.Fatal("empty cache hit")
	}
	c.apply([]positionUpdate{{"k", 7}})
	c.fill(key, 3, gen) // what the reader read before the commit
	if pos, hit, _ := c.get(key); !hit || pos != 7 {
		t.Fatalf("stale fill replaced a committed position: %d %v", pos, hit)
	}
}
