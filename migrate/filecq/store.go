package filecq

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rs/zerolog"
)

// Store is RocketMQ's file ConsumeQueue behind cq.Store. It is safe for
// concurrent use: Put from one goroutine at a time, everything else from
// any number.
//
// Locks: Store.mu guards the queue table, the LRU of queues with open files,
// the counters and the sets of paths to sync; queue.mu guards one queue's
// state and files; dirMu serialises creating and removing directories. The
// order is queue.mu, then dirMu, then Store.mu; Store.mu is never held while
// taking another lock.
type Store struct {
	opts     Options
	fs       vfs.FS
	log      zerolog.Logger
	root     string // Dir/consumequeue
	fileSize int64
	units    int64
	readOnly bool

	dirMu sync.Mutex

	mu          sync.Mutex
	idle        *sync.Cond // signalled when active drops to 0 after Close began
	closed      bool
	active      int // method calls in progress
	queues      map[queueKey]*queue
	lru         *list.List // queues holding open files, most recently used first
	mappings    int
	openFiles   int
	pendingSync map[string]struct{} // files written, then closed before a Flush
	dirtyDirs   map[string]struct{} // directories whose entries changed
	syncFailed  error               // the first failed fsync's error, wrapping ErrSyncFailed (see there)
}

var _ cq.Store = (*Store)(nil)

// Open opens (creating nothing until the first Put) the file ConsumeQueue
// under opts.Dir/consumequeue and recovers every queue as RocketMQ does:
// from the third-last file of each queue it reads units while phyOffset >= 0
// and size > 0, ends the queue at the first unit that fails, and deletes
// the files beyond that point. Plain files and non-numeric queue directories
// are skipped (RocketMQ's RocksDB ConsumeQueue keeps its files in the same
// directory).
//
// MinOffset after Open is the first unit that is not a blank pre-fill unit;
// the broker then calls CorrectMin with the CommitLog's minimum and Truncate
// with its end, as RocketMQ does after loading.
func Open(opts Options) (*Store, error) { return open(opts, false) }

// OpenReadOnly opens the store for inspection and migration tools. It never
// writes: files are opened read-only and read with pread (no mappings),
// dirty files past a queue's recovered end are ignored rather than deleted,
// Put, SeedStart, DeleteQueue and DeleteTopic return ErrReadOnly, Flush
// does nothing, and CorrectMin and Truncate only change the bounds the
// store reports.
func OpenReadOnly(opts Options) (*Store, error) { return open(opts, true) }

func open(opts Options, readOnly bool) (*Store, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:        o,
		fs:          o.FS,
		log:         o.Logger.With().Str("component", "filecq").Logger(),
		root:        filepath.Join(o.Dir, "consumequeue"),
		fileSize:    int64(o.UnitsPerFile) * UnitSize,
		units:       int64(o.UnitsPerFile),
		readOnly:    readOnly,
		queues:      make(map[queueKey]*queue),
		lru:         list.New(),
		pendingSync: make(map[string]struct{}),
		dirtyDirs:   make(map[string]struct{}),
	}
	s.idle = sync.NewCond(&s.mu)
	fi, err := s.fs.Stat(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("open consume queue store %s: %w", o.Dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open consume queue store %s: not a directory", o.Dir)
	}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("open consume queue store %s: %w", o.Dir, err)
	}
	return s, nil
}

// enter registers a method call; it fails once Close has begun.
func (s *Store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cq.ErrClosed
	}
	s.active++
	return nil
}

func (s *Store) exit() {
	s.mu.Lock()
	s.active--
	if s.active == 0 && s.closed {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// lookup returns the queue without pinning it: enough to read its bounds.
func (s *Store) lookup(k queueKey) *queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[k]
}

// acquire returns the queue pinned (its open files cannot be evicted until
// release), creating an empty one if create is set.
func (s *Store) acquire(k queueKey, create bool) *queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[k]
	if q == nil {
		if !create {
			return nil
		}
		q = newQueue(k, s.queueDir(k))
		s.queues[k] = q
	}
	q.refs++
	if q.elem != nil {
		s.lru.MoveToFront(q.elem)
	}
	return q
}

func (s *Store) release(q *queue) {
	s.mu.Lock()
	q.refs--
	var victims []*segment
	if q.refs == 0 && s.lru.Len() > s.opts.MaxOpenQueues {
		victims = s.evictLocked()
	}
	s.mu.Unlock()
	s.closeVictims(victims)
}

