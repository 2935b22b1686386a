package pop

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// Init modes of a pop for a group that has no position on a queue yet
// (RocketMQ's ConsumeInitMode).
const (
	// InitMin starts at the queue's minimum offset.
	InitMin int32 = 0
	// InitMax starts at the queue's last message (max offset - 1).
	InitMax int32 = 1
)

// MaxPopMessages is the largest maxMsgNums a pop may ask for.
const MaxPopMessages = 32

// Filter selects messages of the requested topic, first by the tag code
// kept in the ConsumeQueue, then by the record itself (so two tags with
// the same hash do not leak into each other). A nil Filter takes
// everything.
type Filter interface {
	MatchesCode(tagsCode int64) bool
	MatchesRecord(rec []byte) bool
}

// Broker is what the service needs from the broker that owns it.
type Broker interface {
	// ReadQueueNums returns a topic's read queue count; ok is false when
	// the topic does not exist.
	ReadQueueNums(topic string) (n int, ok bool, err error)
	// EnsureTopic creates a system topic (pop-retry or DLQ topic) with one
	// queue and read/write permission when it does not exist.
	EnsureTopic(topic string) error
	// RetryMaxTimes returns the group's retryMaxTimes; ok is false when
	// the group does not exist and is not created for it (RocketMQ's
	// findSubscriptionGroupConfig with autoCreateSubscriptionGroup off):
	// revive then drops the group's checkpoints.
	RetryMaxTimes(group string) (times int32, ok bool, err error)
	// Put appends messages of one topic and queue (revive), assigning
	// queue offsets; it returns once they are in the CommitLog, with the
	// append's status (a flush or the slaves late: stored all the same).
	Put(ctx context.Context, msgs []*commitlog.Message) (commitlog.AppendStatus, error)
	// WaitDispatched returns once every record in the CommitLog when it
	// was called is indexed: what a revive put stored is then found in
	// the ConsumeQueue.
	WaitDispatched(ctx context.Context) error
}

// OffsetTable is the committed consumer offset table (keyspace 0x30)
// as the service reads and writes it: a broker's
// *kvindex.ConsumerOffsets, or a test's wrapper that fails chosen reads.
type OffsetTable interface {
	// Get returns a group's committed offset on a queue; ok is false
	// when it has none.
	Get(group, topic string, queueID int32) (offset int64, ok bool, err error)
	// Set commits a group's offset on a queue.
	Set(group, topic string, queueID int32, offset int64) error
}

var _ OffsetTable = (*kvindex.ConsumerOffsets)(nil)

