package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// A topic deleted while dispatch is behind its last records, the broker
// SIGKILLed right after DELETE_TOPIC_IN_BROKER is answered, stays deleted
// through the restart: the dispatch of the restart, which reads those
// records again, leaves them out of the index (the deletion offset the
// dispatcher records, kvindex.Dispatcher.DeleteTopic). The topic created
// again has empty queues, its first message is at queue offset 0 and
// reads back, and the topic sent to alongside keeps every acknowledged
// message at its offset. A dispatch batch once a second at most keeps
// dispatch behind the sends and the deletion; the dispatched offset the
// killed broker left in its store says whether the kill came in time.
func TestTopicDeletionSurvivesSIGKILLBehindDispatch(t *testing.T) {
	const (
		iterations = 6
		perTopic   = 24 // messages to each topic per iteration
		queues     = 4
		deleted    = "DelT"
		kept       = "KeptT"
	)
	store := t.TempDir()
	cb := startChildBroker(t, store, freeTCPPort(t), "dispatchBatchIntervalMicros=1000000")
	c := cb.dial()
	createTopic(t, c, deleted, queues, queues)
	createTopic(t, c, kept, queues, queues)
	keptAcked := map[int32][]string{} // queue of kept -> bodies by queue offset
	keptSent := 0
	sendKept := func(c *remoting.Client, body string) {
		t.Helper()
		q := int32(keptSent % queues)
		keptSent++
		resp := mustSend(t, c, kept, q, body, "")
		if off := header(t, resp, "queueOffset"); off != int64(len(keptAcked[q])) {
			t.Fatalf("%s sent to %s/%d at queue offset %d, want %d", body, kept, q, off, len(keptAcked[q]))
		}
		keptAcked[q] = append(keptAcked[q], body)
	}
	behind := 0 // kills that left dispatch behind the deleted topic's records
	for it := range iterations {
		// The burst begins just after a dispatch batch: the next one
		// waits a second, longer than the burst and the deletion take.
		sendKept(c, fmt.Sprintf("open-%d", it))
		waitDispatchedChild(t, c)
		var lastDeleted int64 // CommitLog offset of the deleted topic's last record
		for i := range perTopic {
			resp := mustSend(t, c, deleted, int32(i%queues), fmt.Sprintf("gone-%d-%d", it, i), "")
			_, phy, err := commitlog.ParseMessageID(resp.ExtFields["msgId"])
			if err != nil {
				t.Fatalf("msgId %q of a send: %v", resp.ExtFields["msgId"], err)
			}
			lastDeleted = phy
			sendKept(c, fmt.Sprintf("kept-%d-%d", it, i))
		}
		if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": deleted}, nil); r.Code != remoting.Success {
			t.Fatalf("iteration %d: delete %s: %d %s", it, deleted, r.Code, r.Remark)
		}
		cb.kill()
		if dispatched := persistedDispatched(t, store); dispatched <= lastDeleted {
			behind++
		}

		cb.start()
		c = cb.dial()
		waitDispatchedChild(t, c)
		createTopic(t, c, deleted, queues, queues)
		for q := range int32(queues) {
			if off := maxOffsetOf(t, c, deleted, q); off != 0 {
				t.Fatalf("iteration %d: %s/%d created again after a SIGKILL has max offset %d, want 0 (records of the deleted topic were indexed into it)",
					it, deleted, q, off)
			}
		}
		q, body := int32(it%queues), fmt.Sprintf("again-%d", it)
		if off := header(t, mustSend(t, c, deleted, q, body, ""), "queueOffset"); off != 0 {
			t.Fatalf("iteration %d: the first send to %s/%d created again landed at queue offset %d, want 0", it, deleted, q, off)
		}
		waitDispatchedChild(t, c)
		if got := pullQueueBodies(t, c, deleted, q); len(got) != 1 || got[0] != body {
			t.Fatalf("iteration %d: %s/%d created again reads %q, want only %q", it, deleted, q, got, body)
		}
		for q := range int32(queues) {
			got, want := pullQueueBodies(t, c, kept, q), keptAcked[q]
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("iteration %d: %s/%d reads %q, want the acknowledged %q", it, kept, q, got, want)
			}
		}
	}
	t.Logf("%d of %d kills left dispatch behind the deleted topic's records", behind, iterations)
	if behind == 0 {
		t.Fatal("no kill came before dispatch passed the deleted topic's records: the restart's filter was never exercised")
	}
}

