package timer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// Store is what the service needs of the broker's message store.
type Store interface {
	// PutBatch stores messages of one topic and queue, in order, in one
	// append: all of them or none.
	PutBatch(ctx context.Context, msgs []*commitlog.Message) error
	// Read returns the record at a CommitLog offset; ok is false when
	// there is none there.
	Read(phy int64) (m commitlog.Message, ok bool, err error)
}

// tick is how often the service looks for due messages.
const tick = 100 * time.Millisecond

// deliverBatch bounds the entries one scan hands to delivery.
const deliverBatch = 256

// Service indexes parked timer messages (Hook) and delivers them when due
// (Run).
type Service struct {
	timers *kvindex.Timers
	store  Store
	log    zerolog.Logger
	now    func() time.Time
	// paused reports whether delivery is stopped (Options.Paused).
	paused func() bool
	// enqueued and dequeued are Options.Enqueued and Dequeued (no-ops
	// when unset).
	enqueued func(topic string, dueAfterBirth time.Duration)
	dequeued func(topic string)
	// tookIn and putN are Options.TakenIn and Put (no-ops when unset).
	tookIn func()
	putN   func(n int)
	// properties is Options.Properties (nil: Store.Read).
	properties func(phy int64) (string, bool, error)
	// precisionMs is Options.Precision: an entry is due once now passes
	// its TIMER_OUT_MS by it.
	precisionMs int64
	// rollWindowMs is Options.RollWindow (rollPoint).
	rollWindowMs int64
	// chunkBytes is chunkBytes (deliverBatch).
	chunkBytes int64
	// countPage is countPage (CountWaiting).
	countPage int

	// progress reads the timer progress of the Apache RocketMQ store the
	// index was opened on, once, for the first parked message dispatched.
	progress      func() (int64, bool, error)
	queueProgress func() (int64, bool, error)
	progressOnce  sync.Once
	// savedReadTime and saveReadTime are Options.SavedReadTime and
	// SaveReadTime.
	savedReadTime func() (int64, bool, error)
	saveReadTime  func(ms int64) error
	// oneByOne is Options.OneByOne (nil: batches).
	oneByOne    func() bool
	deliveredTo int64 // RocketMQ delivered what it had taken in and was due before this
	takenIn     int64 // RocketMQ had taken in the parked messages below this queue offset

	// The delivery rounds' position in the index (an entry key): every
	// entry before it was handled, so a round scans from it instead of
	// over the tombstones of everything delivered (DeliverDue's
	// goroutine only).
	cursorMs, cursorPhy int64
	// dispatched returns the dispatcher's committed offset (nil: every
	// indexed entry is visible).
	dispatched func() int64
	// late are entries the dispatcher indexed that may lie before the
	// cursor (due within lateWindow of when they were indexed); a round
	// moves the cursor back to those that are committed.
	lateMu sync.Mutex
	late   []kvindex.TimerEntry
	// lateLost is true when late was full (maxLate: no round emptied it,
	// as on a slave or while delivery is stopped) and entries were left
	// out; lateLostBelow is past the last left out. A round then scans
	// from the keyspace's start instead of the cursor.
	lateLost      bool
	lateLostBelow int64
	maxLate       int // the list's bound (maxLate; tests lower it)
	// cursorAt is cursorMs as the last round left it, for the hook: an
	// entry due before it is late whenever it is due (the clock stepped
	// back).
	cursorAt atomic.Int64

	// wm is the watermark after the last round, lowered with the cursor
	// when a round moves it back to late entries (lowerCursor). Lock
	// order: lateMu before wmMu.
	wmMu sync.Mutex
	wm   Watermark

	// readMs is the slot (a multiple of the precision) before which the
	// last round that left nothing due behind it had delivered everything
	// it could see: RocketMQ's currReadTimeMs, which its dequeue moves on
	// slot by slot with the clock, empty slots too, and which stays where
	// it is while delivery is stopped. Run starts it where the last run
	// saved it (or at the slot of its start); 0 before Run.
	// DeliveredBefore bounds it by what still waits.
	readMs atomic.Int64

	// hookedBelow is the end of the last record the hook saw: a record
	// before it is one a failed dispatch batch hands it again, not
	// counted twice (written by the hook alone).
	hookedBelow atomic.Int64
	// lastStoreMs is the store time of the last parked record the hook
	// indexed, and lastIndexedMs when it did (LastIndexed).
	lastStoreMs, lastIndexedMs atomic.Int64
	// waiting counts the messages waiting by topic (CountWaiting).
	waiting waitingCounts
	// hold holds new parked messages back (Options.StopEnqueue).
	hold hold
}

// Watermark tells which parked messages a Service has handled (delivered
// or dropped, and deleted from its index): every entry before the key
// (CursorMs, CursorPhy) in delivery order whose record lies below
// BelowPhy. A slave, whose index holds the entries its master handled
// (the deletions live in the master's index only), forgets them with it.
type Watermark struct {
	CursorMs  int64 `json:"cursorMs"`
	CursorPhy int64 `json:"cursorPhy"`
	BelowPhy  int64 `json:"belowPhy"`
}

// Covers reports whether the watermark speaks for e: it was handled.
func (w Watermark) Covers(e kvindex.TimerEntry) bool {
	before := e.DeliverMs < w.CursorMs || (e.DeliverMs == w.CursorMs && e.PhyOffset < w.CursorPhy)
	return before && e.PhyOffset < w.BelowPhy
}

