package kvindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// DirName is the directory of the database under the store root.
const DirName = "kvindex"

// Errors returned by Open.
var (
	// ErrLocked is returned when another process (a running broker) holds
	// the database. Inspect a live broker through a checkpoint instead.
	ErrLocked = errors.New("kvindex: database is locked by another process (is a broker running on this store?)")
	// ErrNotFound is returned by read-only opens of a directory that holds
	// no database.
	ErrNotFound = errors.New("kvindex: no database in directory")
	// ErrSchema is returned when the database was written with a layout
	// version this code does not know.
	ErrSchema = errors.New("kvindex: unsupported schema version")
)

// Options configure Open.
type Options struct {
	// Dir is the database directory (usually <storePathRootDir>/kvindex).
	Dir string
	// CacheSize is the block cache in bytes (default 128 MiB). Pebble
	// counts its memtables against its cache, so Open gives Pebble's cache
	// memtableCacheShare memtables more (see pebbleCacheSize).
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes (default 64 MiB).
	MemTableSize uint64
	// ReadOnly opens without writing anything (inspection tools). The
	// directory must hold a database. Without FS, the open creates and
	// changes no file and fails with ErrLocked while a writer (a running
	// broker) holds the database; see readOnlyFS.
	ReadOnly bool
	// Logger receives Pebble's log lines and ours.
	Logger zerolog.Logger
	// FS is the file system (nil: the operating system's). Tests pass
	// Pebble's in-memory or error-injecting file systems.
	FS vfs.FS
	// WALSync is what durable writes wait for (default WALSyncAlways: an
	// fdatasync of the write-ahead log). WALSyncInterval trades the
	// power-failure guarantee for throughput until the next SyncWAL; see
	// walsync.go.
	WALSync WALSync
}

// DB is the open index database. It is safe for concurrent use.
type DB struct {
	pdb *pebble.DB
	// cache is Pebble's block cache; the DB holds a reference to it
	// until Close, so that BlockCache can read its figures.
	cache    *pebble.Cache
	log      zerolog.Logger
	readOnly bool
	dir      string
	closed   atomic.Bool
	keys     *KeyIndex
	// positions caches the POP positions for every PopStore of the
	// database.
	positions *positionCache
	// committed caches the committed offsets (0x30) the same way.
	committed *positionCache
	// offsetsMu orders the commits of consumer offsets with their
	// application to committed.
	offsetsMu sync.Mutex
	// floors bounds the seeks of PopStore.MinInFlight (popfloor.go).
	floors *checkpointFloors
	// cks holds the live checkpoints of the queues POP uses most
	// (popckcache.go).
	cks    *checkpointCache
	stalls *writeStalls
	// walFS holds back the write-ahead log's syncs under WALSyncInterval
	// until SyncWAL (nil otherwise).
	walFS *intervalSyncFS
	// flushes counts the waits for the write-ahead log: Flush calls and
	// PopBatch.CommitDurable commits.
	flushes atomic.Int64
	// blockCache is Options.CacheSize.
	blockCache int64
	// legacyIntents is set while keyspace 0x57 may hold revive intents of
	// an earlier version, which the dispatcher deletes (poprevive.go).
	legacyIntents atomic.Bool
	// topicFence orders DeleteTopic with the writes of the topic's
	// queue state (popfence.go).
	topicFence *topicFence

	// journalTop is the largest first offset a CQ journal record may
	// have, once journalTopKnown (see journalMayExist).
	journalMu       sync.Mutex
	journalTop      int64
	journalTopKnown bool
}

// memtableCacheShare is how many memtables' worth Open adds to Pebble's
// cache: the mutable one and one being flushed.
const memtableCacheShare = 2

// pebbleCacheSize is the size of Pebble's cache that leaves blockCache
// bytes to blocks. Pebble reserves each memtable's size in its cache
// (Cache.Reserve: the cache shrinks by it), so a cache of 128 MiB with
// 64 MiB memtables held no block at all while a memtable was flushed
// behind a full one: every read of a table, index blocks included, was a
// pread and a decompression (block cache size 0 and 63,000 misses, 28
// hits, in the pop benchmark's drain of 1M messages).
func pebbleCacheSize(blockCache int64, memTable uint64) int64 {
	return blockCache + memtableCacheShare*int64(memTable)
}