// waitDispatchedChild waits until a broker has dispatched everything
// appended (its runtime info says no byte is behind).
func waitDispatchedChild(t *testing.T, c *remoting.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lag := runtimeInfo(t, c)["dispatchBehindBytes"]
		if lag == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatch still %s bytes behind", lag)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// persistedDispatched reads the dispatched offset a stopped (or killed)
// broker left in its store: where the dispatch of its restart begins.
func persistedDispatched(t *testing.T, store string) int64 {
	t.Helper()
	var off int64
	readStoppedIndex(t, store, func(db *kvindex.DB) (err error) {
		off, err = db.Dispatched()
		return err
	})
	return off
}

// readStoppedIndex opens, read-only, the index a stopped (or killed)
// broker left in its store, runs read on it and closes it.
func readStoppedIndex(t *testing.T, store string, read func(*kvindex.DB) error) {
	t.Helper()
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(store, kvindex.DirName), ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("open the stopped broker's index: %v", err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Errorf("close the stopped broker's index: %v", err)
		}
	}()
	if err := read(db); err != nil {
		t.Fatalf("read the stopped broker's index: %v", err)
	}
}

// maxOffsetOf asks GET_MAX_OFFSET of a queue.
func maxOffsetOf(t *testing.T, c *remoting.Client, topic string, q int32) int64 {
	t.Helper()
	r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(int(q))}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("max offset of %s/%d: %d %s", topic, q, r.Code, r.Remark)
	}
	return header(t, r, "offset")
}

// pullQueueBodies pulls a queue from offset 0 to its end and returns the
// bodies, failing the test on a gap in the queue offsets.
func pullQueueBodies(t *testing.T, c *remoting.Client, topic string, q int32) []string {
	t.Helper()
	var out []string
	for off := int64(0); ; {
		r := call(t, c, remoting.PullMessage, pullReq("inspect", topic, q, off, 0, 0, "*"), nil)
		switch r.Code {
		case remoting.Success:
		case remoting.PullNotFound, remoting.PullOffsetMoved:
			return out
		default:
			t.Fatalf("pull %s/%d at %d: %d %s", topic, q, off, r.Code, r.Remark)
		}
		for _, m := range decodeRecords(t, r.Body) {
			if m.QueueOffset != off {
				t.Fatalf("pull %s/%d: offset %d where %d was expected", topic, q, m.QueueOffset, off)
			}
			out = append(out, string(m.Body))
			off++
		}
	}
}

