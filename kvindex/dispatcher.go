package kvindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/meta"
)

// Hook sees every dispatched record of one topic (the timer and
// transaction services register theirs for their system topics). It may
// add keys of its own keyspaces to w; they commit atomically with the
// batch's ConsumeQueue entries and the dispatched offset, so a hook's index
// is exactly as durable and as replayable as the ConsumeQueue. Records of
// hooked topics are still indexed as normal messages.
type Hook interface {
	// Dispatch sees m only during the call: the dispatcher reuses it for
	// the next record, and its Body aliases the CommitLog.
	Dispatch(w *pebble.Batch, m *commitlog.Message) error
}

// HookFunc adapts a function to Hook.
type HookFunc func(w *pebble.Batch, m *commitlog.Message) error

// Dispatch calls f.
func (f HookFunc) Dispatch(w *pebble.Batch, m *commitlog.Message) error { return f(w, m) }

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	Log *commitlog.Log
	DB  *DB
	// Store is the ConsumeQueue that serves reads: the CQ of DB or a file
	// ConsumeQueue.
	Store cq.Store
	// Mirror, when set, is a second ConsumeQueue layout written beside
	// Store (double-write mode: RocketMQ's file ConsumeQueue beside the
	// Pebble one, either way round). One of Store and Mirror must then be
	// the CQ of DB. Recover brings a Mirror that fell behind up to date.
	Mirror cq.Store
	// FileFlushInterval is how often a ConsumeQueue outside DB is flushed
	// and its durable point recorded (default 1 s, RocketMQ's
	// flushIntervalConsumeQueue). After a power failure Recover writes
	// again what it may have lost since.
	FileFlushInterval time.Duration
	// OpenFileLayout, when set and the file ConsumeQueue is not written,
	// opens it read-only: a rebuild of the database's ConsumeQueue takes
	// queue numbering from it when its recorded progress reaches past the
	// CommitLog's minimum. Recover closes what it opened.
	OpenFileLayout func() (cq.Store, error)
	// CatchUpMarkBytes is how many CommitLog bytes Recover's catch-up of
	// a layout reads between records of its progress (default 64 MiB): a
	// start killed in the middle resumes from the last one.
	CatchUpMarkBytes int64
	// AfterRebuildDrop, when set, is called once a rebuild has dropped a
	// layout's queues, before it writes them again: the point a crash
	// test kills the process at.
	AfterRebuildDrop func(layout string)
	// Offsets, when set, learns how far each queue is dispatched (so idle
	// queues can be evicted).
	Offsets *QueueOffsets
	// Notifier, when set, is told about every queue that got entries and
	// their tag codes (nothing, at no cost, while nobody waits on it).
	Notifier *Notifier
	// Hooks by topic.
	Hooks map[string]Hook
	// Compaction, when set, gets a copy of every record of the topics it
	// compacts, in the batch that indexes it.
	Compaction *Compaction
	// CommitHook, when set, sees every record whose transaction type is
	// COMMIT (the committed copy of a transactional message), whatever its
	// topic, in the same way as Hooks.
	CommitHook Hook
	// Replica marks a CommitLog written by another broker (a slave's,
	// copied from its master): an entry below its queue's end whose
	// record lies past the queue's last one starts the queue anew, as
	// the master's deletion and creation of the topic did, and the queue
	// is dropped before it is indexed (restart.go). Otherwise such an
	// entry is kept out as already there.
	Replica bool
	// NewTopic, when set, is told each topic the dispatcher meets for the
	// first time since it started (a slave's broker looks whether it has
	// the topic's config yet): once for each topic whose name it keeps,
	// and at every record of a topic past maxDispatchTopics names. It
	// runs on the dispatcher's goroutine, in the middle of a batch, and
	// must return at once.
	NewTopic func(topic string)
	// QueueRestarted, when set, is called under Replica for a queue a
	// replicated record starts anew, before the queue is dropped (and
	// again if a crash comes before the drop): the broker drops the
	// consumer state of the old queue there. It runs on the dispatcher's
	// goroutine; an error fails the batch, which is retried.
	QueueRestarted func(topic string, queueID int32) error
	// DelayLevels computes the tagsCode (delivery time) of
	// SCHEDULE_TOPIC_XXXX records; RocketMQ's default levels when nil.
	DelayLevels []time.Duration
	// MultiDispatch indexes a record also in each light message queue
	// (meta.IsLMQ) its INNER_MULTI_DISPATCH property names, at the offset
	// its INNER_MULTI_QUEUE_OFFSET property gives (RocketMQ's
	// enableMultiDispatch), when its topic allows it
	// (meta.TopicAllowsLMQ).
	MultiDispatch bool
	// SkipKeyIndex leaves records out of the key index (RocketMQ's
	// messageIndexEnable=false): dispatch writes one key per record
	// instead of two or more, and key queries find nothing new.
	SkipKeyIndex bool
	// MaxBatchRecords caps the records per Pebble batch (default 4096).
	MaxBatchRecords int
	// BatchInterval, when positive, is the least time between the starts
	// of two dispatch batches while records keep arriving (0: each batch
	// starts as soon as the last ends). Records that arrive within it of
	// the last batch wait for its end and go into one batch together; a
	// record after a longer pause, and the rest of a full batch, are
	// dispatched at once. At paced rates a batch per record costs a Pebble
	// commit, two progress keys in the memtable and a wake-up of every
	// held request of the queue per message; RocketMQ's dispatcher, for
	// comparison, looks for new records once a millisecond.
	BatchInterval time.Duration
	// MaxLagBytes bounds how far the CommitLog may run ahead of dispatch
	// before Admit makes appenders wait (0: no bound). Appenders that run
	// flat out on a small machine otherwise take the dispatcher's CPU and
	// the lag grows without bound.
	MaxLagBytes int64
	// PruneInterval is how often the cq journal is pruned below the
	// CommitLog's flushed offset (default 1 s), by a goroutine of its own.
	PruneInterval time.Duration
	Logger        zerolog.Logger
	// RecoveryStep, when set, is called by Recover after each of its
	// steps that changes the database, and by dispatch after it dropped a
	// replica's restarted queue (StepQueueRestarted), with the step's
	// name: the seam of the crash tests that kill a broker in the middle.
	RecoveryStep func(step string)
}

