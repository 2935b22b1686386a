package commitlog

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// FlushType selects when appended bytes are made durable.
type FlushType int

const (
	// AsyncFlush flushes in the background every FlushInterval
	// (RocketMQ's ASYNC_FLUSH, the default).
	AsyncFlush FlushType = iota
	// SyncFlush group-commits: an Append with WaitFlush returns only once
	// its bytes are on stable storage (RocketMQ's SYNC_FLUSH).
	SyncFlush
)

// String returns RocketMQ's name of the flush type.
func (t FlushType) String() string {
	if t == SyncFlush {
		return "SYNC_FLUSH"
	}
	return "ASYNC_FLUSH"
}

// Config configures a Log. Zero fields take the defaults of DefaultConfig
// (RocketMQ's MessageStoreConfig defaults), except RecoverFrom, StoreHost,
// FS and Logger, whose zero values are meaningful.
type Config struct {
	// Dir is the store root: the lock, abort and checkpoint files live in
	// Dir (RocketMQ's storePathRootDir), and the segments in SegmentDir.
	Dir string
	// SegmentDir is the directory of the segment files (RocketMQ's
	// storePathCommitLog, often a disk of its own). Empty means
	// Dir/commitlog, RocketMQ's default. Whatever it is, the lock, abort
	// and checkpoint files stay in Dir, where RocketMQ keeps them.
	SegmentDir string
	// SegmentSize is the size of new segment files (default 1 GiB). An
	// existing store keeps the size of its files whatever this says.
	SegmentSize int64
	// FlushType is AsyncFlush (default) or SyncFlush.
	FlushType FlushType
	// ReadUncommitted lets confirmed readers (NewConfirmedReader: the
	// dispatcher) read records the flusher has not made durable yet under
	// SyncFlush, RocketMQ's readUnCommitted (default false). Without it,
	// under SyncFlush, consumers never see a record that a power failure
	// could take back. Under AsyncFlush confirmed readers always read up
	// to the write position, as RocketMQ's reput does.
	ReadUncommitted bool
	// FlushInterval is the period of the async flusher (500 ms).
	FlushInterval time.Duration
	// FlushLeastPages is the number of dirty 4 KiB pages the async flusher
	// waits for (4)...
	FlushLeastPages int
	// FlushThoroughInterval ...unless this long has passed since the last
	// flush of everything (10 s).
	FlushThoroughInterval time.Duration
	// WakeFlushOnAppend wakes the async flusher at every append, so that
	// it flushes as soon as FlushLeastPages are dirty rather than at its
	// next FlushInterval (RocketMQ's wakeFlushWhenPutMessage).
	WakeFlushOnAppend bool
	// SyncFlushTimeout bounds how long an Append waits for its group commit
	// before it returns FlushDiskTimeout (5 s).
	SyncFlushTimeout time.Duration
	// MaxMessageSize is the largest body (or sum of bodies of a batch)
	// accepted (4 MiB).
	MaxMessageSize int
	// CheckCRCOnRecover makes recovery verify body CRCs (true), or the
	// CRC properties instead with ForceVerifyPropCRC. Only
	// DefaultConfig sets it; a zero Config leaves it off.
	CheckCRCOnRecover bool
	// AppendPropCRC ends every appended record with a __CRC32# property
	// holding the CRC of the record's other bytes (RocketMQ's
	// enabledAppendPropCRC, default false; see PropertyCRC32). A single
	// message's own __CRC32# properties are dropped first, a producer
	// batch's are kept (AppendRequest.ProducerBatch), as RocketMQ does.
	// Records take PropCRCReservedLen (or one more) bytes more each.
	AppendPropCRC bool
	// ForceVerifyPropCRC makes recovery, when CheckCRCOnRecover is on,
	// verify each record's __CRC32# property in place of its body CRC
	// (RocketMQ's forceVerifyPropCRC, default false; CheckPropCRC). As in
	// RocketMQ, a record without the property fails like a damaged one:
	// the log is cut there, so it suits only a store whose every record
	// that recovery can scan was appended with AppendPropCRC. Open logs a
	// warning when it is on and AppendPropCRC is off.
	ForceVerifyPropCRC bool
	// RandomReads advises the segments no longer written for random
	// access (MADV_RANDOM): a read from disk fetches the pages it touches
	// and no read-ahead, which keeps consumers reading old messages at
	// random from filling the page cache (RocketMQ's
	// dataReadAheadEnable=false). SetRandomReads changes it.
	RandomReads bool
	// FileReservedTime is how long a segment is kept after its last
	// modification (72 h).
	FileReservedTime time.Duration
	// DeleteWhen lists the local hours of day at which expired segments are
	// deleted ({4}).
	DeleteWhen []int
	// DiskMaxUsedSpaceRatio is the disk usage, in percent, above which
	// expired segments are deleted at any hour (75).
	DiskMaxUsedSpaceRatio float64
	// DiskForceCleanRatio is the disk usage, in percent, above which the
	// oldest segments are deleted even if not expired (85, RocketMQ's
	// diskSpaceCleanForciblyRatio).
	DiskForceCleanRatio float64
	// DiskWarningLevelRatio is the disk usage, in percent, above which
	// appends are refused with ErrStoreFull until retention has brought
	// it back below (90, RocketMQ's diskSpaceWarningLevelRatio): the last
	// tenth of the disk is left to the index and to the deletion of
	// segments, instead of a full disk failing writes half way. The
	// retention cleaner checks it every CleanInterval, and Open once. It
	// and DiskForceCleanRatio are start values; SetRetention changes them.
	DiskWarningLevelRatio float64
	// KeepUnexpiredWhenFull never deletes a segment younger than
	// FileReservedTime, however full the disk (RocketMQ's
	// cleanFileForciblyEnable=false): appends then fail with ErrDiskFull
	// rather than lose messages retention promised to keep. It is the
	// start value; SetRetention changes it.
	KeepUnexpiredWhenFull bool
	// CleanInterval is the period of the retention cleaner (10 s).
	CleanInterval time.Duration
	// RecoverFrom hints where recovery must start at the latest: the
	// offset up to which the index has dispatched records. Values <= 0
	// mean no hint. Recovery is correct without it.
	RecoverFrom int64
	// CutAt, when positive, ends the log at this offset at Open: the
	// records from there on are removed as a damaged tail would be. It
	// must be the start of a record (or of a segment's blank filler) at
	// or below the recovered end, else Open fails. It mends a slave whose
	// records past that offset are not its master's (ha.ErrDiverged).
	CutAt int64
	// StoreHost is written into every appended record and its message id.
	// When invalid (zero), each message's own StoreHost is kept.
	StoreHost netip.AddrPort
	// FS is the file system (nil: the operating system's).
	FS vfs.FS
	// Logger receives the log's events (the zero Logger discards them).
	Logger zerolog.Logger
	// Now is the clock for store timestamps and retention (nil: time.Now).
	Now func() time.Time
	// BeforeFlush, when set, is called by the flusher before each flush:
	// a seam for fault tests (a disk whose flushes stall or slow down).
	BeforeFlush func()
	// Stop is called, once, when a flush of the segments fails (msync
	// reports a write-back error: an I/O error of the device). The log
	// cannot tell which bytes appended since the last good flush reached
	// the disk, and a later sync that succeeds would prove nothing about
	// them (after a failed write-back the kernel may have marked their
	// pages clean, so they are neither retried nor kept), so from then on
	// it reports nothing as flushed: sync-flush appends time out
	// (FLUSH_DISK_TIMEOUT), and Flush, WaitDurable and Close return
	// ErrFlushFailed. nil: log the error at fatal level and exit the
	// process with status 2, so that a restart recovers the log from its
	// files, verifying the records past the checkpoint of the last good
	// flush (as the index stops at a failed write of its log).
	Stop func(err error)
	// Replica makes the log a copy of a master's (brokerRole=SLAVE): its
	// bytes arrive through AppendReplica exactly as they lie in the
	// master's segments, and Append is refused (ErrReplica). SegmentSize
	// must be the master's.
	Replica bool
}