// Watermark returns what the delivery rounds have handled so far.
func (s *Service) Watermark() Watermark {
	s.wmMu.Lock()
	defer s.wmMu.Unlock()
	return s.wm
}

// setWatermark records the cursor after a round whose late entries below
// committed were folded in: every entry before the cursor and below
// committed is gone from the index, but for those held back (from
// held.from on), which the cursor may have passed over.
func (s *Service) setWatermark(committed int64, held holdSnapshot) {
	s.cursorAt.Store(s.cursorMs)
	s.wmMu.Lock()
	s.wm = Watermark{CursorMs: s.cursorMs, CursorPhy: s.cursorPhy, BelowPhy: min(committed, held.from)}
	s.wmMu.Unlock()
}

// DeliveredBefore is a time before which the parked messages the service
// indexed were delivered, RocketMQ's lastReadTimeMs, which a RocketMQ
// slave copies from its master (GET_TIMER_CHECK_POINT) and resumes its
// timing wheel at when it is promoted. As RocketMQ's, it moves on with
// the clock while the slots are empty: it is the slot of the last round
// that left nothing due behind it (before the first, the read time the
// last run saved, as RocketMQ's timer starts at its checkpoint's, else
// the slot of Run's start; see Run),
// so it stays where it is while delivery is stopped; and it is never
// past the slot of a message still waiting: the earliest entry from the
// rounds' cursor on, or indexed behind it and not yet delivered (the late
// list). It is a multiple of the precision, as RocketMQ's slots are.
// Messages held back (timerStopEnqueue) are not taken in, as in
// RocketMQ, and do not hold it back: HeldFrom is the queue offset from
// which a RocketMQ slave takes them in.
//
// An entry the dispatcher has not committed yet may be due before it:
// read the timer topic's end first, and such a message lies past it (not
// taken in, for a RocketMQ slave).
func (s *Service) DeliveredBefore(now time.Time) (int64, error) {
	t := now.UnixMilli()
	if r := s.readMs.Load(); r > 0 {
		t = min(t, r)
	}
	// The late list and the watermark together: a round takes an entry
	// off the list as it moves the watermark's cursor back to it.
	s.lateMu.Lock()
	w := s.Watermark()
	heldFrom, released, ok := s.heldBounds()
	for _, e := range s.late {
		if e.PhyOffset < heldFrom {
			t = min(t, e.DeliverMs)
		}
	}
	if ok {
		t = min(t, released.DeliverMs) // released, the cursor not yet back at them
	}
	if s.lateLost {
		w.CursorMs, w.CursorPhy = 0, 0 // entries left out of the list lie anywhere
	}
	s.lateMu.Unlock()
	first, ok, err := s.firstTakenIn(w.CursorMs, w.CursorPhy, heldFrom)
	if err != nil {
		return 0, err
	}
	if ok {
		t = min(t, first)
	}
	return s.slotOf(t), nil
}

// heldScan bounds the entries DeliveredBefore reads past those held back
// to find the first one taken in.
const heldScan = 16 * deliverBatch

// firstTakenIn returns the delivery time of the first entry from
// (fromMs, fromPhy) on that is not held back (of a record before
// heldFrom); ok is false when there is none. Past heldScan held entries
// it returns the time of the last one read: the first taken in is not
// earlier.
func (s *Service) firstTakenIn(fromMs, fromPhy, heldFrom int64) (int64, bool, error) {
	page := deliverBatch
	if heldFrom == math.MaxInt64 {
		page = 1 // nothing held: the first entry
	}
	for read := 0; read < heldScan; {
		due, err := s.timers.DueFrom(fromMs, fromPhy, math.MaxInt64, page)
		if err != nil {
			return 0, false, err
		}
		for _, e := range due {
			if e.PhyOffset < heldFrom {
				return e.DeliverMs, true, nil
			}
		}
		if len(due) < page {
			return 0, false, nil
		}
		read += len(due)
		last := due[len(due)-1]
		fromMs, fromPhy = last.DeliverMs, last.PhyOffset+1
	}
	return fromMs, true, nil
}

// ReadBehind is how far the delivery rounds are behind the clock: now
// less DeliveredBefore, RocketMQ's getDequeueBehindMillis (now less
// currReadTimeMs), behind the runtime info's timerReadBehind and
// rocketmq_timer_dequeue_latency. Under a slot while the rounds keep up;
// it grows with a message overdue and while delivery is stopped, idle or
// not, as RocketMQ's does.
func (s *Service) ReadBehind(now time.Time) (time.Duration, error) {
	read, err := s.DeliveredBefore(now)
	if err != nil {
		return 0, err
	}
	return time.Duration(max(0, now.UnixMilli()-read)) * time.Millisecond, nil
}

// slotOf is the start of the slot of precision that ms falls in.
func (s *Service) slotOf(ms int64) int64 {
	if s.precisionMs <= 0 {
		return ms
	}
	return ms - ms%s.precisionMs
}

// ForgetDelivered deletes the entries w covers from the index: on a slave,
// the parked messages its master delivered. It returns how many went.
func (s *Service) ForgetDelivered(w Watermark) (int, error) {
	const batch = 4096
	gone := 0
	fromMs, fromPhy := int64(0), int64(0)
	for {
		due, err := s.timers.DueFrom(fromMs, fromPhy, w.CursorMs, batch)
		if err != nil {
			return gone, err
		}
		var covered []kvindex.TimerEntry
		for _, e := range due {
			if w.Covers(e) {
				covered = append(covered, e)
			}
		}
		if err := s.deleteWaiting(covered, func() ([]waitingDelta, error) { return s.readDeltas(covered) }); err != nil {
			return gone, err
		}
		gone += len(covered)
		if len(due) < batch {
			return gone, nil
		}
		last := due[len(due)-1]
		fromMs, fromPhy = last.DeliverMs, last.PhyOffset+1
	}
}

