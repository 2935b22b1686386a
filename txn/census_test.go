package txn

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// sendHalfTo stores a half for topic as the broker does for a send and
// waits until it is dispatched.
func (f *fixture) sendHalfTo(topic, uniq string) *commitlog.Message {
	f.t.Helper()
	m := &commitlog.Message{Topic: topic, QueueID: 0, BornTimestamp: f.now.UnixMilli(), Body: []byte("b-" + uniq),
		Properties: "PGROUP\x01pg\x02UNIQ_KEY\x01" + uniq + "\x02TRAN_MSG\x01true\x02"}
	ToHalf(m)
	f.storeMs.Store(f.now.UnixMilli())
	res, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store})
	if err != nil {
		f.t.Fatal(err)
	}
	f.caughtUp()
	m.PhyOffset, m.QueueOffset = res.PhyOffset, res.QueueOffset
	return m
}

// OpenByTopic (rocketmq_half_messages) counts the open transactions by
// the topic their message is sent to; a commit, a give-up, and a commit
// the dispatcher recorded before the checker swept its half each take
// one away.
func TestOpenByTopicCountsTheOpenTransactionsOfEachTopic(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second, CheckMax: 1})
	ctx := context.Background()
	count := func(want map[string]int64) {
		t.Helper()
		got, err := f.svc.OpenByTopic(ctx)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("OpenByTopic = %v (%v), want %v", got, err, want)
		}
	}
	a, b := f.sendHalfTo("A", "UA1"), f.sendHalfTo("A", "UA2")
	f.now = f.now.Add(time.Minute) // c is checked and given up at the next pass, a and b end first
	c := f.sendHalfTo("C", "UC1")
	count(map[string]int64{"A": 2, "C": 1})

	if err := f.svc.End(ctx, commitReq(a)); err != nil {
		t.Fatal(err)
	}
	count(map[string]int64{"A": 1, "C": 1})

	// b's committed message indexed before its end is recorded (a crash
	// in between): its half stays listed open until the checker sweeps
	// it, but it is not counted.
	m, err := committedMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(ctx, m); err != nil {
		t.Fatal(err)
	}
	f.caughtUp()
	if _, open := f.open(b.PhyOffset); !open {
		t.Fatal("the half of b is no longer listed open: the test does not test what it says")
	}
	count(map[string]int64{"C": 1})

	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st.Discarded != 1 {
		t.Fatalf("pass %+v, want c given up", st)
	}
	if _, open := f.open(c.PhyOffset); open {
		t.Fatal("c is still open after its give-up")
	}
	count(map[string]int64{})
}
