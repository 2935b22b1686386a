package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave answers POP, ACK, BATCH_ACK and CHANGE_MESSAGE_INVISIBLETIME as
// RocketMQ 5.3.3's slave does, slaveReadEnable or not, and writes
// nothing: a pop gets the messages (RocketMQ's checkpoint write goes
// through EscapeBridge, which on a slave puts nothing and only fails), so
// the next pop gets them again; acks are SUCCESS and change nothing; a
// change of invisible time of a message popped without order is
// SYSTEM_ERROR (its new checkpoint cannot be put), of an orderly one
// SUCCESS. The checks before them still answer as on a master.
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
	if again := mustPop(t, sc, req); fmt.Sprint(bodies(again.Messages)) != "[m0 m1]" {
		t.Fatalf("second pop on the slave: %v; want [m0 m1] again, the first recorded nothing", bodies(again.Messages))
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
	if again := mustPop(t, sc, req); fmt.Sprint(bodies(again.Messages)) != "[m0 m1]" {
		t.Fatalf("pop on the slave after its acks: %v; want [m0 m1], the acks changed nothing", bodies(again.Messages))
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
	// master's pop position is past them).
	if got := mustPop(t, sc, req); fmt.Sprint(bodies(got.Messages)) != "[m0 m1]" {
		t.Fatalf("pop on the slave of messages in flight on the master: %v, want [m0 m1]", bodies(got.Messages))
	}
}