// lateWindow bounds how far ahead of its indexing an entry may be due and
// still be noted as late: the cursor, which never passes the clock,
// cannot pass an entry due later than that before its dispatch batch
// commits.
const lateWindow = time.Minute

// maxLate bounds the late list: past it, entries are left out and a
// round rescans the keyspace from its start.
const maxLate = 1 << 16

// Options are the optional parts of a Service.
type Options struct {
	// Progress returns the timer progress of an Apache RocketMQ store the
	// index was migrated from (kvindex.DB.RocketMQTimerProgress), and
	// QueueProgress how far that timer had taken in its topic
	// (kvindex.DB.RocketMQTimerQueueOffset; without it, all of it).
	Progress      func() (int64, bool, error)
	QueueProgress func() (int64, bool, error)
	// Dispatched returns the CommitLog offset before which the dispatcher
	// committed every record (kvindex.Dispatcher.Dispatched); without it
	// an indexed entry counts as committed at once.
	Dispatched func() int64
	// Paused reports whether delivery is stopped (RocketMQ's
	// timerStopDequeue): due messages stay parked, and are delivered,
	// late, once it reports false. Without it delivery never pauses.
	Paused func() bool
	// StopEnqueue reports whether new parked messages are held back
	// (RocketMQ's timerStopEnqueue, see hold.go): those dispatched while
	// it reports true stay parked, undelivered, until it reports false
	// again; those parked before are delivered when due. Without it
	// nothing is held.
	StopEnqueue func() bool
	// Properties, when set, returns the properties of the record at a
	// CommitLog offset, as Store.Read would (ok false: no record there),
	// without the rest: CountWaiting reads a million of them at a start.
	Properties func(phy int64) (props string, ok bool, err error)
	// Enqueued, when set, sees every parked message indexed: its
	// destination topic and how long after its birth it is due (the
	// broker's timer metrics). Dequeued sees every delivered one.
	Enqueued func(topic string, dueAfterBirth time.Duration)
	Dequeued func(topic string)
	// TakenIn, when set, is told of every parked record the hook takes in
	// (a message, a cancel, a rolled copy; once, as Enqueued), and Put of
	// the messages each round puts (delivered, or parked again at a roll
	// point): RocketMQ's enqueue_put and dequeue_put counts, behind the
	// runtime info's timerEnqueueTps and timerDequeueTps.
	TakenIn func()
	Put     func(n int)
	// Precision is timerPrecisionMs (Config.Precision; default 1 s). A
	// message parked at TIMER_OUT_MS is delivered once now reaches
	// TIMER_OUT_MS plus the precision, as RocketMQ reads a wheel slot only
	// after its time has passed: never before the time asked for (Park
	// rounds TIMER_OUT_MS down by up to one precision).
	Precision time.Duration
	// RollWindow is Config.RollWindow (default 2 days): a parked message
	// due further ahead of its store time is indexed within it and, when
	// that comes, parked again (rolled) instead of delivered.
	RollWindow time.Duration
	// SavedReadTime, when set, returns the read time Run saved last
	// (kvindex.DB.TimerReadTime): Run starts the read time there, as
	// RocketMQ's timer starts its currReadTimeMs at its checkpoint's
	// lastReadTimeMs, and SaveReadTime saves it every second while it
	// runs, and when it stops.
	SavedReadTime func() (int64, bool, error)
	SaveReadTime  func(ms int64) error
	// OneByOne, when set and reporting true, has each delivered message
	// put alone (Store.PutBatch of one): a store that sends each message
	// in a request of its own (an acting master's escape to another
	// broker group) could otherwise fail a batch after storing part of
	// it, and the round would deliver that part again.
	OneByOne func() bool
}

// New returns a timer service over the index's timer keyspace.
func New(timers *kvindex.Timers, store Store, opts Options, log zerolog.Logger) *Service {
	paused := opts.Paused
	if paused == nil {
		paused = func() bool { return false }
	}
	enqueued, dequeued := opts.Enqueued, opts.Dequeued
	if enqueued == nil {
		enqueued = func(string, time.Duration) {}
	}
	if dequeued == nil {
		dequeued = func(string) {}
	}
	tookIn, putN := opts.TakenIn, opts.Put
	if tookIn == nil {
		tookIn = func() {}
	}
	if putN == nil {
		putN = func(int) {}
	}
	def := DefaultConfig()
	precision, roll := opts.Precision, opts.RollWindow
	if precision <= 0 {
		precision = def.Precision
	}
	if roll <= 0 {
		roll = def.RollWindow
	}
	return &Service{timers: timers, store: store, progress: opts.Progress, queueProgress: opts.QueueProgress,
		savedReadTime: opts.SavedReadTime, saveReadTime: opts.SaveReadTime, oneByOne: opts.OneByOne,
		precisionMs: precision.Milliseconds(), rollWindowMs: roll.Milliseconds(), chunkBytes: chunkBytes, countPage: countPage,
		dispatched: opts.Dispatched, paused: paused, now: time.Now, takenIn: math.MaxInt64, maxLate: maxLate, hold: newHold(opts.StopEnqueue),
		enqueued: enqueued, dequeued: dequeued, tookIn: tookIn, putN: putN, properties: opts.Properties, log: log.With().Str("component", "timer").Logger()}
}