// Open opens (creating when allowed) the database in opts.Dir.
func Open(opts Options) (*DB, error) {
	if opts.CacheSize == 0 {
		opts.CacheSize = 128 << 20
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = 64 << 20
	}
	if opts.ReadOnly && opts.FS == nil {
		if _, err := os.Stat(opts.Dir); err != nil {
			return nil, fmt.Errorf("open index %s: %w", opts.Dir, ErrNotFound)
		}
	}
	fs := opts.FS
	if opts.ReadOnly && fs == nil {
		fs = readOnlyFS{vfs.Default}
	}
	logger := pebbleLogger{opts.Logger.With().Str("component", "pebble").Logger()}
	var walFS *intervalSyncFS
	if !opts.ReadOnly {
		if fs == nil {
			fs = vfs.Default
		}
		fs = walFailStopFS{FS: fs, stop: logger.Fatalf}
		if opts.WALSync == WALSyncInterval {
			walFS = newIntervalSyncFS(fs)
			fs = walFS
		}
	}
	cache := pebble.NewCache(pebbleCacheSize(opts.CacheSize, opts.MemTableSize))
	stalls := &writeStalls{log: opts.Logger.With().Str("component", "pebble").Logger()}
	po := &pebble.Options{
		EventListener:               stalls.listener(),
		Cache:                       cache,
		MemTableSize:                opts.MemTableSize,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
		// Start writing the WAL back every 1 MiB (sync_file_range), so
		// that the fsync of the old WAL, which Pebble makes inside the
		// commit that rotates the memtable, covers at most that much: it
		// stalled the dispatcher for 15-25 ms at a time (bench
		// dispatch-lag at 24k appends/s: p99.9 lag 15.6 -> 8.1 ms, max
		// 24 -> 10 ms, medians of 5 runs).
		WALBytesPerSync:    1 << 20,
		FormatMajorVersion: pebble.FormatNewest,
		ReadOnly:           opts.ReadOnly,
		ErrorIfNotExists:   opts.ReadOnly,
		Logger:             logger,
		FS:                 fs,
	}
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionBalanced })
	// Bloom filters (10 bits, about 1.2 bytes, per key) let the point
	// reads of absent keys that the hot paths make (a cold queue's min
	// key, POP lookups by handle) skip tables instead of searching them.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.EnsureDefaults()
	var gate *openGate
	if !opts.ReadOnly && gateOpen(po, opts.Dir) {
		gate = newOpenGate()
		po.Experimental.CompactionScheduler = gate
	}
	pdb, err := pebble.Open(opts.Dir, po)
	if gate != nil {
		if err == nil {
			gate.open()
		} else {
			gate.abandon()
		}
	}
	if err != nil {
		cache.Unref()
		if isLockError(err) {
			return nil, fmt.Errorf("open index %s: %w", opts.Dir, ErrLocked)
		}
		if opts.ReadOnly && isNotExist(err) {
			return nil, fmt.Errorf("open index %s: %w", opts.Dir, ErrNotFound)
		}
		return nil, fmt.Errorf("open index %s: %w", opts.Dir, err)
	}
	d := &DB{pdb: pdb, log: opts.Logger, readOnly: opts.ReadOnly, dir: opts.Dir, positions: newPositionCache(defaultPositionCache),
		floors: newCheckpointFloors(defaultCheckpointFloors), cks: newCheckpointCache(defaultCheckpointCacheBytes), committed: newPositionCache(defaultPositionCache),
		stalls: stalls, walFS: walFS, blockCache: opts.CacheSize, cache: cache, topicFence: newTopicFence()}
	d.keys = &KeyIndex{db: d}
	if err := d.checkSchema(); err != nil {
		_ = pdb.Close()
		cache.Unref()
		return nil, err
	}
	legacy, err := d.hasKeys(prefixPopRevive)
	if err != nil {
		_ = pdb.Close()
		cache.Unref()
		return nil, err
	}
	d.legacyIntents.Store(legacy)
	return d, nil
}