// Names of Recover's steps, as given to DispatcherOptions.RecoveryStep.
const (
	StepIndexCut            = "index cut"
	StepTransactionsDropped = "transactions dropped"
	StepTimersDropped       = "timers dropped"
	StepCopiesDropped       = "copies dropped"
	StepCopiesRestored      = "copies restored"
	StepRestoresCleared     = "restores cleared"
	StepDispatchedSet       = "dispatched set"
	// StepQueueRestarted is dispatch's, not Recover's: a replica's queue
	// dropped for the record that starts it anew, not yet indexed
	// (restart.go).
	StepQueueRestarted = "queue restarted"
)

// step tells RecoveryStep that Recover finished a step.
func (d *Dispatcher) step(name string) {
	if d.opts.RecoveryStep != nil {
		d.opts.RecoveryStep(name)
	}
}

// Dispatcher tails the CommitLog and indexes every record: ConsumeQueue
// entries, key-index entries, hook keys and the new dispatched offset go
// into one Pebble batch per run of records (no per-record sync: the log is
// the source of truth), then waiting readers are woken.
//
// One goroutine, started by Start and stopped by Close, owns the tail.
type Dispatcher struct {
	opts DispatcherOptions
	log  zerolog.Logger
	kv   *CQ // the KV ConsumeQueue when written, for atomic batches
	keys *KeyIndex
	// layouts are the ConsumeQueues written, Store first; files those of
	// them outside DB, written before each batch.
	layouts []layout
	files   []cq.Store
	// keyBatch collects a batch's key-index entries (reused).
	keyBatch keyBatch
	// lagged holds the queues of a batch that wrote entries of records
	// retention had deleted (correctLagged's, reused).
	lagged []qkey
	// compactRecs are copies of the batch's records of compacted topics,
	// copied into the index under writeMu (reused).
	compactRecs [][]byte

	// writeMu is held while a batch is written to the ConsumeQueues, so
	// Quiesced can read them between batches. Lock order: minMu, then
	// writeMu, then the KV ConsumeQueue's mu.
	writeMu sync.Mutex
	// minMu is held while the CommitLog minimum is applied to every
	// layout in turn (outside writeMu: a sweep of every queue must not
	// stall dispatch), so QuiescedMinima never sees one layout corrected
	// and the other not.
	minMu sync.Mutex

	next atomic.Int64 // next CommitLog offset to dispatch
	// deleted holds the topic deletions dispatch has not passed (nil:
	// none); written under writeMu, read by the loop once a batch.
	deleted atomic.Pointer[deletedTopics]
	// queueBegins is what a first open of a RocketMQ store recorded of
	// where the queues of the topics of deleted began (DB.queueBegins),
	// read by recover.
	queueBegins map[string]topicBegin

	mu      sync.Mutex
	waiters []dispatchWaiter
	err     error // set when the loop stopped on an error

	cancel context.CancelFunc
	done   chan struct{} // closed when the dispatch loop has stopped
	// pruned is closed when the journal pruner has stopped, flushed when
	// the file flusher has.
	pruned  chan struct{}
	flushed chan struct{}

	// State dispatchBatch reuses from batch to batch; only the loop
	// goroutine touches it.
	entries []cq.Dispatch
	touched map[qkey]int // index into queues
	queues  []pendingQueue
	// Tag codes of the batch's entries for the Notifier, collected only
	// when somebody waits on it: by record (a code that repeats the
	// queue's previous one is left out), then grouped by queue. At most
	// one of each per record of a batch.
	batchCodes []queueCode
	codes      []int64
	// arrivals gives the batch's Arrivals their entries' properties.
	arrivals arrivalRecords
	topics   map[string]string // topic names handed to the records' decoder
	decode   commitlog.DecodeOptions
	// Under Replica (restart.go): stopAt, when past a batch's start,
	// ends the batch before the record at that offset, which restarts
	// its queue; readerAhead is set when a batch so ended, its reader
	// having read that record already; lastRestart is the last restart
	// made, not made twice.
	stopAt      int64
	readerAhead bool
	lastRestart queueRestart
}

// maxDispatchTopics bounds the topic names the dispatcher keeps to hand
// to decoded records. Once it holds that many, the names kept stay and
// any other topic's records get a fresh string each: starting over
// instead would, with more active topics than this, clear the set again
// and again and still allocate for nearly every record.
const maxDispatchTopics = 1 << 16

type dispatchWaiter struct {
	offset int64
	ch     chan struct{}
}

// NewDispatcher returns a dispatcher; call Recover, then Start.
func NewDispatcher(opts DispatcherOptions) (*Dispatcher, error) {
	if opts.Log == nil || opts.DB == nil || opts.Store == nil {
		return nil, errors.New("dispatcher: Log, DB and Store are required")
	}
	if opts.MaxBatchRecords <= 0 {
		opts.MaxBatchRecords = 4096
	}
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = time.Second
	}
	if opts.FileFlushInterval <= 0 {
		opts.FileFlushInterval = time.Second
	}
	if opts.CatchUpMarkBytes <= 0 {
		opts.CatchUpMarkBytes = 64 << 20
	}
	if opts.DelayLevels == nil {
		lv, err := meta.ParseDelayLevels(meta.DefaultMessageDelayLevel)
		if err != nil {
			return nil, err
		}
		opts.DelayLevels = lv
	}
	d := &Dispatcher{opts: opts, log: opts.Logger.With().Str("component", "dispatcher").Logger(), keys: opts.DB.KeyIndex(),
		touched: map[qkey]int{}, topics: map[string]string{}}
	d.decode = commitlog.DecodeOptions{Topics: d.topicName}
	for _, s := range []cq.Store{opts.Store, opts.Mirror} {
		if s == nil {
			continue
		}
		if kv, ok := s.(*CQ); ok && kv.db == opts.DB {
			if d.kv != nil {
				return nil, errors.New("dispatcher: Store and Mirror are both the database's ConsumeQueue")
			}
			d.kv = kv
			d.layouts = append(d.layouts, layout{name: LayoutKV, store: s, inDB: true})
			continue
		}
		if len(d.files) > 0 {
			return nil, errors.New("dispatcher: with a Mirror, one of Store and Mirror must be the database's ConsumeQueue")
		}
		d.files = append(d.files, s)
		d.layouts = append(d.layouts, layout{name: LayoutFile, store: s})
	}
	return d, nil
}

