package kvindex

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// sortedSets collects the point writes of one batch and adds them to the
// Pebble batch in key order.
//
// Pebble applies a batch to its memtable (a skiplist) in the batch's
// order with one inserter, which starts each insert's search from where
// the previous one ended: a key just after the previous one costs a few
// steps, a key elsewhere a search from the top through cold memory. A
// dispatch batch holds its records in CommitLog order, which interleaves
// the queues (q0:n, q1:n, ..., q0:n+1, ...) and the message keys; in key
// order each queue's entries become one run of neighbours. Equal keys
// keep their order (a later write of a key still wins).
type sortedSets struct {
	buf   []byte
	items []sortedSet
}

// sortedSet locates one write in buf: the key at [off, off+klen), the value
// right after it.
type sortedSet struct {
	off, klen, vlen int
}

func (s *sortedSets) key(it sortedSet) []byte { return s.buf[it.off : it.off+it.klen] }

// add copies a write.
func (s *sortedSets) add(key, value []byte) {
	s.items = append(s.items, sortedSet{off: len(s.buf), klen: len(key), vlen: len(value)})
	s.buf = append(append(s.buf, key...), value...)
}

// reset forgets the writes held, keeping the room.
func (s *sortedSets) reset() { s.buf, s.items = s.buf[:0], s.items[:0] }

// emit adds the writes to b in key order and forgets them, keeping the
// room for the next batch.
func (s *sortedSets) emit(b *pebble.Batch) error {
	if !slices.IsSortedFunc(s.items, s.compare) {
		slices.SortStableFunc(s.items, s.compare)
	}
	for _, it := range s.items {
		k := s.key(it)
		v := s.buf[it.off+it.klen : it.off+it.klen+it.vlen]
		if it.vlen == 0 {
			v = nil
		}
		if err := b.Set(k, v, nil); err != nil {
			return fmt.Errorf("add key %x to the batch: %w", k, err)
		}
	}
	s.reset()
	return nil
}

func (s *sortedSets) compare(a, b sortedSet) int { return bytes.Compare(s.key(a), s.key(b)) }
