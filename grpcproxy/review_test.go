package grpcproxy

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/pop"
)

// A send whose message type the topic does not take is refused with
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as RocketMQ's proxy checks it
// (clients that skip their own check would otherwise store it); a
// receive asking for more than 32 messages gets at most 32 instead of a
// refusal; an ack with a handle whose invisible time is over is
// INVALID_RECEIPT_HANDLE, not OK.
func TestProxyChecksAsRocketMQ(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "TypedFifo", 2, "+message.type=FIFO")
	c.createTopic(t, "Batch", 1, "")
	deadline := time.Now().Add(20 * time.Second)
	var st *rmqpb.Status
	for {
		resp, err := c.rpc.SendMessage(callCtx(t, "typed", 5*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage("TypedFifo", "normal")}})
		if err != nil {
			t.Fatal(err)
		}
		st = resp.GetStatus()
		if st.GetCode() != rmqpb.Code_TOPIC_NOT_FOUND || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.GetCode() != rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE {
		t.Fatalf("a NORMAL message to a FIFO topic answered %v, want MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", st)
	}

	for i := range 40 {
		c.send(t, "batch", newMessage("Batch", string(rune('a'+i%26))))
	}
	req := receiveRequest("batch-g", "Batch", 30*time.Second, time.Second)
	req.BatchSize = 64
	got, msgs := c.receiveOnce(t, "batch", req, 10*time.Second)
	if got.GetCode() != rmqpb.Code_OK || len(msgs) == 0 || len(msgs) > pop.MaxPopMessages {
		t.Fatalf("a receive of 64 answered %v with %d messages, want OK with 1 to %d", got, len(msgs), pop.MaxPopMessages)
	}

	h, err := ParseHandle(msgs[0].GetSystemProperties().GetReceiptHandle())
	if err != nil {
		t.Fatal(err)
	}
	h.PopTime = time.Now().Add(-time.Hour).UnixMilli() // its invisible time ended long ago
	if st := c.ack(t, "batch", "batch-g", "Batch", msgs[0].GetSystemProperties().GetMessageId(), h.String()); st.GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("ack with an expired handle answered %v, want INVALID_RECEIPT_HANDLE", st)
	}
}

// A client's termination unregisters it from its group: with ACL on it
// needs Sub on the group, as in RocketMQ's proxy.
func TestTerminationNeedsTheGroup(t *testing.T) {
	needs := needsOf(&rmqpb.NotifyClientTerminationRequest{Group: &rmqpb.Resource{Name: "g"}})
	if len(needs) != 1 || needs[0].Resource != auth.Group("g") || len(needs[0].Actions) != 1 || needs[0].Actions[0] != auth.ActionSub {
		t.Fatalf("needs of a termination: %v, want Sub on Group:g", needs)
	}
}

// blockedStream is a telemetry stream whose client stopped reading: Send
// blocks until released.
type blockedStream struct {
	rmqpb.MessagingService_TelemetryServer
	release chan struct{}
	sent    chan *rmqpb.TelemetryCommand
}

func (b *blockedStream) Send(cmd *rmqpb.TelemetryCommand) error {
	<-b.release
	b.sent <- cmd
	return nil
}

// A transaction check passes over a producer whose stream is stuck in a
// send and goes to another producer of the topic, instead of waiting
// behind it.
func TestCheckSkipsABlockedProducer(t *testing.T) {
	r := newStreamRegistry()
	stuck := &blockedStream{release: make(chan struct{}), sent: make(chan *rmqpb.TelemetryCommand, 4)}
	ready := &blockedStream{release: make(chan struct{}), sent: make(chan *rmqpb.TelemetryCommand, 4)}
	close(ready.release)
	a, b := newTelemetryStream(stuck), newTelemetryStream(ready)
	r.open("a", a)
	r.open("b", b)
	r.setTopics(a, map[string]bool{"T": true})
	r.setTopics(b, map[string]bool{"T": true})
	go func() { _ = a.send(&rmqpb.TelemetryCommand{}) }() // blocks: a's client reads nothing
	deadline := time.Now().Add(5 * time.Second)
	for len(a.turn) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the blocked send did not start")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 3 {
		if !r.sendToProducer("T", &rmqpb.TelemetryCommand{}) {
			t.Fatalf("check %d was not delivered while one producer of two is blocked", i)
		}
	}
	if len(ready.sent) != 3 {
		t.Fatalf("the reading producer got %d checks, want all 3", len(ready.sent))
	}
	close(stuck.release)
}

// A transaction check reaches a lone producer whose stream is busy with
// another send a moment (the check of another transaction of the same
// pass): it waits for that send instead of being dropped, which cost the
// client a check and the broker one of its transactionCheckMax.
func TestCheckWaitsForABusyLoneProducer(t *testing.T) {
	r := newStreamRegistry()
	busy := &blockedStream{release: make(chan struct{}), sent: make(chan *rmqpb.TelemetryCommand, 4)}
	ts := newTelemetryStream(busy)
	r.open("lone", ts)
	r.setTopics(ts, map[string]bool{"T": true})
	first := &rmqpb.TelemetryCommand{Status: &rmqpb.Status{Message: "first"}}
	done := make(chan error, 1)
	go func() { done <- ts.send(first) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(ts.turn) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first send did not start")
		}
		time.Sleep(time.Millisecond)
	}
	release := time.AfterFunc(50*time.Millisecond, func() { close(busy.release) })
	defer release.Stop()
	second := &rmqpb.TelemetryCommand{Status: &rmqpb.Status{Message: "second"}}
	if !r.sendToProducer("T", second) {
		t.Fatal("the check was dropped while the lone producer's stream finished another send")
	}
	if err := <-done; err != nil {
		t.Fatalf("first send: %v", err)
	}
	if got := []string{(<-busy.sent).GetStatus().GetMessage(), (<-busy.sent).GetStatus().GetMessage()}; got[0] != "first" || got[1] != "second" {
		t.Fatalf("the producer got %q, want first, second", got)
	}
}