// Hook is the dispatcher hook of rmq_sys_wheel_timer: it indexes each
// parked message at its TIMER_OUT_MS (a record without a valid one is due
// at once), or, when that is a roll window or more after the record's
// store time, at a roll point within the window (rollPoint), where the
// delivery round parks it again. In a store migrated from Apache RocketMQ
// 5, a message RocketMQ had taken in (below its lastTimerQueueOffset) and
// that was due before its timer progress was delivered there and is left
// out; one it had not taken in is delivered, overdue or not, as RocketMQ
// would on restart.
//
// It also keeps what the timer metrics read: the store time of the last
// record indexed (LastIndexed), the count of messages waiting by topic
// once CountWaiting has run, and Options.Enqueued; a record a failed
// dispatch batch hands it again is indexed again but not counted again.
func (s *Service) Hook() kvindex.Hook {
	return kvindex.HookFunc(func(w *pebble.Batch, m *commitlog.Message) error {
		s.progressOnce.Do(s.readProgress)
		fresh := m.PhyOffset >= s.hookedBelow.Load()
		if fresh {
			s.hookedBelow.Store(m.PhyOffset + int64(m.StoreSize))
		}
		held, err := s.holdRecord(w, m)
		if err != nil {
			return err
		}
		if !held { // a held message is not taken in yet
			s.lastStoreMs.Store(m.StoreTimestamp)
			s.lastIndexedMs.Store(s.now().UnixMilli())
		}
		due := parkedDue(m)
		if due < s.deliveredTo && m.QueueOffset < s.takenIn {
			return nil
		}
		at := rollPoint(due, m.StoreTimestamp, s.rollWindowMs)
		if at <= s.now().Add(lateWindow).UnixMilli() || at < s.cursorAt.Load() {
			s.lateMu.Lock()
			if len(s.late) < s.maxLate {
				s.late = append(s.late, kvindex.TimerEntry{DeliverMs: at, PhyOffset: m.PhyOffset})
			} else {
				s.lateLost, s.lateLostBelow = true, max(s.lateLostBelow, m.PhyOffset+1)
			}
			s.lateMu.Unlock()
		}
		if err := s.timers.Add(w, kvindex.TimerEntry{DeliverMs: at, PhyOffset: m.PhyOffset, Size: m.StoreSize}); err != nil {
			return err
		}
		if !fresh {
			return nil
		}
		s.hooked(m.PhyOffset, m)
		s.tookIn()
		if _, rolled := commitlog.LookupProperty(m.Properties, PropRollTimes); !rolled {
			topic, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyRealTopic)
			s.enqueued(topic, time.Duration(due-m.BornTimestamp)*time.Millisecond)
		}
		return nil
	})
}

// LastIndexed returns the store time of the last parked record the hook
// indexed and when it indexed it, in Unix milliseconds (zeros before the
// first): how long a timer message waited for the dispatcher to index it
// (rocketmq_timer_enqueue_latency).
func (s *Service) LastIndexed() (storeMs, indexedMs int64) {
	// The hook writes the store time first: read after the time of
	// indexing, it is as new as that one at least.
	indexedMs = s.lastIndexedMs.Load()
	return s.lastStoreMs.Load(), indexedMs
}

// parkedDue is when a parked record is due: its TIMER_OUT_MS, else (no
// valid one) its store time.
func parkedDue(m *commitlog.Message) int64 {
	if v, ok := commitlog.LookupProperty(m.Properties, PropOutMs); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return m.StoreTimestamp
}

// rollPoint is where a record stored at stored and due at due is indexed:
// at due when that is less than a roll window after stored; else at a roll
// point within the window, where it is parked again (a fresh record that
// CommitLog retention keeps), as RocketMQ's TimerMessageStore.doEnqueue
// rolls it: half a window after stored when the rest after one window
// would be under a third of a window, else a whole window after stored.
// It depends on the record alone, so a slave and a re-dispatch index the
// same key.
func rollPoint(due, stored, window int64) int64 {
	if window <= 0 || due-stored < window {
		return due
	}
	if due-stored-window < window/3 {
		return stored + window/2
	}
	return stored + window
}

// readProgress reads the migrated store's timer progress, once.
func (s *Service) readProgress() {
	if s.progress == nil {
		return
	}
	ms, ok, err := s.progress()
	if err != nil {
		s.log.Warn().Err(err).Msg("read RocketMQ's timer progress; every parked message counts as waiting")
		return
	}
	if !ok {
		return
	}
	if s.queueProgress != nil {
		off, qok, err := s.queueProgress()
		if err != nil {
			s.log.Warn().Err(err).Msg("read how far RocketMQ's timer had read; every parked message counts as waiting")
			return
		}
		if qok {
			s.takenIn = off
		}
	}
	s.deliveredTo = ms
}

// Run delivers due messages every 100 ms until ctx ends, except while
// Options.Paused says delivery is stopped; a failed round is retried at
// the next tick, and logged the first time, then at most every
// repeatlog.DefaultInterval while it keeps failing. The read time
// (DeliveredBefore) starts where the last run saved it
// (Options.SavedReadTime), as RocketMQ's timer starts at its
// checkpoint's, or at the slot of its start without one: stopped from
// there, it stays. It is saved every second and at the end.
func (s *Service) Run(ctx context.Context) {
	s.readMs.CompareAndSwap(0, s.startReadTime())
	saved, savedAt := int64(0), time.Time{}
	save := func() {
		r := s.readMs.Load()
		if s.saveReadTime == nil || r == saved {
			return
		}
		if err := s.saveReadTime(r); err != nil {
			s.log.Warn().Err(err).Msg("save the timer's read time")
			return
		}
		saved, savedAt = r, s.now()
	}
	fails := repeatlog.New(s.log, repeatlog.DefaultInterval, s.now)
	periodic.Run(ctx, tick, func(ctx context.Context) {
		s.round(ctx, fails)
		if s.now().Sub(savedAt) >= readTimeSaveEvery {
			save()
		}
	})
	save()
}

