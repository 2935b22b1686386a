package broker

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// resetPushes connects a consumer of group (client id id, heartbeat sent
// with client version version) whose handler passes every
// RESET_CONSUMER_CLIENT_OFFSET it receives to the returned channel and
// then answers with answer(req) (nil: no answer).
func resetPushes(t *testing.T, tb *testBroker, id, group string, version int32, answer func(context.Context, *remoting.Command) *remoting.Command) chan *remoting.Command {
	t.Helper()
	got := make(chan *remoting.Command, 8)
	c := tb.client(func(ctx context.Context, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.ResetConsumerClientOffset {
			return nil // NOTIFY_CONSUMER_IDS_CHANGED
		}
		got <- req
		if answer == nil {
			return nil
		}
		return answer(ctx, req)
	})
	hb := remoting.NewRequest(remoting.HeartBeat, nil, heartbeatBody(id, "", group, map[string]string{"CT": "*"}))
	hb.Version = version
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if r, err := c.Invoke(ctx, hb); err != nil || r.Code != remoting.Success {
		t.Fatalf("heartbeat of %s: %v %v", id, r, err)
	}
	return got
}

// byQueue is a reset table by queue id, each queue checked to be the
// test broker's queue of topic.
func byQueue(t *testing.T, table map[adminbody.MessageQueue]int64, topic string) map[int32]int64 {
	t.Helper()
	out := make(map[int32]int64, len(table))
	for q, off := range table {
		if q.Topic != topic || q.BrokerName != "broker-a" {
			t.Fatalf("reset table names queue %+v", q)
		}
		out[q.QueueID] = off
	}
	return out
}