func isLockError(err error) bool {
	// EAGAIN: Pebble's fcntl lock is refused while a reader holds its
	// shared lock (readOnlyFS).
	if errors.Is(err, ErrLocked) || errors.Is(err, syscall.EAGAIN) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "lock") && (strings.Contains(s, "resource temporarily unavailable") ||
		strings.Contains(s, "held") || strings.Contains(s, "locked"))
}

func isNotExist(err error) bool {
	return errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "does not exist")
}

func (d *DB) checkSchema() error {
	v, err := d.get(metaKey(metaSchema))
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v == nil {
		if d.readOnly {
			return nil
		}
		if err := d.writeSchemaVersion(); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	}
	if len(v) != 4 {
		return fmt.Errorf("%w: %x (this build reads %d to %d)", ErrSchema, v, minSchemaVersion, schemaVersion)
	}
	ver := binary.BigEndian.Uint32(v)
	if ver < minSchemaVersion || ver > schemaVersion {
		return fmt.Errorf("%w: %d (this build reads %d to %d)", ErrSchema, ver, minSchemaVersion, schemaVersion)
	}
	if ver < checkpointSchemaVersion && !d.readOnly {
		moved, dropped, err := d.migratePopCheckpoints()
		if err != nil {
			return fmt.Errorf("upgrade schema version %d to %d: %w", ver, schemaVersion, err)
		}
		d.log.Info().Uint32("from", ver).Uint32("to", schemaVersion).Int("inFlightRecords", moved).
			Int("undecodableRecordsDropped", dropped).Msg("index schema version upgraded: in-flight records moved to checkpoints")
		return nil
	}
	if ver < schemaVersion && !d.readOnly {
		if err := d.writeSchemaVersion(); err != nil {
			return fmt.Errorf("upgrade schema version %d to %d: %w", ver, schemaVersion, err)
		}
		d.log.Info().Uint32("from", ver).Uint32("to", schemaVersion).Msg("index schema version upgraded")
	}
	return nil
}

// writeSchemaVersion records schemaVersion, synced.
func (d *DB) writeSchemaVersion() error {
	return d.pdb.Set(metaKey(metaSchema), schemaValue(), pebble.Sync)
}

// schemaValue is the value of the schema version key.
func schemaValue() []byte { return binary.BigEndian.AppendUint32(nil, schemaVersion) }

// get returns a copy of the value of k, or nil when absent.
func (d *DB) get(k []byte) ([]byte, error) {
	v, closer, err := d.pdb.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	_ = closer.Close()
	return out, nil
}

// Dir returns the database directory.
func (d *DB) Dir() string { return d.dir }

