package pop

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// The points of a revive of the deleted topic's queue at which the
// deletion starts, in the order the revive reaches them.
const (
	deleteBeforeRound  = "before the round"
	deleteAtQueueRead  = "at the read of the queue"
	deleteAtMaxTimes   = "once the messages are read"
	deleteAtEnsure     = "before the put"
	deleteAtFailedPut  = "at a put that fails"
	deleteAtSettleScan = "at the settle of a batch left"
)

// The points of another write of the deleted topic's queue state at which
// the deletion starts.
const (
	deleteBeforeCall   = "before the call"
	deleteAtTopicCheck = "at the check of the topic"
	deleteAtStateRead  = "once the state is read"
)

// deletionRace runs a topic deletion, as the broker's deleteTopic does
// it, when a revive of the topic reaches one point (at), and records what
// the revive puts meanwhile and after.
type deletionRace struct {
	t     *testing.T
	db    *kvindex.DB
	cqs   *cqtest.Memory
	topic string
	at    string

	mu      sync.Mutex
	fired   bool
	started chan struct{}
	done    chan struct{}
	// returned is set once the deletion returned.
	returned atomic.Bool
	derr     error
	// late are the messages of the topic put once the deletion returned;
	// put are all the messages put.
	late, put []*commitlog.Message
}

// reach starts the deletion when the revive reaches point, then lets the
// revive go on once the deletion returned or has been running for a
// while (it may wait for the revive).
func (r *deletionRace) reach(point string) {
	r.mu.Lock()
	fire := point == r.at && !r.fired
	r.fired = r.fired || fire
	r.mu.Unlock()
	if !fire {
		return
	}
	go r.run()
	select {
	case <-r.done:
	case <-time.After(300 * time.Millisecond):
	}
}

// run deletes the topic's queues, then its consumers' offsets, pop
// positions and checkpoints, as the broker does (Broker.deleteTopic).
func (r *deletionRace) run() {
	defer close(r.done)
	close(r.started)
	err := r.cqs.DeleteTopic(r.topic)
	if err == nil {
		err = r.db.Pop().DeleteTopic(r.topic)
	}
	r.derr = err
	r.returned.Store(true)
}

// wait waits for the deletion to return.
func (r *deletionRace) wait() {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.t.Fatal("the topic deletion never returned")
	}
	if r.derr != nil {
		r.t.Fatalf("topic deletion: %v", r.derr)
	}
}

// raceBroker is the revive's pop.Broker: each call is a point the
// deletion may start at; puts to the deleted topic's pop-retry topic fail
// when failTopic says so.
type raceBroker struct {
	race      *deletionRace
	failTopic string
}

// ReadQueueNums reports one queue for every topic but pop-retry topics
// (none exists) and the deleted topic once its deletion began (the
// broker deletes the config first). The check of the deleted topic is a
// point the deletion may start at, after the check answered.
func (b *raceBroker) ReadQueueNums(topic string) (int, bool, error) {
	r := b.race
	if meta.IsRetryTopic(topic) {
		return 0, false, nil
	}
	if topic != r.topic {
		return 1, true, nil
	}
	select {
	case <-r.started:
		return 0, false, nil
	default:
	}
	r.reach(deleteAtTopicCheck)
	return 1, true, nil
}

func (b *raceBroker) EnsureTopic(topic string) error {
	if topic == RetryTopicV1(b.race.topic, "G") {
		b.race.reach(deleteAtEnsure)
	}
	return nil
}

func (b *raceBroker) RetryMaxTimes(group string) (int32, bool, error) {
	if group == "G" {
		b.race.reach(deleteAtMaxTimes)
	}
	return 16, true, nil
}

func (b *raceBroker) WaitDispatched(context.Context) error { return nil }

