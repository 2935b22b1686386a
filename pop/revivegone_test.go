package pop

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
)

// topicsBroker is a pop.Broker with only some topics and groups, whose
// puts (from every revive worker at once) succeed; it keeps what they put.
type topicsBroker struct {
	exists map[string]bool // topics and groups
	mu     sync.Mutex
	put    []*commitlog.Message
}

func (b *topicsBroker) ReadQueueNums(topic string) (int, bool, error) { return 1, b.exists[topic], nil }
func (b *topicsBroker) EnsureTopic(string) error                      { return nil }
func (b *topicsBroker) RetryMaxTimes(group string) (int32, bool, error) {
	return 16, b.exists[group], nil
}
func (b *topicsBroker) WaitDispatched(context.Context) error { return nil }
func (b *topicsBroker) Put(_ context.Context, msgs []*commitlog.Message) (commitlog.AppendStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.put = append(b.put, msgs...)
	return commitlog.PutOK, nil
}

// A revive round drops the checkpoints whose topic no longer exists (the
// topic popped, or the one a pop-retry topic retries) or whose group does
// not exist and is not created (autoCreateSubscriptionGroup off) with a
// warning instead of putting their messages to a pop-retry topic, and
// writes nothing else of that topic: as RocketMQ's
// PopReviveService.mergeAndRevive skips a checkpoint whose normal topic
// has no config or whose group findSubscriptionGroupConfig does not find.
// The other checkpoints are revived as usual.
func TestReviveDropsCheckpointsOfTopicsAndGroupsGone(t *testing.T) {
	cases := []struct {
		topic, group string // the checkpoint's
		revived      bool
	}{
		{"Kept", "G", true},
		{"Gone", "G", false},
		{RetryTopicV1("Kept", "G"), "G", true},
		{RetryTopicV1("Gone", "G"), "G", false},
		{RetryTopicV2("Gone", "G"), "G", false},
		{"Kept", "NoGroup", false},
		{RetryTopicV1("Kept", "NoGroup"), "NoGroup", false},
	}
	l := openTestLog(t)
	db := openIndex(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	mem := cqtest.NewMemory()
	var cks []kvindex.Checkpoint
	for _, c := range cases {
		res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{Topic: c.topic,
			Body: []byte("body of " + c.group + "/" + c.topic), BornHost: host, StoreHost: host}})
		if err != nil {
			t.Fatal(err)
		}
		qo, err := mem.MaxOffset(c.topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Put([]cq.Dispatch{{Topic: c.topic, Entry: cq.Entry{QueueOffset: qo, PhyOffset: res.PhyOffset, Size: res.Records[0].Size}}}); err != nil {
			t.Fatal(err)
		}
		cks = append(cks, kvindex.Checkpoint{Group: c.group, Topic: c.topic, CKOffset: qo, PopTime: 900_000, InvisibleTime: 60_000,
			VisibleAt: 960_000, Offsets: []int64{qo}})
	}
	broker := &topicsBroker{exists: map[string]bool{"Kept": true, "G": true}}
	var logs testutil.SyncBuffer
	svc, err := New(Config{DB: db, CQ: mem, Log: l, Offsets: db.ConsumerOffsets(), Broker: broker,
		Now: func() time.Time { return time.UnixMilli(1_000_000) }, Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	putCheckpoints(t, svc, cks...)
	if _, err := svc.ReviveOnce(context.Background()); err != nil {
		t.Fatalf("revive round: %v", err)
	}
	put := map[string]int{}
	for _, m := range broker.put {
		put[string(m.Body)]++
	}
	for _, c := range cases {
		want := 0
		if c.revived {
			want = 1
		}
		if got := put["body of "+c.group+"/"+c.topic]; got != want {
			t.Errorf("checkpoint of %s/%s: %d messages put, want %d", c.group, c.topic, got, want)
		}
		if !c.revived && !strings.Contains(logs.String(), `"group":"`+c.group+`","topic":"`+c.topic+`"`) {
			t.Errorf("no warning names the checkpoint of %s/%s dropped:\n%s", c.group, c.topic, logs.String())
		}
	}
	checkNothingLeft(t, svc.store, "after the revive round")
	for _, c := range cases {
		if !broker.exists[originalTopic(c.topic, c.group)] {
			checkConsumerStateGone(t, db, "after the revive round", c.topic)
		}
	}
	if out := logs.String(); strings.Contains(out, `"level":"error"`) {
		t.Errorf("errors logged:\n%s", out)
	}
}