// Dispatched returns the persisted dispatched offset: every CommitLog record
// before it is indexed. 0 for a new database.
func (d *DB) Dispatched() (int64, error) {
	v, err := d.get(metaKey(metaDispatched))
	if err != nil {
		return 0, fmt.Errorf("read dispatched offset: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	off, err := getInt64(v)
	if err != nil {
		return 0, fmt.Errorf("read dispatched offset: %w", err)
	}
	return off, nil
}

// SetDispatched records the dispatched offset (durably). Used when recovery
// moves it back to a truncated CommitLog end.
func (d *DB) SetDispatched(off int64) error {
	if err := d.pdb.Set(metaKey(metaDispatched), putInt64(off), pebble.Sync); err != nil {
		return fmt.Errorf("write dispatched offset: %w", err)
	}
	return nil
}

// RocketMQConfigImported reports whether the config files of an Apache
// RocketMQ store were imported into this index, and when (ms).
func (d *DB) RocketMQConfigImported() (at int64, ok bool, err error) {
	return d.metaInt64(metaConfigImported)
}

// MarkRocketMQConfigImported records (durably) that the store's config
// files were imported, so a restart does not import them again.
func (d *DB) MarkRocketMQConfigImported(at int64) error {
	return d.setMetaInt64(metaConfigImported, at)
}

// RocketMQTimerProgress returns the timer progress of the Apache RocketMQ
// store this index was opened on (RocketMQ delivered every timer message
// due before it); ok is false when none was imported.
func (d *DB) RocketMQTimerProgress() (ms int64, ok bool, err error) {
	return d.metaInt64(metaTimerProgress)
}

// SetRocketMQTimerProgress records (durably) the timer progress of the
// Apache RocketMQ store being imported.
func (d *DB) SetRocketMQTimerProgress(ms int64) error {
	return d.setMetaInt64(metaTimerProgress, ms)
}

// TimerReadTime returns the timer's read time as last saved
// (SetTimerReadTime); ok is false when none was.
func (d *DB) TimerReadTime() (ms int64, ok bool, err error) {
	return d.metaInt64(metaTimerReadMs)
}

// SetTimerReadTime saves the timer's read time, as RocketMQ flushes its
// timer checkpoint's lastReadTimeMs every second: without a sync (a
// crash loses at most the last saves, which only make a restart's read
// time earlier).
func (d *DB) SetTimerReadTime(ms int64) error {
	if err := d.pdb.Set(metaKey(metaTimerReadMs), putInt64(ms), pebble.NoSync); err != nil {
		return fmt.Errorf("write meta %s: %w", metaTimerReadMs, err)
	}
	return nil
}

// RocketMQTimerQueueOffset returns how far the timer of the Apache
// RocketMQ store this index was opened on had read rmq_sys_wheel_timer
// (the queue offset of the first parked message it had not taken in);
// ok is false when none was imported.
func (d *DB) RocketMQTimerQueueOffset() (offset int64, ok bool, err error) {
	return d.metaInt64(metaTimerQueueOffset)
}

// SetRocketMQTimerQueueOffset records (durably) how far the timer of the
// Apache RocketMQ store being imported had read its topic.
func (d *DB) SetRocketMQTimerQueueOffset(offset int64) error {
	return d.setMetaInt64(metaTimerQueueOffset, offset)
}

// RocketMQPopImported reports whether the POP in-flight state of an
// Apache RocketMQ store was imported into this index.
func (d *DB) RocketMQPopImported() (bool, error) {
	_, ok, err := d.metaInt64(metaPopImported)
	return ok, err
}

// MarkRocketMQPopImported records (durably) that the store's POP
// in-flight state was imported, so a restart does not import it again.
func (d *DB) MarkRocketMQPopImported(at int64) error {
	return d.setMetaInt64(metaPopImported, at)
}

// PopRollback is the record of the last POP_ROLLBACK: the POP messages in
// flight before At (ms; when it began) were written to queue 0 of the
// revive topic Topic as RocketMQ check-points, from queue offset From on.
//
//	value: from int64 | at int64 | topic
type PopRollback struct {
	Topic string `json:"topic"`
	From  int64  `json:"from"`
	At    int64  `json:"at"`
}

// SetPopRollback records (durably) a POP_ROLLBACK.
func (d *DB) SetPopRollback(r PopRollback) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(r.From))
	v = binary.BigEndian.AppendUint64(v, uint64(r.At))
	if err := d.pdb.Set(metaKey(metaPopRollback), append(v, r.Topic...), pebble.Sync); err != nil {
		return fmt.Errorf("record the POP rollback: %w", err)
	}
	return nil
}

// LastPopRollback returns the record of the last POP_ROLLBACK; ok is
// false when there was none.
func (d *DB) LastPopRollback() (r PopRollback, ok bool, err error) {
	v, err := d.get(metaKey(metaPopRollback))
	if err != nil || v == nil {
		return r, false, err
	}
	if len(v) < 16 {
		return r, false, fmt.Errorf("meta %s: %d bytes: %w", metaPopRollback, len(v), ErrBadKey)
	}
	r.From, r.At, r.Topic = int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), string(v[16:])
	return r, true, nil
}