func (b *raceBroker) Put(_ context.Context, msgs []*commitlog.Message) (commitlog.AppendStatus, error) {
	r := b.race
	if msgs[0].Topic == b.failTopic {
		r.reach(deleteAtFailedPut)
		return commitlog.PutOK, errors.New("disk full")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.put = append(r.put, msgs...)
	if msgs[0].Topic == RetryTopicV1(r.topic, "G") && r.returned.Load() {
		r.late = append(r.late, msgs...)
	}
	return commitlog.PutOK, nil
}

// raceQueues is the ConsumeQueue, whose reads of the deleted topic and of
// its pop-retry topic are points the deletion may start at.
type raceQueues struct {
	*cqtest.Memory
	race *deletionRace
}

func (q *raceQueues) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	if topic == q.race.topic {
		q.race.reach(deleteAtQueueRead)
	}
	return q.Memory.Get(topic, queueID, from, max)
}

func (q *raceQueues) MinOffset(topic string, queueID int32) (int64, error) {
	if topic == RetryTopicV1(q.race.topic, "G") {
		q.race.reach(deleteAtSettleScan)
	}
	return q.Memory.MinOffset(topic, queueID)
}

// A topic deleted while a revive of one of its checkpoints is under way,
// whatever the point the revive has reached: once the deletion returned,
// no checkpoint, revive batch, pop position nor committed offset of the
// topic is left (a revive moves the committed offset after its put), and
// nothing of it is put to its pop-retry topic; nothing is logged as an error, and
// revive goes on with the other topics. (RocketMQ's PopReviveService
// skips a checkpoint whose topic has no config, but a revive that passed
// that check reads and puts asynchronously, so it may still put after
// the deletion returned; here the deletion waits for it.)
func TestTopicDeletedDuringItsRevive(t *testing.T) {
	for _, at := range []string{deleteBeforeRound, deleteAtQueueRead, deleteAtMaxTimes, deleteAtEnsure, deleteAtFailedPut, deleteAtSettleScan} {
		t.Run(strings.ReplaceAll(at, " ", "_"), func(t *testing.T) {
			checkTopicDeletedDuringItsRevive(t, at)
		})
	}
}

