package grpcproxy

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
)

// A client that goes away while the proxy long-polls for it does not take
// the messages the poll then pops with it: they are made visible again
// within a second or so, not after the whole invisible time.
func TestMessagesPoppedForAGoneClientComeBack(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "ReceiveGone", "ReceiveGoneGroup"
	c.createTopic(t, topic, 1, "")
	c.send(t, "p", newMessage(topic, "first")) // the group's offset starts
	first := c.receiveN(t, "c", receiveRequest(group, topic, 30*time.Second, time.Second), 1)[0]
	c.ack(t, "c", group, topic, first.GetSystemProperties().GetMessageId(), first.GetSystemProperties().GetReceiptHandle())

	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "gone"))
	if _, err := c.rpc.ReceiveMessage(ctx, receiveRequest(group, topic, 60*time.Second, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the proxy is long-polling
	cancel()
	time.Sleep(200 * time.Millisecond)
	c.send(t, "p", newMessage(topic, "while gone"))
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if _, msgs := c.receiveOnce(t, "c2", receiveRequest(group, topic, 30*time.Second, time.Second), 10*time.Second); len(msgs) > 0 {
			if string(msgs[0].GetBody()) != "while gone" {
				t.Fatalf("received %q", msgs[0].GetBody())
			}
			return
		}
	}
	t.Fatal("the message popped for a client that had gone stayed invisible (60 s) instead of coming back")
}

// A client that ends (NotifyClientTermination) while its auto-renewed
// receive long-polls is answered MESSAGE_NOT_FOUND, "disconnected", as
// RocketMQ's proxy answers since apache/rocketmq#9253, and the messages
// the poll popped come back within a second or so: nobody would renew or
// settle them, and renewing them for a gone client kept them invisible.
func TestReceiveForAnEndedClientGivesTheMessagesBack(t *testing.T) {
	c := startTestCluster(t, func(cfg *Config) { cfg.DefaultInvisible, cfg.RenewAhead = 30*time.Second, 10*time.Second })
	const topic, group = "ReceiveEnded", "ReceiveEndedGroup"
	c.createTopic(t, topic, 1, "")
	c.send(t, "p", newMessage(topic, "first")) // the group's offset starts
	first := c.receiveN(t, "c", receiveRequest(group, topic, 30*time.Second, time.Second), 1)[0]
	c.ack(t, "c", group, topic, first.GetSystemProperties().GetMessageId(), first.GetSystemProperties().GetReceiptHandle())

	// The consumer's settings, as a push consumer sends them first.
	c.telemetryOnce(t, "ender", &rmqpb.Settings{ClientType: rmqpb.ClientType_PUSH_CONSUMER.Enum(),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic}}}}}})
	req := receiveRequest(group, topic, 0, 5*time.Second)
	req.AutoRenew = true
	stream, err := c.rpc.ReceiveMessage(callCtx(t, "ender", 20*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		st   *rmqpb.Status
		msgs int
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		for {
			r, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					a.err = err
				}
				got <- a
				return
			}
			switch {
			case r.GetStatus() != nil:
				a.st = r.GetStatus()
			case r.GetMessage() != nil:
				a.msgs++
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the proxy is long-polling
	resp, err := c.rpc.NotifyClientTermination(callCtx(t, "ender", 5*time.Second), &rmqpb.NotifyClientTerminationRequest{Group: &rmqpb.Resource{Name: group}})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("NotifyClientTermination: %v %v", resp.GetStatus(), err)
	}
	c.send(t, "p", newMessage(topic, "while ending"))
	a := <-got
	if a.err != nil || a.msgs != 0 || a.st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND || !strings.Contains(a.st.GetMessage(), "[ender] is disconnected") {
		t.Fatalf("the ended client's receive: status %v, %d messages, %v; want MESSAGE_NOT_FOUND, disconnected, none", a.st, a.msgs, a.err)
	}
	start := time.Now()
	again := c.receiveN(t, "staying", receiveRequest(group, topic, 10*time.Second, time.Second), 1)[0]
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the message came back after %v, want about a second", waited)
	}
	if string(again.GetBody()) != "while ending" {
		t.Fatalf("received %q", again.GetBody())
	}
}
