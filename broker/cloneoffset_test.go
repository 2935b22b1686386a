package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// cloneFixture is a broker where group "src" has committed offsets on
// topic CT (4 queues: 2, 6, 7, 8; queue 0 holds 3 messages), on CO (1
// queue: 3), on its retry topic (1 queue: 4), and on Gone, a topic the
// broker has no config for (1 queue: 9).
type cloneFixture struct {
	b *testBroker
	c *remoting.Client
}

var cloneSrcCT = map[int32]int64{0: 2, 1: 6, 2: 7, 3: 8}

func newCloneFixture(t *testing.T) *cloneFixture {
	t.Helper()
	b := startTestBroker(t, nil)
	c := b.client(nil)
	createTopic(t, c, "CT", 4, 4)
	createTopic(t, c, "CO", 1, 1)
	createTopic(t, c, meta.RetryTopic("src"), 1, 1)
	for i := range 3 {
		mustSend(t, c, "CT", 0, fmt.Sprintf("m%d", i), "")
	}
	b.caughtUp()
	for q, off := range cloneSrcCT {
		commit(t, c, "src", "CT", q, off)
	}
	commit(t, c, "src", "CO", 0, 3)
	commit(t, c, "src", meta.RetryTopic("src"), 0, 4)
	// Offsets outlive a topic only when written behind the broker's back
	// (a topic created on another broker of the group, a store copied in):
	// seed one directly.
	if err := b.offsets.Set("src", "Gone", 0, 9); err != nil {
		t.Fatal(err)
	}
	return &cloneFixture{b: b, c: c}
}

// clone sends CLONE_GROUP_OFFSET and fails unless it succeeded.
func (f *cloneFixture) clone(t *testing.T, ext map[string]string) {
	t.Helper()
	r := call(t, f.c, remoting.CloneGroupOffset, ext, nil)
	if r.Code != remoting.Success || r.Remark != "" {
		t.Fatalf("clone %v: code %d %q", ext, r.Code, r.Remark)
	}
}

// offsets reads a group's committed offsets of queues 0..n-1 of a topic;
// a queue without one reads as "-".
func (f *cloneFixture) offsets(t *testing.T, group, topic string, n int32) string {
	t.Helper()
	var out []string
	for q := range n {
		r := call(t, f.c, remoting.QueryConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(q)), "setZeroIfNotFound": "false"}, nil)
		switch r.Code {
		case remoting.Success:
			out = append(out, strconv.FormatInt(header(t, r, "offset"), 10))
		case remoting.QueryNotFound:
			out = append(out, "-")
		default:
			t.Fatalf("query offset of %s on %s/%d: %d %s", group, topic, q, r.Code, r.Remark)
		}
	}
	return strings.Join(out, " ")
}

// TestCloneGroupOffsetCopiesEveryQueue clones one topic over a group that
// had offsets of its own there: every queue gets the source's offset, the
// source's other topics are not cloned and the source keeps its offsets.
func TestCloneGroupOffsetCopiesEveryQueue(t *testing.T) {
	f := newCloneFixture(t)
	commit(t, f.c, "dst", "CT", 0, 100)
	commit(t, f.c, "dst", "CT", 1, 101)
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "CT", "offline": "false"})
	if got := f.offsets(t, "dst", "CT", 4); got != "2 6 7 8" {
		t.Errorf("dst on CT after the clone: %s, want 2 6 7 8", got)
	}
	if got := f.offsets(t, "dst", "CO", 1); got != "-" {
		t.Errorf("dst on CO, not cloned: %s", got)
	}
	if got := f.offsets(t, "src", "CT", 4) + " | " + f.offsets(t, "src", "CO", 1); got != "2 6 7 8 | 3" {
		t.Errorf("src after the clone: %s", got)
	}
	// The clone is in the stored table (the one GET_ALL_CONSUMER_OFFSET
	// hands the slaves), not only in the offset cache.
	stored := map[string]int64{}
	if err := f.b.offsets.Each("dst", func(u kvindex.OffsetUpdate) bool {
		stored[fmt.Sprintf("%s/%d", u.Topic, u.QueueID)] = u.Offset
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"CT/0": 2, "CT/1": 6, "CT/2": 7, "CT/3": 8}; fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Errorf("stored offsets of dst: %v, want %v", stored, want)
	}
}

// A topic is cloned as named, as the access check read it: "CO " (a
// space after) is no topic, not CO, which a user denied CO could clone
// otherwise. A blank one is every topic.
func TestCloneGroupOffsetTakesTheTopicAsNamed(t *testing.T) {
	f := newCloneFixture(t)
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "CO ", "offline": "true"})
	if got := f.offsets(t, "dst", "CO", 1); got != "-" {
		t.Errorf("dst on CO after a clone of \"CO \": %s, want none", got)
	}
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "  ", "offline": "true"})
	if got := f.offsets(t, "dst", "CO", 1); got != "3" {
		t.Errorf("dst on CO after a clone of every topic: %s, want 3", got)
	}
}