// Recover brings the index in line with the recovered CommitLog before
// dispatch starts: entries pointing past the log's end are removed (with
// the transaction, timer and compaction keys of those records), the
// dispatched offset is moved into the log's range, ConsumeQueue minima
// are corrected to the log's minimum, and every ConsumeQueue layout
// written is brought up to the dispatched offset (a file ConsumeQueue may
// have lost unflushed writes; a layout double-write turned on may lack
// everything). It returns the offset dispatch will start from.
func (d *Dispatcher) Recover() (int64, error) {
	l := d.opts.Log
	end, minOff := l.MaxOffset(), l.MinOffset()
	from, hadDispatched, err := d.opts.DB.metaInt64(metaDispatched)
	if err != nil {
		return 0, err
	}
	for _, f := range d.files {
		// A file ConsumeQueue is written before the dispatched offset: it
		// may hold entries of records the log lost.
		if err := f.Truncate(end); err != nil {
			return 0, fmt.Errorf("recover index: %w", err)
		}
	}
	if from > end || d.kv == nil {
		// The index may hold entries of records the log lost (a power
		// failure before the log was flushed): cut it at the log's end.
		if d.kv != nil {
			if err := d.kv.Truncate(end); err != nil {
				return 0, fmt.Errorf("recover index: %w", err)
			}
		}
		if err := d.keys.Truncate(end); err != nil {
			return 0, fmt.Errorf("recover index: %w", err)
		}
		d.step(StepIndexCut)
		if from > end {
			if err := d.dropAbove(end); err != nil {
				return 0, fmt.Errorf("recover index: %w", err)
			}
			d.log.Warn().Int64("dispatched", from).Int64("logEnd", end).Msg("index was ahead of the recovered CommitLog; truncated it")
			from = end
		}
	}
	if from < minOff {
		from = minOff
	}
	if err := d.correctMin(minOff, len(d.files) > 0); err != nil {
		return 0, fmt.Errorf("recover index: %w", err)
	}
	if err := d.opts.DB.SetDispatched(from); err != nil {
		return 0, err
	}
	d.step(StepDispatchedSet)
	deleted, err := d.opts.DB.topicsDeleted(minOff, end)
	if err != nil {
		return 0, fmt.Errorf("recover index: %w", err)
	}
	if d.queueBegins, err = d.opts.DB.queueBegins(deleted); err != nil {
		return 0, fmt.Errorf("recover index: %w", err)
	}
	if err := d.catchUpLayouts(from, minOff, end, hadDispatched, deleted); err != nil {
		return 0, fmt.Errorf("recover index: %w", err)
	}
	// Dispatch from an offset below a deletion (a crash lost batches
	// written after it) leaves the deleted topic's records out again.
	d.deleted.Store(newDeletedTopics(deleted, from).withQueues(d.queueBegins))
	d.next.Store(from)
	d.log.Info().Int64("from", from).Int64("logEnd", end).Int64("logMin", minOff).Msg("dispatch recovered")
	return from, nil
}

// dropAbove removes what the dispatch of records at or past end wrote
// beyond the ConsumeQueue and the key index: transaction halves and
// ends, timer entries and compacted copies. The offsets past end will
// hold other records.
func (d *Dispatcher) dropAbove(end int64) error {
	// The serving ConsumeQueue is cut at end already: its half queue
	// ends where the halves left in the log end.
	halfEnd, err := d.opts.Store.MaxOffset(meta.TransHalfTopic, 0)
	if err != nil {
		return fmt.Errorf("read the half queue's end: %w", err)
	}
	reopened, err := d.opts.DB.Transactions().DropAbove(end, halfEnd, d.halfAt)
	if err != nil {
		return err
	}
	d.step(StepTransactionsDropped)
	timers, err := d.opts.DB.Timers().DropAbove(end)
	if err != nil {
		return err
	}
	d.step(StepTimersDropped)
	copies, restored := 0, 0
	if c := d.opts.Compaction; c != nil {
		if copies, err = c.DropAbove(end); err != nil {
			return err
		}
		d.step(StepCopiesDropped)
		// The keys this cut marked, and those of a recovery that stopped
		// before copying them again.
		lost, err := c.PendingRestores()
		if err != nil {
			return err
		}
		if restored, err = d.recopyNewest(lost); err != nil {
			return err
		}
		d.step(StepCopiesRestored)
		if err := c.ClearRestores(lost); err != nil {
			return err
		}
		d.step(StepRestoresCleared)
	}
	d.log.Info().Int64("logEnd", end).Int("timers", timers).Int("compactedCopies", copies).Int("compactedRestored", restored).
		Int("transactionsReopened", reopened).Msg("dropped the index entries of records past the recovered CommitLog's end")
	return nil
}

// halfAt returns the open half of the half message at a CommitLog offset,
// due for a check at once: a transaction whose commit the log lost. ok is
// false when no half message starts there.
func (d *Dispatcher) halfAt(phy int64) (TxnHalf, bool, error) {
	v, err := d.opts.Log.ReadRecord(phy)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) || commitlog.NoRecordAt(err) {
		return TxnHalf{}, false, nil
	}
	if err != nil {
		return TxnHalf{}, false, fmt.Errorf("read the half message at %d: %w", phy, err)
	}
	defer v.Release()
	m, err := commitlog.Decode(v.Data)
	if err != nil || m.Topic != meta.TransHalfTopic {
		return TxnHalf{}, false, nil
	}
	return TxnHalf{PhyOffset: phy, QueueOffset: m.QueueOffset, StoreTimestamp: m.StoreTimestamp, NextCheckAt: m.StoreTimestamp}, true, nil
}

