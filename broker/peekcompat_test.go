package broker

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// PEEK_MESSAGE takes any maxMsgNums, as RocketMQ's PeekMessageProcessor
// (which has no bound of 32, unlike POP_MESSAGE): each queue gives at
// most 32 of them (RocketMQ's store hands out no more in one read), a
// peek of every queue reads on into the next queue, and 0 finds nothing
// (PULL_NOT_FOUND, restNum counting every message), where rocketkv once
// peeked one at least and 32 at most. A negative number fails as Java's
// processor does (SYSTEM_ERROR: it allocates a list of that capacity).
func TestPeekTakesAnyMaxMsgNums(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	createTopic(t, rc, "PKN", 2, 2)
	for q := range int32(2) {
		for i := range 40 {
			mustSend(t, rc, "PKN", q, fmt.Sprintf("q%d-%d", q, i), "")
		}
	}
	b.caughtUp()
	for _, tc := range []struct {
		queueID  int32
		maxNums  int
		wantCode int32
		want     int
	}{
		{-1, 64, remoting.Success, 64},
		{-1, 100, remoting.Success, 64}, // 32 of each queue
		{0, 40, remoting.Success, 32},
		{-1, 33, remoting.Success, 33},
		{-1, 0, remoting.PullNotFound, 0},
		{0, -1, remoting.SystemError, 0},
	} {
		r := call(t, rc, remoting.PeekMessage, map[string]string{"consumerGroup": "pkn", "topic": "PKN",
			"queueId": strconv.Itoa(int(tc.queueID)), "maxMsgNums": strconv.Itoa(tc.maxNums)}, nil)
		got := 0
		if len(r.Body) > 0 {
			got = len(decodeRecords(t, r.Body))
		}
		if r.Code != tc.wantCode || got != tc.want {
			t.Errorf("peek of %d from queue %d: code %d (%s), %d messages; want code %d, %d messages",
				tc.maxNums, tc.queueID, r.Code, r.Remark, got, tc.wantCode, tc.want)
		}
		if tc.maxNums == 0 {
			wantRest := "80"
			if tc.queueID >= 0 {
				wantRest = "40"
			}
			if r.ExtFields["restNum"] != wantRest {
				t.Errorf("peek of %d from queue %d: restNum %q, want %s", tc.maxNums, tc.queueID, r.ExtFields["restNum"], wantRest)
			}
		}
	}
	// Peeking changed nothing: a pop still gets the first message of a
	// queue.
	code, msgs, err := c.Peek(ctx20(t), "pkn", "PKN", 1, 1)
	if err != nil || code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "q1-0" {
		t.Fatalf("peek of queue 1 after the others: %d %v %v", code, msgs, err)
	}
}

// A peek of every queue starts from a different queue each time, as
// RocketMQ's starts from a random one: a peek of one message does not
// show the first queue's only.
func TestPeekOfEveryQueueRotatesItsFirstQueue(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	createTopic(t, rc, "PKR", 4, 4)
	for q := range int32(4) {
		mustSend(t, rc, "PKR", q, fmt.Sprintf("q%d", q), "")
	}
	b.caughtUp()
	seen := map[int32]int{}
	for range 4 {
		code, msgs, err := c.Peek(ctx20(t), "pkr", "PKR", -1, 1)
		if err != nil || code != remoting.Success || len(msgs) != 1 {
			t.Fatalf("peek of one: %d %v %v", code, msgs, err)
		}
		seen[msgs[0].QueueID]++
	}
	if len(seen) != 4 {
		t.Fatalf("4 peeks of one message showed queues %v, want each of the 4 once", seen)
	}
}
