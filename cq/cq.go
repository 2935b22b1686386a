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
//
// A queue exists from its first Put until DeleteQueue or DeleteTopic drops
// it; CorrectMin and Truncate never drop a queue, they only move its bounds.
// Unknown queues answer 0 to MaxOffset, MinOffset and OffsetByTime and no
// entries to Get, without an error.
//
// Store timestamps are assumed not to decrease along a queue (the CommitLog
// assigns them in append order); OffsetByTime's answer on a queue whose
// timestamps go backwards is whatever a binary search finds.
//
// At startup the broker calls Truncate with the recovered end of the
// CommitLog and CorrectMin with its minimum, as RocketMQ does after loading
// its ConsumeQueues. A layout that does not persist minima (the file layout
// recomputes them from its files) relies on that CorrectMin call; every
// other answer survives Close and reopening as it is.
type Store interface {
	// Put writes entries, possibly for many queues. Within a queue the
	// entries arrive in increasing QueueOffset order. Per entry, in order:
	//
	//   - an entry with a negative QueueOffset or PhyOffset or a Size <= 0
	//     makes Put fail before anything of the call is written;
	//   - the first entry of a queue that does not exist starts it at its
	//     QueueOffset: MinOffset = MaxOffset = QueueOffset before it is
	//     written (RocketMQ pre-fills the file below it with blank units);
	//   - an entry below MaxOffset is already there and is skipped (the
	//     existing entry is kept), so re-dispatching a range after a crash is
	//     harmless;
	//   - an entry above MaxOffset is stored at MaxOffset, as RocketMQ's file
	//     ConsumeQueue does (it logs "[BUG] logic queue order" and appends).
	//
	// A layout may also skip an entry whose record ends at or before the end
	// of the queue's newest record (RocketMQ's maxPhysicOffset check); the
	// dispatcher never produces such an entry.
	Put(entries []Dispatch) error

	// Get returns up to max consecutive entries of the queue starting at
	// from. It returns fewer (possibly none) at the end of the queue, and
	// none at or past MaxOffset as it stood when the read began, even when
	// a Put is under way: a reader never moves past an end that MaxOffset
	// would then deny (a pop position or an ack range checked against it
	// would go back). A from below MinOffset or at/after MaxOffset, or a
	// max <= 0, returns no entries and no error. StoreTimestamp is 0 in
	// layouts that do not keep it.
	Get(topic string, queueID int32, from int64, max int) ([]Entry, error)

	// MaxOffset returns the next queue offset to be written (0 for an
	// unknown queue).
	MaxOffset(topic string, queueID int32) (int64, error)

	// MinOffset returns the smallest queue offset still readable (0 for an
	// unknown queue). It is never above MaxOffset; it equals MaxOffset when
	// the queue holds no readable entry.
	MinOffset(topic string, queueID int32) (int64, error)

	// OffsetByTime returns the queue offset of the message stored at
	// timestamp ts (ms) following RocketMQ's getOffsetInQueueByTime rules,
	// looking only at the entries in [MinOffset, MaxOffset):
	//
	//   - Lower: the first entry whose store time is >= ts, or MaxOffset if
	//     every entry is older than ts;
	//   - Upper: the last entry whose store time is <= ts, or MinOffset if
	//     every entry is newer than ts;
	//   - with entries stored exactly at ts, Lower gives the first of them
	//     and Upper the last;
	//   - an empty queue gives MinOffset (= MaxOffset), an unknown one 0.
	OffsetByTime(topic string, queueID int32, ts int64, b Boundary) (int64, error)

	// DeleteQueue drops every entry of one queue and its bounds. Deleting
	// an unknown queue is not an error. A later Put starts the queue afresh.
	DeleteQueue(topic string, queueID int32) error

	// DeleteTopic drops every queue of a topic (none is not an error).
	DeleteTopic(topic string) error

	// CorrectMin moves the minimum of every queue past the entries whose
	// record lies below minPhyOffset (the CommitLog's new minimum after
	// retention deleted segments) and may delete those entries. Per queue:
	// if its newest entry starts below minPhyOffset the queue becomes empty
	// and keeps its MaxOffset (MinOffset = MaxOffset); otherwise MinOffset
	// moves to the first entry at or after the current MinOffset whose
	// PhyOffset is >= minPhyOffset. MinOffset never moves back.
	CorrectMin(minPhyOffset int64) error

	// Truncate removes every entry whose record starts at or after
	// phyOffset: the recovered end of the CommitLog. Per queue, MaxOffset
	// moves back to one past the last entry in [MinOffset, MaxOffset) whose
	// PhyOffset is < phyOffset, or to MinOffset if there is none; MinOffset
	// does not change. Later Puts continue at the new MaxOffset.
	Truncate(phyOffset int64) error

	// Queues calls fn for every queue the store holds (empty ones
	// included), in no particular order, until fn returns false. fn may
	// call the store's other methods; queues added or deleted meanwhile may
	// or may not be visited.
	Queues(fn func(topic string, queueID int32) bool) error

	// Flush makes everything written so far durable.
	Flush() error

	// Close flushes and releases the store. Calling it again returns
	// ErrClosed.
	Close() error
}

// LastEntry returns the newest entry of a queue in s; ok is false when
// the queue holds none (unknown, or emptied by retention).
func LastEntry(s Store, topic string, queueID int32) (e Entry, ok bool, err error) {
	end, err := s.MaxOffset(topic, queueID)
	if err != nil || end == 0 {
		return Entry{}, false, err
	}
	last, err := s.Get(topic, queueID, end-1, 1)
	if err != nil || len(last) == 0 {
		return Entry{}, false, err
	}
	return last[0], true, nil
}
