package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// pullQueue pulls the bodies of every message of a queue of a broker
// reached only over the wire, waiting up to 10 s for the queue to end with
// last (the dispatcher indexes in CommitLog order, so everything stored
// before it is indexed too).
func pullQueue(t *testing.T, c *remoting.Client, topic string, qid int32, last string) []string {
	t.Helper()
	var bodies []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		bodies = bodies[:0]
		for off := int64(0); ; {
			resp := call(t, c, remoting.PullMessage, pullReq("inspect", topic, qid, off, 0, 0, "*"), nil)
			if resp.Code != remoting.Success {
				break
			}
			for _, m := range decodeRecords(t, resp.Body) {
				bodies = append(bodies, string(m.Body))
				off = m.QueueOffset + 1
			}
		}
		if (len(bodies) > 0 && bodies[len(bodies)-1] == last) || time.Now().After(deadline) {
			return bodies
		}
	}
}

// Every END_TRANSACTION the broker answered survives a SIGKILL right after
// the last answer: each committed message is in its queue exactly once,
// commits and rollbacks cannot be reversed, a repeated commit stores
// nothing more, and the transactions left open can still be ended.
func TestAnsweredTransactionEndsSurviveSIGKILL(t *testing.T) {
	store := t.TempDir()
	cb := startChildBroker(t, store, freeTCPPort(t))
	c := cb.dial()
	const n = 24
	halves := make([]sentHalf, n)
	for i := range halves {
		halves[i] = sendHalf(t, c, "TxKill", 0, fmt.Sprintf("UNIQ-KILL-%d", i), fmt.Sprintf("tx-%d", i), "", time.Now().UnixMilli())
	}
	// i%3: 0 committed, 1 rolled back, 2 left open.
	var committed []string
	for i, h := range halves {
		state := []int{8, 12}[i%3%2]
		if i%3 == 2 {
			continue
		}
		if r := endTxn(t, c, h, "pg", state, false); r.Code != remoting.Success {
			t.Fatalf("end %s: %d %s", h.uniq, r.Code, r.Remark)
		}
		if state == 8 {
			committed = append(committed, fmt.Sprintf("tx-%d", i))
		}
	}
	cb.kill()
	cb.start()
	c = cb.dial()

	got := pullQueue(t, c, "TxKill", 0, committed[len(committed)-1])
	if fmt.Sprint(got) != fmt.Sprint(committed) {
		t.Fatalf("after the kill TxKill holds %v, want the committed %v", got, committed)
	}
	for i, h := range halves {
		switch i % 3 {
		case 0:
			if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
				t.Errorf("repeated commit of %s after the kill: %d %s", h.uniq, r.Code, r.Remark)
			}
			if r := endTxn(t, c, h, "pg", 12, false); r.Code == remoting.Success {
				t.Errorf("rollback of the committed %s after the kill succeeded", h.uniq)
			}
		case 1:
			if r := endTxn(t, c, h, "pg", 8, false); r.Code == remoting.Success {
				t.Errorf("commit of the rolled-back %s after the kill succeeded", h.uniq)
			}
		case 2:
			if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
				t.Errorf("commit of the open %s after the kill: %d %s", h.uniq, r.Code, r.Remark)
			}
			committed = append(committed, fmt.Sprintf("tx-%d", i))
		}
	}
	if got := pullQueue(t, c, "TxKill", 0, committed[len(committed)-1]); fmt.Sprint(got) != fmt.Sprint(committed) {
		t.Fatalf("after the repeated and late ends TxKill holds %v, want %v", got, committed)
	}
}
