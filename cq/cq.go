// Package cq defines the ConsumeQueue: the per-queue index that maps a
// logical queue offset to the CommitLog record holding that message.
//
// rocketkv has two layouts behind the one Store interface:
//
//   - kvindex.CQ keeps entries in Pebble (the default, storeType "kv");
//   - filecq keeps RocketMQ's own file layout (consumequeue/<topic>/<queueId>/
//     files of 20-byte units), byte-compatible with Apache RocketMQ stores, used
//     for migration and as the side-by-side baseline.
//
// Both answer every query the same way; the suite in cq/cqtest runs on both.
//
// Offsets follow RocketMQ: a queue holds entries at logical offsets
// [MinOffset, MaxOffset), MaxOffset being the next offset to be written.
package cq

import (
	"errors"
)

// Entry is one ConsumeQueue unit: where the message at QueueOffset lives in
// the CommitLog, and what a consumer needs to filter it without reading it.
type Entry struct {
	// QueueOffset is the logical offset of the message in its queue.
	QueueOffset int64
	// PhyOffset is the CommitLog offset of the record.
	PhyOffset int64
	// Size is the record's total size in bytes.
	Size int32
	// TagsCode is the Java String.hashCode of the TAGS property (0 without
	// tags), or the delivery time for SCHEDULE_TOPIC_XXXX.
	TagsCode int64
	// StoreTimestamp is the record's store time in ms. Layouts that do not
	// keep it (the file layout) report 0 from Get.
	StoreTimestamp int64
}

// End returns the CommitLog offset just past the record.
func (e Entry) End() int64 { return e.PhyOffset + int64(e.Size) }

// Dispatch is one entry addressed to its queue, as the dispatcher produces it.
type Dispatch struct {
	Topic   string
	QueueID int32
	Entry
}

// Boundary selects which of several entries with the same store timestamp
// OffsetByTime returns, as RocketMQ's BoundaryType.
type Boundary int

const (
	// Lower returns the first entry at or after the timestamp.
	Lower Boundary = iota
	// Upper returns the last entry at or before the timestamp.
	Upper
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("cq: store is closed")

// Store is a ConsumeQueue store covering every topic and queue of a broker.
//
// Implementations are safe for concurrent use. Put is called by one
// goroutine at a time (the dispatcher); readers run concurrently with it.
type Store interface {
	// Put writes entries, possibly for many queues. Within a queue the
	// entries arrive in increasing QueueOffset order. An entry whose queue
	// offset is already present is skipped, so re-dispatching a range after
	// a crash is harmless.
	Put(entries []Dispatch) error

	// Get returns up to max consecutive entries of the queue starting at
	// from. It returns fewer (possibly none) at the end of the queue. A from
	// below MinOffset or at/after MaxOffset returns no entries and no error.
	Get(topic string, queueID int32, from int64, max int) ([]Entry, error)

	// MaxOffset returns the next queue offset to be written (0 for an
	// unknown queue).
	MaxOffset(topic string, queueID int32) (int64, error)

	// MinOffset returns the smallest queue offset still readable (0 for an
	// unknown queue). It is never above MaxOffset.
	MinOffset(topic string, queueID int32) (int64, error)

	// OffsetByTime returns the queue offset of the message stored at
	// timestamp ts (ms) following RocketMQ's getOffsetInQueueByTime rules:
	// with Lower the first entry whose store time is >= ts, with Upper the
	// last entry whose store time is <= ts; clamped to [MinOffset, MaxOffset].
	OffsetByTime(topic string, queueID int32, ts int64, b Boundary) (int64, error)

	// DeleteQueue drops every entry of one queue and its bounds.
	DeleteQueue(topic string, queueID int32) error

	// DeleteTopic drops every queue of a topic.
	DeleteTopic(topic string) error

	// CorrectMin moves the minimum of every queue past the entries whose
	// record lies below minPhyOffset (the CommitLog's new minimum after
	// retention deleted segments) and may delete those entries.
	CorrectMin(minPhyOffset int64) error

	// Truncate removes every entry whose record starts at or after
	// phyOffset: the recovered end of the CommitLog. Queue maxima move back
	// accordingly.
	Truncate(phyOffset int64) error

	// Queues calls fn for every queue the store holds, in no particular
	// order, until fn returns false.
	Queues(fn func(topic string, queueID int32) bool) error

	// Flush makes everything written so far durable.
	Flush() error

	// Close flushes and releases the store.
	Close() error
}