// A topic deletion SIGKILLed after any of its steps (each a commit of
// its own) is all or nothing after the next start. Killed once it deleted
// the topic's config, it is completed before the broker serves: the
// topic's config, queues and committed offsets are all gone, and the
// topic created again numbers its messages from 0 and stays through a
// later restart (the deletion's marker was cleared, not run again over
// the new topic). Killed before, the topic is whole. Another topic and
// its offsets are untouched either way.
func TestTopicDeletionKilledAfterEachStepIsAllOrNothing(t *testing.T) {
	const doomed, kept = "Doomed", "KeptToo"
	for _, tc := range []struct {
		step    string
		deleted bool
	}{
		{stepTopicDeletionBegun, false},
		{stepTopicConfigDeleted, true},
		{stepTopicQueuesDropped, true},
		{stepTopicConsumerStateDeleted, true},
	} {
		step := tc.step
		t.Run(strings.ReplaceAll(step, " ", "_"), func(t *testing.T) {
			store := t.TempDir()
			cb := startChildBroker(t, store, freeTCPPort(t), childKillAtStep+"="+strings.ReplaceAll(step, " ", "_"))
			c := cb.dial()
			createTopic(t, c, doomed, 2, 2)
			createTopic(t, c, kept, 2, 2)
			keptBodies := map[int32][]string{}
			for i := range 4 {
				q := int32(i % 2)
				mustSend(t, c, doomed, q, fmt.Sprintf("doomed-%d", i), "")
				mustSend(t, c, kept, q, fmt.Sprintf("kept-%d", i), "")
				keptBodies[q] = append(keptBodies[q], fmt.Sprintf("kept-%d", i))
			}
			waitDispatchedChild(t, c)
			commit(t, c, "dg", doomed, 0, 2)
			commit(t, c, "dg", kept, 0, 1)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if r, err := c.Invoke(ctx, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": doomed}, nil)); err == nil {
				t.Fatalf("the deletion was answered (%d %s): the broker did not kill itself at %q", r.Code, r.Remark, step)
			}
			cb.kill()
			if pending := pendingTopicDeletions(t, store); fmt.Sprint(pending) != "["+doomed+"]" {
				t.Fatalf("the killed broker's store has pending deletions %q, want [%s]: the kill did not come half way", pending, doomed)
			}

			cb.extra = nil
			cb.start()
			c = cb.dial()
			waitDispatchedChild(t, c)
			checkKept := func() {
				t.Helper()
				if off := committedOffset(t, c, "dg", kept, 0); off != 1 {
					t.Errorf("committed offset of %s: %d, want 1", kept, off)
				}
				for q := range int32(2) {
					if got := pullQueueBodies(t, c, kept, q); fmt.Sprint(got) != fmt.Sprint(keptBodies[q]) {
						t.Errorf("%s/%d reads %q, want %q", kept, q, got, keptBodies[q])
					}
				}
			}
			checkKept()
			if !tc.deleted {
				if r := call(t, c, remoting.GetTopicConfig, map[string]string{"topic": doomed}, nil); r.Code != remoting.Success {
					t.Fatalf("config of the topic whose deletion was killed before it deleted anything: %d %s", r.Code, r.Remark)
				}
				if off := committedOffset(t, c, "dg", doomed, 0); off != 2 {
					t.Errorf("committed offset of %s: %d, want 2", doomed, off)
				}
				if got := pullQueueBodies(t, c, doomed, 0); fmt.Sprint(got) != "[doomed-0 doomed-2]" {
					t.Errorf("%s/0 reads %q, want [doomed-0 doomed-2]", doomed, got)
				}
				if pending := pendingAfterStop(t, cb, store); len(pending) != 0 {
					t.Fatalf("pending deletions after the start kept the topic: %q", pending)
				}
				return
			}
			if r := call(t, c, remoting.GetTopicConfig, map[string]string{"topic": doomed}, nil); r.Code != remoting.TopicNotExist {
				t.Errorf("config of the deleted topic after the restart: %d %s", r.Code, r.Remark)
			}
			r := call(t, c, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "dg", "topic": doomed, "queueId": "0", "setZeroIfNotFound": "false"}, nil)
			if r.Code != remoting.QueryNotFound {
				t.Errorf("committed offset of the deleted topic after the restart: %d %s %v", r.Code, r.Remark, r.ExtFields)
			}
			createTopic(t, c, doomed, 2, 2)
			for q := range int32(2) {
				if off := maxOffsetOf(t, c, doomed, q); off != 0 {
					t.Fatalf("%s/%d created again ends at %d, want 0", doomed, q, off)
				}
			}
			if off := header(t, mustSend(t, c, doomed, 0, "again", ""), "queueOffset"); off != 0 {
				t.Fatalf("the first message of %s created again is at queue offset %d, want 0", doomed, off)
			}
			waitDispatchedChild(t, c)

			cb.kill()
			cb.start()
			c = cb.dial()
			waitDispatchedChild(t, c)
			if got := pullQueueBodies(t, c, doomed, 0); fmt.Sprint(got) != "[again]" {
				t.Fatalf("after one more restart %s/0 created again reads %q, want [again]", doomed, got)
			}
		})
	}
}

// pendingAfterStop stops the child broker and returns the topic deletions
// it left unfinished in its store.
func pendingAfterStop(t *testing.T, cb *childBroker, store string) []string {
	t.Helper()
	cb.kill()
	return pendingTopicDeletions(t, store)
}

// pendingTopicDeletions reads the topic deletions a stopped (or killed)
// broker left unfinished in its store.
func pendingTopicDeletions(t *testing.T, store string) []string {
	t.Helper()
	var pending []string
	readStoppedIndex(t, store, func(db *kvindex.DB) (err error) {
		pending, err = db.PendingTopicDeletions()
		return err
	})
	return pending
}