// recopyNewest copies again, for each key whose newest message was cut
// with the log's tail, the key's newest message left in the CommitLog,
// found through the key index (none without it): its copy was dropped
// when the cut message was dispatched. It returns how many it copied.
func (d *Dispatcher) recopyNewest(keys []CompactedKey) (int, error) {
	if len(keys) == 0 || d.opts.SkipKeyIndex {
		return 0, nil
	}
	var recs [][]byte
	for _, k := range keys {
		var rec []byte
		_, err := d.keys.Lookup(KeyQuery{Topic: k.Topic, Key: k.Key, Kind: KindKey, Max: 1, MinPhyOffset: d.opts.Log.MinOffset(),
			Verify: func(e KeyIndexEntry) (int64, bool) {
				v, err := d.opts.Log.ReadRecord(e.PhyOffset)
				if err != nil {
					return 0, false
				}
				defer v.Release()
				m, err := commitlog.Decode(v.Data)
				if err != nil || m.Topic != k.Topic || m.QueueID != k.QueueID {
					return 0, false
				}
				if key, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyKeys); key != k.Key {
					return 0, false
				}
				rec = append([]byte(nil), v.Data...)
				return m.StoreTimestamp, true
			}})
		if err != nil {
			return 0, fmt.Errorf("find the message of %s/%d before the cut one of key %q: %w", k.Topic, k.QueueID, k.Key, err)
		}
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	if len(recs) == 0 {
		return 0, nil
	}
	if err := d.opts.Compaction.CopyRecords(recs); err != nil {
		return 0, err
	}
	return len(recs), nil
}

// LogMinOffsetChanged applies a new CommitLog minimum (retention deleted
// segments): ConsumeQueue minima move past the deleted records and the key
// index drops the buckets below it. Register it with the CommitLog's
// OnMinOffsetChange.
func (d *Dispatcher) LogMinOffsetChanged(newMin int64) {
	if err := d.correctMin(newMin, false); err != nil {
		d.log.Error().Err(err).Int64("min", newMin).Msg("correct the index to the CommitLog minimum")
	}
}

// ReapplyLogMin applies the CommitLog minimum to every ConsumeQueue layout
// and the key index again, whether or not it moved since it was last
// applied: entries of records retention deleted go (the file layout's
// expired files with them), and each queue's minimum moves past them.
// Retention does the same each time it deletes segments; this is for an
// administrator who asks (CLEAN_EXPIRED_CONSUMEQUEUE). It sweeps every
// queue.
func (d *Dispatcher) ReapplyLogMin(minOff int64) error {
	return d.correctMin(minOff, true)
}

// correctMin applies the CommitLog minimum to the ConsumeQueue and the key
// index. The KV ConsumeQueue persists its minima, so the sweep over every
// queue runs only when the minimum moved past the one last applied
// (recorded in meta "cqMinApplied"); always forces it (the file layout
// recomputes minima at every start).
func (d *Dispatcher) correctMin(minOff int64, always bool) error {
	d.minMu.Lock()
	defer d.minMu.Unlock()
	applied, err := d.opts.DB.get(metaKey(metaMinApplied))
	if err != nil {
		return fmt.Errorf("read applied minimum: %w", err)
	}
	var last int64
	if applied != nil {
		if last, err = getInt64(applied); err != nil {
			return fmt.Errorf("read applied minimum: %w", err)
		}
	}
	d.keys.noteMin(minOff)
	if !always && minOff <= last {
		return nil
	}
	for _, l := range d.layouts {
		if err := l.store.CorrectMin(minOff); err != nil {
			return fmt.Errorf("correct %s ConsumeQueue minima to %d: %w", l.name, minOff, err)
		}
	}
	if minOff > 0 {
		if err := d.keys.DropBelow(minOff); err != nil {
			return err
		}
	}
	if d.kv == nil {
		// The database's ConsumeQueue was not corrected: the next run that
		// writes it must correct it.
		return nil
	}
	if err := d.opts.DB.pdb.Set(metaKey(metaMinApplied), putInt64(minOff), pebble.Sync); err != nil {
		return fmt.Errorf("record applied minimum: %w", err)
	}
	return nil
}

// correctLagged applies the CommitLog minimum to the queues of a batch
// that wrote entries of records retention had deleted, and drops the key
// index below it again: each queue's minimum moves past those entries, as
// retention's own correction (which ran before the batch's commit) moves
// every queue's. The caller holds writeMu. The file layout, whose minima
// come from its files at each start, is left to the next retention pass.
func (d *Dispatcher) correctLagged(pending []pendingQueue) error {
	queues := d.lagged[:0]
	for _, q := range pending {
		queues = append(queues, qkey{q.topic, q.qid})
	}
	d.lagged = queues
	minOff := d.opts.Log.MinOffset()
	if d.kv != nil {
		if err := d.kv.correctMinOf(queues, minOff); err != nil {
			return fmt.Errorf("correct the minima of %d queues dispatched behind retention: %w", len(queues), err)
		}
	}
	if minOff > 0 {
		if err := d.keys.DropBelow(minOff); err != nil {
			return err
		}
	}
	return nil
}

// Start runs the dispatch loop until Close.
func (d *Dispatcher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.done = make(chan struct{})
	d.pruned = make(chan struct{})
	d.flushed = make(chan struct{})
	go d.run(ctx)
	go d.pruneLoop(ctx)
	go d.flushLoop(ctx)
}

// flushLoop flushes the file ConsumeQueue every FileFlushInterval and
// records how far it is durable. The record is not synced: the index's
// WAL sync makes it durable, and a lost one only makes Recover write
// again entries that are there.
func (d *Dispatcher) flushLoop(ctx context.Context) {
	defer close(d.flushed)
	if len(d.files) == 0 {
		return
	}
	periodic.Run(ctx, d.opts.FileFlushInterval, func(context.Context) {
		if err := d.recordFileProgress(d.next.Load(), pebble.NoSync); err != nil {
			d.log.Error().Err(err).Msg("flush the file ConsumeQueue")
		}
	})
}

