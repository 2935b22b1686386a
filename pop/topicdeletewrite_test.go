package pop

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// writeDuringDeletion is a write of a queue's POP state that a deletion
// of its topic may overlap: setup prepares the state it changes (a pop
// of the queue's two messages), run makes it.
type writeDuringDeletion struct {
	name   string
	setup  func(t *testing.T, s *Service) Handle
	run    func(s *Service, h Handle) error
	points []string
}

// popBoth pops the two messages of queue 0 of T for group G (orderly or
// not) and returns the handle of the first.
func popBoth(orderly bool) func(t *testing.T, s *Service) Handle {
	return func(t *testing.T, s *Service) Handle {
		t.Helper()
		res, err := s.Pop(PopRequest{Group: "G", Topic: "T", QueueID: 0, MaxMsgNums: 32, InvisibleTime: 60_000, Order: orderly})
		if err != nil || len(res.Records) != 2 {
			t.Fatalf("pop before the deletion: %d records, %v", len(res.Records), err)
		}
		return Handle{CKOffset: 0, PopTime: res.PopTime, InvisibleTime: res.InvisibleTime, ReviveQID: res.ReviveQID,
			RetryFlag: FlagNormal, QueueID: 0, QueueOffset: 0}
	}
}

func noSetup(*testing.T, *Service) Handle { return Handle{} }

var writesDuringDeletion = []writeDuringDeletion{
	{"pop", noSetup, func(s *Service, _ Handle) error {
		_, err := s.Pop(PopRequest{Group: "G", Topic: "T", QueueID: -1, MaxMsgNums: 32, InvisibleTime: 60_000})
		return err
	}, []string{deleteBeforeCall, deleteAtTopicCheck, deleteAtQueueRead}},
	{"orderly pop", noSetup, func(s *Service, _ Handle) error {
		_, err := s.Pop(PopRequest{Group: "G", Topic: "T", QueueID: -1, MaxMsgNums: 32, InvisibleTime: 60_000, Order: true})
		return err
	}, []string{deleteBeforeCall, deleteAtTopicCheck, deleteAtQueueRead}},
	{"ack", popBoth(false), func(s *Service, h Handle) error {
		_, err := s.Ack("G", "T", 0, 0, h)
		return err
	}, []string{deleteBeforeCall, deleteAtStateRead}},
	{"orderly ack", popBoth(true), func(s *Service, h Handle) error {
		_, err := s.Ack("G", "T", 0, 0, h)
		return err
	}, []string{deleteBeforeCall, deleteAtStateRead}},
	{"change of invisible time", popBoth(false), func(s *Service, h Handle) error {
		_, err := s.ChangeInvisibleTime("G", "T", 0, 0, h, 30_000)
		return err
	}, []string{deleteBeforeCall, deleteAtStateRead}},
	{"orderly change of invisible time", popBoth(true), func(s *Service, h Handle) error {
		_, err := s.ChangeInvisibleTime("G", "T", 0, 0, h, 30_000)
		return err
	}, []string{deleteBeforeCall, deleteAtStateRead}},
	{"offset reset", popBoth(false), func(s *Service, _ Handle) error {
		_, err := s.ResetOffsets("G", "T", map[int32]int64{0: 1})
		return err
	}, []string{deleteBeforeCall, deleteAtStateRead}},
}

// A write of a topic's queue state that a deletion of the topic overlaps,
// whatever the point the write has reached (the broker checked that the
// topic exists before the call): once both returned, nothing of the
// topic's consumer state is left. The write either comes before the
// deletion, which then deletes it, or writes nothing: a committed offset,
// pop position, checkpoint or orderly batch it wrote after the deletion
// would make a topic created again under the name start its groups at a
// stale offset or revive its messages at the old checkpoints' offsets.
func TestTopicDeletedDuringAWriteOfItsState(t *testing.T) {
	for _, w := range writesDuringDeletion {
		for _, at := range w.points {
			t.Run(strings.ReplaceAll(w.name+" "+at, " ", "_"), func(t *testing.T) {
				checkTopicDeletedDuringAWrite(t, w, at)
			})
		}
	}
}

func checkTopicDeletedDuringAWrite(t *testing.T, w writeDuringDeletion, at string) {
	const doomed = "T"
	l := openTestLog(t)
	db := openIndex(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	mem := cqtest.NewMemory()
	for i := range 2 {
		res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{Topic: doomed,
			Body: []byte("body " + string(rune('a'+i))), BornHost: host, StoreHost: host}})
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Put([]cq.Dispatch{{Topic: doomed, Entry: cq.Entry{QueueOffset: int64(i), PhyOffset: res.PhyOffset, Size: res.Records[0].Size}}}); err != nil {
			t.Fatal(err)
		}
	}
	race := &deletionRace{t: t, db: db, cqs: mem, topic: doomed, at: at, started: make(chan struct{}), done: make(chan struct{})}
	var logs testutil.SyncBuffer
	svc, err := New(Config{DB: db, CQ: &raceQueues{Memory: mem, race: race}, Log: l, Offsets: db.ConsumerOffsets(),
		Broker: &raceBroker{race: race}, Now: func() time.Time { return time.UnixMilli(1_000_000) },
		Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	h := w.setup(t, svc)
	svc.stateRead = func() { race.reach(deleteAtStateRead) }
	race.reach(deleteBeforeCall)
	if err := w.run(svc, h); err != nil {
		t.Errorf("%s: %v", w.name, err)
	}
	select {
	case <-race.started:
	default:
		t.Fatalf("the %s never reached the point %q", w.name, at)
	}
	race.wait()
	checkNothingLeft(t, svc.store, "once the deletion returned", doomed)
	checkConsumerStateGone(t, db, "once the deletion returned", doomed)
	if out := logs.String(); strings.Contains(out, `"level":"error"`) {
		t.Errorf("errors logged:\n%s", out)
	}
}