// metaInt64 reads the int64 value of the meta key name; ok is false when
// the key is absent (or its value is not 8 bytes, which err then says).
func (d *DB) metaInt64(name string) (v int64, ok bool, err error) {
	b, err := d.get(metaKey(name))
	if err != nil {
		return 0, false, fmt.Errorf("read meta %s: %w", name, err)
	}
	if b == nil {
		return 0, false, nil
	}
	v, err = getInt64(b)
	if err != nil {
		return 0, false, fmt.Errorf("read meta %s: %w", name, err)
	}
	return v, true, nil
}

// setMetaInt64 writes v to the meta key name, synced.
func (d *DB) setMetaInt64(name string, v int64) error {
	if err := d.pdb.Set(metaKey(name), putInt64(v), pebble.Sync); err != nil {
		return fmt.Errorf("write meta %s: %w", name, err)
	}
	return nil
}

// SlaveTopicsAt returns, on a store that served as a slave, the CommitLog
// offset below which its topic table holds the config of every topic its
// master had; ok is false on a store that never did, or whose broker
// started as the master since and took the topics it lacked.
func (d *DB) SlaveTopicsAt() (off int64, ok bool, err error) {
	return d.metaInt64(metaSlaveTopicsAt)
}

// SetSlaveTopicsAt records that the topic table holds the config of every
// topic of the master with a record below off.
func (d *DB) SetSlaveTopicsAt(off int64) error {
	return d.setMetaInt64(metaSlaveTopicsAt, off)
}

// ClearSlaveTopicsAt forgets SlaveTopicsAt: the broker serves as the
// master and took the topics its table lacked.
func (d *DB) ClearSlaveTopicsAt() error {
	if err := d.pdb.Delete(metaKey(metaSlaveTopicsAt), pebble.Sync); err != nil {
		return fmt.Errorf("delete meta %s: %w", metaSlaveTopicsAt, err)
	}
	return nil
}

// Checkpoint writes a consistent, openable copy of the database to dir
// (which must not exist). Files are hard-linked where possible, so it is
// cheap; kvdump reads a live broker's index this way.
func (d *DB) Checkpoint(dir string) error {
	if err := d.pdb.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("checkpoint index to %s: %w", dir, err)
	}
	return nil
}

// Flush makes every write so far durable, including unsynced ones, in the
// sense of Options.WALSync: synced under WALSyncAlways, written to the
// kernel under WALSyncInterval.
func (d *DB) Flush() error {
	if d.readOnly {
		return nil
	}
	d.flushes.Add(1)
	if err := d.pdb.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("sync index WAL: %w", err)
	}
	return nil
}

// BlockCacheStats is what the block cache holds and how reads fared.
type BlockCacheStats struct {
	// Capacity is the budget for blocks (Options.CacheSize); Bytes what
	// they take now.
	Capacity, Bytes int64
	// Hits and Misses count the block reads it answered and did not.
	Hits, Misses int64
}

// BlockCache returns the block cache's figures: the cache's own counters,
// not the whole database's metrics (which walk every level).
func (d *DB) BlockCache() BlockCacheStats {
	m := d.cache.Metrics()
	return BlockCacheStats{Capacity: d.blockCache, Bytes: m.Size, Hits: m.Hits, Misses: m.Misses}
}

// Flushes returns how many times writers waited for the write-ahead log
// (Flush calls and PopBatch.CommitDurable commits): one per durable
// request at most.
func (d *DB) Flushes() int64 { return d.flushes.Load() }

// SyncWAL makes every write so far survive a power failure, whatever
// Options.WALSync says: it is Flush followed, under WALSyncInterval, by an
// fdatasync of the write-ahead log. The broker calls it periodically.
func (d *DB) SyncWAL() error {
	if err := d.Flush(); err != nil {
		return err
	}
	if d.walFS == nil {
		return nil
	}
	if err := d.walFS.syncAll(); err != nil {
		return fmt.Errorf("sync index WAL: %w", err)
	}
	return nil
}

// WALSyncs returns how many fdatasyncs of the write-ahead log SyncWAL and
// log closes have made under WALSyncInterval (always 0 under
// WALSyncAlways, where every durable commit syncs it).
func (d *DB) WALSyncs() int64 {
	if d.walFS == nil {
		return 0
	}
	return d.walFS.syncs.Load()
}