func checkTopicDeletedDuringItsRevive(t *testing.T, at string) {
	const doomed, other = "T", "U"
	l := openTestLog(t)
	db := openIndex(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	mem := cqtest.NewMemory()
	for _, topic := range []string{doomed, doomed, other, other} {
		res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{Topic: topic,
			Body: []byte("body of " + topic), BornHost: host, StoreHost: host}})
		if err != nil {
			t.Fatal(err)
		}
		off, err := mem.MaxOffset(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Put([]cq.Dispatch{{Topic: topic, Entry: cq.Entry{QueueOffset: off, PhyOffset: res.PhyOffset, Size: res.Records[0].Size}}}); err != nil {
			t.Fatal(err)
		}
	}
	race := &deletionRace{t: t, db: db, cqs: mem, topic: doomed, at: at, started: make(chan struct{}), done: make(chan struct{})}
	broker := &raceBroker{race: race}
	if at == deleteAtFailedPut {
		broker.failTopic = RetryTopicV1(doomed, "G")
	}
	var logs testutil.SyncBuffer
	now := time.UnixMilli(1_000_000)
	var clock sync.Mutex
	svc, err := New(Config{DB: db, CQ: &raceQueues{Memory: mem, race: race}, Log: l, Offsets: db.ConsumerOffsets(), Broker: broker,
		Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }, Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	ck := func(group, topic string, popTime int64, offsets ...int64) kvindex.Checkpoint {
		return kvindex.Checkpoint{Group: group, Topic: topic, CKOffset: offsets[0], PopTime: popTime, InvisibleTime: 60_000,
			VisibleAt: popTime + 60_000, Offsets: offsets}
	}
	// Due now: two messages of the doomed topic and one of the other.
	putCheckpoints(t, svc, ck("G", doomed, 900_000, 0, 1), ck("H", other, 900_000, 0))
	// As the pop of the doomed topic's two messages left them: the
	// group's position past them, its committed offset before them.
	setConsumerState(t, svc.store, "G", doomed, 0, 2, 0)
	// Due in a minute: the other topic's second message.
	putCheckpoints(t, svc, ck("H", other, 1_000_000, 1))
	if at == deleteAtSettleScan {
		// A put a crash cut short left the doomed topic's messages in a
		// revive batch, and an earlier version's put one in a revive
		// intent (0x57), settled when the service starts.
		b := svc.store.NewBatch()
		gone := ck("G", doomed, 800_000, 0, 1)
		if err := b.PutReviveBatch(&kvindex.ReviveBatch{Checkpoint: gone}); err != nil {
			t.Fatal(err)
		}
		older := ck("G", doomed, 700_000, 1)
		legacy := kvindex.IntentOf(&older, 1)
		if err := b.PutReviveIntent(&legacy); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if _, err := svc.reviveIntents(context.Background(), false); err != nil {
			t.Fatalf("settle of the batches left: %v", err)
		}
	} else {
		if at == deleteBeforeRound {
			race.reach(at)
		}
		if _, err := svc.ReviveOnce(context.Background()); err != nil {
			t.Fatalf("revive round: %v", err)
		}
	}
	select {
	case <-race.started:
	default:
		t.Fatalf("the revive never reached the point %q", at)
	}
	race.wait()
	checkNothingLeft(t, svc.store, "once the deletion returned", doomed)
	checkConsumerStateGone(t, db, "once the deletion returned", doomed)
	if at == deleteAtSettleScan {
		if _, err := svc.ReviveOnce(context.Background()); err != nil {
			t.Fatalf("revive round: %v", err)
		}
	}

	// The other topic's later checkpoint is revived by a later round.
	clock.Lock()
	now = now.Add(2 * time.Minute)
	clock.Unlock()
	if _, err := svc.ReviveOnce(context.Background()); err != nil {
		t.Fatalf("revive round after the deletion: %v", err)
	}

	checkNothingLeft(t, svc.store, "at the end")
	checkConsumerStateGone(t, db, "at the end", doomed)
	race.mu.Lock()
	late, put := race.late, race.put
	race.mu.Unlock()
	for _, m := range late {
		t.Errorf("put to %s once the deletion returned: %q", m.Topic, m.Body)
	}
	otherRevived := 0
	for _, m := range put {
		if m.Topic == RetryTopicV1(other, "H") {
			otherRevived++
		}
	}
	if otherRevived != 2 {
		t.Errorf("%d messages of the other topic revived, want 2", otherRevived)
	}
	if out := logs.String(); strings.Contains(out, `"level":"error"`) {
		t.Errorf("errors logged:\n%s", out)
	}
}

// checkNothingLeft fails t when checkpoints or revive batches of topics
// are left (of any topic when none is named).
func checkNothingLeft(t *testing.T, store *kvindex.PopStore, when string, topics ...string) {
	t.Helper()
	of := func(topic string) bool { return len(topics) == 0 || slices.Contains(topics, topic) }
	err := store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool {
		if of(c.Topic) {
			t.Errorf("checkpoint left %s: %+v", when, c)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	err = store.ReviveBatches(func(r kvindex.ReviveBatch) bool {
		if of(r.Topic) {
			t.Errorf("revive batch left %s: %+v", when, r)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	err = store.LegacyReviveIntents(func(in kvindex.ReviveIntent) bool {
		if of(in.Topic) {
			t.Errorf("revive intent left %s: %+v", when, in)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setConsumerState stores a group's pop position and committed offset on
// a queue, as its pops leave them.
func setConsumerState(t *testing.T, store *kvindex.PopStore, group, topic string, queueID int32, position, committed int64) {
	t.Helper()
	b := store.NewBatch()
	defer b.Close()
	if err := b.SetPosition(group, topic, queueID, position); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCommitted(group, topic, queueID, committed); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

// checkConsumerStateGone fails t when a committed offset, a pop position,
// an orderly batch or a checkpoint of topic is left.
func checkConsumerStateGone(t *testing.T, db *kvindex.DB, when, topic string) {
	t.Helper()
	err := db.ConsumerOffsets().Each("", func(u kvindex.OffsetUpdate) bool {
		if u.Topic == topic {
			t.Errorf("committed offset left %s: %+v", when, u)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	queues, err := db.Pop().Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if q.Topic == topic {
			t.Errorf("pop state left %s: %+v", when, q)
		}
	}
}