// round is one delivery round of Run. A failed round is logged through
// fails: a put that keeps failing (a full disk, an escape no other
// broker group takes) fails every round, 10 a second.
func (s *Service) round(ctx context.Context, fails *repeatlog.Limiter) {
	s.settleHold()
	if s.paused() {
		return
	}
	if _, err := s.DeliverDue(ctx); err != nil {
		if ctx.Err() == nil {
			fails.Failed().Err(err).Msg("deliver timer messages")
		}
		return
	}
	fails.Recovered().Msg("deliver timer messages: delivering again")
}

// ForgetReadTime forgets the read time of a Run that ended, so that the
// next Run starts at the saved one (Options.SavedReadTime) and
// DeliveredBefore goes by what waits meanwhile: a slave that acted as
// master and follows its master again keeps the read time its master
// reports, not the one its own run left. Call it after Run returned.
func (s *Service) ForgetReadTime() { s.readMs.Store(0) }

// readTimeSaveEvery is how often Run saves the read time (RocketMQ's
// timerFlushIntervalMs).
const readTimeSaveEvery = time.Second

// startReadTime is where Run starts the read time: the saved one, no
// later than the slot of now, and no earlier than RocketMQ's timer
// starts its wheel (the slots of 7 days before now but 60, a slot being
// the precision), or the slot of now without one.
func (s *Service) startReadTime() int64 {
	now := s.slotOf(s.now().UnixMilli())
	if s.savedReadTime == nil {
		return now
	}
	ms, ok, err := s.savedReadTime()
	if err != nil {
		s.log.Warn().Err(err).Msg("read the timer's saved read time; starting it now")
		return now
	}
	if !ok || ms <= 0 {
		return now
	}
	earliest := now - (wheelSlots-wheelBlankSlots)*max(s.precisionMs, 1)
	return min(max(s.slotOf(ms), earliest), now)
}

// wheelSlots and wheelBlankSlots are RocketMQ's timer wheel's slots (7
// days of them) and the blank ones it keeps ahead: a restarted timer's
// read time is no earlier than the slots of wheelSlots-wheelBlankSlots
// before now (TimerMessageStore.recover).
const (
	wheelSlots      = 7 * 24 * 3600
	wheelBlankSlots = 60
)

// DeliverDue stores every message due by now in its real topic and queue
// and returns how many it delivered. A due message carrying
// TIMER_DEL_UNIQKEY (REAL_TOPIC+"+"+UNIQ_KEY of a timer message due at
// the same time) cancels that message and is not delivered itself, as in
// RocketMQ. An entry whose record left the CommitLog, or lost its
// destination, is dropped with a log line.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	delivered := 0
	for ctx.Err() == nil {
		now := s.now()
		committed, held := s.lowerCursor()
		due, err := s.timers.DueFrom(s.cursorMs, s.cursorPhy, now.UnixMilli()-s.precisionMs, deliverBatch)
		if err != nil {
			return delivered, err
		}
		if len(due) == 0 {
			s.setWatermark(committed, held)
			s.readMs.Store(s.slotOf(now.UnixMilli()))
			return delivered, nil
		}
		full := len(due) == deliverBatch
		if full {
			due = wholeTimes(due)
			if due[0].DeliverMs == due[len(due)-1].DeliverMs {
				// One delivery time fills the batch: read the rest of it,
				// so a cancel after the first deliverBatch of its time
				// still meets its message, as RocketMQ reads a whole slot.
				if due, err = s.wholeSlot(due); err != nil {
					return delivered, err
				}
			}
		}
		n := 0
		take := s.passHeld(due, held)
		if len(take) > 0 {
			n, err = s.deliverBatch(ctx, take, now)
		}
		if err == nil && len(take) < len(due) {
			// Every entry taken was handled: the cursor passes over the
			// held ones after them too (passHeld noted the first).
			last := due[len(due)-1]
			s.cursorMs, s.cursorPhy = last.DeliverMs, last.PhyOffset+1
		}
		s.setWatermark(committed, held)
		delivered += n
		if err != nil {
			return delivered, err
		}
		if !full {
			s.readMs.Store(s.slotOf(now.UnixMilli()))
			return delivered, nil
		}
	}
	return delivered, ctx.Err()
}