// Compact compacts the whole database (tests and benchmarks measuring
// bytes per entry).
func (d *DB) Compact(ctx context.Context) error {
	if err := d.pdb.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		return fmt.Errorf("compact index: %w", err)
	}
	return nil
}

// DiskUsage returns the bytes the database occupies on disk.
func (d *DB) DiskUsage() uint64 {
	return d.pdb.Metrics().DiskSpaceUsage()
}

// KeyspaceDiskUsage estimates the bytes the keys of one keyspace (those
// starting with prefix) occupy in the database's tables, by Pebble's
// EstimateDiskUsage: tables wholly inside the keyspace count in full, tables
// straddling its bounds by their overlapping data blocks. Memtables and the
// WAL are not counted, so recent writes show only after a flush or a
// compaction. Benchmarks use it for index bytes per message.
func (d *DB) KeyspaceDiskUsage(prefix byte) (uint64, error) {
	end := []byte{prefix + 1}
	if prefix == 0xff {
		end = bytes.Repeat([]byte{0xff}, maxKeyLen+16)
	}
	n, err := d.pdb.EstimateDiskUsage([]byte{prefix}, end)
	if err != nil {
		return 0, fmt.Errorf("disk usage of keyspace %#02x: %w", prefix, err)
	}
	return n, nil
}

// Metrics returns Pebble's metrics in their text form.
func (d *DB) Metrics() string { return d.pdb.Metrics().String() }

// WriteStalls returns how many times Pebble has held the index's writes
// back since Open, and for how long in all.
func (d *DB) WriteStalls() (int64, time.Duration) { return d.stalls.snapshot() }

// ErrDBClosed is returned by Close after the first call.
var ErrDBClosed = errors.New("kvindex: database is closed")

// Close flushes the memtables (so that the next open need not replay the
// WAL) and closes the database. Calling it again returns ErrDBClosed.
func (d *DB) Close() error {
	if d.closed.Swap(true) {
		return ErrDBClosed
	}
	began := time.Now()
	var flushed time.Duration
	if !d.readOnly {
		// Flushing the memtables now makes the next open fast: Pebble
		// would otherwise replay their WAL, seconds for a full memtable.
		if err := d.pdb.Flush(); err != nil {
			d.log.Warn().Err(err).Msg("flush index before close; the next open replays its WAL")
		}
		flushed = time.Since(began)
	}
	// Pebble's close waits for the flushes and compactions running: at a
	// controller-mode switch this is part of the old role's stop.
	err := d.pdb.Close()
	d.log.Info().Dur("flush", flushed).Dur("took", time.Since(began)).Msg("index closed")
	d.cache.Unref()
	if err != nil {
		return fmt.Errorf("close index: %w", err)
	}
	return nil
}

// Scan calls fn for every key starting with prefix, in key order, until fn
// returns false. Key and value are only valid during the call.
func (d *DB) Scan(prefix []byte, fn func(key, value []byte) bool) error {
	return d.ScanFrom(prefix, prefix, fn)
}

// ScanFrom is Scan starting at the key from (which starts with prefix).
func (d *DB) ScanFrom(prefix, from []byte, fn func(key, value []byte) bool) error {
	if len(prefix) == 0 {
		// No lower bound rather than an empty one: Pebble's invariant
		// checks (race builds) index the first byte of a non-nil bound.
		prefix, from = nil, nil
	}
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("scan %x: %w", prefix, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("scan %x: %w", prefix, err)
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("scan %x: %w", prefix, err)
	}
	return nil
}

// pebbleLogger forwards Pebble's log lines to zerolog.
type pebbleLogger struct{ log zerolog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) { l.log.Debug().Msgf(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error().Msgf(format, args...)
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	// Pebble calls Fatalf for unrecoverable internal errors and expects the
	// process to stop; log loudly and exit rather than continue on a
	// corrupt database.
	l.log.WithLevel(zerolog.FatalLevel).Msgf(format, args...)
	_, _ = io.WriteString(os.Stderr, "pebble fatal: "+fmt.Sprintf(format, args...)+"\n")
	os.Exit(2)
}
