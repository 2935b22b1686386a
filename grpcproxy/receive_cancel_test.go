package grpcproxy

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
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