// Default values of Config.
const (
	DefaultSegmentSize           = 1 << 30
	DefaultFlushInterval         = 500 * time.Millisecond
	DefaultFlushLeastPages       = 4
	DefaultFlushThoroughInterval = 10 * time.Second
	DefaultSyncFlushTimeout      = 5 * time.Second
	DefaultMaxMessageSize        = 4 << 20
	DefaultFileReservedTime      = 72 * time.Hour
	DefaultDiskMaxUsedSpaceRatio = 75
	DefaultDiskForceCleanRatio   = 85
	DefaultDiskWarningLevelRatio = 90
	DefaultCleanInterval         = 10 * time.Second
)

// DefaultConfig returns the default configuration for the store rooted at
// dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:                   dir,
		SegmentSize:           DefaultSegmentSize,
		FlushType:             AsyncFlush,
		FlushInterval:         DefaultFlushInterval,
		FlushLeastPages:       DefaultFlushLeastPages,
		FlushThoroughInterval: DefaultFlushThoroughInterval,
		SyncFlushTimeout:      DefaultSyncFlushTimeout,
		MaxMessageSize:        DefaultMaxMessageSize,
		CheckCRCOnRecover:     true,
		FileReservedTime:      DefaultFileReservedTime,
		DeleteWhen:            []int{4},
		DiskMaxUsedSpaceRatio: DefaultDiskMaxUsedSpaceRatio,
		DiskForceCleanRatio:   DefaultDiskForceCleanRatio,
		DiskWarningLevelRatio: DefaultDiskWarningLevelRatio,
		CleanInterval:         DefaultCleanInterval,
	}
}

