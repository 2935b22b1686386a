// Package cqcompare checks that two ConsumeQueue stores hold the same
// index.
//
// In double-write mode rocketkv writes RocketMQ's file ConsumeQueue and its
// Pebble ConsumeQueue side by side, from the same dispatch batches. Before
// an operator switches reads from one layout to the other, or stops
// writing one, Compare says whether they agree and, when they do not,
// where. It is rocketkv's form of the broker check behind RocketMQ's
// CHECK_ROCKSDB_CQ_WRITE_PROGRESS (mqadmin checkRocksdbCqWriteProgress),
// and stricter than it: RocketMQ compares the units of each queue from a
// start time to the file layout's end and says per topic whether they
// match; Compare also compares each queue's bounds, finds queues only one
// store holds, and names the queue, the offset and the two values that
// differ.
//
// # What is compared
//
// Every queue either store lists (Store.Queues), or only those of
// Options.Topic, in topic then queue id order:
//
//   - a queue one store does not hold is a difference when the other has
//     given it offsets (MaxOffset > 0); a queue that never held an entry
//     (MaxOffset 0) may exist in one layout only;
//   - MaxOffset must be equal: it is the offset the next message of the
//     queue gets, and the offset consumers pull up to;
//   - MinOffset must be equal: a consumer whose offset lies between the
//     two minima would be corrected forward by one layout and served by the
//     other;
//   - the entries both stores hold from the compared start on must be
//     equal in queue offset, CommitLog offset, size and tags code. Store
//     timestamps are not compared: the file layout keeps none (it reads
//     them from the CommitLog when it needs them).
//
// The compared range of a queue, for stores a and b:
//
//	queue offset    0 ........................................................>
//	a                     [minA ------------------------------------ maxA)
//	b                  [minB ------------------------------------------- maxB)
//	Options.FromTime               t: a's OffsetByTime(FromTime, Upper)
//	compared                       [t ------------------------------ maxA)
//	                               lo = max(minA, minB, t)     hi = min(maxA, maxB)
//
// Entries below a queue's minimum may already be gone (CommitLog
// retention), and entries past the smaller maximum exist in one store only
// (the maxima differ, which is reported once, not entry by entry). With
// FromTime set, the start is raised, as in RocketMQ, to the last entry
// stored at or before FromTime (store a's OffsetByTime with the Upper
// boundary), so entries stored before it are not compared, but for that
// one. Both layouts answer OffsetByTime; the file layout reads the times
// from the CommitLog.
//
// The first entry that differs is reported and the rest of that queue
// skipped: one entry locates the problem, and a queue shifted by one entry
// would otherwise report every entry after it. The other queues are still
// compared. Report counts every difference and keeps the first
// Options.MaxDifferences.
//
// # Comparing stores that are being written
//
// The broker compares its layouts while it runs. Options.Bounds lets it
// read the bounds of a queue in both stores at one point of the dispatch
// (between two batches, which write both layouts), so that an append
// between the two reads does not look like a difference. The entries are
// read afterwards, outside that hook: entries below the maxima read then do
// not change, except that retention may move a minimum up meanwhile. When
// one store returns fewer entries than the other, both minima are read
// again: if one moved past the position reached, the comparison goes on
// from the new start without a difference; otherwise the entries one store
// lacks are a difference.
//
// Compare reads each store through the cq.Store interface only and never
// writes.
package cqcompare
