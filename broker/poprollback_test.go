package broker

import (
	"fmt"
	"strconv"
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