// deliverBatch delivers due entries in order and deletes the entries it
// handled; on a failed put it stops there, and the rest wait for the next
// round. It puts the records in chunks of at most chunkBytes, so a slot
// of many large messages is not held in memory at once. A first pass
// learns what each entry is (a roll, a cancel, a message cancelled or
// delivered already) and keeps the records of the first chunk, which is
// then put as read; a later chunk's records are read again.
func (s *Service) deliverBatch(ctx context.Context, due []kvindex.TimerEntry, now time.Time) (int, error) {
	kinds, kept, deltas, err := s.classify(due, s.chunkEnd(due, 0))
	if err != nil {
		return 0, err
	}
	handled := make([]bool, len(due))
	for i, k := range kinds {
		handled[i] = k == dueSkip // dropped, cancelled, delivered by a copy: nothing to put
	}
	delivered := 0
	var putErr error
	for from := 0; from < len(due) && putErr == nil; {
		to := s.chunkEnd(due, from)
		var n int
		n, putErr = s.deliverChunk(ctx, due[from:to], kinds[from:to], handled[from:to], kept, now)
		kept = nil // the first chunk's records only
		delivered += n
		from = to
	}
	var done []kvindex.TimerEntry
	var doneDeltas []waitingDelta
	for i, h := range handled {
		if h {
			done = append(done, due[i])
			doneDeltas = append(doneDeltas, deltas[i])
		}
	}
	if err := s.deleteWaiting(done, func() ([]waitingDelta, error) { return doneDeltas, nil }); err != nil {
		return delivered, err
	}
	s.advanceCursor(due, handled)
	return delivered, putErr
}

// chunkEnd returns where the chunk of due starting at from ends: after
// as many entries as fit in chunkBytes of records, one at least.
func (s *Service) chunkEnd(due []kvindex.TimerEntry, from int) int {
	to, bytes := from, int64(0)
	for to < len(due) && (to == from || bytes+int64(due[to].Size) <= s.chunkBytes) {
		bytes += int64(due[to].Size)
		to++
	}
	return to
}

// chunkBytes bounds the parked records one chunk of a round reads and
// puts together, and those the round's first pass keeps for its first
// chunk (Service.chunkBytes; tests lower it).
const chunkBytes = 32 << 20

// dueKind is what a round does with a due entry.
type dueKind uint8

const (
	dueSkip    dueKind = iota // nothing to put: dropped, a cancel, cancelled, or a copy of one delivered
	dueDeliver                // put in its real topic and queue
	dueRoll                   // at a roll point: parked again
)

// classify reads the records of a round's entries and says what to do
// with each. A cancel reaches the message it names at its own delivery
// time only, as in RocketMQ's timing wheel, whatever else a round holds.
// Apache RocketMQ parks a message due further ahead than its timing
// wheel again when the wheel comes round (TIMER_ROLL_TIMES), as rocketkv
// does at its roll points, so a store can hold a message twice at one
// delivery time (a migrated one, or a crash between a roll and its
// entry's deletion): only the first is delivered. kept holds the records
// read of the first keep entries that are to be put (nil for the others),
// for the round to put them without reading them again; deltas what each
// entry counts among the messages waiting (CountWaiting).
func (s *Service) classify(due []kvindex.TimerEntry, keep int) (kinds []dueKind, kept []*commitlog.Message, deltas []waitingDelta, err error) {
	type timeKey struct {
		ms  int64
		key string
	}
	kinds = make([]dueKind, len(due))
	kept = make([]*commitlog.Message, keep)
	deltas = make([]waitingDelta, len(due))
	keys := make([]string, len(due))
	cancelled := map[timeKey]bool{}
	rolled := map[string]bool{} // cancel keys of rolled messages
	for i, e := range due {
		m, ok, err := s.readDue(e)
		if err != nil {
			return nil, nil, nil, err
		}
		if !ok {
			continue
		}
		deltas[i] = waitingDeltaOf(m.Properties)
		if i < keep {
			kept[i] = &m
		}
		if parkedDue(&m) > e.DeliverMs {
			// A roll point (Hook): parked again, a cancel too, even when
			// overdue by now, so that it meets its cancel at its time.
			kinds[i] = dueRoll
			continue
		}
		if key, ok := commitlog.LookupProperty(m.Properties, PropDeleteKey); ok {
			cancelled[timeKey{e.DeliverMs, key}] = true
			if i < keep {
				kept[i] = nil
			}
			continue
		}
		keys[i] = cancelKey(&m)
		if _, ok := commitlog.LookupProperty(m.Properties, PropRollTimes); ok {
			rolled[keys[i]] = true
		}
		kinds[i] = dueDeliver
	}
	delivering := map[string]bool{}
	for i, e := range due {
		if kinds[i] != dueDeliver {
			continue
		}
		k := keys[i]
		switch {
		case rolled[k] && delivering[k]:
			kinds[i] = dueSkip // a copy of a message this round delivers
		case cancelled[timeKey{e.DeliverMs, k}]:
			kinds[i] = dueSkip
		case rolled[k]:
			delivering[k] = true
		}
		if kinds[i] == dueSkip && i < keep {
			kept[i] = nil
		}
	}
	return kinds, kept, deltas, nil
}

// readDue reads the parked record of a due entry; ok is false (with a log
// line) when it is damaged or gone from the CommitLog: the entry is
// dropped.
func (s *Service) readDue(e kvindex.TimerEntry) (commitlog.Message, bool, error) {
	m, ok, err := s.store.Read(e.PhyOffset)
	if commitlog.NoRecordAt(err) {
		s.log.Error().Err(err).Int64("phyOffset", e.PhyOffset).Msg("timer message damaged in the CommitLog; dropped")
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read timer message at %d: %w", e.PhyOffset, err)
	}
	if !ok {
		s.log.Warn().Int64("phyOffset", e.PhyOffset).Msg("timer message gone from the CommitLog before its time; dropped")
	}
	return m, ok, nil
}