// With useServerSideResetOffset=false an offset reset is RocketMQ 4's
// (Broker2Client.resetOffset): each write queue's offset at the time,
// a queue the group has consumed less of than that kept unless isForce,
// pushed oneway to every online consumer of the group as
// RESET_CONSUMER_CLIENT_OFFSET and answered as the table; the broker's
// committed offsets stay as they are until the clients commit. A client
// that answers with an error or not at all changes neither what the
// others receive nor the answer.
func TestResetOffsetThroughClients(t *testing.T) {
	b := startTestBroker(t, map[string]string{"useServerSideResetOffset": "false"})
	c := b.client(nil)
	for i := range 3 {
		mustSend(t, c, "CT", 0, fmt.Sprintf("early%d", i), "")
	}
	mustSend(t, c, "CT", 1, "q1-early", "")
	time.Sleep(20 * time.Millisecond) // store times have millisecond precision
	mid := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	for i := range 3 {
		mustSend(t, c, "CT", 0, fmt.Sprintf("late%d", i), "")
	}
	b.caughtUp()
	tc, _, _ := b.topicConfig("CT")

	reset := func(h map[string]string, lang string) *remoting.Command {
		t.Helper()
		req := remoting.NewRequest(remoting.InvokeBrokerToResetOffset, h, nil)
		if lang != "" {
			req.Language = lang
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		r, err := c.Invoke(ctx, req)
		if err != nil {
			t.Fatalf("reset %v: %v", h, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("reset %v answered after %v: the broker waited for a client", h, d)
		}
		return r
	}
	req := func(ts int64, force bool) map[string]string {
		h := resetReq("cg-ct", "CT", ts, -1, 0)
		h["isForce"] = strconv.FormatBool(force)
		return h
	}

	// A queue without a committed offset of the group refuses the reset.
	ensureGroup(t, c, "cg-ct")
	commit(t, c, "cg-ct", "CT", 0, 6)
	if r := reset(req(mid, true), ""); r.Code != remoting.SystemError || r.Remark != "THe consumer group <cg-ct> not exist" {
		t.Fatalf("reset with queues the group has no offset for: %d %q", r.Code, r.Remark)
	}
	// The group has read all of queue 0 and nothing of queue 1.
	for q := int32(1); q < int32(tc.WriteQueueNums); q++ {
		commit(t, c, "cg-ct", "CT", q, 0)
	}
	if r := reset(req(mid, true), ""); r.Code != remoting.ConsumerNotOnline ||
		r.Remark != fmt.Sprintf("Consumer not online, so can not reset offset, Group: cg-ct Topic: CT Timestamp: %d", mid) {
		t.Fatalf("reset without consumers: %d %q", r.Code, r.Remark)
	}
	if r := reset(resetReq("cg-ct", "Nope", mid, -1, 0), ""); r.Code != remoting.TopicNotExist ||
		r.Remark != "[reset-offset] reset offset failed, no topic in this broker. topic=Nope" {
		t.Fatalf("reset of an unknown topic: %d %q", r.Code, r.Remark)
	}

	ok := resetPushes(t, b, "10.0.0.1@ok", "cg-ct", remoting.CurrentVersion, nil)
	failing := resetPushes(t, b, "10.0.0.2@fails", "cg-ct", remoting.CurrentVersion, func(_ context.Context, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.SystemError, "cannot reset")
	})
	hung := make(chan struct{})
	defer close(hung)
	silent := resetPushes(t, b, "10.0.0.3@hung", "cg-ct", remoting.CurrentVersion, func(ctx context.Context, req *remoting.Command) *remoting.Command {
		select {
		case <-hung:
		case <-ctx.Done():
		}
		return nil
	})
	other := resetPushes(t, b, "10.0.0.4@other", "cg-other", remoting.CurrentVersion, nil)
	ensureGroup(t, c, "cg-other")

	// Without force, queue 1 (consumed up to 0, its time's offset 1)
	// keeps the group's offset; queue 0 moves back to the first message
	// stored at or after mid.
	r := reset(req(mid, false), "")
	if r.Code != remoting.Success {
		t.Fatalf("reset through the clients: %d %s", r.Code, r.Remark)
	}
	answer, err := adminbody.DecodeResetOffset(r.Body)
	if err != nil {
		t.Fatalf("answer %s: %v", r.Body, err)
	}
	want := map[int32]int64{0: 3, 1: 0}
	for q := int32(2); q < int32(tc.WriteQueueNums); q++ {
		want[q] = 0
	}
	if got := byQueue(t, answer, "CT"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answer %v, want %v", got, want)
	}
	for name, ch := range map[string]chan *remoting.Command{"ok": ok, "failing": failing, "hung": silent} {
		select {
		case push := <-ch:
			if !push.IsOneway() {
				t.Errorf("%s: the push is not oneway (flag %d)", name, push.Flag)
			}
			wantExt := map[string]string{"topic": "CT", "group": "cg-ct", "timestamp": strconv.FormatInt(mid, 10), "queueId": "-1", "isForce": "false"}
			if fmt.Sprint(push.ExtFields) != fmt.Sprint(wantExt) {
				t.Errorf("%s: header %v, want %v", name, push.ExtFields, wantExt)
			}
			table, err := adminbody.DecodeResetOffset(push.Body)
			if err != nil {
				t.Fatalf("%s: body %s: %v", name, push.Body, err)
			}
			if got := byQueue(t, table, "CT"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: pushed offsets %v, want %v", name, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("client %s was not told of the reset", name)
		}
	}
	// The broker's offsets are the clients' to commit.
	if off0, off1 := committedOffset(t, c, "cg-ct", "CT", 0), committedOffset(t, c, "cg-ct", "CT", 1); off0 != 6 || off1 != 0 {
		t.Fatalf("committed offsets after the reset %d, %d; want 6, 0 (untouched)", off0, off1)
	}
	commit(t, c, "cg-ct", "CT", 0, 3)
	if off := committedOffset(t, c, "cg-ct", "CT", 0); off != 3 {
		t.Fatalf("the client's commit of the reset offset left %d", off)
	}

	// isForce moves queue 1 forward too; a C++ admin has the offsets
	// pushed as a list.
	r = reset(req(mid, true), "CPP")
	if r.Code != remoting.Success {
		t.Fatalf("forced reset: %d %s", r.Code, r.Remark)
	}
	want[1] = 1
	if answer, err := adminbody.DecodeResetOffset(r.Body); err != nil || fmt.Sprint(byQueue(t, answer, "CT")) != fmt.Sprint(want) {
		t.Fatalf("forced reset answer %s (%v), want %v", r.Body, err, want)
	}
	select {
	case push := <-ok:
		wantBody := string(adminbody.EncodeResetOffsetForC(map[adminbody.MessageQueue]int64{
			mq(b, "CT", 0): 3, mq(b, "CT", 1): 1, mq(b, "CT", 2): 0, mq(b, "CT", 3): 0}))
		if tc.WriteQueueNums != 4 || string(push.Body) != wantBody {
			t.Errorf("push for C++ (%d write queues): %s, want %s", tc.WriteQueueNums, push.Body, wantBody)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("forced reset not pushed")
	}
	// Timestamp -1: the end of each queue.
	r = reset(req(-1, true), "")
	want[0], want[1] = 6, 1
	if answer, err := adminbody.DecodeResetOffset(r.Body); r.Code != remoting.Success || err != nil || fmt.Sprint(byQueue(t, answer, "CT")) != fmt.Sprint(want) {
		t.Fatalf("reset to the end: %d %s (%v), want %v", r.Code, r.Body, err, want)
	}
	select {
	case push := <-other:
		t.Fatalf("a consumer of another group was told: %v", push.ExtFields)
	default:
	}
	if off := committedOffset(t, c, "cg-ct", "CT", 0); off != 3 {
		t.Fatalf("committed offset %d after resets through the clients, want the client's 3", off)
	}
}

// A consumer of the group older than 3.0.7 (RocketMQ's
// V3_0_7_SNAPSHOT) cannot take a pushed reset: the reset is refused with
// RocketMQ's remark naming its version, and no client is told.
func TestResetThroughClientsRefusesOldClients(t *testing.T) {
	b := startTestBroker(t, map[string]string{"useServerSideResetOffset": "false"})
	c := b.client(nil)
	mustSend(t, c, "CT", 0, "m0", "")
	b.caughtUp()
	tc, _, _ := b.topicConfig("CT")
	for q := range int32(tc.WriteQueueNums) {
		commit(t, c, "cg-old", "CT", q, 0)
	}
	fresh := resetPushes(t, b, "10.0.0.1@new", "cg-old", remoting.CurrentVersion, nil)
	resetPushes(t, b, "10.0.0.2@old", "cg-old", 27, nil) // V3_0_6
	r := call(t, c, remoting.InvokeBrokerToResetOffset, resetReq("cg-old", "CT", -1, -1, 0), nil)
	if r.Code != remoting.SystemError || r.Remark != "the client does not support this feature. version=V3_0_6" {
		t.Fatalf("reset with a 3.0.6 consumer: %d %q", r.Code, r.Remark)
	}
	select {
	case push := <-fresh:
		t.Fatalf("a client was told of a refused reset: %v", push.ExtFields)
	case <-time.After(200 * time.Millisecond):
	}
	// The version RocketMQ first pushes to is enough.
	for q := range int32(tc.WriteQueueNums) {
		commit(t, c, "cg-edge", "CT", q, 0)
	}
	edge := resetPushes(t, b, "10.0.0.3@307", "cg-edge", 28, nil)
	if r := call(t, c, remoting.InvokeBrokerToResetOffset, resetReq("cg-edge", "CT", -1, -1, 0), nil); r.Code != remoting.Success {
		t.Fatalf("reset with a V3_0_7_SNAPSHOT consumer: %d %s", r.Code, r.Remark)
	}
	select {
	case <-edge:
	case <-time.After(10 * time.Second):
		t.Fatal("the V3_0_7_SNAPSHOT client was not told")
	}
}

// useServerSideResetOffset changes at run time (UPDATE_BROKER_CONFIG):
// off, a reset the server side assigned stops holding the client's
// commits back and its pull is not told (the reset is dropped, as
// RocketMQ's pull erases it), and the next reset goes through the
// clients; on again, resets are the server's.
func TestUseServerSideResetOffsetIsLive(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for i := range 4 {
		mustSend(t, c, "CT", 0, fmt.Sprintf("m%d", i), "")
	}
	b.caughtUp()
	tc, _, _ := b.topicConfig("CT")
	for q := range int32(tc.WriteQueueNums) {
		commit(t, c, "cg-live", "CT", q, 0)
	}
	commit(t, c, "cg-live", "CT", 0, 4)
	pushes := resetPushes(t, b, "10.0.0.1@live", "cg-live", remoting.CurrentVersion, nil)

	mustReset(t, c, resetReq("cg-live", "CT", -1, 0, 1)) // server-side: waits for the next pull
	if off := committedOffset(t, c, "cg-live", "CT", 0); off != 1 {
		t.Fatalf("server-side reset left offset %d, want 1", off)
	}
	updateConfig(t, c, "useServerSideResetOffset=false\n")
	if r := commitOffset(t, c, "cg-live", "CT", 0, 3); r.Code != remoting.Success || r.Remark != "" || committedOffset(t, c, "cg-live", "CT", 0) != 3 {
		t.Fatalf("commit with the switch off over a waiting reset: %d %q, offset %d", r.Code, r.Remark, committedOffset(t, c, "cg-live", "CT", 0))
	}
	if r := call(t, c, remoting.PullMessage, pullReq("cg-live", "CT", 0, 3, 0, 0, "*"), nil); r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 1 {
		t.Fatalf("pull with the switch off over a waiting reset: %d %s", r.Code, r.Remark)
	}
	got := mustReset(t, c, resetReq("cg-live", "CT", 0, -1, 0))
	if got[0] != 0 || committedOffset(t, c, "cg-live", "CT", 0) != 3 {
		t.Fatalf("reset through the clients: %v, committed %d", got, committedOffset(t, c, "cg-live", "CT", 0))
	}
	select {
	case <-pushes:
	case <-time.After(10 * time.Second):
		t.Fatal("the reset with the switch off was not pushed")
	}

	updateConfig(t, c, "useServerSideResetOffset=true\n")
	mustReset(t, c, resetReq("cg-live", "CT", 0, -1, 0))
	if off := committedOffset(t, c, "cg-live", "CT", 0); off != 0 {
		t.Fatalf("server-side reset after the switch is on again left offset %d, want 0", off)
	}
	select {
	case push := <-pushes:
		t.Fatalf("a server-side reset was pushed to the client: %v", push.ExtFields)
	case <-time.After(200 * time.Millisecond):
	}
}
