// Package cqtest is the test suite every cq.Store layout passes, and
// Memory, an in-memory cq.Store that is both the suite's reference model
// and a convenient Store for tests of code that uses one.
//
// # Plugging a layout in
//
// A layout's test hands Run an Opener, a function that opens the store kept
// in a directory (empty the first time, the same store again after the
// suite closed it):
//
//	func TestSuite(t *testing.T) {
//		cqtest.Run(t, func(t *testing.T, dir string, log *cqtest.CommitLog) cq.Store {
//			s, err := mylayout.Open(dir, log.StoreTime)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// log stands in for the CommitLog: the suite adds every record it
// dispatches to it, retention (CorrectMin) and recovery (Truncate) change it
// the way they change the real log, and a layout that keeps no store
// timestamps reads them with log.StoreTime. A layout that keeps them
// ignores log. Metamorphic compares two layouts directly (say, the Pebble
// one against the file one) on random operation sequences; Run already
// compares the layout under test against Memory.
//
// When the suite reopens a store it does what the broker does at startup:
// Truncate to the CommitLog's end, then CorrectMin to its minimum.
//
// Get results are compared without StoreTimestamp, which may be 0 (the file
// layout keeps none); a non-zero one must be the record's.
//
// # Scripts
//
// Most cases are data-driven scripts in testdata/, embedded in the package;
// RunScript runs one more from a layout's own tests. A script is a sequence
// of commands, each followed by its input lines (put only), a line "----",
// and the expected output up to a blank line. Lines starting with # between
// commands are comments.
//
//	put                              entries, one a line:
//	T 0 0 1000 100 11 5000             topic queueID queueOffset phyOffset size tagsCode storeTimestamp
//	----
//	ok                               (or "error")
//
//	put-run T q from n phy size tags ts tsStep
//	                                 n entries at from+i, phy+i*size, store time ts+i*tsStep
//	get T q from max                 one "queueOffset phyOffset size tagsCode" line per entry, or (none)
//	bounds T q                       min=<MinOffset> max=<MaxOffset>
//	bytime T q ts lower|upper        OffsetByTime
//	delete-queue T q                 ok
//	delete-topic T                   ok
//	correct-min phy                  CommitLog minimum moves to phy, then CorrectMin; ok
//	truncate phy                     CommitLog cut at phy, then Truncate; ok
//	queues                           "topic queueID" lines, sorted, or (none)
//	flush                            ok
//	reopen                           Close, open again, Truncate(end), CorrectMin(min); ok
//
// After every command the runner also checks 0 <= MinOffset <= MaxOffset
// for every listed queue. Expected outputs are worked out by hand from
// RocketMQ's rules (the cq.Store documentation), never recorded from an
// implementation.
package cqtest