// pinAll pins every queue, for the store-wide operations.
func (s *Store) pinAll() []*queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := make([]*queue, 0, len(s.queues))
	for _, q := range s.queues {
		q.refs++
		qs = append(qs, q)
	}
	return qs
}

// forget removes a deleted queue from the table.
func (s *Store) forget(q *queue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues[q.key] == q {
		delete(s.queues, q.key)
	}
}

func (s *Store) queueDir(k queueKey) string {
	return filepath.Join(s.root, k.topic, fmt.Sprint(k.id))
}

// segmentsChanged records that q opened or closed files (q.mu held): it
// updates the counters and the LRU, queues the closed dirty files for the
// next Flush, and evicts other queues over the bound.
func (s *Store) segmentsChanged(q *queue, dMaps, dFiles int, closedDirty []string) {
	s.mu.Lock()
	s.mappings += dMaps
	s.openFiles += dFiles
	for _, p := range closedDirty {
		s.pendingSync[p] = struct{}{}
	}
	switch {
	case len(q.open) > 0 && q.elem == nil:
		q.elem = s.lru.PushFront(q)
	case len(q.open) > 0:
		s.lru.MoveToFront(q.elem)
	case q.elem != nil:
		s.lru.Remove(q.elem)
		q.elem = nil
	}
	victims := s.evictLocked()
	s.mu.Unlock()
	s.closeVictims(victims)
}

// evictLocked detaches the open files of the least recently used unpinned
// queues until the bound holds (or only pinned queues are left) and
// returns them to be closed outside s.mu. A queue with refs == 0 is touched
// by nobody else, so its files may be taken without its lock.
func (s *Store) evictLocked() []*segment {
	var victims []*segment
	for e := s.lru.Back(); e != nil && s.lru.Len() > s.opts.MaxOpenQueues; {
		q := e.Value.(*queue)
		prev := e.Prev()
		if q.refs == 0 {
			for _, sg := range q.open {
				if sg.m != nil {
					s.mappings--
				}
				s.openFiles--
				if sg.dirty {
					s.pendingSync[sg.path] = struct{}{}
				}
			}
			victims = append(victims, q.open...)
			q.open = nil
			s.lru.Remove(e)
			q.elem = nil
		}
		e = prev
	}
	return victims
}

func (s *Store) closeVictims(victims []*segment) {
	for _, sg := range victims {
		if err := sg.close(); err != nil {
			s.log.Error().Err(err).Msg("closing an evicted consume queue file")
		}
	}
}

// OpenMappings returns the number of files currently mapped (0 for a
// read-only store). It stays at most 2 x MaxOpenQueues, except while more
// queues than that are being read at the same moment.
func (s *Store) OpenMappings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mappings
}

// OpenFiles returns the number of ConsumeQueue files currently open.
func (s *Store) OpenFiles() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openFiles
}

// Queues implements cq.Store. Queues found on disk without any file are
// listed too (RocketMQ loads them as empty queues).
func (s *Store) Queues(fn func(topic string, queueID int32) bool) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.mu.Lock()
	keys := make([]queueKey, 0, len(s.queues))
	for k := range s.queues {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	s.exit()
	for _, k := range keys {
		if !fn(k.topic, k.id) {
			break
		}
	}
	return nil
}

// Gap is a run of files missing in the middle of a queue of a read-only
// store: RocketMQ's MappedFileQueue.checkSelf only logs such a queue, and
// reads around the missing files; so does a read-only Store (Open, which
// writes, refuses it unless Options.RefillGap writes them again). Get
// leaves the missing units out.
type Gap struct {
	Topic   string
	QueueID int32
	// From and To bound the queue offsets [From, To) the missing files
	// held.
	From, To int64
	// PhyFrom and PhyTo bound where the CommitLog records of the missing
	// entries lie, [PhyFrom, PhyTo): PhyFrom is the end of the record of
	// the entry before them (0 when the unit before is no entry), PhyTo
	// the start of the record of the entry after them (-1 when the queue
	// has none: they reach to the CommitLog's end).
	PhyFrom, PhyTo int64
}

// Gaps returns the runs of files missing in the middle of the queues
// (never any in a store Open opened), by topic, queue id and offset:
// those below each queue's end (MaxOffset), whether or not its minimum
// moved past them.
func (s *Store) Gaps() []Gap {
	if err := s.enter(); err != nil {
		return nil
	}
	defer s.exit()
	var out []Gap
	for _, q := range s.pinAll() {
		q.mu.Lock()
		for _, g := range q.gaps {
			if q.deleted || g.from >= q.max {
				continue
			}
			to := g.unit.phy + 1
			if g.unit.phy == math.MaxInt64 {
				to = -1
			}
			out = append(out, Gap{Topic: q.key.topic, QueueID: q.key.id, From: g.from, To: g.to, PhyFrom: g.phyFrom, PhyTo: to})
		}
		q.mu.Unlock()
		s.release(q)
	}
	slices.SortFunc(out, func(a, b Gap) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID), cmp.Compare(a.From, b.From))
	})
	return out
}