// deliverChunk puts the entries of a chunk to deliver or roll, marking in
// handled those done with, and returns how many it delivered (rolls are
// not counted). It reads the records of those kept does not hold (kept
// may be nil). The messages of one queue, in their order, go in one
// append; queues are independent, so the order across them need not be
// kept. On a failed put it stops: the rest wait for the next round.
func (s *Service) deliverChunk(ctx context.Context, due []kvindex.TimerEntry, kinds []dueKind, handled []bool, kept []*commitlog.Message, now time.Time) (int, error) {
	type run struct {
		idx  []int
		msgs []*commitlog.Message
	}
	var runs []*run
	byQueue := map[string]*run{}
	for i, e := range due {
		if kinds[i] == dueSkip {
			continue
		}
		var m *commitlog.Message
		if i < len(kept) && kept[i] != nil {
			m = kept[i]
		} else {
			rec, ok, err := s.readDue(e)
			if err != nil {
				return 0, err
			}
			if !ok {
				handled[i] = true
				continue
			}
			m = &rec
		}
		var out *commitlog.Message
		var err error
		if kinds[i] == dueRoll {
			out = rolledCopy(m)
		} else if out, err = deliveredMessage(m, now, s.precisionMs); err != nil {
			s.log.Warn().Err(err).Int64("phyOffset", e.PhyOffset).Msg("timer message without a destination; dropped")
			handled[i] = true
			continue
		}
		k := out.Topic + "\x00" + strconv.Itoa(int(out.QueueID))
		r := byQueue[k]
		if r == nil || len(r.msgs) == maxAppendBatch {
			r = &run{}
			byQueue[k] = r
			runs = append(runs, r)
		}
		r.idx = append(r.idx, i)
		r.msgs = append(r.msgs, out)
	}
	delivered := 0
	for _, r := range runs {
		entries := make([]kvindex.TimerEntry, len(r.idx))
		for j, i := range r.idx {
			entries[j] = due[i]
		}
		done, n, err := s.put(ctx, entries, r.msgs)
		if r.msgs[0].Topic != meta.TimerTopic {
			delivered += n // not rolls
		}
		for _, i := range r.idx[:done] {
			handled[i] = true
		}
		if err != nil {
			return delivered, err // the rest of this run and the later ones wait for the next round
		}
	}
	return delivered, nil
}

// maxAppendBatch bounds the messages of one append.
const maxAppendBatch = 64

// put stores a run of delivered messages of one queue. A run the store
// refuses for a message itself is stored one by one, dropping (with an
// error line) those that can never be stored. It returns how many of the
// run's first messages are done with (stored or dropped) and how many
// were stored; on an error the messages after the done ones wait for the
// next round.
func (s *Service) put(ctx context.Context, entries []kvindex.TimerEntry, msgs []*commitlog.Message) (done, stored int, err error) {
	if len(msgs) > 1 && (slices.ContainsFunc(msgs, multiDispatched) || (s.oneByOne != nil && s.oneByOne())) {
		// Only a message stored alone also goes to the light message
		// queues it names (as RocketMQ re-puts each timer message alone).
		return s.putEach(ctx, entries, msgs)
	}
	err = s.store.PutBatch(ctx, msgs)
	if err == nil {
		s.putN(len(msgs))
		for _, m := range msgs {
			if m.Topic != meta.TimerTopic { // a roll stays parked
				s.dequeued(m.Topic)
			}
		}
		return len(msgs), len(msgs), nil
	}
	if !commitlog.Unstorable(err) || len(msgs) == 1 {
		if commitlog.Unstorable(err) {
			s.log.Error().Err(err).Int64("phyOffset", entries[0].PhyOffset).Str("topic", msgs[0].Topic).
				Msg("timer message can never be stored in its topic; dropped")
			return 1, 0, nil
		}
		return 0, 0, fmt.Errorf("deliver %d timer messages to %s/%d: %w", len(msgs), msgs[0].Topic, msgs[0].QueueID, err)
	}
	return s.putEach(ctx, entries, msgs)
}

// putEach is put of each message alone, in order, up to the first error.
func (s *Service) putEach(ctx context.Context, entries []kvindex.TimerEntry, msgs []*commitlog.Message) (done, stored int, err error) {
	for i := range msgs {
		d, n, err := s.put(ctx, entries[i:i+1], msgs[i:i+1])
		done += d
		stored += n
		if err != nil {
			return done, stored, err
		}
	}
	return done, stored, nil
}

// multiDispatched reports whether m names light message queues to be
// dispatched to as well (INNER_MULTI_DISPATCH).
func multiDispatched(m *commitlog.Message) bool {
	v, ok := commitlog.LookupProperty(m.Properties, commitlog.PropertyMultiDispatch)
	return ok && v != ""
}

// lowerCursor moves the cursor back to the committed late entries that
// lie before it and to the held entries a lifted hold released, and
// returns the committed offset it took (every entry below it was indexed,
// and is now at or after the cursor if it was not handled) and the hold
// the round is to respect.
func (s *Service) lowerCursor() (int64, holdSnapshot) {
	committed := int64(math.MaxInt64)
	if s.dispatched != nil {
		committed = s.dispatched()
	}
	s.lateMu.Lock()
	defer s.lateMu.Unlock()
	if s.lateLost {
		// Entries were left out of the list: scan from the start (what
		// was delivered is gone from the keyspace), until every entry
		// left out is committed and so seen by the scan.
		s.cursorMs, s.cursorPhy = 0, 0
		s.lateLost = s.lateLostBelow > committed
		if !s.lateLost {
			s.log.Warn().Int("late", len(s.late)).Msg("timer entries indexed behind the delivery position overflowed their list; rescanned from the start")
		}
	}
	keep := s.late[:0]
	for _, e := range s.late {
		if e.PhyOffset >= committed {
			keep = append(keep, e)
			continue
		}
		if e.DeliverMs < s.cursorMs || (e.DeliverMs == s.cursorMs && e.PhyOffset < s.cursorPhy) {
			s.cursorMs, s.cursorPhy = e.DeliverMs, e.PhyOffset
		}
	}
	s.late = keep
	held := s.holdFor()
	s.wmMu.Lock()
	if s.cursorMs < s.wm.CursorMs || (s.cursorMs == s.wm.CursorMs && s.cursorPhy < s.wm.CursorPhy) {
		// What the round is to deliver is before the watermark too, from
		// now on (DeliveredBefore reads the two under lateMu).
		s.wm.CursorMs, s.wm.CursorPhy = s.cursorMs, s.cursorPhy
	}
	s.wmMu.Unlock()
	return committed, held
}

