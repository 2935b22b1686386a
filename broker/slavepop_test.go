package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave answers POP, ACK, BATCH_ACK and CHANGE_MESSAGE_INVISIBLETIME as
// RocketMQ 5.3.3's slave does, slaveReadEnable or not, and writes
// nothing: a pop gets the messages (RocketMQ's checkpoint write goes
// through EscapeBridge, which on a slave puts nothing and only fails),
// and the next pop goes on past them (what it handed out is kept in
// memory only, as RocketMQ's slave's PopBufferMergeService); non-orderly
// acks are SUCCESS and change nothing; a change of invisible time of a
// message popped without order is SYSTEM_ERROR (its new checkpoint
// cannot be put), of an orderly one SUCCESS. The checks before them still
// answer as on a master. (Orderly pops and acks on a slave:
// TestSlaveOrderlyPopsLockTheQueue; across a restart of the slave:
// TestASlavesOwnOffsetsSurviveItsRestart.)
func TestSlaveAnswersPopsWithoutRecordingThem(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	_, mrc := popClient(master)
	sendBodies(t, mrc, "SP", 2)
	waitReplicated(t, master, slave)
	sc, src := popClient(slave)
	createTopic(t, src, "SP", 8, 8) // the slave's own copy of the config, until it syncs

	req := popclient.PopRequest{Group: "g", Topic: "SP", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute}
	first := mustPop(t, sc, req)
	if first.Code != remoting.Success || first.Remark != "FOUND" || fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("pop on the slave: code %d %q, %v; want SUCCESS FOUND [m0 m1]", first.Code, first.Remark, bodies(first.Messages))
	}
	if again := mustPop(t, sc, req); len(again.Messages) != 0 {
		t.Fatalf("second pop on the slave: %v; want nothing, the first handed out both", bodies(again.Messages))
	}
	h := first.Messages[0].Handle
	if _, ok, err := slave.db.Pop().Checkpoint("g", "SP", 0, h.CKOffset, h.PopTime); err != nil || ok {
		t.Fatalf("the slave's pop wrote a checkpoint (%v)", err)
	}
	if pos, ok, err := slave.db.Pop().Position("g", "SP", 0); err != nil || ok {
		t.Fatalf("the slave's pop wrote a position %d (%v)", pos, err)
	}

	ctx := ctx20(t)
	if code, err := sc.Ack(ctx, "g", first.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack on the slave: %d %v, want SUCCESS", code, err)
	}
	if code, err := sc.BatchAck(ctx, "g", "SP", first.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack on the slave: %d %v, want SUCCESS", code, err)
	}
	beyond := h
	beyond.QueueOffset = 99
	if code, err := sc.AckHandle(ctx, "g", "SP", beyond); err != nil || code != remoting.NoMessage {
		t.Fatalf("ack on the slave of an offset past the queue: %d %v, want NO_MESSAGE", code, err)
	}
	r, err := src.Invoke(ctx, popclient.ChangeInvisibleRequest("g", "SP", h, time.Minute))
	if err != nil || r.Code != remoting.SystemError || r.Remark != "" {
		t.Fatalf("change of invisible time on the slave: %+v %v, want SYSTEM_ERROR without a remark", r, err)
	}
	if again := mustPop(t, sc, req); len(again.Messages) != 0 {
		t.Fatalf("pop on the slave after its acks: %v; want nothing, the acks changed nothing", bodies(again.Messages))
	}

	req.Order = true
	ordered := mustPop(t, sc, req)
	if ordered.Code != remoting.Success || ordered.ReviveQID != pop.OrderReviveQueue || len(ordered.Messages) == 0 {
		t.Fatalf("orderly pop on the slave: code %d reviveQid %d, %v", ordered.Code, ordered.ReviveQID, bodies(ordered.Messages))
	}
	code, nh, err := sc.ChangeInvisibleTime(ctx, "g", ordered.Messages[0], time.Minute)
	if err != nil || code != remoting.Success || nh.PopTime != ordered.PopTime {
		t.Fatalf("orderly change of invisible time on the slave: %d %v, popTime %d; want SUCCESS with the pop's %d", code, err, nh.PopTime, ordered.PopTime)
	}

	// The master's state is the one that counts: none of it moved. Its
	// in-flight state, copied to the slave, stays as the master wrote it
	// whatever the slave is asked.
	mc, _ := popClient(master)
	req.Order = false
	onMaster := mustPop(t, mc, req)
	if fmt.Sprint(bodies(onMaster.Messages)) != "[m0 m1]" {
		t.Fatalf("pop on the master after the slave's: %v", bodies(onMaster.Messages))
	}
	syncSlave(t, slave, master)
	if code, err := sc.Ack(ctx, "g", onMaster.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack on the slave of a message popped from the master: %d %v, want SUCCESS", code, err)
	}
	if code, err := sc.BatchAck(ctx, "g", "SP", onMaster.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack on the slave of messages popped from the master: %d %v, want SUCCESS", code, err)
	}
	mh := onMaster.Messages[0].Handle
	if ck, ok, err := slave.db.Pop().Checkpoint("g", "SP", 0, mh.CKOffset, mh.PopTime); err != nil || !ok || fmt.Sprint(ck.Offsets) != "[0 1]" {
		t.Fatalf("the slave's copy of the master's checkpoint after acks on the slave: %+v %v %v, want offsets [0 1]", ck, ok, err)
	}
	// A slave's pop starts from the committed offset, as RocketMQ's: the
	// messages the master has in flight come again from the slave (the
	// master's pop position is past them), to a group that did not pop
	// them from the slave.
	req.Group = "g2"
	mustPop(t, mc, req)
	syncSlave(t, slave, master)
	if got := mustPop(t, sc, req); fmt.Sprint(bodies(got.Messages)) != "[m0 m1]" {
		t.Fatalf("pop on the slave of messages in flight on the master: %v, want [m0 m1]", bodies(got.Messages))
	}
}