// When a push consumer goes away (NotifyClientTermination), the messages
// the proxy renewed for it are delivered to another consumer a second
// later, as RocketMQ's proxy clears them, not when the renewed invisible
// time (30 s here) would end.
func TestTerminationClearsRenewals(t *testing.T) {
	c := startTestCluster(t, func(cfg *Config) { cfg.DefaultInvisible, cfg.RenewAhead = 30*time.Second, 10*time.Second })
	const topic, group = "ClearRenew", "GroupClear"
	c.createTopic(t, topic, 1, "")
	c.send(t, "clear-producer", newMessage(topic, "clear-body"))
	req := receiveRequest(group, topic, 0, time.Second)
	req.AutoRenew = true
	// The consumer's settings, as a push consumer sends them first.
	c.telemetryOnce(t, "leaving", &rmqpb.Settings{ClientType: rmqpb.ClientType_PUSH_CONSUMER.Enum(),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic}}}}}})
	got := c.receiveN(t, "leaving", req, 1)[0]
	if d := got.GetSystemProperties().GetInvisibleDuration().AsDuration(); d != 30*time.Second {
		t.Fatalf("auto-renewed message invisible for %v, want 30s", d)
	}
	resp, err := c.rpc.NotifyClientTermination(callCtx(t, "leaving", 5*time.Second), &rmqpb.NotifyClientTerminationRequest{Group: &rmqpb.Resource{Name: group}})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("NotifyClientTermination: %v %v", resp.GetStatus(), err)
	}
	start := time.Now()
	again := c.receiveN(t, "staying", receiveRequest(group, topic, 10*time.Second, time.Second), 1)[0]
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the message came again after %v, want about a second", waited)
	}
	if again.GetSystemProperties().GetMessageId() != got.GetSystemProperties().GetMessageId() {
		t.Fatalf("received %s, want the message the leaving client held", again.GetSystemProperties().GetMessageId())
	}
}

// A name the brokers know splits into the namespace and the client's name,
// as RocketMQ's proxy hands a transaction check's topic to its client.
func TestSplitNamespace(t *testing.T) {
	for _, tc := range []struct{ in, ns, name string }{
		{"Orders", "", "Orders"},
		{"prod%Orders", "prod", "Orders"},
		{"%RETRY%g", "", "%RETRY%g"},
	} {
		if ns, name := splitNamespace(tc.in); ns != tc.ns || name != tc.name {
			t.Errorf("splitNamespace(%q) = %q, %q; want %q, %q", tc.in, ns, name, tc.ns, tc.name)
		}
		if tc.ns != "" && wrap(&rmqpb.Resource{ResourceNamespace: tc.ns, Name: tc.name}) != tc.in {
			t.Errorf("wrap does not undo splitNamespace(%q)", tc.in)
		}
	}
}

// A receipt handle is client input: forwarding to the dead-letter queue
// refuses one whose CommitLog offset is another message's (the broker
// would copy whatever lies there); an EndTransaction without a transaction
// id (Java's blank: U+2003) is INVALID_TRANSACTION_ID, and one of a
// transaction the proxy never saw (a U+00A0 id is no blank one to Java) is
// INTERNAL_SERVER_ERROR, RocketMQ proxy's TRANSACTION_DATA_NOT_FOUND.
func TestRefusesForgedIdentifiers(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "Forged", "GroupForged"
	c.createTopic(t, topic, 1, "")
	c.send(t, "forger", newMessage(topic, "first"))
	c.send(t, "forger", newMessage(topic, "second"))
	msgs := c.receiveN(t, "forger", receiveRequest(group, topic, 30*time.Second, time.Second), 2)
	first, err := ParseHandle(msgs[0].GetSystemProperties().GetReceiptHandle())
	if err != nil {
		t.Fatal(err)
	}
	second, err := ParseHandle(msgs[1].GetSystemProperties().GetReceiptHandle())
	if err != nil {
		t.Fatal(err)
	}
	forged := first
	forged.CommitLogOffset = second.CommitLogOffset
	resp, err := c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, "forger", 5*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		ReceiptHandle: forged.String(), MessageId: msgs[0].GetSystemProperties().GetMessageId()})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("forwarding with a forged handle answered %v %v, want INVALID_RECEIPT_HANDLE", resp.GetStatus(), err)
	}
	for id, want := range map[string]rmqpb.Code{
		"": rmqpb.Code_INVALID_TRANSACTION_ID, "\u2003": rmqpb.Code_INVALID_TRANSACTION_ID,
		"never-sent": rmqpb.Code_INTERNAL_SERVER_ERROR, "\u00a0": rmqpb.Code_INTERNAL_SERVER_ERROR,
	} {
		end, err := c.rpc.EndTransaction(callCtx(t, "forger", 5*time.Second), &rmqpb.EndTransactionRequest{
			Topic: &rmqpb.Resource{Name: topic}, TransactionId: id, MessageId: "x", Resolution: rmqpb.TransactionResolution_COMMIT})
		if err != nil || end.GetStatus().GetCode() != want {
			t.Fatalf("EndTransaction of %q answered %v %v, want %v", id, end.GetStatus(), err, want)
		}
	}
}
