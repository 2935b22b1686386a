// Package slablru is a least-recently-used map for very many small
// entries. Entries live in one slice and are linked by int32 indices, so a
// cache of a million entries is two allocations (the slice and the index
// map) instead of several objects and pointers per entry: the garbage
// collector has far less to trace, which at a million queues was a
// quarter of the broker's CPU.
//
// Layout:
//
//	index: map[K]int32 ──► slots[i] = { key, value, prev, next }
//	                        head (most recent) ◄──► ... ◄──► tail (least recent)
//	free slots are chained through next, starting at free
//
// A Cache is not safe for concurrent use; its owner locks it.
package slablru

// none marks the end of a chain.
const none = -1

type slot[K comparable, V any] struct {
	key        K
	val        V
	prev, next int32
	used       bool
}

// Cache maps keys to values, keeping at most its capacity; adding beyond
// it evicts the least recently used entry.
type Cache[K comparable, V any] struct {
	index      map[K]int32
	slots      []slot[K, V]
	head, tail int32 // most and least recently used, none when empty
	free       int32 // first free slot, none when there is none
	capacity   int
}

// New returns a cache of at most capacity entries (at least 1).
func New[K comparable, V any](capacity int) *Cache[K, V] {
	capacity = max(capacity, 1)
	return &Cache[K, V]{index: map[K]int32{}, head: none, tail: none, free: none, capacity: capacity}
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return len(c.index) }

// Cap returns the capacity.
func (c *Cache[K, V]) Cap() int { return c.capacity }

// Get returns the value of k and marks it most recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	i, ok := c.index[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.toFront(i)
	return c.slots[i].val, true
}

// Peek returns the value of k without changing its recency.
func (c *Cache[K, V]) Peek(k K) (V, bool) {
	i, ok := c.index[k]
	if !ok {
		var zero V
		return zero, false
	}
	return c.slots[i].val, true
}

// Ref returns a pointer to the value of k for changing it in place, and
// marks it most recently used. The pointer is valid until the next Add or
// Remove.
func (c *Cache[K, V]) Ref(k K) (*V, bool) {
	i, ok := c.index[k]
	if !ok {
		return nil, false
	}
	c.toFront(i)
	return &c.slots[i].val, true
}

// RefPeek is Ref without changing the recency.
func (c *Cache[K, V]) RefPeek(k K) (*V, bool) {
	i, ok := c.index[k]
	if !ok {
		return nil, false
	}
	return &c.slots[i].val, true
}

// Add sets the value of k and marks it most recently used. When that
// takes the cache past its capacity, the least recently used entry is
// evicted and returned with evicted set.
func (c *Cache[K, V]) Add(k K, v V) (oldKey K, oldVal V, evicted bool) {
	if i, ok := c.index[k]; ok {
		c.slots[i].val = v
		c.toFront(i)
		return oldKey, oldVal, false
	}
	if len(c.index) >= c.capacity && c.tail != none {
		t := c.tail
		oldKey, oldVal, evicted = c.slots[t].key, c.slots[t].val, true
		c.removeAt(t)
	}
	i := c.alloc()
	c.slots[i] = slot[K, V]{key: k, val: v, prev: none, next: none, used: true}
	c.index[k] = i
	c.pushFront(i)
	return oldKey, oldVal, evicted
}

// Insert is Add without eviction: the cache may exceed its capacity until
// the owner calls EvictOldest.
func (c *Cache[K, V]) Insert(k K, v V) *V {
	if i, ok := c.index[k]; ok {
		c.slots[i].val = v
		c.toFront(i)
		return &c.slots[i].val
	}
	i := c.alloc()
	c.slots[i] = slot[K, V]{key: k, val: v, prev: none, next: none, used: true}
	c.index[k] = i
	c.pushFront(i)
	return &c.slots[i].val
}

// Remove deletes k; it reports whether k was there.
func (c *Cache[K, V]) Remove(k K) bool {
	i, ok := c.index[k]
	if !ok {
		return false
	}
	c.removeAt(i)
	return true
}

// EvictOldest removes up to n entries from the least recently used end
// for which evictable returns true, looking at no more than budget
// entries, and returns how many it removed. Entries it passes over keep
// their place.
func (c *Cache[K, V]) EvictOldest(n, budget int, evictable func(K, *V) bool) int {
	removed := 0
	for i := c.tail; i != none && removed < n && budget > 0; budget-- {
		prev := c.slots[i].prev
		if evictable(c.slots[i].key, &c.slots[i].val) {
			c.removeAt(i)
			removed++
		}
		i = prev
	}
	return removed
}

// RemoveIf removes every entry for which match returns true (a walk of
// the whole cache).
func (c *Cache[K, V]) RemoveIf(match func(K, V) bool) int {
	removed := 0
	for i := range c.slots {
		s := &c.slots[i]
		if s.used && match(s.key, s.val) {
			c.removeAt(int32(i))
			removed++
		}
	}
	return removed
}

// Purge removes every entry and releases the slots.
func (c *Cache[K, V]) Purge() {
	c.index = map[K]int32{}
	c.slots = nil
	c.head, c.tail, c.free = none, none, none
}

// alloc returns a free slot index, growing the slice when none is free.
func (c *Cache[K, V]) alloc() int32 {
	if c.free != none {
		i := c.free
		c.free = c.slots[i].next
		return i
	}
	c.slots = append(c.slots, slot[K, V]{})
	return int32(len(c.slots) - 1)
}

// removeAt unlinks slot i, deletes its key and puts it on the free chain.
func (c *Cache[K, V]) removeAt(i int32) {
	c.unlink(i)
	delete(c.index, c.slots[i].key)
	c.slots[i] = slot[K, V]{prev: none, next: c.free}
	c.free = i
}

func (c *Cache[K, V]) toFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

func (c *Cache[K, V]) pushFront(i int32) {
	s := &c.slots[i]
	s.prev, s.next = none, c.head
	if c.head != none {
		c.slots[c.head].prev = i
	}
	c.head = i
	if c.tail == none {
		c.tail = i
	}
}

func (c *Cache[K, V]) unlink(i int32) {
	s := &c.slots[i]
	if s.prev != none {
		c.slots[s.prev].next = s.next
	} else if c.head == i {
		c.head = s.next
	}
	if s.next != none {
		c.slots[s.next].prev = s.prev
	} else if c.tail == i {
		c.tail = s.prev
	}
	s.prev, s.next = none, none
}
