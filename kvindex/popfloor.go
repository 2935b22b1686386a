package kvindex

import (
	"math"
	"sync"

	"github.com/rocketkv/rocketkv/internal/slablru"
)

// checkpointFloors keeps, per group and queue, a lower bound of the
// CKOffset of every checkpoint of the queue (keyspace 0x56), so that
// MinInFlight seeks to the oldest live checkpoint instead of walking the
// tombstones of up to MaxCheckpointSpan offsets of acknowledged ones below
// it: with 32-message pops that walk crossed about 100 tombstones on
// every ack that moved the committed offset.
//
// A floor is raised only by MinInFlight, to the first checkpoint its scan
// found, and lowered by PutCheckpoint when it adds one below it (an offset
// reset moves the pop position back). Both run under the POP service's
// lock of the queue, which every writer of the queue's checkpoints holds,
// so a scan never races a write of the same queue. A floor lowered by a
// batch that is then not committed is still a lower bound. A queue the
// cache does not hold (evicted, or not seen since the store opened)
// falls back to the committed offset minus MaxCheckpointSpan.
type checkpointFloors struct {
	mu    sync.Mutex
	cache *slablru.Cache[string, int64] // key: the queue's 0x56 prefix
}

// defaultCheckpointFloors is how many queues' floors are kept.
const defaultCheckpointFloors = 1 << 16

// noCheckpoint is the floor of a queue known to have no checkpoint.
const noCheckpoint = math.MaxInt64

func newCheckpointFloors(capacity int) *checkpointFloors {
	return &checkpointFloors{cache: slablru.New[string, int64](capacity)}
}

// purge forgets every floor, after the checkpoints were replaced.
func (f *checkpointFloors) purge() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cache.Purge()
}

// get returns the floor of a queue prefix; ok is false when unknown.
func (f *checkpointFloors) get(prefix []byte) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache.Get(string(prefix))
}

// set records a floor found by a scan.
func (f *checkpointFloors) set(prefix []byte, floor int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cache.Add(string(prefix), floor)
}

// lower lowers a known floor to ckOffset.
func (f *checkpointFloors) lower(prefix []byte, ckOffset int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.cache.Get(string(prefix)); ok && ckOffset < cur {
		f.cache.Add(string(prefix), ckOffset)
	}
}