// Quiesced runs fn while no dispatch batch is being written to the
// ConsumeQueues, so that fn sees every layout at the same point.
func (d *Dispatcher) Quiesced(fn func() error) error {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	return fn()
}

// QuiescedMinima is Quiesced that also waits out a retention pass applying
// the CommitLog minimum to the layouts (and holds the next one back), so
// that fn sees their minima alike too: what a comparison of the layouts'
// bounds needs.
func (d *Dispatcher) QuiescedMinima(fn func() error) error {
	d.minMu.Lock()
	defer d.minMu.Unlock()
	return d.Quiesced(fn)
}

// pruneLoop drops, every PruneInterval, the cq journal records the
// CommitLog has made durable. It runs beside the dispatch loop rather than
// in it: a prune reads the records of the last interval (milliseconds at
// tens of thousands of messages a second), and on the loop every
// long-polled delivery waited for it once a second.
func (d *Dispatcher) pruneLoop(ctx context.Context) {
	defer close(d.pruned)
	if d.kv == nil {
		return
	}
	periodic.Run(ctx, d.opts.PruneInterval, func(context.Context) {
		if err := d.kv.PruneJournal(min(d.opts.Log.FlushedOffset(), d.next.Load())); err != nil {
			d.log.Warn().Err(err).Msg("prune cq journal")
		}
	})
}

// Close stops the loop and waits for it.
func (d *Dispatcher) Close() error {
	if d.cancel == nil {
		return nil
	}
	d.cancel()
	<-d.done
	<-d.pruned
	<-d.flushed
	d.cancel = nil
	if err := d.recordFileProgress(d.next.Load(), pebble.Sync); err != nil {
		return fmt.Errorf("close dispatcher: %w", err)
	}
	return nil
}

// Dispatched returns the offset up to which every record is indexed.
func (d *Dispatcher) Dispatched() int64 { return d.next.Load() }

// Lag returns how many CommitLog bytes are appended but not yet indexed,
// leaving out those a controller-mode confirm limit holds back
// (commitlog.Log.LimitedEnd; RocketMQ's dispatchBehindBytes also counts
// only up to its confirm offset).
func (d *Dispatcher) Lag() int64 { return max(0, d.opts.Log.LimitedEnd()-d.next.Load()) }

// ErrDispatchBehind is returned by Admit when dispatch stayed more than
// MaxLagBytes behind the CommitLog for the whole wait it was given.
var ErrDispatchBehind = errors.New("dispatch is behind the CommitLog")

// Behind reports whether an appender would have to wait in Admit now:
// dispatch is more than MaxLagBytes behind the CommitLog's end (Lag).
func (d *Dispatcher) Behind() bool {
	return d.opts.MaxLagBytes > 0 && d.Lag() > d.opts.MaxLagBytes
}

// Admit is called by an appender before it appends. While dispatch is more
// than MaxLagBytes behind the CommitLog's end it waits, up to wait, for
// dispatch to come within the bound; then it returns ErrDispatchBehind
// (wrapped with the lag). With MaxLagBytes 0 it returns at once.
func (d *Dispatcher) Admit(ctx context.Context, wait time.Duration) error {
	if !d.Behind() {
		return nil
	}
	bound := d.opts.MaxLagBytes
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := d.WaitFor(wctx, d.opts.Log.LimitedEnd()-bound)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: %d bytes not indexed after waiting %s (bound %d)", ErrDispatchBehind, d.Lag(), wait, bound)
	}
	return fmt.Errorf("wait for dispatch before append: %w", err)
}

// WaitFor blocks until every record before offset is indexed, ctx ends or
// the loop stopped on an error.
func (d *Dispatcher) WaitFor(ctx context.Context, offset int64) error {
	d.mu.Lock()
	if d.err != nil {
		err := d.err
		d.mu.Unlock()
		return err
	}
	if d.next.Load() >= offset {
		d.mu.Unlock()
		return nil
	}
	w := dispatchWaiter{offset: offset, ch: make(chan struct{})}
	d.waiters = append(d.waiters, w)
	d.mu.Unlock()
	select {
	case <-w.ch:
		d.mu.Lock()
		err := d.err
		d.mu.Unlock()
		if d.next.Load() >= offset {
			return nil
		}
		return err
	case <-ctx.Done():
		d.forget(w.ch)
		return ctx.Err()
	}
}

// forget removes a waiter that gave up, so waiters that time out while
// dispatch is stuck do not pile up.
func (d *Dispatcher) forget(ch chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, w := range d.waiters {
		if w.ch == ch {
			d.waiters = slices.Delete(d.waiters, i, i+1)
			return
		}
	}
}

// CatchUp waits until everything appended so far is indexed; under a
// controller-mode confirm limit (commitlog.Log.SetConfirmLimit), what is
// confirmed so far: the records ending at or before the limit.
func (d *Dispatcher) CatchUp(ctx context.Context) error {
	end := d.opts.Log.MaxOffset()
	if d.opts.Log.LimitedEnd() < end {
		end = d.confirmedRecordsEnd()
	}
	return d.WaitFor(ctx, end)
}

// confirmedRecordsEnd is the end of the last whole record a confirmed
// reader sees now, found by walking the records dispatch has not indexed
// yet (the limit may fall inside a record, where dispatch stops short of
// it).
func (d *Dispatcher) confirmedRecordsEnd() int64 {
	r := d.opts.Log.NewConfirmedReader(d.next.Load())
	defer r.Close()
	for {
		_, err := r.Next()
		if err == nil {
			continue
		}
		if errors.Is(err, commitlog.ErrNoMoreData) {
			return r.Offset()
		}
		// Dispatch meets the same damage and reports it; wait for the
		// limit as before the walk.
		return d.opts.Log.LimitedEnd()
	}
}

