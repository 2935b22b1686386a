package broker

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave following its master marks its answers to POP (found, and held
// until its poll time ran out), ACK, BATCH_ACK and
// CHANGE_MESSAGE_INVISIBLETIME with remoting.FieldSlave, which RocketMQ's
// slave, answering them as a master would, leaves a client to guess; a
// master's answers carry no mark. (The gRPC proxy asks for the route
// again when a broker it took for the master marks its answer.)
func TestSlaveMarksItsPopAnswers(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	mc, mrc := popClient(master)
	sendBodies(t, mrc, "SM", 2)
	waitReplicated(t, master, slave)
	sc, src := popClient(slave)
	createTopic(t, src, "SM", 8, 8) // the slave's own copy of the config, until it syncs

	marked := func(ext map[string]string) bool { return ext[remoting.FieldSlave] == "true" }
	req := popclient.PopRequest{Group: "g", Topic: "SM", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute}
	if res := mustPop(t, mc, req); res.Code != remoting.Success || marked(res.Header) {
		t.Fatalf("pop on the master: code %d, header %v; want SUCCESS unmarked", res.Code, res.Header)
	}
	found := mustPop(t, sc, req)
	if found.Code != remoting.Success || len(found.Messages) != 2 || !marked(found.Header) {
		t.Fatalf("pop on the slave: code %d, %d messages, header %v; want SUCCESS with 2, marked", found.Code, len(found.Messages), found.Header)
	}
	req.PollTime = 300 * time.Millisecond
	if held := mustPop(t, sc, req); held.Code != remoting.PollingTimeout || !marked(held.Header) {
		t.Fatalf("held pop on the slave: code %d, header %v; want POLLING_TIMEOUT marked", held.Code, held.Header)
	}

	ctx := ctx20(t)
	h := found.Messages[0].Handle
	for name, r := range map[string]*remoting.Command{
		"ack":                    popclient.AckRequest("g", "SM", h),
		"change of invisibility": popclient.ChangeInvisibleRequest("g", "SM", h, time.Minute),
	} {
		resp, err := src.Invoke(ctx, r)
		if err != nil || !marked(resp.ExtFields) {
			t.Errorf("%s on the slave: %+v %v; want its answer marked", name, resp, err)
		}
		if resp, err := mrc.Invoke(ctx, r); err != nil || marked(resp.ExtFields) {
			t.Errorf("%s on the master: %+v %v; want its answer unmarked", name, resp, err)
		}
	}
	if code, err := sc.BatchAck(ctx, "g", "SM", found.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack on the slave: %d %v, want SUCCESS", code, err)
	}
	if r := call(t, src, remoting.BatchAckMessage, nil, []byte(`{"acks":[]}`)); r.Code != remoting.NoMessage || !marked(r.ExtFields) {
		t.Errorf("empty batch ack on the slave: %+v; want NO_MESSAGE marked", r)
	}
	if r := call(t, mrc, remoting.BatchAckMessage, nil, []byte(`{"acks":[]}`)); marked(r.ExtFields) {
		t.Errorf("empty batch ack on the master: %+v; want it unmarked", r)
	}
}
