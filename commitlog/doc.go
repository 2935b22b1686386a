// Package commitlog is rocketkv's CommitLog: RocketMQ's on-disk message log,
// byte-compatible with the files Apache RocketMQ writes, and the codec of
// its records.
//
// # Records
//
// A record is one message as the broker stored it: a self-describing,
// big-endian frame that starts with its own length and a magic code. Decode
// turns the bytes into a Message (the body is not copied), Encode /
// AppendRecord build them, Check validates them without allocating. The
// layout, with byte offsets for IPv4 born and store hosts (an IPv6 host is
// 16+4 bytes instead of 4+4 and shifts every later field by 12):
//
//	 0      4      8      12     16     20            28            36
//	+------+------+------+------+------+-------------+-------------+------+
//	|TOTAL |MAGIC |BODY  |QUEUE |FLAG  | QUEUEOFFSET | PHYSICAL    |SYS   |
//	|SIZE  |      |CRC   |ID    |      |   int64     | OFFSET int64|FLAG  |
//	+------+------+------+------+------+-------------+-------------+------+
//	 40            48            56            64            72     76
//	+-------------+-------------+-------------+-------------+------+-------------+
//	| BORN        | BORNHOST    | STORE       | STOREHOST   |RECON-| PREPARED TX |
//	| TIMESTAMP   | ip:4 port:4 | TIMESTAMP   | ip:4 port:4 |SUME  | OFFSET int64|
//	+-------------+-------------+-------------+-------------+------+-------------+
//	 84
//	+---------+------+-----------+-------+-------+------------+
//	| BODYLEN | BODY | TOPICLEN  | TOPIC |PROPLEN| PROPERTIES |
//	| int32   | n    | 1 (V1) or | t     | int16 | p          |
//	|         |      | 2 (V2)    |       |       |            |
//	+---------+------+-----------+-------+-------+------------+
//
//	TOTALSIZE = 91 + n + t + p        (V1, both hosts IPv4)
//	          + 1 for V2, + 12 per IPv6 host
//
// MAGIC is MagicV1 (0xDAA320A7, one-byte topic length, topics up to 127
// bytes) or MagicV2 (0xDAA320AB, two-byte topic length). BODYCRC is CRC-32
// IEEE of the body AND 0x7FFFFFFF. SYSFLAG bits: FlagCompressed,
// FlagMultiTags, the transaction type (TransactionType), FlagBornHostV6,
// FlagStoreHostV6, FlagNeedUnwrap, FlagInnerBatch and the compression type.
// PROPERTIES is "key 0x01 value" pairs separated by 0x02, with or without a
// trailing 0x02 (ParseProperties, LookupProperty, FormatProperties).
//
// With Config.AppendPropCRC (RocketMQ's enabledAppendPropCRC) the
// properties end with a CRC property over the rest of the record, in its
// last 20 bytes (a 0x02 before it when the properties before do not end
// with one; PROPLEN counts both):
//
//	+----------+------+--------------------------------+------+
//	| __CRC32# | 0x01 | 10 digits, least significant   | 0x02 |
//	| 8 bytes  |      | first, '0'-padded on the right |      |
//	+----------+------+--------------------------------+------+
//	 CRC = CRC-32 IEEE of bytes [0, TOTALSIZE-20) AND 0x7FFFFFFF
//
// The CRC covers the queue offset, physical offset and store timestamp,
// so the append writes it last, under its lock (see PropertyCRC32).
//
// The offset message id (MessageID) is the hex of the store host's IP,
// port and the record's physical offset: 32 characters for IPv4, 56 for
// IPv6.
//
// # Segments
//
// The log is a sequence of equal-size files (1 GiB by default; an existing
// store keeps its own size) in <root>/commitlog, or in Config.SegmentDir
// when RocketMQ's storePathCommitLog put them elsewhere (the lock, abort and
// checkpoint files stay in <root>), each named after the log offset of its
// first byte, zero-padded to 20 digits:
//
//	<root>/commitlog/00000000000000000000   offsets [0, 2^30)
//	<root>/commitlog/00000000001073741824   offsets [2^30, 2^31)
//	<root>/commitlog/00000000002147483648   ...
//
// Records never span files. When a record (or a whole batch) plus 8 bytes
// does not fit in the rest of the active file, an 8-byte blank filler is
// written where it would have started and the record goes to offset 0 of a
// new file; the rest of the old file stays zero:
//
//	+----------------+----------------+------------------------+
//	| remaining:int32| 0xCBD43194     | zeros up to file end   |
//	+----------------+----------------+------------------------+
//	 \______________ remaining = file size - position _________/
//
// A new file has all its blocks allocated (fallocate) before it is mapped,
// because writing to a sparse mapping on a full disk kills the process with
// SIGBUS instead of returning an error; a failed allocation returns
// ErrDiskFull and leaves the log as it was (an existing store's sparse last
// file is allocated at Open for the same reason). The next file is
// preallocated in the background after every roll, and a background
// goroutine keeps the pages just ahead of the writer faulted in
// (MADV_POPULATE_WRITE), so appends copy into memory without page faults.
// With SyncFlush the segment being written is advised MADV_RANDOM, so the
// kernel caches it in single pages: a group commit then writes the pages
// appended since the previous one, where large folios made each msync
// write up to 2 MiB (40 times the record bytes with 64 writers); the advice
// is lifted when the segment is sealed, so that reading it back from disk
// keeps its read-ahead.
//
// # Store root files
//
//	<root>/lock         "lock", held with flock while a Log is open (ErrLocked)
//	<root>/abort        the PID; created by Open, removed by Close. Present
//	                    at Open means the last run crashed: abnormal recovery.
//	<root>/checkpoint   4096 bytes; big-endian int64 at:
//	                     0 physicMsgTimestamp (store time of the last flushed record)
//	                     8 logicsMsgTimestamp  16 indexMsgTimestamp
//	                    24 masterFlushedOffset 32 confirmPhyOffset
//	                    (the first is written here, masterFlushedOffset
//	                    by SetMasterFlushedOffset, confirmPhyOffset by
//	                    SetConfirmLimit; the rest are kept)
//
// # Recovery
//
// Open scans records forward from a starting segment, verifying structure,
// the physical-offset field and (CheckCRCOnRecover) body CRCs, or the CRC
// properties instead with ForceVerifyPropCRC (a record without one is a
// bad record then, as in RocketMQ), and ends the
// log at the first bad record: the bytes after it in that segment are
// zeroed and later segments deleted. After Close the scan covers the last
// three segments; after a crash it starts at the last segment whose first
// record is older than the checkpoint's timestamp minus 3 s, or earlier if
// Config.RecoverFrom says so. Config.CutAt ends the log at a record start
// of the operator's choosing the same way (a slave's records that are not
// its master's). RecoveryInfo reports what happened.
//
// # Usage
//
//	l, err := commitlog.Open(commitlog.DefaultConfig("/var/lib/rocketkv"))
//	if err != nil { ... }
//	defer l.Close()
//	res, err := l.Append(ctx, commitlog.AppendRequest{Message: &commitlog.Message{
//		Topic: "TopicA", QueueID: 0, Body: body,
//		Properties: commitlog.FormatProperties(map[string]string{"TAGS": "TagA"}),
//	}, Assigner: queueOffsets})
//	v, err := l.ReadRecord(res.PhyOffset)
//	m, err := commitlog.Decode(v.Data) // m.Body aliases v.Data
//	v.Release()
//
//	r := l.NewConfirmedReader(from) // the dispatcher's tail: flushed records only under SyncFlush, confirmed ones under a confirm limit
//	for {
//		e, err := r.Next()
//		if err == commitlog.ErrNoMoreData { r.Wait(ctx); continue }
//		...
//	}
//
// # Concurrency
//
// A Log is safe for concurrent use. Appends serialize on one lock that
// covers only choosing the position, rolling, assigning queue offsets and
// copying encoded bytes into the mapping; the end offset is then published
// atomically, so readers (which take no lock) never see a partial record.
// Flushing runs on a background goroutine: with SyncFlush, appends that
// wait share one msync (group commit). A flush that fails is final: the
// log reports nothing as flushed after it and calls Config.Stop (by
// default the process ends; see Config.Stop for why a retry cannot be
// trusted). Mapped segments are reference
// counted, so a View or Reader keeps a segment readable after retention
// deleted it. The codec functions are safe for concurrent use; an Encoder
// or a Reader is not.
package commitlog