// withDefaults fills zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig(c.Dir)
	if c.Dir == "" {
		return c, fmt.Errorf("commitlog config: Dir is empty")
	}
	if c.SegmentDir == "" {
		c.SegmentDir = SegmentDirOf(c.Dir)
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = d.SegmentSize
	}
	if c.SegmentSize < minSegmentSize || c.SegmentSize > maxSegmentSize {
		return c, fmt.Errorf("commitlog config: SegmentSize %d outside [%d, %d]", c.SegmentSize, minSegmentSize, maxSegmentSize)
	}
	if c.FlushType != AsyncFlush && c.FlushType != SyncFlush {
		return c, fmt.Errorf("commitlog config: unknown FlushType %d", c.FlushType)
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.FlushLeastPages <= 0 {
		c.FlushLeastPages = d.FlushLeastPages
	}
	if c.FlushThoroughInterval <= 0 {
		c.FlushThoroughInterval = d.FlushThoroughInterval
	}
	if c.SyncFlushTimeout <= 0 {
		c.SyncFlushTimeout = d.SyncFlushTimeout
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = d.MaxMessageSize
	}
	if c.FileReservedTime <= 0 {
		c.FileReservedTime = d.FileReservedTime
	}
	if c.DeleteWhen == nil {
		c.DeleteWhen = d.DeleteWhen
	}
	for _, h := range c.DeleteWhen {
		if h < 0 || h > 23 {
			return c, fmt.Errorf("commitlog config: DeleteWhen hour %d outside 0..23", h)
		}
	}
	if c.DiskMaxUsedSpaceRatio <= 0 {
		c.DiskMaxUsedSpaceRatio = d.DiskMaxUsedSpaceRatio
	}
	if c.DiskForceCleanRatio <= 0 {
		c.DiskForceCleanRatio = d.DiskForceCleanRatio
	}
	if c.DiskWarningLevelRatio <= 0 {
		c.DiskWarningLevelRatio = d.DiskWarningLevelRatio
	}
	if c.CleanInterval <= 0 {
		c.CleanInterval = d.CleanInterval
	}
	if c.FS == nil {
		c.FS = vfs.OS{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// SegmentDirOf is the default segment directory of the store rooted at
// root: root/commitlog (RocketMQ's storePathCommitLog when unset).
func SegmentDirOf(root string) string { return filepath.Join(root, commitLogDirName) }

// Segment size bounds: a segment must hold at least a small record plus the
// filler, and be mappable.
const (
	minSegmentSize = 4096
	maxSegmentSize = 1 << 40
)
