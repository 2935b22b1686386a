package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestPopWithoutPollTimeIsNeverHeld checks that a POP or NOTIFICATION
// with pollTime 0 that finds nothing is answered at once (210, hasMsg
// false), as RocketMQ's PopLongPollingService answers NOT_POLLING before
// it looks at the deadline, even when the client's clock runs ahead of
// the broker's so that bornTime + pollTime is still in the future.
// Held, the request would wait until the client's bornTime and the call
// would time out.
func TestPopWithoutPollTimeIsNeverHeld(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "NP", 0, "x", "")
	b.caughtUp()
	if res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "NP", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute}); len(res.Messages) != 1 {
		t.Fatalf("first pop got %d messages", len(res.Messages))
	}
	ahead := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	ext := map[string]string{"consumerGroup": "g", "topic": "NP", "queueId": "0", "maxMsgNums": "1",
		"invisibleTime": "60000", "pollTime": "0", "bornTime": ahead, "initMode": "0"}
	if r := call(t, rc, remoting.PopMessage, ext, nil); r.Code != remoting.PollingTimeout {
		t.Fatalf("empty pop without polling: code %d (%s), want 210", r.Code, r.Remark)
	}
	r := call(t, rc, remoting.Notification, ext, nil)
	if r.Code != remoting.Success || r.ExtFields["hasMsg"] != "false" {
		t.Fatalf("notification without polling: code %d hasMsg %q", r.Code, r.ExtFields["hasMsg"])
	}
}