func (d *Dispatcher) wake(stopErr error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if stopErr != nil {
		d.err = stopErr
	}
	next := d.next.Load()
	kept := d.waiters[:0]
	for _, w := range d.waiters {
		if w.offset <= next || stopErr != nil {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	d.waiters = kept
}

func (d *Dispatcher) run(ctx context.Context) {
	defer close(d.done)
	r := d.opts.Log.NewConfirmedReader(d.next.Load())
	defer r.Close()
	backoff := 10 * time.Millisecond
	// lastStart is when the last batch that was not full began (zero
	// after a full one), for BatchInterval.
	var lastStart time.Time
	var pause *time.Timer
	defer func() {
		if pause != nil {
			pause.Stop()
		}
	}()
	for {
		if wait := d.untilNextBatch(lastStart); wait > 0 {
			if pause == nil {
				pause = time.NewTimer(wait)
			} else {
				pause.Reset(wait)
			}
			select {
			case <-ctx.Done():
				d.wake(ctx.Err())
				return
			case <-pause.C:
			}
		}
		start := time.Now()
		n, err := d.dispatchBatch(r)
		if errors.Is(err, errDeletedMidBatch) || errors.Is(err, errStopBeforeRestart) || errors.Is(err, errQueueRestarted) {
			r.Close()
			r = d.opts.Log.NewConfirmedReader(d.next.Load())
			continue
		}
		if err != nil {
			if errors.Is(err, commitlog.ErrClosed) || ctx.Err() != nil {
				d.wake(commitlog.ErrClosed)
				return
			}
			if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
				if moved, serr := d.skipToLogStart(); serr != nil {
					err = serr
				} else if moved {
					r.Close()
					r = d.opts.Log.NewConfirmedReader(d.next.Load())
					continue
				}
			}
			// A damaged record in the live log or an index write failure:
			// stop advancing (the index stays consistent) and retry.
			d.log.Error().Err(err).Int64("at", d.next.Load()).Msg("dispatch failed; retrying")
			select {
			case <-ctx.Done():
				d.wake(ctx.Err())
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			r.Close()
			r = d.opts.Log.NewConfirmedReader(d.next.Load())
			continue
		}
		backoff = 10 * time.Millisecond
		if d.readerAhead {
			d.readerAhead = false
			r.Close()
			r = d.opts.Log.NewConfirmedReader(d.next.Load())
			continue
		}
		if n > 0 {
			lastStart = time.Time{}
			if d.opts.BatchInterval > 0 && n < d.opts.MaxBatchRecords {
				lastStart = start
			}
			continue
		}
		if err := r.Wait(ctx); err != nil {
			if ctx.Err() == nil && !errors.Is(err, commitlog.ErrClosed) {
				d.log.Error().Err(err).Msg("wait for CommitLog appends")
			}
			d.wake(err)
			return
		}
	}
}

// untilNextBatch is how long the batch after one that began at lastStart
// waits under BatchInterval (zero lastStart: none).
func (d *Dispatcher) untilNextBatch(lastStart time.Time) time.Duration {
	if lastStart.IsZero() {
		return 0
	}
	return d.opts.BatchInterval - time.Since(lastStart)
}

// skipToLogStart moves the dispatched offset up to the CommitLog's first
// offset when it lies below it, as Recover does at a start: the log now
// begins past what was dispatched. A replica's log does so from its first
// byte (a new slave receives its master's newest segment only, not
// segment 0), and retention may delete segments a lagging dispatcher had
// not reached. It reports whether the offset moved.
func (d *Dispatcher) skipToLogStart() (bool, error) {
	from, minOff := d.next.Load(), d.opts.Log.MinOffset()
	if from >= minOff {
		return false, nil
	}
	d.writeMu.Lock()
	err := d.opts.DB.SetDispatched(minOff)
	if err == nil {
		d.next.Store(minOff)
	}
	d.writeMu.Unlock()
	if err != nil {
		return false, fmt.Errorf("move the dispatched offset from %d to the CommitLog's start %d: %w", from, minOff, err)
	}
	if err := d.correctMin(minOff, false); err != nil {
		return true, fmt.Errorf("move the dispatched offset from %d to the CommitLog's start %d: %w", from, minOff, err)
	}
	d.log.Warn().Int64("dispatched", from).Int64("logMin", minOff).Msg("the CommitLog starts past the dispatched offset; dispatching from its start")
	d.wake(nil)
	return true, nil
}

// pendingQueue collects per-queue facts of a batch for after its commit.
type pendingQueue struct {
	topic string
	qid   int32
	first int64 // queue offset of the queue's first entry in the batch
	next  int64
	// The queue's tag codes, when collected: the last one, how many, and
	// where they start in Dispatcher.codes once grouped.
	lastCode     int64
	ncodes, from int
}

// queueCode is a tag code of the batch's queue q (an index into queues).
type queueCode struct {
	q    int
	code int64
}

// dispatchBatch indexes the records available at the reader, up to
// MaxBatchRecords, in one Pebble batch. It returns how many records it
// consumed.
func (d *Dispatcher) dispatchBatch(r *commitlog.Reader) (int, error) {
	if len(d.touched) > maxReusedTouched {
		d.touched = map[qkey]int{} // clearing a map costs its size, as in CQ.putBatch
	} else {
		clear(d.touched)
	}
	entries, touched, queues := d.entries[:0], d.touched, d.queues[:0]
	d.batchCodes = d.batchCodes[:0]
	defer func() {
		// Keep the room, drop what the records referenced.
		clear(entries)
		clear(queues)
		d.entries, d.queues = entries[:0], queues[:0]
	}()
	b := d.opts.DB.pdb.NewBatch()
	defer b.Close()
	kb := &d.keyBatch
	kb.sets.reset() // a batch that failed part way left its entries
	// Tag codes are collected record by record only when somebody waits
	// already; one who begins to wait during the batch gets them from
	// the entries after the commit.
	collect := d.opts.Notifier != nil && !d.opts.Notifier.Idle()
	// One Message for the batch: handing it to a hook makes it escape, so
	// one declared per record cost a heap allocation per record.
	var m commitlog.Message
	compaction := d.opts.Compaction
	// Records of topics deleted after they were appended are left out of
	// the index; nil (no lookups) once dispatch has passed every deletion.
	gone := d.deleted.Load()
	// A record indexed with no entry of its own (a prepared or rolled
	// back transactional record) leaves no queue to tell its topic by.
	unqueued := false
	defer func() {
		clear(d.compactRecs)
		d.compactRecs = d.compactRecs[:0]
	}()
	// Records with an empty topic (noQueue): how many, the first's offset.
	noTopic, firstNoTopic := 0, int64(0)
	batchStart := d.next.Load()
	stopped := false // at stopAt, whose record the reader has read
	n := 0
	for n < d.opts.MaxBatchRecords {
		e, err := r.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			break
		}
		if err != nil {
			return 0, err
		}
		if d.stopAt > batchStart && e.Offset >= d.stopAt {
			stopped = true
			break
		}
		n++
		m, err = commitlog.DecodeWith(e.Data, d.decode)
		if err != nil {
			return 0, fmt.Errorf("decode record at %d: %w", e.Offset, err)
		}
		if h := d.opts.Hooks[m.Topic]; h != nil {
			if err := h.Dispatch(b, &m); err != nil {
				return 0, fmt.Errorf("dispatch hook of %s at %d: %w", m.Topic, e.Offset, err)
			}
		}
		beforeDeletion := gone.covers(m.Topic, m.QueueID, e.Offset, m.QueueOffset)
		if !beforeDeletion && compaction.Compacts(m.Topic) {
			d.compactRecs = append(d.compactRecs, append([]byte(nil), e.Data...))
		}
		if err := dispatchRevived(d.opts.DB, b, &m); err != nil {
			d.log.Warn().Err(err).Int64("offset", e.Offset).Str("topic", m.Topic).Msg("revived record names no revive intent; indexed as it is")
		}
		tx := commitlog.TransactionType(m.SysFlag)
		if tx == commitlog.TransactionCommit && d.opts.CommitHook != nil {
			if err := d.opts.CommitHook.Dispatch(b, &m); err != nil {
				return 0, fmt.Errorf("commit hook at %d: %w", e.Offset, err)
			}
		}
		from := len(entries)
		entries = gone.filter(d.entriesOf(entries, &m, e), from)
		unqueued = unqueued || (!beforeDeletion && len(entries) == from)
		for _, ent := range entries[from:] {
			off := ent.Entry.QueueOffset
			q := queueIDOf(ent.Topic, ent.QueueID)
			i, ok := touched[q]
			if ok {
				queues[i].next = max(queues[i].next, off+1)
			} else {
				i = len(queues)
				touched[q] = i
				queues = append(queues, pendingQueue{topic: ent.Topic, qid: ent.QueueID, first: off, next: off + 1})
			}
			if collect {
				d.addCode(queues, i, ent.Entry.TagsCode)
			}
		}
		unqueued := noQueue(&m)
		if unqueued {
			noTopic++
			if noTopic == 1 {
				firstNoTopic = e.Offset
			}
		}
		if tx != commitlog.TransactionRollback && !d.opts.SkipKeyIndex && !beforeDeletion && !unqueued {
			keys, _ := commitlog.LookupProperty(m.Properties, "KEYS")
			uniq, _ := commitlog.LookupProperty(m.Properties, "UNIQ_KEY")
			kb.add(m.Topic, keys, uniq, e.Offset, m.StoreTimestamp)
		}
	}
	end := r.Offset()
	if stopped {
		end = d.stopAt
	}
	if end == d.next.Load() {
		return n, nil // only blank fillers or nothing
	}
	if d.opts.Replica && len(entries) > 0 {
		if err := d.checkRestart(entries, batchStart); err != nil {
			return 0, err
		}
	}
	if err := kb.flush(d.opts.DB, b); err != nil {
		return 0, err
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	if mustReread(gone, d.deleted.Load(), queues, unqueued) {
		return 0, errDeletedMidBatch
	}
	if len(d.compactRecs) > 0 {
		// Under writeMu, as a backfill (Compaction.CopyRecords) and a
		// topic's deletion run: they see no copy half made.
		if err := compaction.addRecords(b, d.compactRecs); err != nil {
			return 0, err
		}
	}
	if len(entries) > 0 {
		for _, f := range d.files {
			if err := f.Put(entries); err != nil {
				return 0, fmt.Errorf("write %d entries to the file ConsumeQueue: %w", len(entries), err)
			}
		}
	}
	if err := d.commitBatch(b, entries, end); err != nil {
		return 0, err
	}
	if noTopic > 0 {
		d.log.Warn().Int("records", noTopic).Int64("firstOffset", firstNoTopic).
			Msg("CommitLog records with an empty topic are left out of the ConsumeQueue and the key index: no client can read such a topic")
	}
	d.passDeleted(end)
	if len(queues) > 0 && d.next.Load() < d.opts.Log.MinOffset() {
		// Retention deleted records of this batch while it was read (the
		// reader holds the segment it is in): a correction of the
		// minima that ran before this commit missed its entries. Before
		// anyone is told the batch is in.
		if err := d.correctLagged(queues); err != nil {
			return 0, err
		}
	}
	// After the KV ConsumeQueue's lock is released: Assign, which holds
	// the offset table's lock, may read the ConsumeQueue (a queue not in
	// the table), which takes that lock.
	for _, q := range queues {
		if d.opts.Offsets != nil {
			d.opts.Offsets.Dispatched(q.topic, q.qid, q.next)
		}
	}
	if nt := d.opts.Notifier; nt != nil && !nt.Idle() {
		if !collect {
			// Somebody began to wait during the batch.
			for _, e := range entries {
				d.addCode(queues, touched[queueIDOf(e.Topic, e.QueueID)], e.Entry.TagsCode)
			}
		}
		d.groupCodes(queues)
		d.arrivals.begin(d.opts.Log, entries, touched, len(queues))
		for i, q := range queues {
			nt.NotifyArrival(Arrival{Topic: q.topic, QueueID: q.qid, First: q.first, Next: q.next,
				Codes: d.codes[q.from : q.from+q.ncodes : q.from+q.ncodes], records: &d.arrivals, queue: i})
		}
		d.arrivals.end()
	}
	// After the notifications: WaitFor's callers (tests among them) find
	// the held requests of what they waited for already told.
	d.next.Store(end)
	d.readerAhead = stopped
	d.wake(nil)
	return n, nil
}

// commitBatch adds the batch's entries to the KV ConsumeQueue's writes in
// b, with the progress records up to end, commits b and publishes the new
// queue ends, all under the KV ConsumeQueue's lock.
func (d *Dispatcher) commitBatch(b *pebble.Batch, entries []cq.Dispatch, end int64) error {
	var pending cqPending
	if d.kv != nil {
		d.kv.mu.Lock()
		defer d.kv.mu.Unlock()
		if len(entries) > 0 {
			p, err := d.kv.putBatch(b, entries)
			if err != nil {
				return err
			}
			pending = p
		}
		if err := b.Set(metaKey(metaCQWritten+LayoutKV), putInt64(end), nil); err != nil {
			return fmt.Errorf("record the kv ConsumeQueue's progress: %w", err)
		}
	}
	if err := b.Set(metaKey(metaDispatched), putInt64(end), nil); err != nil {
		return fmt.Errorf("record dispatched offset: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("commit dispatch batch up to %d: %w", end, err)
	}
	if d.kv != nil {
		d.kv.publish(pending)
	}
	return nil
}

// addCode adds a tag code of an entry of the batch's queue i, unless it
// repeats the queue's previous one.
func (d *Dispatcher) addCode(queues []pendingQueue, i int, code int64) {
	if pq := &queues[i]; pq.ncodes == 0 || pq.lastCode != code {
		pq.lastCode = code
		pq.ncodes++
		d.batchCodes = append(d.batchCodes, queueCode{i, code})
	}
}

// groupCodes puts the batch's tag codes in d.codes queue by queue (a
// counting sort by queue: no comparisons) and sets each queue's from.
func (d *Dispatcher) groupCodes(queues []pendingQueue) {
	total := 0
	for i := range queues {
		queues[i].from = total
		total += queues[i].ncodes
		queues[i].ncodes = 0 // counted again as the codes are placed
	}
	d.codes = slices.Grow(d.codes[:0], total)[:total]
	for _, c := range d.batchCodes {
		q := &queues[c.q]
		d.codes[q.from+q.ncodes] = c.code
		q.ncodes++
	}
}

// topicName returns the topic string for a record's topic bytes: the same
// string for every record of a topic, so that dispatching allocates none
// (past maxDispatchTopics names, a new string for each record of a topic
// not kept). A topic it has no string for yet goes to the NewTopic hook.
func (d *Dispatcher) topicName(b []byte) string {
	if t, ok := d.topics[string(b)]; ok {
		return t
	}
	t := string(b)
	if len(d.topics) < maxDispatchTopics {
		d.topics[t] = t
	}
	if d.opts.NewTopic != nil {
		d.opts.NewTopic(t)
	}
	return t
}

// entryOf is the ConsumeQueue entry of the record e decoded as m, if it
// belongs in one: transaction halves and rollbacks do not, nor a record
// with an empty topic (noQueue).
func (d *Dispatcher) entryOf(m *commitlog.Message, e commitlog.Entry) (cq.Dispatch, bool) {
	tx := commitlog.TransactionType(m.SysFlag)
	if tx != commitlog.TransactionNotType && tx != commitlog.TransactionCommit || noQueue(m) {
		return cq.Dispatch{}, false
	}
	return cq.Dispatch{Topic: m.Topic, QueueID: m.QueueID, Entry: cq.Entry{
		QueueOffset:    m.QueueOffset,
		PhyOffset:      e.Offset,
		Size:           e.Size,
		TagsCode:       d.tagsCode(m),
		StoreTimestamp: m.StoreTimestamp,
	}}, true
}

// noQueue reports whether the record m names no queue: its topic is
// empty. RocketMQ's decoder reads such a record (a topic length of 0) and
// its dispatch files it under consumequeue/<queueId>/, where a topic's
// directory goes, but no client reaches it: a send and a topic's creation
// refuse a blank topic (TopicValidator), a pull needs the topic's config
// and a client's query its route, which it cannot have. Neither this
// package's encoder nor RocketMQ's send path writes one: it comes from a
// foreign writer or damage. It is left out of every
// ConsumeQueue layout (the file one cannot name its directory) and of the
// key index; hooks still see it, as they see a deleted topic's records.
func noQueue(m *commitlog.Message) bool { return m.Topic == "" }

// entriesOf appends to out the ConsumeQueue entries of the record e
// decoded as m: its own (entryOf) and, under MultiDispatch, one in each
// light message queue its properties name, at the offset they give.
// Names that are not a valid light message queue's (meta.ValidLMQ), and
// offsets that are missing or not a number, are skipped.
func (d *Dispatcher) entriesOf(out []cq.Dispatch, m *commitlog.Message, e commitlog.Entry) []cq.Dispatch {
	ent, ok := d.entryOf(m, e)
	if !ok {
		return out
	}
	out = append(out, ent)
	if !d.opts.MultiDispatch || !meta.TopicAllowsLMQ(m.Topic) {
		return out
	}
	for name, off := range commitlog.MultiDispatched(m.Properties) {
		if !meta.ValidLMQ(name) || off < 0 {
			continue
		}
		lmq := ent
		lmq.Topic, lmq.QueueID, lmq.Entry.QueueOffset = name, 0, off
		out = append(out, lmq)
	}
	return out
}

// tagsCode is the ConsumeQueue tag code of a record: the delivery time for
// delay-level messages parked in SCHEDULE_TOPIC_XXXX, otherwise the Java
// hash of TAGS.
func (d *Dispatcher) tagsCode(m *commitlog.Message) int64 {
	return TagsCodeOf(m, d.opts.DelayLevels)
}
