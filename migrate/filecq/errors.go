package filecq

import "errors"

// Errors returned when opening a store.
var (
	// ErrCorrupt is returned by Open and OpenReadOnly when a queue directory
	// is not a RocketMQ ConsumeQueue of the configured file size: a file
	// whose length is not UnitsPerFile x 20 bytes, a file name that is not
	// a multiple of that size, or (Open only, when Options.RefillGap does
	// not write them again: OpenReadOnly reads around them, see Gap) files
	// that do not follow each other. OffsetByTime wraps it for a queue
	// with such missing files.
	// Units are not judged: recovery ends a queue at its first unit that is
	// not valid, as RocketMQ does. Reads wrap it too if a mapped file turns
	// out shorter than the file size (changed behind the store's back).
	ErrCorrupt = errors.New("filecq: consume queue directory is corrupt")
)

// Errors returned by the methods of an open store.
var (
	// ErrReadOnly is returned by Put, SeedStart, DeleteQueue and
	// DeleteTopic of a store opened with OpenReadOnly.
	ErrReadOnly = errors.New("filecq: store is read-only")

	// ErrInvalidName is returned by Put and SeedStart for a topic that
	// cannot be a single directory name (empty, ".", "..", or holding '/'
	// or NUL) or a negative queue id. Nothing of the call is written.
	ErrInvalidName = errors.New("filecq: topic or queue id cannot name a directory")

	// ErrInvalidEntry is returned by Put for an entry that cannot be stored
	// in a unit: a negative queue or CommitLog offset, a size that is not
	// positive, or a queue offset whose byte position overflows; and by
	// SeedStart for such a queue offset. Nothing of the call is written.
	ErrInvalidEntry = errors.New("filecq: entry cannot be stored")

	// ErrSyncFailed is returned (wrapping the first failure) by every
	// Flush after an fsync of a file or directory failed: what was written
	// since the last good Flush is not known to be on disk, and a later
	// fsync that succeeds would not prove it (after a failed write-back
	// the kernel may have dropped the pages), so the store never reports
	// it durable. The caller's recorded progress stays at the last good
	// Flush; a restart writes the entries again from there.
	ErrSyncFailed = errors.New("filecq: an fsync failed; what was written since the last good flush is not known to be on disk")

	// ErrNoStoreTime is returned by OffsetByTime on a non-empty queue when
	// Options.StoreTime is nil: the file layout keeps no store timestamps.
	ErrNoStoreTime = errors.New("filecq: no store-time lookup configured")
)