// A slave's pops hand out each message once inside its invisible time:
// consecutive pops between two syncs get the next messages, as RocketMQ's
// slave's (whose PopBufferMergeService remembers what it handed out), and
// so do concurrent ones. What the sync brings moves a group on when the
// master's committed offset is ahead, never back past what the slave
// handed out and is still invisible; once the invisible time is over,
// what the master did not see acknowledged comes again.
func TestSlavePopsHandOutEachMessageOnce(t *testing.T) {
	master, slave, mc, mrc := startSlaveWithMessages(t, "HO", 6)
	sc, _ := popClient(slave)
	ctx := ctx20(t)

	popSlave := func(group string, n int, invisible time.Duration) popclient.PopResult {
		t.Helper()
		return mustPop(t, sc, popclient.PopRequest{Group: group, Topic: "HO", QueueID: 0, MaxMsgNums: n, InvisibleTime: invisible})
	}
	expect := func(what string, got popclient.PopResult, want string) {
		t.Helper()
		if s := fmt.Sprint(bodies(got.Messages)); s != want {
			t.Fatalf("%s: %s, want %s", what, s, want)
		}
	}
	expect("first pop on the slave", popSlave("g", 2, time.Minute), "[m0 m1]")
	expect("second pop on the slave", popSlave("g", 2, time.Minute), "[m2 m3]")
	syncSlave(t, slave, master) // the master has no offset of g: nothing moves
	expect("pop on the slave after a sync", popSlave("g", 2, time.Minute), "[m4 m5]")
	expect("pop on the slave of a queue it handed out whole", popSlave("g", 2, time.Minute), "[]")

	// The master's committed offset ahead of what the slave handed out:
	// the slave goes on from there.
	onMaster := mustPop(t, mc, popclient.PopRequest{Group: "ahead", Topic: "HO", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if code, err := mc.BatchAck(ctx, "ahead", "HO", onMaster.Messages); err != nil || code != remoting.Success || len(onMaster.Messages) != 6 {
		t.Fatalf("pop and ack of %v on the master: %d %v", bodies(onMaster.Messages), code, err)
	}
	mustSend(t, mrc, "HO", 0, "n0", "")
	mustSend(t, mrc, "HO", 0, "n1", "")
	waitReplicated(t, master, slave)
	expect("pop of group ahead on the slave", popSlave("ahead", 1, time.Minute), "[m0]")
	syncSlave(t, slave, master)
	expect("pop of group ahead on the slave after the master's offset came", popSlave("ahead", 32, time.Minute), "[n0 n1]")

	// The master's committed offset behind what the slave handed out: not
	// back past it.
	expect("pop of group behind on the slave", popSlave("behind", 3, time.Minute), "[m0 m1 m2]")
	onMaster = mustPop(t, mc, popclient.PopRequest{Group: "behind", Topic: "HO", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if code, err := mc.Ack(ctx, "behind", onMaster.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack of %v on the master: %d %v", bodies(onMaster.Messages), code, err)
	}
	syncSlave(t, slave, master)
	if off, ok, err := slave.offsets.Get("behind", "HO", 0); err != nil || !ok || off != 1 {
		t.Fatalf("the master's offset of group behind on the slave: %d %v %v, want 1", off, ok, err)
	}
	expect("pop of group behind on the slave after the master's offset came", popSlave("behind", 2, time.Minute), "[m3 m4]")

	// Once their invisible time is over, the messages the slave handed
	// out come again: the master did not see them acknowledged.
	short := popSlave("short", 2, time.Second)
	expect("pop with a short invisible time", short, "[m0 m1]")
	expect("next pop with a short invisible time", popSlave("short", 2, time.Second), "[m2 m3]")
	time.Sleep(time.Until(time.UnixMilli(short.PopTime + 2*short.InvisibleTime + 100)))
	expect("pop once the invisible time is over", popSlave("short", 2, time.Second), "[m0 m1]")

	// Concurrent pops of one queue share its messages out.
	const pops = 8
	got := make(chan []string, pops)
	for range pops {
		go func() {
			res, err := sc.Pop(ctx, popclient.PopRequest{Group: "many", Topic: "HO", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
			if err != nil {
				t.Error(err)
			}
			got <- bodies(res.Messages)
		}()
	}
	seen := map[string]int{}
	for range pops {
		for _, b := range <-got {
			seen[b]++
		}
	}
	if len(seen) != pops {
		t.Fatalf("%d concurrent pops of one message each on the slave got %v, want each of 8 messages once", pops, seen)
	}

	// A NOTIFICATION, and the readiness of a held pop, count from where
	// the slave's next pop starts: nothing waits for group many, and a
	// held pop of it gets the next message sent.
	if code, has, _, err := sc.Notification(ctx, "many", "HO", 0, 0, false); err != nil || code != remoting.Success || has {
		t.Fatalf("notification on the slave of a queue handed out whole: %d hasMsg %v %v, want false", code, has, err)
	}
	held := make(chan popclient.PopResult, 1)
	go func() {
		res, err := sc.Pop(ctx, popclient.PopRequest{Group: "many", Topic: "HO", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, PollTime: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		held <- res
	}()
	mustSend(t, mrc, "HO", 0, "late", "")
	expect("held pop on the slave", <-held, "[late]")
}

// A slave's pop of a group it does not hold, created with
// autoCreateSubscriptionGroup, is answered with the group's defaults and
// stores nothing: the slave's group table stays its master's copy, at
// the master's data version, so the next sync has nothing to replace.
func TestSlavePopStoresNoAutoCreatedGroup(t *testing.T) {
	master, slave, _, _ := startSlaveWithMessages(t, "AG", 1)
	before := slave.groups.Version()
	sc, _ := popClient(slave)
	res := mustPop(t, sc, popclient.PopRequest{Group: "fresh", Topic: "AG", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if res.Code != remoting.Success || fmt.Sprint(bodies(res.Messages)) != "[m0]" {
		t.Fatalf("pop on the slave of a group it does not hold: %d %v", res.Code, bodies(res.Messages))
	}
	if gc, ok, err := slave.groups.Get("fresh"); err != nil || ok {
		t.Fatalf("the slave stored the group its pop created: %+v %v", gc, err)
	}
	if after := slave.groups.Version(); !sameVersion(after, before) || !sameVersion(after, master.groups.Version()) {
		t.Fatalf("the slave's group table version moved: %+v, before %+v, master's %+v", after, before, master.groups.Version())
	}
}

// A pop held on a slave wakes when the invisible time of what the
// slave's pops handed out of its queue runs out, as a revive's put wakes
// it on a master: it gets the messages again then, not at the end of its
// poll time.
func TestSlaveHeldPopWakesWhenHandedOutMessagesExpire(t *testing.T) {
	_, slave, _, _ := startSlaveWithMessages(t, "HW", 2)
	sc, _ := popClient(slave)
	first := mustPop(t, sc, popclient.PopRequest{Group: "w", Topic: "HW", QueueID: 0, MaxMsgNums: 2, InvisibleTime: 3 * time.Second})
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("first pop on the slave: %v, want [m0 m1]", bodies(first.Messages))
	}

	const pollTime = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*pollTime)
	defer cancel()
	type answer struct {
		res popclient.PopResult
		at  time.Time
		err error
	}
	held := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := sc.Pop(ctx, popclient.PopRequest{Group: "w", Topic: "HW", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, PollTime: pollTime})
		held <- answer{res, time.Now(), err}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		slave.popHolds.mu.Lock()
		n := slave.popHolds.total
		slave.popHolds.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second pop on the slave is not held")
		}
	}
	a := <-held
	if a.err != nil {
		t.Fatal(a.err)
	}
	if fmt.Sprint(bodies(a.res.Messages)) != "[m0 m1]" {
		t.Fatalf("held pop on the slave: %v, want [m0 m1] once their invisible time ran out", bodies(a.res.Messages))
	}
	if waited := a.at.Sub(start); waited >= pollTime/2 {
		t.Fatalf("held pop on the slave answered after %v of its %v poll time: not woken when the invisible time ran out", waited, pollTime)
	}
}

// Orderly pops on a slave keep their batch and their progress, as
// RocketMQ's slave keeps them in its ConsumerOrderInfoManager and offset
// table: a second orderly consumer of the group gets nothing
// while the first holds the batch; the first's acks on the slave free
// the queue, wake the second's held pop and move the group on, so that
// it gets the next messages at once; an ack of an offset outside the
// batch is MESSAGE_ILLEGAL; a change of invisible time below the
// committed offset is SUCCESS with zero fields, as RocketMQ answers it.
// The slave's store holds them apart from what it copies from its master
// (keyspace 0x59, which a restart of the slave loads): neither its
// orderly batches nor its committed offsets hold any of it, and the
// master's state is as it was.
func TestSlaveOrderlyPopsLockTheQueue(t *testing.T) {
	master, slave, _, _ := startSlaveWithMessages(t, "SO", 4)
	sc, _ := popClient(slave)
	ctx := ctx20(t)

	req := popclient.PopRequest{Group: "o", Topic: "SO", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "first"}
	first := mustPop(t, sc, req)
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("first orderly pop on the slave: %v, want [m0 m1]", bodies(first.Messages))
	}
	req.AttemptID = "second"
	if got := mustPop(t, sc, req); len(got.Messages) != 0 {
		t.Fatalf("second consumer's orderly pop on the slave while the first holds the batch: %v, want nothing", bodies(got.Messages))
	}

	held := make(chan popclient.PopResult, 1)
	start := time.Now()
	const pollTime = 20 * time.Second
	go func() {
		hreq := req
		hreq.PollTime = pollTime
		res, err := sc.Pop(ctx, hreq)
		if err != nil {
			t.Error(err)
		}
		held <- res
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		slave.popHolds.mu.Lock()
		n := slave.popHolds.total
		slave.popHolds.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second consumer's orderly pop on the slave is not held")
		}
	}
	for _, m := range first.Messages {
		if code, err := sc.Ack(ctx, "o", m); err != nil || code != remoting.Success {
			t.Fatalf("orderly ack of %s on the slave: %d %v, want SUCCESS", m.Body, code, err)
		}
	}
	next := <-held
	if fmt.Sprint(bodies(next.Messages)) != "[m2 m3]" {
		t.Fatalf("second consumer's held orderly pop on the slave after the first's acks: %v, want [m2 m3]", bodies(next.Messages))
	}
	if waited := time.Since(start); waited >= pollTime/2 {
		t.Fatalf("held orderly pop on the slave answered after %v of its %v poll time: not woken by the acks", waited, pollTime)
	}

	stray := next.Messages[1].Handle
	stray.QueueOffset = 4
	if code, err := sc.AckHandle(ctx, "o", "SO", stray); err != nil || code != remoting.MessageIllegal {
		t.Fatalf("orderly ack on the slave of an offset outside its batch: %d %v, want MESSAGE_ILLEGAL", code, err)
	}
	code, nh, err := sc.ChangeInvisibleTime(ctx, "o", first.Messages[0], time.Minute)
	if err != nil || code != remoting.Success || nh.PopTime != 0 || nh.InvisibleTime != 0 || nh.ReviveQID != 0 {
		t.Fatalf("orderly change of invisible time on the slave below the committed offset: %d %+v %v, want SUCCESS with zero fields", code, nh, err)
	}

	var own []kvindex.SlaveOwn
	if err := slave.db.Pop().EachSlaveOwn(func(o kvindex.SlaveOwn) bool { own = append(own, o); return true }); err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || own[0].Group != "o" || own[0].Committed != 2 || own[0].Batch == nil || len(own[0].Batch.Messages) != 2 || own[0].Batch.Messages[0].QueueOffset != 2 {
		t.Fatalf("the slave's own orderly state in its store: %+v, want o's offset 2 and its batch [2 3]", own)
	}
	for _, b := range []*testBroker{slave, master} {
		if st, ok, err := b.db.Pop().Order("o", "SO", 0); err != nil || ok {
			t.Fatalf("an orderly batch of the slave's pops is stored (%v): %+v", err, st)
		}
		if off, ok, err := b.offsets.Get("o", "SO", 0); err != nil || ok {
			t.Fatalf("a committed offset of the slave's orderly acks is stored (%v): %d", err, off)
		}
	}
}

// What a slave's orderly pops and acks committed holds until the next
// copy of the master's offsets, which replaces it as RocketMQ's slave
// sync puts the master's table over its own: an offset reset backward on
// the master reaches the slave's orderly consumer at the next sync, and
// the messages from there, acknowledged on the slave or not, come again.
func TestSlaveSyncReplacesTheSlavesOrderlyProgress(t *testing.T) {
	master, slave, _, _ := startSlaveWithMessages(t, "SR", 6)
	sc, _ := popClient(slave)
	ctx := ctx20(t)

	req := popclient.PopRequest{Group: "o", Topic: "SR", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
	for _, want := range []string{"[m0 m1]", "[m2 m3]"} {
		got := mustPop(t, sc, req)
		if fmt.Sprint(bodies(got.Messages)) != want {
			t.Fatalf("orderly pop on the slave: %v, want %s", bodies(got.Messages), want)
		}
		for _, m := range got.Messages {
			if code, err := sc.Ack(ctx, "o", m); err != nil || code != remoting.Success {
				t.Fatalf("orderly ack of %s on the slave: %d %v", m.Body, code, err)
			}
		}
	}
	// The master's offset of the group, reset back to 1.
	if err := master.offsets.Set("o", "SR", 0, 1); err != nil {
		t.Fatal(err)
	}
	syncSlave(t, slave, master)
	if got := mustPop(t, sc, req); fmt.Sprint(bodies(got.Messages)) != "[m1 m2]" {
		t.Fatalf("orderly pop on the slave after a sync of the master's offset 1: %v, want [m1 m2]", bodies(got.Messages))
	}
}

// A client's offset commit on a slave (UPDATE_CONSUMER_OFFSET) replaces
// what the slave's orderly pops and acks committed of the queue, as it
// overwrites the one entry of RocketMQ's slave's offset table.
func TestSlaveOffsetCommitReplacesTheSlavesOrderlyProgress(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	_, mrc := popClient(master)
	sendBodies(t, mrc, "SC", 4)
	if r := call(t, mrc, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"o"}`)); r.Code != remoting.Success {
		t.Fatalf("create the group on the master: %d %s", r.Code, r.Remark)
	}
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master) // the topic and the group
	sc, src := popClient(slave)
	ctx := ctx20(t)

	req := popclient.PopRequest{Group: "o", Topic: "SC", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
	got := mustPop(t, sc, req)
	for _, m := range got.Messages {
		if code, err := sc.Ack(ctx, "o", m); err != nil || code != remoting.Success {
			t.Fatalf("orderly ack of %s on the slave: %d %v", m.Body, code, err)
		}
	}
	if r := call(t, src, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "o", "topic": "SC", "queueId": "0", "commitOffset": "1"}, nil); r.Code != remoting.Success {
		t.Fatalf("offset commit on the slave: %d %s", r.Code, r.Remark)
	}
	if got := mustPop(t, sc, req); fmt.Sprint(bodies(got.Messages)) != "[m1 m2]" {
		t.Fatalf("orderly pop on the slave after a commit of 1 there: %v, want [m1 m2]", bodies(got.Messages))
	}
}

// The end of the invisible time of what a slave handed out to one group
// wakes that group's held pops, not those of the other groups held on
// the same queue, which would re-run for nothing and be held again
// (RocketMQ notifies by topic, group and queue).
func TestSlaveExpiryWakesOnlyItsGroupsHeldPops(t *testing.T) {
	_, slave, _, _ := startSlaveWithMessages(t, "GW", 2)
	sc, _ := popClient(slave)
	for _, p := range []struct {
		group     string
		invisible time.Duration
	}{{"a", time.Second}, {"b", time.Minute}} {
		res := mustPop(t, sc, popclient.PopRequest{Group: p.group, Topic: "GW", QueueID: 0, MaxMsgNums: 2, InvisibleTime: p.invisible})
		if fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
			t.Fatalf("pop of group %s on the slave: %v, want [m0 m1]", p.group, bodies(res.Messages))
		}
	}
	held := func(group string) <-chan popclient.PopResult {
		ch := make(chan popclient.PopResult, 1)
		go func() {
			res, _ := sc.Pop(context.Background(), popclient.PopRequest{Group: group, Topic: "GW", QueueID: 0, MaxMsgNums: 2,
				InvisibleTime: time.Minute, PollTime: 10 * time.Second})
			ch <- res
		}()
		waitFor(t, "the pop of group "+group+" held", func() bool { return slave.popHolds.count(popHoldKey{"GW", group, 0}) == 1 })
		return ch
	}
	heldB := held("b")
	reruns := slave.popHolds.reruns.Load()
	heldA := held("a")
	select {
	case res := <-heldA:
		if fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
			t.Fatalf("held pop of group a: %v, want [m0 m1] once their invisible time ran out", bodies(res.Messages))
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the held pop of group a was not woken when its messages' invisible time ran out")
	}
	time.Sleep(200 * time.Millisecond)
	if n := slave.popHolds.reruns.Load() - reruns; n != 1 {
		t.Fatalf("%d held pops re-ran at the end of group a's invisible time, want 1 (group a's; group b's stays held)", n)
	}
	select {
	case res := <-heldB:
		t.Fatalf("held pop of group b answered: code %d, %v", res.Code, bodies(res.Messages))
	default:
	}
}

// A slave answers a group's offset from its one offset table, as
// RocketMQ's slave's QUERY_CONSUMER_OFFSET and GET_CONSUME_STATS read the
// ConsumerOffsetManager its orderly pops and acks commit into: the
// progress of the slave's own orderly acks shows over the offset copied
// from the master, for a group the master has no offset of too, until a
// client's commit on the slave or the master's sync replaces it.
func TestSlaveAnswersOffsetsWithItsOwnProgress(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	_, mrc := popClient(master)
	sendBodies(t, mrc, "SQ", 6)
	createGroups(t, mrc, "q", "p")
	commit(t, mrc, "q", "SQ", 0, 1)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master) // the topic, the groups and q's offset
	sc, src := popClient(slave)
	ctx := ctx20(t)

	popAndAck := func(group string, want string) {
		t.Helper()
		req := popclient.PopRequest{Group: group, Topic: "SQ", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
		got := mustPop(t, sc, req)
		if fmt.Sprint(bodies(got.Messages)) != want {
			t.Fatalf("orderly pop of %s on the slave: %v, want %s", group, bodies(got.Messages), want)
		}
		for _, m := range got.Messages {
			if code, err := sc.Ack(ctx, group, m); err != nil || code != remoting.Success {
				t.Fatalf("orderly ack of %s on the slave: %d %v", m.Body, code, err)
			}
		}
	}
	query := func(group string) string {
		t.Helper()
		r := call(t, src, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": "SQ", "queueId": "0", "setZeroIfNotFound": "false"}, nil)
		if r.Code != remoting.Success {
			return fmt.Sprintf("code %d", r.Code)
		}
		return r.ExtFields["offset"]
	}
	stats := func(group string) string {
		t.Helper()
		table := consumeStats(t, src, map[string]string{"consumerGroup": group})
		w, ok := table[adminbody.MessageQueue{BrokerName: slave.cfg.BrokerName, Topic: "SQ", QueueID: 0}]
		if !ok {
			return fmt.Sprintf("no row of SQ/0 in %v", table)
		}
		return fmt.Sprint(w.ConsumerOffset)
	}

	popAndAck("q", "[m1 m2]")
	if got := query("q"); got != "3" {
		t.Fatalf("QUERY_CONSUMER_OFFSET of q on the slave after its orderly acks up to 2: %s, want 3", got)
	}
	if got := stats("q"); got != "3" {
		t.Fatalf("GET_CONSUME_STATS of q on the slave after its orderly acks up to 2: consumerOffset %s, want 3", got)
	}
	// A group the master has no offset of: its progress on the slave and
	// the topic it is on.
	popAndAck("p", "[m0 m1]")
	if got := query("p"); got != "2" {
		t.Fatalf("QUERY_CONSUMER_OFFSET of p on the slave after its orderly acks up to 1: %s, want 2", got)
	}
	if got := stats("p"); got != "2" {
		t.Fatalf("GET_CONSUME_STATS of p on the slave: consumerOffset %s, want 2", got)
	}

	// A client's commit on the slave replaces q's entry; the master's
	// sync replaces p's.
	if r := call(t, src, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "q", "topic": "SQ", "queueId": "0", "commitOffset": "5"}, nil); r.Code != remoting.Success {
		t.Fatalf("offset commit on the slave: %d %s", r.Code, r.Remark)
	}
	if got := query("q"); got != "5" {
		t.Fatalf("QUERY_CONSUMER_OFFSET of q on the slave after a commit of 5 there: %s, want 5", got)
	}
	commit(t, mrc, "p", "SQ", 0, 4)
	syncSlave(t, slave, master)
	if got := query("p"); got != "4" {
		t.Fatalf("QUERY_CONSUMER_OFFSET of p on the slave after a sync of the master's 4: %s, want 4", got)
	}
}

// startSlaveWithMessages starts a master and its slave, sends n messages
// m0..m(n-1) to topic on the master, and returns once the slave holds
// them and its sync brought the topic: the start of the slave POP tests.
func startSlaveWithMessages(t *testing.T, topic string, n int) (master, slave *testBroker, mc *popclient.Client, mrc *remoting.Client) {
	t.Helper()
	master = startTestBroker(t, withHA(nil))
	slave = startSlaveOf(t, master, nil)
	mc, mrc = popClient(master)
	sendBodies(t, mrc, topic, n)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	return master, slave, mc, mrc
}

// createGroups creates each subscription group with its defaults through
// c (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
func createGroups(t *testing.T, c *remoting.Client, groups ...string) {
	t.Helper()
	for _, g := range groups {
		if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.Success {
			t.Fatalf("create group %s through %s: %d %s", g, c.Addr(), r.Code, r.Remark)
		}
	}
}