// Config configures a Service.
type Config struct {
	DB  *kvindex.DB
	CQ  cq.Store
	Log *commitlog.Log
	// Offsets is the committed consumer offset table (0x30).
	Offsets OffsetTable
	Broker  Broker
	// BrokerName goes into handles.
	BrokerName string
	// StoreHost is the born and store host of revived messages.
	StoreHost netip.AddrPort
	// RetryTopicV2 makes revive write V2 pop-retry topics
	// (%RETRY%<group>+<topic>), RocketMQ's enableRetryTopicV2; pops then
	// read them too.
	RetryTopicV2 bool
	// ReadRetryV1 makes pops read V1 pop-retry topics
	// (retrieveMessageFromPopRetryTopicV1, default true in RocketMQ).
	ReadRetryV1 bool
	// RetryFirstPercent is the share, in percent, of a group's
	// non-orderly pops of a topic that read its pop-retry topics before
	// the topic itself (RocketMQ's popFromRetryProbability; the others
	// read them after, when the topic leaves room). Zero means RocketMQ's
	// default, 20; a negative value, never first. The pops that read them
	// first are spread evenly over the group's requests.
	RetryFirstPercent int
	// ReviveBatch bounds the records one revive round handles (default
	// 4096).
	ReviveBatch int
	// ReviveIdle is the longest the revive loop sleeps when nothing is due
	// (default 100 ms); it also wakes at the next deadline.
	ReviveIdle time.Duration
	// GiveBackWait bounds how long a failed revive put waits for the
	// dispatcher to index what it stored before the messages it did not
	// store go back to their checkpoints (default 30 s). Past it the
	// revive batch stays and is settled before a later round, once the
	// dispatcher has caught up.
	GiveBackWait time.Duration
	// InMemory reports whether the CommitLog record of size bytes at
	// phyOffset is in the page cache. With it, a group's first pop of a
	// queue with InitMax starts at 0 instead of the last message when the
	// queue's first message is (RocketMQ's initPopOffsetByCheckMsgInMem,
	// on by default): a consumer group created just after its topic's
	// first messages gets them. nil always starts at the last message.
	InMemory func(phyOffset int64, size int32) bool
	// Compaction, when set, holds the copies of compacted topics' messages:
	// pops of such a topic read them, as RocketMQ's pops read its
	// compaction store.
	Compaction *kvindex.Compaction
	// OnQueueReady is called when an orderly ack, the end of an orderly
	// batch's lock, a revive, an ack or a change of the setting that
	// releases a queue the in-flight threshold stopped or, on a slave, the
	// end of the invisible time of what its read-only pops handed out may
	// have made messages of a queue poppable for group (to wake the
	// group's held pops, as RocketMQ's ackOrderly and lock release notify
	// by topic, group and queue; a negative queueID: every queue of the
	// topic); it must not block. For a queue of one of group's pop-retry
	// topics it is called a second time, with the topic it retries and
	// queueID -1: the pops that read that queue are held under that topic
	// (wakeRetryOrigin).
	OnQueueReady func(topic, group string, queueID int32)
	// DropExhaustedRevives drops a message whose revive failed
	// maxReviveAttempts times (its record unreadable, or its put to the
	// pop-retry topic refused) instead of retrying it every 2 h for ever
	// (RocketMQ's skipWhenCKRePutReachMaxTimes).
	DropExhaustedRevives bool
	// ReturnActualRetryTopic answers a pop with its pop-retry messages
	// under their own topic and without a POP_CK property, instead of
	// under the topic popped with their handle in POP_CK
	// (popResponseReturnActualRetryTopic).
	ReturnActualRetryTopic bool
	// QuietOrderLockRelease leaves the pops held on an orderly queue
	// asleep when its batch's lock runs out (RocketMQ's
	// enableNotifyAfterPopOrderLockRelease=false); they then pop it at
	// the end of their poll time. An ack that frees the queue wakes them
	// either way, as RocketMQ's ackOrderly does.
	QuietOrderLockRelease bool
	// MaxTransferBytes bounds the bytes of the messages a pop takes from
	// one queue, the first always taken (RocketMQ's
	// maxTransferBytesOnMessageInMemory, at which its pops stop reading a
	// queue; zero means its default, 256 KiB).
	MaxTransferBytes int
	// InFlightLimit returns the in-flight threshold of non-orderly pops
	// and whether it is on (RocketMQ's popInflightMessageThreshold and
	// enablePopMessageThreshold): a pop skips a queue of which the group
	// has more messages in flight (threshold.go). Called for each queue a
	// pop reads, so it must be cheap; nil is always off.
	InFlightLimit func() (limit int64, on bool)
	// StageAhead turns the staged revive on (stage.go): revive copies
	// messages whose deadline comes within StageAhead to the pop-retry
	// topic before it, when re-putting them at their deadline would make
	// them late (a burst of deadlines), and pops hand the copies out from
	// their deadline on. Zero: off.
	StageAhead time.Duration
	// Observer is told of the events RocketMQ's POP metrics count; nil
	// tells nobody.
	Observer Observer
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger zerolog.Logger
}

