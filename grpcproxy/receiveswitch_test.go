package grpcproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// fakePopBroker answers POP_MESSAGE with one new message a pop (its body
// the broker's name and a count), ACK_MESSAGE and
// CHANGE_MESSAGE_INVISIBLETIME with SUCCESS, counting them. Once demoted
// it answers as a rocketkv slave does: pops found read-only, acks
// SUCCESS, changes of invisible time SYSTEM_ERROR but for messages popped
// orderly (SUCCESS: the slave moves their deadline in the batch it
// keeps), each marked remoting.FieldSlave; a send-back
// (CONSUMER_SEND_MSG_BACK) it refuses as RocketMQ's slave does
// (SYSTEM_BUSY, [REJECTREQUEST]). With fifo set it answers
// GET_SUBSCRIPTION_GROUP_CONFIG with an orderly group, and pops asked
// for in order with orderly handles.
type fakePopBroker struct {
	name  string
	addr  string
	slave atomic.Bool
	fifo  atomic.Bool

	mu                    sync.Mutex
	pops, acks, changes   int
	ackedOffsets, changed []int64
	// slaveChanged lists the changes of invisible time of orderly
	// messages the broker took as a slave, as "offset:invisibleTime".
	slaveChanged []string
	// sentBack lists the CommitLog offsets the broker moved to the
	// dead-letter queue as a master; views counts VIEW_MESSAGE_BY_ID.
	sentBack []string
	views    int
}

func startFakePopBroker(t *testing.T, name string) *fakePopBroker {
	t.Helper()
	b := &fakePopBroker{name: name}
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.PopMessage, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		_ = conn.Reply(req, b.mark(b.popAnswer(req)))
	})
	mux.HandleFunc(remoting.AckMessage, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		b.mu.Lock()
		b.acks++
		if !b.slave.Load() {
			off, _ := remoting.Header(req.ExtFields).Int64("offset")
			b.ackedOffsets = append(b.ackedOffsets, off)
		}
		b.mu.Unlock()
		_ = conn.Reply(req, b.mark(remoting.NewResponse(req, remoting.Success, "")))
	})
	mux.HandleFunc(remoting.ChangeMessageInvisibleTime, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		b.mu.Lock()
		b.changes++
		b.mu.Unlock()
		if b.slave.Load() {
			h, err := pop.ParseHandle(req.ExtFields["extraInfo"])
			if err != nil || !h.Orderly() {
				_ = conn.Reply(req, b.mark(remoting.NewResponse(req, remoting.SystemError, "")))
				return
			}
			b.mu.Lock()
			b.slaveChanged = append(b.slaveChanged, req.ExtFields["offset"]+":"+req.ExtFields["invisibleTime"])
			b.mu.Unlock()
			resp := remoting.NewResponse(req, remoting.Success, "")
			rh := remoting.Header{}
			rh.SetInt64("popTime", h.PopTime)
			rh.SetInt64("invisibleTime", h.InvisibleTime)
			rh.SetInt32("reviveQid", h.ReviveQID)
			resp.ExtFields = rh
			_ = conn.Reply(req, b.mark(resp))
			return
		}
		off, _ := remoting.Header(req.ExtFields).Int64("offset")
		b.mu.Lock()
		b.changed = append(b.changed, off)
		b.mu.Unlock()
		resp := remoting.NewResponse(req, remoting.Success, "")
		h := remoting.Header{}
		h.SetInt64("popTime", time.Now().UnixMilli())
		h.SetInt64("invisibleTime", 30000)
		h.SetInt32("reviveQid", 0)
		resp.ExtFields = h
		_ = conn.Reply(req, resp)
	})
	mux.HandleFunc(remoting.GetSubscriptionGroupConfig, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		if !b.fifo.Load() {
			_ = conn.Reply(req, remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, ""))
			return
		}
		gc := meta.NewSubscriptionGroupConfig(req.ExtFields["group"])
		gc.ConsumeMessageOrderly = true
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body, _ = json.Marshal(gc)
		_ = conn.Reply(req, resp)
	})
	mux.HandleFunc(remoting.ViewMessageByID, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		// The record a pop handed out at the offset (popAnswer's).
		b.mu.Lock()
		b.views++
		b.mu.Unlock()
		phy, _ := remoting.Header(req.ExtFields).Int64("offset")
		resp := remoting.NewResponse(req, remoting.Success, "")
		m := b.record("T", phy-1000)
		body, err := commitlog.AppendRecord(nil, &m)
		if err != nil {
			resp = remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		resp.Body = body
		_ = conn.Reply(req, resp)
	})
	mux.HandleFunc(remoting.ConsumerSendMsgBack, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		if b.slave.Load() {
			_ = conn.Reply(req, remoting.NewResponse(req, remoting.SystemBusy, "[REJECTREQUEST]system busy, start flow control for a while"))
			return
		}
		b.mu.Lock()
		b.sentBack = append(b.sentBack, req.ExtFields["offset"])
		b.mu.Unlock()
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, ""))
	})
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	b.addr = srv.Addr().String()
	return b
}