// Flush implements cq.Store: it fsyncs every file written since the last
// Flush (writes go through pwrite, so fsync rather than msync is what makes
// them durable) and the directories whose entries changed. A read-only
// store has nothing to flush. Once an fsync failed, every Flush returns
// ErrSyncFailed (see there).
func (s *Store) Flush() error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if s.readOnly {
		return nil
	}
	return s.flush()
}

func (s *Store) flush() error {
	s.mu.Lock()
	if failed := s.syncFailed; failed != nil {
		s.mu.Unlock()
		return failed
	}
	var qs []*queue
	for e := s.lru.Front(); e != nil; e = e.Next() {
		q := e.Value.(*queue)
		q.refs++
		qs = append(qs, q)
	}
	s.mu.Unlock()

	// The open dirty files are synced by name, outside their queue's
	// lock: a Put to the queue (the dispatcher) does not wait for the
	// fsync, and a file the LRU closes meanwhile stays valid to sync. A
	// write after the dirty mark is cleared marks the file again.
	var errs []error
	var paths []string
	for _, q := range qs {
		q.mu.Lock()
		for _, sg := range q.open {
			if sg.dirty {
				sg.dirty = false
				paths = append(paths, sg.path)
			}
		}
		q.mu.Unlock()
		s.release(q)
	}
	for _, p := range paths {
		if err := s.syncPath(p); err != nil {
			errs = append(errs, err)
			s.mu.Lock()
			s.pendingSync[p] = struct{}{}
			s.mu.Unlock()
		}
	}
	// Taken after the open files: a dirty file closed while they were
	// synced (the LRU, a queue opening another file) is synced by name
	// here, so everything written before Flush was called is durable when
	// it returns.
	s.mu.Lock()
	pending, dirs := s.pendingSync, s.dirtyDirs
	s.pendingSync, s.dirtyDirs = make(map[string]struct{}), make(map[string]struct{})
	s.mu.Unlock()
	var retry []string
	for _, set := range []map[string]struct{}{pending, dirs} {
		for p := range set {
			if err := s.syncPath(p); err != nil {
				errs = append(errs, err)
				retry = append(retry, p)
			}
		}
	}
	if len(retry) > 0 {
		s.mu.Lock()
		for _, p := range retry {
			if _, ok := dirs[p]; ok {
				s.dirtyDirs[p] = struct{}{}
			} else {
				s.pendingSync[p] = struct{}{}
			}
		}
		s.mu.Unlock()
	}
	err := errors.Join(errs...)
	if errors.Is(err, ErrSyncFailed) {
		// A failed fsync is final; the paths that could not be opened
		// (too many open files, say) are tried again by the next Flush.
		s.mu.Lock()
		if s.syncFailed == nil {
			s.syncFailed = err
			s.log.Error().Err(err).Msg("file ConsumeQueue fsync failed: nothing written since the last good flush is reported durable any more; a restart writes it again from the CommitLog")
		}
		err = s.syncFailed
		s.mu.Unlock()
	}
	return err
}

// syncPath fsyncs a file or directory by name; one that is gone since
// (deleted queue, truncated file) needs nothing.
func (s *Store) syncPath(p string) error {
	f, err := s.fs.OpenFile(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return fmt.Errorf("sync %s: %w: %w", p, ErrSyncFailed, serr)
	}
	if cerr != nil {
		return fmt.Errorf("sync %s: close: %w", p, cerr)
	}
	return nil
}

// Close implements cq.Store: it waits for the calls in progress, flushes
// and closes every file.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return cq.ErrClosed
	}
	s.closed = true
	for s.active > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()

	var errs []error
	if !s.readOnly {
		if err := s.flush(); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
	}
	s.mu.Lock()
	var segs []*segment
	for _, q := range s.queues {
		segs = append(segs, q.open...)
		q.open = nil
		q.elem = nil
	}
	s.lru.Init()
	s.mappings, s.openFiles = 0, 0
	s.mu.Unlock()
	for _, sg := range segs {
		if err := sg.close(); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
	}
	return errors.Join(errs...)
}