// Service is the POP service: pops messages and records them in flight,
// acknowledges them, changes their invisible time, and revives the expired
// ones through the pop-retry topic. All of its state is in the database
// (kvindex POP keyspaces); answers that acknowledge a client are written
// durably before they are returned.
//
// Concurrency: every state change of a group's queue happens under a lock
// striped by (group, topic, queue), and is committed to Pebble before the
// lock is released (unsynced, so that conflicting changes commit in lock
// order); the caller's answer waits for one WAL sync after the lock is
// released, which concurrent requests share. A crash therefore keeps a
// prefix of the committed changes and every answered one.
//
// One goroutine, started by Start and stopped by Close, runs revive.
type Service struct {
	cfg   Config
	obs   Observer
	store *kvindex.PopStore
	log   zerolog.Logger
	seed  maphash.Seed
	locks [lockStripes]sync.Mutex

	reqMu    sync.Mutex
	reqCount map[string]uint64

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// orderWakes wakes held pops when an orderly lock runs out (nil under
	// QuietOrderLockRelease).
	orderWakes *orderWakes
	// handed is what a slave's read-only pops handed out (PopReadOnly).
	handed *handedOut
	// slaveOrd is what a slave's orderly pops, acks and changes of
	// invisible time keep (readonlyorder.go).
	slaveOrd *slaveOrders

	// stopped are the queues the in-flight threshold stops
	// (threshold.go).
	stopped stoppedQueues
	// slaveFlight counts what a slave's non-orderly pops handed out and
	// is in flight, for the threshold on a slave (slaveinflight.go).
	slaveFlight *slaveInFlight

	lateness lateness
	// stage is the staged revive's state (revive goroutine only), staged
	// counts the messages it copied, and gates wakes pops held on a
	// pop-retry queue when its next staged copy may be handed out.
	stage  stager
	staged atomic.Int64
	gates  *queueTimers
	// cursor is the revive loop's lower bound: no record is due before
	// it, so scans skip the tombstones below it. Writers of a deadline
	// report it to lowDeadline once their batch is committed
	// (noteDeadline), and each revive round first lowers the cursor to the
	// lowest deadline reported since the last round. A record is then
	// either committed before a round's scan starts (the scan sees it) or
	// reported to the next round, so a deadline written behind the cursor
	// (an invisible time of 0 after a slow lock wait, a change of
	// invisible time) is revived by the next round at the latest.
	cursor      int64
	lowDeadline atomic.Int64
	revived     atomic.Int64
	dlq         atomic.Int64
	undecodable atomic.Int64

	// reviving is set while the revive loop runs (Start to Close, or
	// RunActingRevive), and scanFrom is where its next round scans from:
	// ReviveBacklog reads them from other goroutines.
	reviving atomic.Bool
	scanFrom atomic.Int64
	// acting is set while an acting master's revive runs
	// (RunActingRevive): its puts go to another broker group, its pops
	// start past the master's copied pop position and its acks remove
	// messages from the master's copied checkpoints (acting.go).
	acting atomic.Pointer[actingRevive]

	// stateRead, when set (tests only), is called by acks, changes of
	// invisible time and offset resets once they read the queue state
	// they change, before they write it.
	stateRead func()
}

// readState calls the stateRead hook.
func (s *Service) readState() {
	if s.stateRead != nil {
		s.stateRead()
	}
}

const lockStripes = 1024

// New returns a service; Start runs revive.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.CQ == nil || cfg.Log == nil || cfg.Offsets == nil || cfg.Broker == nil {
		return nil, errors.New("pop: DB, CQ, Log, Offsets and Broker are required")
	}
	if cfg.ReviveBatch <= 0 {
		cfg.ReviveBatch = 4096
	}
	if cfg.RetryFirstPercent == 0 {
		cfg.RetryFirstPercent = 20
	}
	if cfg.ReviveIdle <= 0 {
		cfg.ReviveIdle = 100 * time.Millisecond
	}
	if cfg.GiveBackWait <= 0 {
		cfg.GiveBackWait = 30 * time.Second
	}
	if cfg.MaxTransferBytes <= 0 {
		cfg.MaxTransferBytes = 256 << 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OnQueueReady == nil {
		cfg.OnQueueReady = func(string, string, int32) {}
	}
	cfg.OnQueueReady = wakeRetryOrigin(cfg.OnQueueReady)
	s := &Service{
		cfg:      cfg,
		obs:      cfg.Observer,
		store:    cfg.DB.Pop(),
		log:      cfg.Logger.With().Str("component", "pop").Logger(),
		seed:     maphash.MakeSeed(),
		reqCount: map[string]uint64{},
		wake:     make(chan struct{}, 1),
	}
	s.gates = newQueueTimers(cfg.OnQueueReady)
	s.startStager()
	s.handed = newHandedOut(cfg.OnQueueReady, s.now)
	s.slaveOrd = newSlaveOrders(s.store)
	s.slaveFlight = newSlaveInFlight(s.wakeReleasedReadOnly)
	if !cfg.QuietOrderLockRelease {
		s.orderWakes = newOrderWakes(cfg.OnQueueReady)
	}
	s.lowDeadline.Store(math.MaxInt64)
	return s, nil
}

