// Package filecq is RocketMQ's file ConsumeQueue behind cq.Store: it reads
// and writes the consumequeue/ directory of an Apache RocketMQ store byte
// for byte, for migration (read an existing store, or double-write beside
// the Pebble index) and as the side-by-side baseline of the KV layout.
//
// # Layout
//
// One directory per queue, named by the raw topic string and the decimal
// queue id, holding files of UnitsPerFile units (RocketMQ's default 300,000,
// so 6,000,000 bytes). A file is named by the byte offset of its first unit
// in the queue, as 20 zero-padded digits; queue offset q lives at byte q x 20
// of the queue, so with 300,000 units file k is named k x 6,000,000 and with
// 10 units (the fixtures) the second file is 00000000000000000200:
//
//	<Dir>/consumequeue/<topic>/<queueId>/00000000000000000000   units 0 .. n-1
//	                                     00000000000006000000   units n .. 2n-1   (n = 300,000)
//	                                     ...
//
// A unit is 20 bytes, big-endian:
//
//	0                 8           12                   20
//	+-----------------+-----------+--------------------+
//	|    phyOffset    |   size    |      tagsCode      |
//	|      int64      |   int32   |       int64        |
//	+-----------------+-----------+--------------------+
//	  CommitLog offset  record      Java String.hashCode of TAGS,
//	  of the record     size        sign-extended (0 without tags), or the
//	                                delivery time in SCHEDULE_TOPIC_XXXX
//
// Files are created at full size, sparse (like RocketMQ's preallocated
// mapped files), so the unwritten tail reads as zero units. A queue whose
// first entry is not the first unit of its first file has the units below
// it filled with blank units (phyOffset 0, size 0x7FFFFFFF, tagsCode 0),
// which recovery counts but which are never entries:
//
//	file 00000000000000000200 (10 units), first entry at offset 13:
//	| blank | blank | blank | entry 13 | 0 0 0 ... (zero tail)         |
//	  10      11      12      13         14 .. 19
//
// Recovery (Open) reads each queue from its third-last file on while units
// have phyOffset >= 0 and size > 0; the first other unit ends the queue
// (spec 3.6). RocketMQ's RocksDB ConsumeQueue keeps its files in the same
// consumequeue/ directory: plain files and directories that are not a
// canonical non-negative queue id are skipped.
//
// # Use
//
//	s, err := filecq.Open(filecq.Options{
//		Dir:       "/data/store", // the store root, holding consumequeue/
//		StoreTime: storeTime,     // func(phy int64, size int32) (int64, error), a CommitLog lookup
//		Logger:    logger,
//	})
//	if err != nil { ... }
//	defer s.Close()
//	// At startup, as RocketMQ does after loading its ConsumeQueues:
//	err = s.Truncate(commitLogEnd)
//	err = s.CorrectMin(commitLogMin)
//	// Then the dispatcher puts, consumers read:
//	err = s.Put(dispatches)
//	entries, err := s.Get("TopicA", 0, 120, 32)
//
// OpenReadOnly gives a store for inspection and migration tools that never
// writes to the directory. It also reads a queue whose files do not all
// follow each other, as RocketMQ's MappedFileQueue does after logging it:
// the units of the missing files are never entries, and Gaps reports
// them; Open, which writes, refuses such a queue unless
// Options.RefillGap gives the missing entries (the broker reads them from
// the CommitLog), which it writes again.
//
// # Concurrency and resources
//
// A Store is safe for concurrent use (Put from one goroutine at a time).
// Units are written with pwrite, as RocketMQ does by default, and read from
// mappings of the files (mmap, github.com/edsrzf/mmap-go); Flush fsyncs the
// files written since the last Flush and the directories changed. To stay
// far below Linux's 65,530 mappings per process at large queue counts, only
// the MaxOpenQueues most recently used queues keep files open, each at most
// two (so at most 2 x MaxOpenQueues mappings and descriptors, see
// OpenMappings); a queue's other files are opened when it is used again.
// Files written and then closed by the LRU are still fsynced by the next
// Flush.
//
// Writes to a sparse file can fail for lack of space (ENOSPC from pwrite,
// returned by Put), but never crash the process through a mapping.
package filecq
