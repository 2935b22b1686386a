package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// PEEK_MESSAGE reads the group's pop-retry topic too, as RocketMQ's
// PeekMessageProcessor: first on every fifth peek, else after the topic
// while the batch has room; its records come back as stored, under the
// pop-retry topic. Peeking still changes nothing.
func TestPeekReadsThePopRetryTopic(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	retryTopic := pop.RetryTopicV1("PK", "pk")
	mustSend(t, rc, "PK", 1, "normal", "")
	mustSend(t, rc, retryTopic, 0, "retried", "")
	b.caughtUp()
	peek := func(queueID int32, maxNums int) string {
		t.Helper()
		code, msgs, err := c.Peek(ctx20(t), "pk", "PK", queueID, maxNums)
		if err != nil || code != remoting.Success {
			t.Fatalf("peek of %d from queue %d: %d %v", maxNums, queueID, code, err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Topic+":"+string(m.Body))
		}
		return strings.Join(out, " ")
	}
	// The topic's queue 0 is empty: only the pop-retry message is there.
	if got := peek(0, 4); got != retryTopic+":retried" {
		t.Fatalf("peek of an empty queue: %q, want the pop-retry message", got)
	}
	// Peeks of one message: the pop-retry topic first on one in five.
	retried := 0
	for range 10 {
		switch got := peek(-1, 1); got {
		case retryTopic + ":retried":
			retried++
		case "PK:normal":
		default:
			t.Fatalf("peek of one: %q", got)
		}
	}
	if retried != 2 {
		t.Fatalf("%d of 10 peeks of one read the pop-retry topic first, want 2", retried)
	}
	if got := peek(-1, 2); got != "PK:normal "+retryTopic+":retried" && got != retryTopic+":retried PK:normal" {
		t.Fatalf("peek of two: %q", got)
	}
	res := mustPop(t, c, popclient.PopRequest{Group: "pk", Topic: "PK", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if len(res.Messages) != 2 {
		t.Fatalf("pop after the peeks: %v, want both messages", bodies(res.Messages))
	}
}
