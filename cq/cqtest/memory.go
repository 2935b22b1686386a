package cqtest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// Memory is a cq.Store held in memory: the reference model the suite
// compares other layouts against, and a handy Store for tests of code that
// uses one. It follows the cq.Store contract literally (linear scans, no
// cleverness), keeps store timestamps, and never skips an entry on its
// physical offset alone (only on its queue offset).
//
// Durability is modelled by snapshots: Flush and Close record the state, and
// Reopen returns a new Memory holding the last recorded state.
//
// It is safe for concurrent use.
type Memory struct {
	mu      sync.RWMutex
	closed  bool
	queues  map[queueKey]*memQueue
	durable map[queueKey]*memQueue // state at the last Flush or Close
}

type queueKey struct {
	topic   string
	queueID int32
}

// memQueue holds the entries at offsets [base, base+len(entries)); the
// readable ones are those at or after min.
type memQueue struct {
	base    int64
	min     int64
	entries []cq.Entry
}

func (q *memQueue) max() int64 { return q.base + int64(len(q.entries)) }

func (q *memQueue) at(off int64) cq.Entry { return q.entries[off-q.base] }

func (q *memQueue) clone() *memQueue {
	c := *q
	c.entries = append([]cq.Entry(nil), q.entries...)
	return &c
}

var _ cq.Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{queues: make(map[queueKey]*memQueue), durable: make(map[queueKey]*memQueue)}
}

// Reopen returns a new open Memory holding what m held at its last Flush or
// Close, as reopening a store on disk would. m itself is not changed.
func (m *Memory) Reopen() *Memory {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := NewMemory()
	for k, q := range m.durable {
		n.queues[k] = q.clone()
		n.durable[k] = q.clone()
	}
	return n
}

// MemoryOpener returns an Opener of Memory stores: the first open of a
// directory gives an empty store, a later one the Reopen of the store last
// opened there. The directory itself is not used.
func MemoryOpener() Opener {
	var mu sync.Mutex
	last := make(map[string]*Memory)
	return func(_ *testing.T, dir string, _ *CommitLog) cq.Store {
		mu.Lock()
		defer mu.Unlock()
		m, ok := last[dir]
		if ok {
			m = m.Reopen()
		} else {
			m = NewMemory()
		}
		last[dir] = m
		return m
	}
}

// validateEntry returns an error if e cannot be stored: a negative queue or
// CommitLog offset, or a size that is not positive. cq.Store.Put rejects a
// call holding such an entry before writing anything.
func validateEntry(d cq.Dispatch) error {
	if d.QueueOffset < 0 || d.PhyOffset < 0 || d.Size <= 0 {
		return fmt.Errorf("entry %s/%d@%d (phy %d, size %d): negative offset or non-positive size",
			d.Topic, d.QueueID, d.QueueOffset, d.PhyOffset, d.Size)
	}
	return nil
}

// Put implements cq.Store.
func (m *Memory) Put(entries []cq.Dispatch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	for _, d := range entries {
		if err := validateEntry(d); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	for _, d := range entries {
		k := queueKey{d.Topic, d.QueueID}
		q, ok := m.queues[k]
		if !ok {
			q = &memQueue{base: d.QueueOffset, min: d.QueueOffset}
			m.queues[k] = q
		}
		if d.QueueOffset < q.max() {
			continue
		}
		e := d.Entry
		e.QueueOffset = q.max()
		q.entries = append(q.entries, e)
	}
	return nil
}

func (m *Memory) queue(topic string, queueID int32) (*memQueue, error) {
	if m.closed {
		return nil, cq.ErrClosed
	}
	return m.queues[queueKey{topic, queueID}], nil
}

// Get implements cq.Store.
func (m *Memory) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q, err := m.queue(topic, queueID)
	if err != nil || q == nil || from < q.min || from >= q.max() || max <= 0 {
		return nil, err
	}
	n := min(int64(max), q.max()-from)
	return append([]cq.Entry(nil), q.entries[from-q.base:from-q.base+n]...), nil
}

// MaxOffset implements cq.Store.
func (m *Memory) MaxOffset(topic string, queueID int32) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q, err := m.queue(topic, queueID)
	if err != nil || q == nil {
		return 0, err
	}
	return q.max(), nil
}

// MinOffset implements cq.Store.
func (m *Memory) MinOffset(topic string, queueID int32) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q, err := m.queue(topic, queueID)
	if err != nil || q == nil {
		return 0, err
	}
	return q.min, nil
}

// OffsetByTime implements cq.Store.
func (m *Memory) OffsetByTime(topic string, queueID int32, ts int64, b cq.Boundary) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q, err := m.queue(topic, queueID)
	if err != nil || q == nil {
		return 0, err
	}
	switch b {
	case cq.Lower:
		for off := q.min; off < q.max(); off++ {
			if q.at(off).StoreTimestamp >= ts {
				return off, nil
			}
		}
		return q.max(), nil
	case cq.Upper:
		for off := q.max() - 1; off >= q.min; off-- {
			if q.at(off).StoreTimestamp <= ts {
				return off, nil
			}
		}
		return q.min, nil
	default:
		return 0, fmt.Errorf("offset by time: unknown boundary %d", b)
	}
}

// DeleteQueue implements cq.Store.
func (m *Memory) DeleteQueue(topic string, queueID int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	delete(m.queues, queueKey{topic, queueID})
	return nil
}

// DeleteTopic implements cq.Store.
func (m *Memory) DeleteTopic(topic string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	for k := range m.queues {
		if k.topic == topic {
			delete(m.queues, k)
		}
	}
	return nil
}

// CorrectMin implements cq.Store. Entries below the new minimum are kept
// (unreadable), as the file layout keeps the last file of a queue.
func (m *Memory) CorrectMin(minPhyOffset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	for _, q := range m.queues {
		if q.min >= q.max() {
			continue
		}
		if q.at(q.max()-1).PhyOffset < minPhyOffset {
			q.min = q.max()
			continue
		}
		for q.at(q.min).PhyOffset < minPhyOffset {
			q.min++
		}
	}
	return nil
}

// Truncate implements cq.Store.
func (m *Memory) Truncate(phyOffset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	for _, q := range m.queues {
		cut := q.max()
		for cut > q.min && q.at(cut-1).PhyOffset >= phyOffset {
			cut--
		}
		q.entries = q.entries[:cut-q.base]
	}
	return nil
}

// Queues implements cq.Store.
func (m *Memory) Queues(fn func(topic string, queueID int32) bool) error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return cq.ErrClosed
	}
	keys := make([]queueKey, 0, len(m.queues))
	for k := range m.queues {
		keys = append(keys, k)
	}
	m.mu.RUnlock()
	for _, k := range keys {
		if !fn(k.topic, k.queueID) {
			break
		}
	}
	return nil
}

// Flush implements cq.Store: it records the state Reopen returns.
func (m *Memory) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	m.snapshot()
	return nil
}

func (m *Memory) snapshot() {
	m.durable = make(map[queueKey]*memQueue, len(m.queues))
	for k, q := range m.queues {
		m.durable[k] = q.clone()
	}
}

// Close implements cq.Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return cq.ErrClosed
	}
	m.snapshot()
	m.closed = true
	return nil
}
