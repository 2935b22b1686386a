package commitlog

import "errors"

// Errors returned by the record codec (Decode, Check, Encode, DecodeBatch,
// ParseMessageID). Test for them with errors.Is: they are usually wrapped
// with the offset or field that failed.
var (
	// ErrBlank is returned by Decode and Check when the bytes hold the
	// 8-byte end-of-segment filler [remaining:4][BlankMagic:4] instead of a
	// message. The Message returned with it has Magic == BlankMagic and
	// StoreSize == the remaining length of the segment (see BlankSize).
	ErrBlank = errors.New("commitlog: blank end-of-segment filler")
	// ErrTruncated is returned when fewer bytes are available than the
	// record header or its TOTALSIZE field asks for.
	ErrTruncated = errors.New("commitlog: record truncated")
	// ErrBadMagic is returned when the magic code is neither MagicV1,
	// MagicV2 nor BlankMagic (a zero-filled area reads as magic 0).
	ErrBadMagic = errors.New("commitlog: bad magic code")
	// ErrCorrupt is returned when a record's fields do not add up: TOTALSIZE
	// differs from the size computed from the field lengths, a length is
	// negative or runs past the record, or (during recovery) the
	// PHYSICALOFFSET field is not the record's position.
	ErrCorrupt = errors.New("commitlog: corrupt record")
	// ErrCRC is returned when body CRC verification was asked for and the
	// stored BODYCRC is not CRC-32 IEEE of the body masked with 0x7FFFFFFF.
	ErrCRC = errors.New("commitlog: body CRC mismatch")
	// ErrPropCRC is returned by CheckPropCRC (recovery under
	// Config.ForceVerifyPropCRC) when a record has no __CRC32# property,
	// or its value is not the CRC of the record's bytes before it.
	ErrPropCRC = errors.New("commitlog: CRC32 property missing or mismatched")
	// ErrTopicTooLong is returned by Encode for an empty topic or one longer
	// than 32,767 bytes (the V2 int16 length).
	ErrTopicTooLong = errors.New("commitlog: topic empty or too long")
	// ErrPropertiesTooLarge is returned by Encode and Append when the
	// properties string is longer than 32,767 bytes (RocketMQ's
	// PROPERTIES_SIZE_EXCEEDED).
	ErrPropertiesTooLarge = errors.New("commitlog: properties longer than 32767 bytes")
	// ErrBadMessageID is returned by ParseMessageID for a string that is not
	// 32 or 56 hex digits.
	ErrBadMessageID = errors.New("commitlog: malformed message id")
)

// Errors returned by the Log.
var (
	// ErrLocked is returned by Open when another process (or another Log in
	// this process) holds the store's lock file.
	ErrLocked = errors.New("commitlog: store is locked by another owner")
	// ErrClosed is returned by every Log method called after Close.
	ErrClosed = errors.New("commitlog: log is closed")
	// ErrMessageTooLarge is returned by Append when a body is larger than
	// Config.MaxMessageSize, or a record (a whole batch) plus the 8-byte
	// filler reserve does not fit in one segment.
	ErrMessageTooLarge = errors.New("commitlog: message too large")
	// ErrDiskFull is returned by Append when a new segment cannot be
	// allocated because the disk is full (ENOSPC from fallocate). The log
	// is left exactly as it was; a later Append succeeds once space returns.
	ErrDiskFull = errors.New("commitlog: disk full")
	// ErrFlushFailed is returned (wrapping the first failure) by Flush,
	// WaitDurable and Close once a flush of the segments failed: nothing
	// appended since the last good flush is known to be on disk, and the
	// log stops reporting anything as flushed (see Config.Stop).
	ErrFlushFailed = errors.New("commitlog: a flush failed; what was appended since the last good flush is not known to be on disk")
	// ErrStoreFull is returned by Append from when the disk holding the
	// segments is used above Config.DiskWarningLevelRatio (RocketMQ's
	// "disk full" running flag): nothing is appended until a check sees
	// the usage down to DiskForceCleanRatio, or the warning level raised
	// above it.
	ErrStoreFull = errors.New("commitlog: disk usage passed the warning level, appends refused")
	// ErrMapFailed is returned by Append (and Open) when a segment file
	// cannot be memory-mapped.
	ErrMapFailed = errors.New("commitlog: mmap failed")
	// ErrOffsetOutOfRange is returned by Read and ReadRecord for a range
	// that starts below MinOffset (deleted by retention) or ends past
	// MaxOffset (not written yet), or that crosses a segment end.
	ErrOffsetOutOfRange = errors.New("commitlog: offset out of range")
	// ErrNoMoreData is returned by Reader.Next when the reader has reached
	// the write position; wait with Reader.Wait or Log.WaitBeyond and call
	// Next again.
	ErrNoMoreData = errors.New("commitlog: no more data yet")
	// ErrBadSegment is returned by Open when a segment file is misnamed or
	// has the wrong size (other than a trailing all-zero preallocated file,
	// which is removed).
	ErrBadSegment = errors.New("commitlog: bad segment file")
	// ErrInvalidAppend is returned by Append for a request without messages,
	// or a batch whose messages do not share one topic and queue.
	ErrInvalidAppend = errors.New("commitlog: invalid append request")
	// ErrReplica is returned by Append on a replica (Config.Replica): its
	// bytes come from the master through AppendReplica only, and a record
	// of its own would fork its log from the master's.
	ErrReplica = errors.New("commitlog: the log is a replica of a master (brokerRole=SLAVE); it takes no appends of its own")
	// ErrNotReplica is returned by AppendReplica on a log that is not a
	// replica.
	ErrNotReplica = errors.New("commitlog: the log is not a replica (Config.Replica is off)")
	// ErrReplicaGap is returned by AppendReplica when the master's bytes
	// do not start where the replica ends: the two logs differ.
	ErrReplicaGap = errors.New("commitlog: replicated bytes do not continue the replica")
)

// NoRecordAt reports whether err, from ReadRecord, says that no record
// starts at the offset: it lies outside the log, or the bytes there are a
// blank filler, not a record's header or a record cut short. An offset a
// client sent may be any of these; one from the index names a record
// that is gone or damaged.
func NoRecordAt(err error) bool {
	return errors.Is(err, ErrOffsetOutOfRange) || errors.Is(err, ErrBadMagic) || errors.Is(err, ErrCorrupt) ||
		errors.Is(err, ErrBlank) || errors.Is(err, ErrTruncated)
}

// Unstorable reports whether err, from Append, is about the message
// itself (too large, properties too large, topic name too long, an
// invalid request such as a bad light message queue name): no retry
// stores it. Other errors (disk full, a closed log, a context) are the
// log's, and a later attempt may succeed.
func Unstorable(err error) bool {
	return errors.Is(err, ErrMessageTooLarge) || errors.Is(err, ErrPropertiesTooLarge) ||
		errors.Is(err, ErrTopicTooLong) || errors.Is(err, ErrInvalidAppend)
}