// TestCloneGroupOffsetKeepsQueuesTheSourceLacks: a queue the source group
// has no offset on keeps the destination's (RocketMQ would drop it).
func TestCloneGroupOffsetKeepsQueuesTheSourceLacks(t *testing.T) {
	f := newCloneFixture(t)
	createTopic(t, f.c, "C2", 2, 2)
	commit(t, f.c, "src", "C2", 0, 1)
	commit(t, f.c, "dst", "C2", 0, 40)
	commit(t, f.c, "dst", "C2", 1, 50)
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "C2"})
	if got := f.offsets(t, "dst", "C2", 2); got != "1 50" {
		t.Errorf("dst on C2 after the clone: %s, want 1 50", got)
	}
}

// TestCloneGroupOffsetSkipsUnknownTopic clones offsets of a topic the
// broker has no config for: nothing is written, and the answer is still
// SUCCESS.
func TestCloneGroupOffsetSkipsUnknownTopic(t *testing.T) {
	f := newCloneFixture(t)
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "Gone"})
	if off, ok, err := f.b.offsets.Get("dst", "Gone", 0); err != nil || ok {
		t.Errorf("dst on the unknown topic: %d %v %v, want none", off, ok, err)
	}
	if off, ok, err := f.b.offsets.Get("src", "Gone", 0); err != nil || !ok || off != 9 {
		t.Fatalf("fixture: src on Gone %d %v %v", off, ok, err)
	}
}

// TestCloneGroupOffsetOnlineSource: while the source group has live
// consumers, a topic they do not subscribe to is skipped unless the
// request says offline; one they subscribe to is cloned.
func TestCloneGroupOffsetOnlineSource(t *testing.T) {
	f := newCloneFixture(t)
	consumer := f.b.client(nil)
	heartbeat(t, consumer, heartbeatBody("10.0.0.1@clone", "", "src", map[string]string{"CO": "*"}))

	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "CT"})
	if got := f.offsets(t, "dst", "CT", 4); got != "- - - -" {
		t.Errorf("dst on CT, not subscribed by the online src: %s", got)
	}
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "CO"})
	if got := f.offsets(t, "dst", "CO", 1); got != "3" {
		t.Errorf("dst on CO, subscribed by the online src: %s", got)
	}
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "CT", "offline": "true"})
	if got := f.offsets(t, "dst", "CT", 4); got != "2 6 7 8" {
		t.Errorf("dst on CT cloned offline: %s", got)
	}
	// Blank topic, online: only the subscribed topics of the source.
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "online", "topic": ""})
	if got := f.offsets(t, "online", "CO", 1) + " | " + f.offsets(t, "online", "CT", 4); got != "3 | - - - -" {
		t.Errorf("online on CO | CT after a blank-topic clone of the online src: %s", got)
	}
}

// TestCloneGroupOffsetBlankTopic clones every topic the source group has
// offsets on (where RocketMQ clones none), except its retry topic and the
// topic the broker does not know.
func TestCloneGroupOffsetBlankTopic(t *testing.T) {
	f := newCloneFixture(t)
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "all"})
	if got := f.offsets(t, "all", "CT", 4) + " | " + f.offsets(t, "all", "CO", 1); got != "2 6 7 8 | 3" {
		t.Errorf("all on CT | CO: %s", got)
	}
	retry := meta.RetryTopic("src")
	if got := f.offsets(t, "all", retry, 1); got != "-" {
		t.Errorf("all on %s: %s, want none", retry, got)
	}
	if got := f.offsets(t, "src", retry, 1); got != "4" {
		t.Fatalf("fixture: src on %s: %s", retry, got)
	}
	if _, ok, err := f.b.offsets.Get("all", "Gone", 0); err != nil || ok {
		t.Errorf("all on the unknown topic: %v %v", ok, err)
	}
	// A topic field of spaces is blank too.
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "spaces", "topic": "  "})
	if got := f.offsets(t, "spaces", "CO", 1); got != "3" {
		t.Errorf("spaces on CO: %s", got)
	}
}