// record is the message a pop of topic hands out at queue offset off.
func (b *fakePopBroker) record(topic string, off int64) commitlog.Message {
	now := time.Now().UnixMilli()
	return commitlog.Message{Topic: topic, QueueID: 0, QueueOffset: off, PhyOffset: 1000 + off, BornTimestamp: now, StoreTimestamp: now,
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2"),
		Body:       []byte(fmt.Sprintf("%s-%d", b.name, off)),
		Properties: commitlog.FormatProperties(map[string]string{commitlog.PropertyUniqID: fmt.Sprintf("7F00000100002A9F0000%012X", off)})}
}

// mark marks resp as a slave's answer once the broker is demoted.
func (b *fakePopBroker) mark(resp *remoting.Command) *remoting.Command {
	if b.slave.Load() {
		if resp.ExtFields == nil {
			resp.ExtFields = map[string]string{}
		}
		resp.ExtFields[remoting.FieldSlave] = "true"
	}
	return resp
}

// popAnswer is a pop's answer: one message of queue 0 at the next offset.
func (b *fakePopBroker) popAnswer(req *remoting.Command) *remoting.Command {
	b.mu.Lock()
	b.pops++
	off := int64(b.pops - 1)
	b.mu.Unlock()
	m := b.record(req.ExtFields["topic"], off)
	now := m.StoreTimestamp
	body, err := commitlog.AppendRecord(nil, &m)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	var ib pop.InfoBuilder
	ib.AddQueue(pop.FlagNormal, 0, off, []int64{off})
	resp := remoting.NewResponse(req, remoting.Success, "FOUND")
	h := remoting.Header{}
	h.SetInt64("popTime", now)
	h.SetInt64("invisibleTime", 30000)
	reviveQid := int32(0)
	if req.ExtFields["order"] == "true" {
		reviveQid = pop.OrderReviveQueue
	}
	h.SetInt32("reviveQid", reviveQid)
	h.SetInt64("restNum", 0)
	h.Set("startOffsetInfo", ib.StartOffsetInfo())
	h.Set("msgOffsetInfo", ib.MsgOffsetInfo())
	resp.ExtFields = h
	resp.Body = body
	return resp
}

// counts returns the requests the broker answered.
func (b *fakePopBroker) counts() (pops, acks, changes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pops, b.acks, b.changes
}

// offsets returns the offsets the broker acknowledged and changed the
// invisible time of as a master.
func (b *fakePopBroker) offsets() (acked, changed string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprint(b.ackedOffsets), fmt.Sprint(b.changed)
}

// switchRig is a proxy in front of a name server whose route of every
// topic names broker group broker-a's master old, then elected, the
// route cache's TTL an hour and its refresh floor (routes.floor) floor.
type switchRig struct {
	ns           *switchingNamesrv
	old, elected *fakePopBroker
	c            *testCluster
}

