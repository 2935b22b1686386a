package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// A new group's first pop of every queue (queueId -1) that is full before
// it reaches some queues still fixes where the group starts on them, as
// RocketMQ's popMsgFromQueue commits the initial offset of each queue it
// visits: under InitMax (CONSUME_FROM_LAST_OFFSET) a start worked out at a
// later pop would be the queue's last message by then, and the messages
// sent in between would never reach the group.
func TestAFullPopFixesTheStartOfTheQueuesItDoesNotRead(t *testing.T) {
	for _, order := range []bool{false, true} {
		t.Run(fmt.Sprintf("order=%v", order), func(t *testing.T) {
			// Not the in-memory rule: InitMax starts at each queue's last message.
			b := startTestBroker(t, map[string]string{"initPopOffsetByCheckMsgInMem": "false"})
			c, rc := popClient(b)
			const queues = 4
			send := func(kind string, n int) {
				for q := int32(0); q < queues; q++ {
					for i := 0; i < n; i++ {
						mustSend(t, rc, "PinStart", q, fmt.Sprintf("%s-q%d-%d", kind, q, i), "")
					}
				}
				b.caughtUp()
			}
			popAll := func(maxMsgs int) []string {
				r := mustPop(t, c, popclient.PopRequest{Group: "pin", Topic: "PinStart", QueueID: -1, MaxMsgNums: maxMsgs,
					InvisibleTime: time.Minute, InitMode: pop.InitMax, Order: order})
				return bodies(r.Messages)
			}
			send("old", 2)
			first := popAll(1)
			if len(first) != 1 {
				t.Fatalf("first pop: %q, want one message", first)
			}
			send("new", 3)
			var got []string
			for i := 0; i < 8; i++ {
				got = append(got, popAll(32)...)
			}
			var missing []string
			for q := 0; q < queues; q++ {
				for i := 0; i < 3; i++ {
					m := fmt.Sprintf("new-q%d-%d", q, i)
					if !slices.Contains(got, m) && (!order || !strings.HasPrefix(first[0], fmt.Sprintf("old-q%d-", q))) {
						// An orderly queue stays locked by the first pop's
						// batch (not acked), so its new messages wait.
						missing = append(missing, m)
					}
				}
			}
			if len(missing) > 0 {
				t.Errorf("messages sent after the group's first pop never delivered: %q (delivered %q)", missing, got)
			}
		})
	}
}

// Answers the Java client decodes a response header from, whatever their
// code, carry its fields: a POLLING_TIMEOUT (popTime, invisibleTime,
// reviveQid, restNum) and every answer to CHANGE_MESSAGE_INVISIBLETIME
// (popTime, invisibleTime, reviveQid). Without them the client's decode
// throws: the pop waits 3 s, the change is an exception instead of
// AckStatus.NO_EXIST.
func TestPopAnswersTheJavaClientDecodesCarryTheirHeader(t *testing.T) {
	b := startTestBroker(t, nil)
	_, rc := popClient(b)
	mustSend(t, rc, "Hdr", 0, "x", "")
	b.caughtUp()
	wantFields := func(what string, r *remoting.Command, wantCode int32, keys ...string) {
		t.Helper()
		if r.Code != wantCode {
			t.Fatalf("%s: code %d (%s), want %d", what, r.Code, r.Remark, wantCode)
		}
		for _, k := range keys {
			if _, err := strconv.ParseInt(r.ExtFields[k], 10, 64); err != nil {
				t.Errorf("%s: field %s is %q, want a number (%v)", what, k, r.ExtFields[k], r.ExtFields)
			}
		}
	}
	// Born long ago: "timeout too much".
	r := call(t, rc, remoting.PopMessage, map[string]string{"consumerGroup": "hg", "topic": "Hdr", "queueId": "0", "maxMsgNums": "1",
		"invisibleTime": "60000", "pollTime": "0", "bornTime": "1000", "initMode": "0"}, nil)
	wantFields("pop born too long ago", r, remoting.PollingTimeout, "popTime", "invisibleTime", "reviveQid", "restNum")
	// An offset past the queue's end: NO_MESSAGE.
	r = call(t, rc, remoting.ChangeMessageInvisibleTime, map[string]string{"consumerGroup": "hg", "topic": "Hdr", "queueId": "0",
		"extraInfo": "0 1 60000 0 0 b 0 5", "offset": "5", "invisibleTime": "1000"}, nil)
	wantFields("change past the queue's end", r, remoting.NoMessage, "popTime", "invisibleTime", "reviveQid")
}
