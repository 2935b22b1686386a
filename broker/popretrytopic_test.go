package broker

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// popResponseReturnActualRetryTopic=true answers a retried message under
// its pop-retry topic without POP_CK; the client builds its handle from
// the answer's header, and the ack of it holds.
func TestPopResponseReturnActualRetryTopic(t *testing.T) {
	b := startTestBroker(t, map[string]string{"popResponseReturnActualRetryTopic": "true"})
	c, rc := popClient(b)
	mustSend(t, rc, "RA", 0, "payload", "")
	b.caughtUp()
	req := popclient.PopRequest{Group: "g", Topic: "RA", QueueID: -1, MaxMsgNums: 1, InvisibleTime: 100 * time.Millisecond}
	if first := mustPop(t, c, req); len(first.Messages) != 1 {
		t.Fatalf("first pop %d", first.Code)
	}
	req.InvisibleTime, req.PollTime = time.Minute, 2*time.Second
	var retry popclient.PopResult
	for deadline := time.Now().Add(10 * time.Second); ; {
		if retry = mustPop(t, c, req); len(retry.Messages) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(retry.Messages) != 1 {
		t.Fatal("message not revived")
	}
	m := retry.Messages[0]
	props := commitlog.ParseProperties(m.Properties)
	if m.Topic != "%RETRY%g_RA" || string(m.Body) != "payload" || m.ReconsumeTimes != 1 {
		t.Fatalf("retried message %+v", m.Message)
	}
	if ck, ok := props[pop.PropertyPopCK]; ok {
		t.Fatalf("retried message carries POP_CK %q", ck)
	}
	if from, ok := props[kvindex.PropertyRevivedFrom]; ok {
		t.Fatalf("retried message carries the broker's own %s %q", kvindex.PropertyRevivedFrom, from)
	}
	if m.Handle.RetryFlag != pop.FlagRetryV1 || m.RealTopic != "%RETRY%g_RA" {
		t.Fatalf("handle %+v, real topic %s", m.Handle, m.RealTopic)
	}
	if _, ok, err := b.popSvc.InFlight("g", m.RealTopic, m.Handle.QueueID, m.QueueOffset); err != nil || !ok {
		t.Fatalf("the retried message is not in flight before its ack (%v)", err)
	}
	if code, _ := c.Ack(ctx20(t), "g", m); code != remoting.Success {
		t.Fatalf("ack of the retried message: %d", code)
	}
	if _, ok, _ := b.popSvc.InFlight("g", m.RealTopic, m.Handle.QueueID, m.QueueOffset); ok {
		t.Fatal("the retried message is still in flight after its ack")
	}
}
