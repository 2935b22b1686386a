// Package dledger reads the CommitLog of an Apache RocketMQ broker that ran
// in DLedger mode (enableDLegerCommitLog=true, RocketMQ 4.5 and later) and
// imports its messages into a rocketkv CommitLog in RocketMQ's plain
// format, keeping every message's topic, queue id and queue offset.
//
// # Where the files are
//
// DLedger keeps its store under <storePathRootDir>/dledger-<selfId>
// (storePathDLedgerCommitLog overrides the data directory):
//
//	dledger-n0/data/<offset>      entry data, one file per mappedFileSizeCommitLog bytes
//	dledger-n0/index/<offset>     entry index, 32 bytes per entry (5 Mi entries a file)
//	dledger-n0/checkpoint         Java properties: endIndex, committedIndex
//
// A file's name is its first byte's offset in the whole log, as 20 decimal
// digits, and every file of a directory has the configured size (mmap'd,
// zeros past the written end).
//
// # An entry (DLedgerEntry, DLedgerEntryCoder)
//
//	off  len  field
//	  0    4  magic     1 (MAGIC_1: every entry RocketMQ's DLedger writes)
//	  4    4  size      whole entry, header included: 48 + bodyLen
//	  8    8  index     entry index, +1 from one entry to the next
//	 16    8  term      raft term, never decreasing
//	 24    8  pos       the entry's own offset in the log (a check)
//	 32    4  channel   reserved, 0
//	 36    4  chainCrc  never computed by DLedger: 0
//	 40    4  bodyCrc   never computed by DLedger: 0
//	 44    4  bodyLen
//	 48    -  body      one RocketMQ CommitLog record
//
// All integers are big-endian. DLedger's master branch (after 0.3.1.2)
// also writes magic 2 (NOOP, empty body) and reserves 3 (CONFIG_CHANGE);
// their layout is the same and they hold no message.
//
// When an entry and 8 more bytes do not fit in the rest of a file, the
// rest is a blank: magic -1 (0xFFFFFFFF) and the blank's length (the rest
// of the file), then zeros; the entry starts the next file. After the last
// entry of the last file the bytes are zeros (a zero magic and size).
//
// # The index (32 bytes an entry, at index x 32)
//
//	magic:4 pos:8 size:4 index:8 term:8
//
// DLedger's recovery compares it with the data and rebuilds it when they
// differ, so the data files are what counts; Reader does not need it.
//
// # How RocketMQ maps an entry to a message
//
// RocketMQ's DLedgerCommitLog appends each message as the body of its own
// entry (a batch as one entry per message) and gives it the physical
// offset pos + 48 (DLedgerEntry.BODY_OFFSET), which it writes into the
// record's PHYSICALOFFSET field, into the ConsumeQueue and into the offset
// message id. The queue offset is the record's QUEUEOFFSET, as in the
// plain CommitLog.
//
// # Versions
//
// The entry, blank and index layouts above are the same in DLedger 0.1
// (RocketMQ 4.5.1 to 4.7.x), 0.2.2 to 0.2.6 (4.8.0 to 4.9.4), 0.3.1 (5.0,
// 5.1.0) and 0.3.1.2 (4.9.5 on, 5.1.1 to 5.3.4), and on its master branch. The
// released versions write and accept magic 1 only; the master branch also
// accepts NOOP and CONFIG_CHANGE entries and may leave a first file made
// of blanks (after a snapshot trims the log), whose blanks are read here
// by their length. The checkpoint's properties are the same throughout.
package dledger
