package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// RocketMQ bounds a pop's maxMsgNums from above only (INVALID_PARAMETER
// past 32, naming brokerIP1). A pop asking for no message, 0 or less,
// reads no queue: it is answered POLLING_TIMEOUT with nothing, at once
// without a poll time, at the end of its poll time with one, and the
// messages stay for the next pop.
func TestPopOfNoMessage(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "NM", 0, "x", "")
	b.caughtUp()
	pop1 := func(maxNums string, pollTime time.Duration) *remoting.Command {
		return call(t, rc, remoting.PopMessage, map[string]string{"consumerGroup": "g", "topic": "NM", "queueId": "-1",
			"maxMsgNums": maxNums, "invisibleTime": "60000", "pollTime": strconv.FormatInt(pollTime.Milliseconds(), 10),
			"bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10), "initMode": "0"}, nil)
	}
	if r := pop1("33", 0); r.Code != remoting.InvalidParameter ||
		r.Remark != "the broker["+b.announcedHost()+"] pop message's num is greater than 32" {
		t.Fatalf("pop of 33: %d %q", r.Code, r.Remark)
	}
	for _, n := range []string{"0", "-1"} {
		r := pop1(n, 0)
		if r.Code != remoting.PollingTimeout || r.Remark != "NO_MESSAGE_IN_QUEUE" || len(r.Body) != 0 {
			t.Fatalf("pop of %s: %d %q with %d bytes, want 210 NO_MESSAGE_IN_QUEUE and nothing", n, r.Code, r.Remark, len(r.Body))
		}
		if got := r.ExtFields["restNum"]; got != "1" {
			t.Fatalf("pop of %s: restNum %q, want 1 (the message left behind)", n, got)
		}
	}
	// Held to its poll time, whatever arrives meanwhile.
	done := make(chan *remoting.Command, 1)
	go func() { done <- pop1("0", 500*time.Millisecond) }()
	waitFor(t, "the pop of none held", func() bool { return b.popHolds.count(popHoldKey{"NM", "g", -1}) == 1 })
	mustSend(t, rc, "NM", 0, "y", "")
	if r := <-done; r.Code != remoting.PollingTimeout || len(r.Body) != 0 {
		t.Fatalf("held pop of none: %d %q with %d bytes", r.Code, r.Remark, len(r.Body))
	}
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "NM", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if got := strings.Join(bodies(res.Messages), " "); got != "x y" {
		t.Fatalf("pop after the pops of none: %q, want x y", got)
	}
}
