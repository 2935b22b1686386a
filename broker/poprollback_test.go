package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/migrate/rmqpop"
	"github.com/rocketkv/rocketkv/remoting"
)

// POP_ROLLBACK writes each checkpoint in flight to queue 0 of the revive
// topic as the check-point message RocketMQ's broker writes, and records
// where they start; rocketkv keeps its own checkpoints.
func TestPopRollback(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	reviveTopic := rmqpop.TopicPrefix + b.cfg.BrokerClusterName
	rollback := func() {
		t.Helper()
		if r := call(t, rc, remoting.PopRollback, nil, nil); r.Code != remoting.Success {
			t.Fatalf("POP_ROLLBACK: %d %s", r.Code, r.Remark)
		}
	}
	// Nothing in flight: RocketMQ's revive would start at the end.
	rollback()
	if r, ok, err := b.db.LastPopRollback(); err != nil || !ok || r.From != 0 || r.Topic != reviveTopic {
		t.Fatalf("rollback record with nothing in flight: %+v %v %v", r, ok, err)
	}

	sendBodies(t, rc, "RB", 3)
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RB", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute})
	if len(res.Messages) != 3 {
		t.Fatalf("pop: %v", bodies(res.Messages))
	}
	if code, err := c.Ack(ctx20(t), "g", res.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	rollback()
	b.caughtUp()
	msgs := pullAll(t, b, rc, reviveTopic, 0)
	if len(msgs) != 1 {
		t.Fatalf("revive topic holds %d messages, want one check-point", len(msgs))
	}
	m := msgs[0]
	tag, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags)
	uniq, _ := commitlog.LookupProperty(m.Properties, "UNIQ_KEY")
	h := res.Messages[0].Handle
	if tag != rmqpop.TagCheckpoint || uniq != fmt.Sprintf("RB@0@%d@g@%d@%s@ck", h.CKOffset, h.PopTime, b.cfg.BrokerName) {
		t.Fatalf("check-point message tag %q, unique key %q", tag, uniq)
	}
	// As buildCkMsg: RocketMQ's revive takes the end of what it may
	// revive from this property, and revives nothing without it.
	if d, _ := commitlog.LookupProperty(m.Properties, "TIMER_DELIVER_MS"); d != strconv.FormatInt(h.PopTime+60_000-1000, 10) {
		t.Fatalf("check-point message TIMER_DELIVER_MS %q, want its revive time less 1 s (%d)", d, h.PopTime+60_000-1000)
	}
	merged := rmqpop.NewMerger()
	if err := merged.Add(tag, m.Body); err != nil {
		t.Fatal(err)
	}
	cks := merged.InFlight()
	if len(cks) != 1 || fmt.Sprint(cks[0].Offsets) != "[0 2]" || cks[0].PopTime != h.PopTime || cks[0].InvisibleTime != 60_000 ||
		cks[0].StartOffset != h.CKOffset || cks[0].Group != "g" || cks[0].Topic != "RB" {
		t.Fatalf("check-point %+v, want offsets [0 2] of the pop at %d", cks, h.PopTime)
	}
	if r, ok, err := b.db.LastPopRollback(); err != nil || !ok || r.From != 0 || r.At < h.PopTime {
		t.Fatalf("rollback record: %+v %v %v", r, ok, err)
	}
	// rocketkv still has them in flight, acked with the same handles.
	if code, err := c.Ack(ctx20(t), "g", res.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack after the rollback: %d %v", code, err)
	}
}

// A staged checkpoint (popReviveStageAhead) is not written to the revive
// topic: its messages' copies are already in the pop-retry topic, which
// RocketMQ serves at once, and a check-point too would have RocketMQ
// deliver them twice. A plain checkpoint of the same rollback is written;
// the answer's remark counts what was left out.
func TestPopRollbackLeavesStagedOut(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	reviveTopic := rmqpop.TopicPrefix + b.cfg.BrokerClusterName
	sendBodies(t, rc, "RBS", 3)
	sendBodies(t, rc, "RBP", 2)
	b.caughtUp()
	staged := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RBS", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute})
	plain := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RBP", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute})
	if len(staged.Messages) != 3 || len(plain.Messages) != 2 {
		t.Fatalf("pops: %v and %v", bodies(staged.Messages), bodies(plain.Messages))
	}
	// Stage the first pop's checkpoint as the staged revive does.
	hs := staged.Messages[0].Handle
	ck, ok, err := b.db.Pop().Checkpoint("g", "RBS", 0, hs.CKOffset, hs.PopTime)
	if err != nil || !ok || len(ck.Offsets) != 3 {
		t.Fatalf("checkpoint of the first pop: %+v %v %v", ck, ok, err)
	}
	batch := b.db.Pop().NewBatch()
	if err := batch.StageCheckpoint(&ck, ck.VisibleAt+300000); err != nil {
		t.Fatal(err)
	}
	if err := batch.Commit(false); err != nil {
		t.Fatal(err)
	}
	batch.Close()

	r := call(t, rc, remoting.PopRollback, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("POP_ROLLBACK: %d %s", r.Code, r.Remark)
	}
	if want := fmt.Sprintf("1 check-points written to %s/0 from offset 0; 1 staged checkpoints (3 messages) left out", reviveTopic); !strings.HasPrefix(r.Remark, want) {
		t.Fatalf("POP_ROLLBACK remark %q, want it to start with %q", r.Remark, want)
	}
	b.caughtUp()
	msgs := pullAll(t, b, rc, reviveTopic, 0)
	merged := rmqpop.NewMerger()
	for _, m := range msgs {
		tag, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags)
		if err := merged.Add(tag, m.Body); err != nil {
			t.Fatal(err)
		}
	}
	cks := merged.InFlight()
	hp := plain.Messages[0].Handle
	if len(msgs) != 1 || len(cks) != 1 || cks[0].Topic != "RBP" || cks[0].StartOffset != hp.CKOffset || cks[0].PopTime != hp.PopTime ||
		fmt.Sprint(cks[0].Offsets) != "[0 1]" {
		t.Fatalf("revive topic holds %d messages, check-points %+v; want the plain pop's only", len(msgs), cks)
	}
	// rocketkv keeps the staged checkpoint as it was.
	if got, ok, err := b.db.Pop().Checkpoint("g", "RBS", 0, hs.CKOffset, hs.PopTime); err != nil || !ok || !got.Staged || len(got.Offsets) != 3 {
		t.Fatalf("staged checkpoint after the rollback: %+v %v %v", got, ok, err)
	}
	if _, ok, err := b.db.Pop().Checkpoint("g", "RBP", 0, hp.CKOffset, hp.PopTime); err != nil || !ok {
		t.Fatalf("plain checkpoint after the rollback: %v %v", ok, err)
	}
}