func startSwitchRig(t *testing.T, floor time.Duration, mutate ...func(*Config)) *switchRig {
	t.Helper()
	r := &switchRig{old: startFakePopBroker(t, "old"), elected: startFakePopBroker(t, "elected")}
	r.ns = startSwitchingNamesrv(t, routeOf(r.old.addr))
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NamesrvAddrs = []string{r.ns.addr}
	cfg.RouteTTL = time.Hour
	cfg.RequestTimeout = 2 * time.Second
	cfg.MinLongPolling = 500 * time.Millisecond
	cfg.MinInvisible = time.Second
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p.routes.floor = floor
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	conn, err := grpc.NewClient(p.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r.c = &testCluster{proxy: p, rpc: rmqpb.NewMessagingServiceClient(conn)}
	return r
}

// receive receives once from topic, failing the test unless exactly
// one message comes, whose body it returns with the message.
func (r *switchRig) receive(t *testing.T, topic string) (string, *rmqpb.Message) {
	t.Helper()
	st, msgs := r.c.receiveOnce(t, "C", receiveRequest("G", topic, 30*time.Second, time.Second), 10*time.Second)
	if st.GetCode() != rmqpb.Code_OK || len(msgs) != 1 {
		t.Fatalf("receive from %s answered %v with %d messages, want OK with one", topic, st, len(msgs))
	}
	return string(msgs[0].GetBody()), msgs[0]
}

// demote has the old master answer as a slave and the name server route
// the elected one.
func (r *switchRig) demote() {
	r.old.slave.Store(true)
	r.ns.route.Store(ptr(routeOf(r.elected.addr)))
}

// A proxy that only receives a topic (no send of it to be refused) pops
// from the master its cached route names, long before the route's TTL
// ends, once that master answers a pop as a slave (a controller-mode
// switch demoted it): the slave's read-only find is not delivered, the
// route is asked again and the receive pops from the elected master.
// Without it the proxy popped from the slave for the route's TTL.
func TestReceiveOnlyProxyFollowsADemotedMaster(t *testing.T) {
	r := startSwitchRig(t, 0)
	if body, _ := r.receive(t, "T"); body != "old-0" {
		t.Fatalf("receive before the switch: %q, want old-0", body)
	}
	r.demote()
	if body, _ := r.receive(t, "T"); body != "elected-0" {
		t.Fatalf("receive after the switch: %q, want elected-0 (the slave's find is not delivered)", body)
	}
	if body, _ := r.receive(t, "T"); body != "elected-1" {
		t.Fatalf("second receive after the switch: %q, want elected-1", body)
	}
	if pops, _, _ := r.old.counts(); pops != 2 {
		t.Fatalf("the demoted master was popped %d times, want 2 (once after the switch, which it answered as a slave)", pops)
	}
}

// An ack or a change of invisible time of a message received before the
// switch, which the old master, still the route's master, answers as a
// slave, is sent again to the master the route names once asked again;
// the answer is that master's.
func TestAckAfterSwitchReachesTheElectedMaster(t *testing.T) {
	r := startSwitchRig(t, 0)
	_, first := r.receive(t, "T")
	_, second := r.receive(t, "T")
	r.demote()

	resp, err := r.c.rpc.AckMessage(callCtx(t, "C", 10*time.Second), &rmqpb.AckMessageRequest{
		Group: &rmqpb.Resource{Name: "G"}, Topic: &rmqpb.Resource{Name: "T"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: first.GetSystemProperties().GetMessageId(), ReceiptHandle: first.GetSystemProperties().GetReceiptHandle()}},
	})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("ack after the switch: %v %v", resp.GetStatus(), err)
	}
	_, oldAcks, _ := r.old.counts()
	_, elAcks, _ := r.elected.counts()
	if acked, _ := r.elected.offsets(); oldAcks != 1 || elAcks != 1 || acked != "[0]" {
		t.Fatalf("ack after the switch: old master asked %d times, elected %d times (offsets %s); want once each, offset 0 at the elected",
			oldAcks, elAcks, acked)
	}

	// The route now names the elected master: the change goes there at
	// once.
	cresp, err := r.c.rpc.ChangeInvisibleDuration(callCtx(t, "C", 10*time.Second), &rmqpb.ChangeInvisibleDurationRequest{
		Group: &rmqpb.Resource{Name: "G"}, Topic: &rmqpb.Resource{Name: "T"},
		ReceiptHandle: second.GetSystemProperties().GetReceiptHandle(), InvisibleDuration: durationpb.New(5 * time.Second),
		MessageId: second.GetSystemProperties().GetMessageId(),
	})
	if err != nil || cresp.GetStatus().GetCode() != rmqpb.Code_OK || cresp.GetReceiptHandle() == "" {
		t.Fatalf("change of invisible time after the switch: %v %v", cresp.GetStatus(), err)
	}
	_, _, oldChanges := r.old.counts()
	if _, changed := r.elected.offsets(); oldChanges != 0 || changed != "[1]" {
		t.Fatalf("change after the switch: old master asked %d times, elected changed %s; want none, [1]", oldChanges, changed)
	}
}