// TestCloneGroupOffsetDropsWaitingReset: a reset of the destination
// group that its pull has not seen yet does not undo the clone at that
// pull.
func TestCloneGroupOffsetDropsWaitingReset(t *testing.T) {
	f := newCloneFixture(t)
	ensureGroup(t, f.c, "dst")
	mustReset(t, f.c, resetReq("dst", "CT", 0, -1, 0))
	f.clone(t, map[string]string{"srcGroup": "src", "destGroup": "dst", "topic": "CT"})
	r := call(t, f.c, remoting.PullMessage, pullReq("dst", "CT", 0, 2, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull of dst from the cloned offset: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	if msgs := decodeRecords(t, r.Body); len(msgs) != 1 || string(msgs[0].Body) != "m2" {
		t.Fatalf("pull of dst from the cloned offset: %d messages", len(msgs))
	}
}

// TestCloneGroupOffsetRefusesMissingGroup: srcGroup and destGroup are
// required, as the other handlers' required fields.
func TestCloneGroupOffsetRefusesMissingGroup(t *testing.T) {
	f := newCloneFixture(t)
	for _, tc := range []struct {
		ext   map[string]string
		field string
	}{
		{map[string]string{"destGroup": "dst", "topic": "CT"}, "srcGroup"},
		{map[string]string{"srcGroup": "src", "topic": "CT"}, "destGroup"},
		{map[string]string{"srcGroup": "", "destGroup": "dst", "topic": "CT"}, "srcGroup"},
	} {
		r := call(t, f.c, remoting.CloneGroupOffset, tc.ext, nil)
		if r.Code != remoting.SystemError || !strings.Contains(r.Remark, tc.field) {
			t.Errorf("clone %v: code %d %q, want %d naming %s", tc.ext, r.Code, r.Remark, remoting.SystemError, tc.field)
		}
	}
	if got := f.offsets(t, "dst", "CT", 4); got != "- - - -" {
		t.Errorf("a refused clone wrote dst on CT: %s", got)
	}
}

// TestCloneGroupOffsetMovesPops: a destination group that pops the cloned
// queue pops on from the cloned offset, whether it pops unordered (its
// pop position moves back over messages it holds) or orderly (the batch
// it holds no longer locks the queue), as a reset moves it.
func TestCloneGroupOffsetMovesPops(t *testing.T) {
	f := newCloneFixture(t)
	pc := popclient.New(f.c, f.b.cfg.BrokerName)
	for _, tc := range []struct {
		group string
		order bool
		held  string // what the group pops before the clone
	}{
		{group: "dst", order: false, held: "[m0 m1 m2]"},
		{group: "odst", order: true, held: "[m0 m1]"},
	} {
		req := popclient.PopRequest{Group: tc.group, Topic: "CT", QueueID: 0, MaxMsgNums: 2,
			InvisibleTime: time.Minute, Order: tc.order}
		if !tc.order {
			req.MaxMsgNums = 3
		}
		if res := mustPop(t, pc, req); fmt.Sprint(bodies(res.Messages)) != tc.held {
			t.Fatalf("%s: pop before the clone: %d %v", tc.group, res.Code, bodies(res.Messages))
		}
		if res := mustPop(t, pc, req); res.Code != remoting.PollingTimeout {
			t.Fatalf("%s: pop with everything held: %d %v", tc.group, res.Code, bodies(res.Messages))
		}
		f.clone(t, map[string]string{"srcGroup": "src", "destGroup": tc.group, "topic": "CT"})
		res := mustPop(t, pc, req)
		if res.Code != remoting.Success || fmt.Sprint(bodies(res.Messages)) != "[m2]" {
			t.Fatalf("%s: pop after cloning offset 2: %d %v", tc.group, res.Code, bodies(res.Messages))
		}
		if got := committedOffset(t, f.c, tc.group, "CT", 0); got != 2 {
			t.Fatalf("%s: committed offset %d after the clone, want 2", tc.group, got)
		}
	}
}

// mqadmin cloneGroupOffset -s g -d g changes nothing, as RocketMQ's
// ConsumerOffsetManager.cloneOffset puts a copy of g's own table back: it
// used to move g's pops back to its committed offset as a reset does, and
// the messages g held in flight were popped again at once.
func TestACloneOfAGroupOntoItselfChangesNothing(t *testing.T) {
	b := startTestBroker(t, nil)
	pc, rc := popClient(b)
	sendBodies(t, rc, "CSelf", 3)
	b.caughtUp()
	req := popclient.PopRequest{Group: "pg", Topic: "CSelf", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute}
	first := mustPop(t, pc, req)
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1 m2]" {
		t.Fatalf("first pop %v", bodies(first.Messages))
	}
	if code, _ := pc.Ack(ctx20(t), "pg", first.Messages[0]); code != remoting.Success {
		t.Fatalf("ack m0: %d", code)
	}
	r := call(t, rc, remoting.CloneGroupOffset, map[string]string{"srcGroup": "pg", "destGroup": "pg", "topic": "CSelf"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("clone pg onto itself: %d %s", r.Code, r.Remark)
	}
	req.PollTime = 200 * time.Millisecond
	if res := mustPop(t, pc, req); len(res.Messages) != 0 {
		t.Fatalf("a clone of pg onto itself re-delivered %v, still in flight", bodies(res.Messages))
	}
}