// noteDeadline reports a visibility deadline just committed, so the
// revive cursor never stays above it. It must come after the commit: a
// round that consumed the report before the record was visible would
// skip it.
func (s *Service) noteDeadline(at int64) {
	for {
		cur := s.lowDeadline.Load()
		if at >= cur || s.lowDeadline.CompareAndSwap(cur, at) {
			return
		}
	}
}

// Store returns the service's POP state store.
func (s *Service) Store() *kvindex.PopStore { return s.store }

func (s *Service) now() int64 { return s.cfg.Now().UnixMilli() }

// lock locks the stripe of a group's queue and returns its unlock.
func (s *Service) lock(group, topic string, queueID int32) func() {
	m := s.stripe(group, topic, queueID)
	m.Lock()
	return m.Unlock
}

// tryLock locks the stripe of a group's queue unless it is busy (a pop
// skips a queue another pop of the group is reading, as RocketMQ's
// QueueLockManager.tryLock does).
func (s *Service) tryLock(group, topic string, queueID int32) (func(), bool) {
	m := s.stripe(group, topic, queueID)
	if !m.TryLock() {
		return nil, false
	}
	return m.Unlock, true
}

func (s *Service) stripe(group, topic string, queueID int32) *sync.Mutex {
	return &s.locks[s.stripeIndex(group, topic, queueID)]
}

// stripeIndex is the index of the lock stripe of a group's queue.
func (s *Service) stripeIndex(group, topic string, queueID int32) int {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(group)
	h.WriteByte(0)
	h.WriteString(topic)
	h.WriteByte(byte(queueID))
	h.WriteByte(byte(queueID >> 8))
	return int(h.Sum64() % lockStripes)
}

// maxRequestCounts bounds the pop counters: groups and topics come and go
// on a broker, and a counter only turns a group's first queue and its
// retry-first share, so once this many group@topic pairs are counted
// (about 6 MiB of map) a new pair takes the place of an arbitrary one,
// which starts again from 0 when it pops next.
const maxRequestCounts = 1 << 16

// nextRequest counts pops per group and topic; retryFirst picks by the
// count those that start with the pop-retry topics.
func (s *Service) nextRequest(group, topic string) uint64 {
	k := group + "@" + topic
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	n, ok := s.reqCount[k]
	if !ok && len(s.reqCount) >= maxRequestCounts {
		for old := range s.reqCount {
			delete(s.reqCount, old)
			break
		}
	}
	s.reqCount[k] = n + 1
	return n
}

// wakeRetryOrigin returns notify, made to name also the keys the pops a
// queue of a group's pop-retry topic serves are held on: a pop of a topic
// reads every queue of the group's pop-retry topics of it, and is held
// under the topic it popped, so the wake of a pop-retry queue (the
// in-flight threshold releasing it, a revive, the end of what a slave
// handed out) wakes the group's pops held on any queue of that topic as
// well as those held on the pop-retry topic itself. RocketMQ's
// notifyMessageArrivingWithRetryTopic names the topic of a V2 pop-retry
// topic in the same way.
func wakeRetryOrigin(notify func(topic, group string, queueID int32)) func(topic, group string, queueID int32) {
	return func(topic, group string, queueID int32) {
		notify(topic, group, queueID)
		if origin, ok := RetryOrigin(topic, group); ok {
			notify(origin, group, -1)
		}
	}
}