// A change of invisible time the old master, still the route's master,
// answers as a slave (SYSTEM_ERROR: it cannot write the checkpoint) is
// sent again to the elected master, and answered OK.
func TestChangeInvisibleAfterSwitchReachesTheElectedMaster(t *testing.T) {
	r := startSwitchRig(t, 0)
	_, m := r.receive(t, "T")
	r.demote()
	resp, err := r.c.rpc.ChangeInvisibleDuration(callCtx(t, "C", 10*time.Second), &rmqpb.ChangeInvisibleDurationRequest{
		Group: &rmqpb.Resource{Name: "G"}, Topic: &rmqpb.Resource{Name: "T"},
		ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), InvisibleDuration: durationpb.New(5 * time.Second),
		MessageId: m.GetSystemProperties().GetMessageId(),
	})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("change of invisible time after the switch: %v %v", resp.GetStatus(), err)
	}
	_, _, oldChanges := r.old.counts()
	if _, changed := r.elected.offsets(); oldChanges != 1 || changed != "[0]" {
		t.Fatalf("change after the switch: old master asked %d times, elected changed %s; want once, [0]", oldChanges, changed)
	}
}

// A demoted master's answer within the refresh floor of its route (the
// route was asked for less than refreshFloor ago) does not have the
// route asked again: the receive answers MESSAGE_NOT_FOUND, the slave's
// find not delivered, and pops no other broker.
func TestReceiveFromADemotedMasterKeepsTheRefreshFloor(t *testing.T) {
	r := startSwitchRig(t, time.Hour)
	if body, _ := r.receive(t, "T"); body != "old-0" {
		t.Fatalf("receive before the switch: %q, want old-0", body)
	}
	asked := r.ns.asked.Load()
	r.demote()
	st, msgs := r.c.receiveOnce(t, "C", receiveRequest("G", "T", 30*time.Second, time.Second), 10*time.Second)
	if st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND || len(msgs) != 0 {
		t.Fatalf("receive after the switch within the floor: %v with %d messages, want MESSAGE_NOT_FOUND", st, len(msgs))
	}
	if pops, _, _ := r.elected.counts(); pops != 0 || r.ns.asked.Load() != asked {
		t.Fatalf("within the floor: the elected master popped %d times, the name server asked %d more times; want neither", pops, r.ns.asked.Load()-asked)
	}
}

