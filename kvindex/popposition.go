package kvindex

import (
	"sync"

	"github.com/rocketkv/rocketkv/internal/slablru"
)

// positionCache keeps groups' pop positions (keyspace 0x52), or their
// committed offsets (0x30, a second instance), in memory, in front of the
// database: every pop reads the position of each queue it looks at and
// every pop and ack its committed offset, and those reads were a Pebble
// Get each (the committed-offset Gets were 5 % of the broker's CPU under
// pop+ack load). It is written through
// by PopBatch.Commit after the batch is in the database, and remembers
// queues without a position too. Readers fill it only when no commit
// applied positions since they missed (gen), so a fill never puts back a
// position a commit has replaced.
type positionCache struct {
	mu    sync.Mutex
	gen   uint64
	cache *slablru.Cache[string, int64] // key: the 0x52 key; value: next offset, or noPosition
}

// noPosition marks a queue the group never popped.
const noPosition = -1

// defaultPositionCache is how many queues' positions are kept.
const defaultPositionCache = 1 << 16

func newPositionCache(capacity int) *positionCache {
	return &positionCache{cache: slablru.New[string, int64](capacity)}
}

// get returns the cached position of key (noPosition when the queue has
// none), whether it was cached, and the generation to pass to fill.
func (c *positionCache) get(key []byte) (pos int64, hit bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pos, hit = c.cache.Get(string(key))
	return pos, hit, c.gen
}

// fill caches what a reader read from the database, unless a commit
// applied positions since its miss at gen.
func (c *positionCache) fill(key []byte, pos int64, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.cache.Add(string(key), pos)
	}
}

// positionUpdate is one position a batch sets.
type positionUpdate struct {
	key  string
	next int64
}

// apply caches the positions of a committed batch. A negative one (which
// only a committed offset can be) is forgotten instead: the cache keeps
// noPosition for an absent key.
func (c *positionCache) apply(updates []positionUpdate) {
	if len(updates) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, u := range updates {
		if u.next < 0 {
			c.cache.Remove(u.key)
			continue
		}
		c.cache.Add(u.key, u.next)
	}
}

// purge forgets everything, after a range deletion.
func (c *positionCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.cache.Purge()
}