// retryTopics returns the pop-retry topics a pop of topic reads, with their
// flags.
func (s *Service) retryTopics(topic, group string) [][2]string {
	var out [][2]string
	if s.cfg.ReadRetryV1 || !s.cfg.RetryTopicV2 {
		out = append(out, [2]string{RetryTopicV1(topic, group), FlagRetryV1})
	}
	if s.cfg.RetryTopicV2 {
		out = append(out, [2]string{RetryTopicV2(topic, group), FlagRetryV2})
	}
	return out
}

// reviveTopic is the pop-retry topic revive writes a message of topic to.
func (s *Service) reviveTopic(topic, group string) string {
	if s.cfg.RetryTopicV2 {
		return RetryTopicV2(topic, group)
	}
	return RetryTopicV1(topic, group)
}

// committed moves the group's committed offset of a queue to the smallest
// offset still in flight, or to fallback (the first offset not consumed:
// this pop's first, or the pop position) when that is smaller. The caller
// holds the queue's lock and commits b.
//
// Without offset resets every in-flight offset is at or above the
// committed one and below the position, so the smaller of the two is the
// smallest in flight. A reset breaks either half: moved back, messages
// popped before it are in flight above the new position (the committed
// offset must not jump up to them); moved forward, they are in flight
// below the new committed offset, which must not fall back to them.
func (s *Service) committed(b *kvindex.PopBatch, group, topic string, queueID int32, fallback int64) error {
	cur, has, err := s.cfg.Offsets.Get(group, topic, queueID)
	if err != nil {
		return err
	}
	return s.committedFrom(b, group, topic, queueID, fallback, cur, has, nil)
}

// committedFrom is committed given the committed offset the caller read
// (cur, has), for a batch b that also rewrites the checkpoint replaced
// (nil for none; see PopStore.MinInFlightReplacing).
func (s *Service) committedFrom(b *kvindex.PopBatch, group, topic string, queueID int32, fallback, cur int64, has bool, replaced *kvindex.Checkpoint) error {
	if has && fallback <= cur {
		// The new offset is max(cur, min(smallest in flight, fallback)),
		// which is cur: no need to seek for the smallest in flight. A pop
		// of a queue with nothing in flight is such a case.
		return nil
	}
	from := int64(0)
	if has {
		from = max(cur, 0)
	}
	off, ok, err := s.store.MinInFlightReplacing(group, topic, queueID, from, replaced)
	if err != nil {
		return err
	}
	if !ok || fallback < off {
		off = fallback
	}
	if has && off < cur {
		off = cur
	}
	if has && cur == off {
		return nil
	}
	return b.SetCommitted(group, topic, queueID, off)
}

// sync makes the commits so far durable.
func (s *Service) sync() error {
	if err := s.store.Sync(); err != nil {
		return fmt.Errorf("sync pop state: %w", err)
	}
	return nil
}

// Start runs the revive loop until Close.
func (s *Service) Start() {
	if s.orderWakes != nil {
		// The batches in flight from before the start (or imported from
		// RocketMQ) free their queues on time too.
		now := s.now()
		err := s.store.EachOrder(func(st kvindex.OrderState) bool {
			s.orderWakes.set(&st, now)
			return true
		})
		if err != nil {
			s.log.Error().Err(err).Msg("orderly batches not read: held pops of their queues wake at the end of their poll time")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	done := make(chan struct{})
	s.done = done
	s.reviving.Store(true)
	go func() {
		defer close(done)
		s.reviveLoop(ctx)
	}()
}

// Close stops revive and waits for it, and stops the timers that wake
// held pops (orderly locks, a slave's handed-out messages and in-flight
// count).
func (s *Service) Close() error {
	s.orderWakes.close()
	s.gates.close()
	s.handed.close()
	s.slaveFlight.close()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	<-s.done
	s.cancel = nil
	s.reviving.Store(false)
	return nil
}

// kick wakes the revive loop (a deadline earlier than it planned for may
// have been written).
func (s *Service) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