// advanceCursor moves the cursor past a round's entries: to the first
// one left for the next round, or after the last.
func (s *Service) advanceCursor(due []kvindex.TimerEntry, handled []bool) {
	for i, h := range handled {
		if !h {
			s.cursorMs, s.cursorPhy = due[i].DeliverMs, due[i].PhyOffset
			return
		}
	}
	last := due[len(due)-1]
	s.cursorMs, s.cursorPhy = last.DeliverMs, last.PhyOffset+1
}

// maxSlot bounds the entries of one delivery time a round reads
// together (wholeSlot); a cancel past it in a larger slot may miss its
// message.
const maxSlot = 64 * deliverBatch

// wholeSlot extends due, a full batch of one delivery time, with the
// other entries of that time, up to maxSlot.
func (s *Service) wholeSlot(due []kvindex.TimerEntry) ([]kvindex.TimerEntry, error) {
	for len(due) < maxSlot {
		last := due[len(due)-1]
		more, err := s.timers.DueFrom(last.DeliverMs, last.PhyOffset+1, last.DeliverMs, deliverBatch)
		if err != nil {
			return nil, err
		}
		due = append(due, more...)
		if len(more) < deliverBatch {
			break
		}
	}
	return due, nil
}

// wholeTimes drops from a full batch the entries of its last delivery
// time, which may go on past the batch: a cancel and the message it names
// share their delivery time, and must be in one batch. A batch of one
// delivery time is kept whole.
func wholeTimes(due []kvindex.TimerEntry) []kvindex.TimerEntry {
	last := due[len(due)-1].DeliverMs
	i := len(due)
	for i > 0 && due[i-1].DeliverMs == last {
		i--
	}
	if i == 0 {
		return due
	}
	return due[:i]
}

// cancelKey is what a TIMER_DEL_UNIQKEY names a parked message by.
func cancelKey(parked *commitlog.Message) string {
	topic, _ := commitlog.LookupProperty(parked.Properties, commitlog.PropertyRealTopic)
	uniq, _ := commitlog.LookupProperty(parked.Properties, commitlog.PropertyUniqID)
	return topic + "+" + uniq
}

// rolledCopy is a parked record parked again at a roll point: the same
// message in the timer topic, TIMER_OUT_MS kept, TIMER_ROLL_TIMES counted
// up (RocketMQ's name and count).
func rolledCopy(parked *commitlog.Message) *commitlog.Message {
	times := 1
	if v, ok := commitlog.LookupProperty(parked.Properties, PropRollTimes); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n < math.MaxInt32 {
			times = n + 1
		}
	}
	return putCopy(parked, parked.Topic, parked.QueueID,
		commitlog.RewriteProperties(parked.Properties, nil, [2]string{PropRollTimes, strconv.Itoa(times)}))
}

// putCopy is the message to put for a parked record: its fields, in topic
// and queue, with properties props. Its PREPARED TX OFFSET is 0, as
// RocketMQ's timer builds the messages it stores: a committed
// transactional message keeps its COMMIT bits but not the offset of its
// half.
func putCopy(parked *commitlog.Message, topic string, queue int32, props string) *commitlog.Message {
	return &commitlog.Message{
		Topic:          topic,
		QueueID:        queue,
		Flag:           parked.Flag,
		SysFlag:        parked.SysFlag,
		BornTimestamp:  parked.BornTimestamp,
		BornHost:       parked.BornHost,
		ReconsumeTimes: parked.ReconsumeTimes,
		Body:           parked.Body,
		Properties:     props,
	}
}

// errDropped marks a parked message that cannot be delivered.
var errDropped = errors.New("dropped")

// deliveredMessage is the message a parked timer message becomes when
// due: its real topic and queue, with TIMER_ENQUEUE_MS (when it was
// parked, rounded down to precisionMs as RocketMQ's timer writes the time
// it took the message in) and TIMER_DEQUEUE_MS (now). REAL_TOPIC and
// REAL_QID stay, as on RocketMQ's: its timer builds the properties string
// it stores before it clears them from the message's map.
func deliveredMessage(parked *commitlog.Message, now time.Time, precisionMs int64) (*commitlog.Message, error) {
	topic, qid, ok := commitlog.RealDestination(parked.Properties)
	if !ok {
		return nil, fmt.Errorf("%w: no valid REAL_TOPIC/REAL_QID", errDropped)
	}
	enqueued := parked.StoreTimestamp
	if precisionMs > 0 {
		enqueued -= enqueued % precisionMs
	}
	return putCopy(parked, topic, qid,
		commitlog.RewriteProperties(parked.Properties, nil,
			[2]string{PropEnqueueMs, strconv.FormatInt(enqueued, 10)},
			[2]string{PropDequeueMs, strconv.FormatInt(now.UnixMilli(), 10)})), nil
}