// The renewals of a message received with auto renew before the switch
// follow the group's master too: the first the old master answers as a
// slave goes again to the elected master, and the next go there
// directly.
func TestRenewalAfterSwitchReachesTheElectedMaster(t *testing.T) {
	r := startSwitchRig(t, 0, func(cfg *Config) {
		cfg.DefaultInvisible = 3 * time.Second
		cfg.RenewAhead = 2 * time.Second
		cfg.RenewPeriod = 100 * time.Millisecond
		cfg.RenewPolicy = []time.Duration{3 * time.Second}
	})
	req := receiveRequest("G", "T", 0, time.Second)
	req.AutoRenew = true
	st, msgs := r.c.receiveOnce(t, "C", req, 10*time.Second)
	if st.GetCode() != rmqpb.Code_OK || len(msgs) != 1 || string(msgs[0].GetBody()) != "old-0" {
		t.Fatalf("receive before the switch: %v with %d messages, want old-0", st, len(msgs))
	}
	r.demote()
	// Renewed at about 1 s and 2 s after the receive (a hang guard, not
	// a measure).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, changed := r.elected.offsets(); changed == "[0 0]" {
			break
		}
		if time.Now().After(deadline) {
			_, changed := r.elected.offsets()
			t.Fatalf("the elected master renewed offsets %s in 20 s, want [0 0]", changed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, oldChanges := r.old.counts(); oldChanges != 1 {
		t.Fatalf("the demoted master was asked %d renewals, want 1 (the first, which it answered as a slave)", oldChanges)
	}
}

// A demoted master's refusal met through one topic has the proxy follow
// the move for every topic the broker served: a topic received from
// after the election reached the name servers pops from the elected
// master at once, without a pop of its own from the demoted one, even
// though the refused topic's route, asked again before the name servers
// knew, found no move.
func TestRefusalThroughOneTopicMovesTheBrokersOtherTopics(t *testing.T) {
	r := startSwitchRig(t, 0)
	for i, topic := range []string{"T1", "T2"} {
		if body, _ := r.receive(t, topic); body != fmt.Sprintf("old-%d", i) {
			t.Fatalf("receive from %s before the switch: %q, want old-%d", topic, body, i)
		}
	}
	// Demoted before the name servers route the elected master.
	r.old.slave.Store(true)
	st, msgs := r.c.receiveOnce(t, "C", receiveRequest("G", "T1", 30*time.Second, time.Second), 10*time.Second)
	if st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND || len(msgs) != 0 {
		t.Fatalf("receive from T1 while the name servers still route the demoted master: %v with %d messages, want MESSAGE_NOT_FOUND", st, len(msgs))
	}
	r.ns.route.Store(ptr(routeOf(r.elected.addr)))
	if body, _ := r.receive(t, "T2"); body != "elected-0" {
		t.Fatalf("receive from T2 after the election: %q, want elected-0", body)
	}
	if pops, _, _ := r.old.counts(); pops != 3 {
		t.Fatalf("the demoted master was popped %d times, want 3 (T2's receive after the election went to the elected master)", pops)
	}
}

// The orderly batch a demoted master's pop hands out, which the proxy
// does not deliver, is given back to that broker (each message's
// invisible time changed to a second, as RocketMQ's proxy gives back what
// it could not stream), so that it locks the queue there no longer; the
// receive goes on to the elected master. A non-orderly find is not given
// back (a slave keeps nothing of it and refuses the change).
func TestOrderlyBatchOfADemotedMasterGivenBack(t *testing.T) {
	for _, fifo := range []bool{true, false} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			r := startSwitchRig(t, 0)
			r.old.fifo.Store(fifo)
			r.elected.fifo.Store(fifo)
			if body, _ := r.receive(t, "T"); body != "old-0" {
				t.Fatalf("receive before the switch: %q, want old-0", body)
			}
			r.demote()
			if body, _ := r.receive(t, "T"); body != "elected-0" {
				t.Fatalf("receive after the switch: %q, want elected-0", body)
			}
			r.old.mu.Lock()
			given := fmt.Sprint(r.old.slaveChanged)
			r.old.mu.Unlock()
			_, _, changes := r.old.counts()
			want, wantChanges := "[1:1000]", 1
			if !fifo {
				want, wantChanges = "[]", 0
			}
			if given != want || changes != wantChanges {
				t.Fatalf("the demoted master was asked %d changes of invisible time, took %s as a slave; want %d, %s (offset:invisibleTime)",
					changes, given, wantChanges, want)
			}
		})
	}
}

// A forward to the dead-letter queue of a message received before the
// switch, which the old master, still the route's master, refuses as a
// slave refuses a send-back, goes to the master the route names once
// asked again: the record is checked there, moved there and acknowledged
// there, and the client is answered OK, as for an ack after the switch.
func TestForwardToDLQAfterSwitchReachesTheElectedMaster(t *testing.T) {
	r := startSwitchRig(t, 0)
	_, m := r.receive(t, "T")
	r.demote()
	resp, err := r.c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, "C", 10*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: "G"}, Topic: &rmqpb.Resource{Name: "T"},
		ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), MessageId: m.GetSystemProperties().GetMessageId(),
		DeliveryAttempt: 1, MaxDeliveryAttempts: 1,
	})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("forward after the switch: %v %v", resp.GetStatus(), err)
	}
	r.old.mu.Lock()
	oldSent := fmt.Sprint(r.old.sentBack)
	r.old.mu.Unlock()
	r.elected.mu.Lock()
	elSent, elViews := fmt.Sprint(r.elected.sentBack), r.elected.views
	r.elected.mu.Unlock()
	acked, _ := r.elected.offsets()
	if oldSent != "[]" || elSent != "[1000]" || elViews != 1 || acked != "[0]" {
		t.Fatalf("forward after the switch: old master moved %s; elected moved %s after %d checks of the record, acknowledged %s; want [], [1000], 1, [0]",
			oldSent, elSent, elViews, acked)
	}
}
