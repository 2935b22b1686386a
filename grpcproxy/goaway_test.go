package grpcproxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/remoting"
)

// A broker stopping gracefully (enableShutdownGracefully) answers the
// proxy's requests GO_AWAY. RocketMQ's proxy sends to brokers through a
// NettyRemotingClient with the default enableReconnectForGoAway (its
// proxy config has no such key): the request goes once more on a new
// connection to the broker's address, and a second GO_AWAY fails it with
// a RemotingSendRequestException, which its ResponseBuilder answers
// INTERNAL_SERVER_ERROR (sendLatencyEnable, off by default, would also
// keep sends off the broker for a while). So does rocketkv's: a send
// whose retry reaches the same going-away broker is INTERNAL_SERVER_ERROR
// (a gRPC producer sends it again as its retry policy allows), one whose
// retry reaches another server behind the address, as behind a load
// balancer, is stored there and answered OK; so is a receive.
func TestGoingAwayBrokerBehindProxy(t *testing.T) {
	var redirect sync.Map // broker address -> the server behind it now
	c := startTestClusterWith(t, map[string]string{"enableShutdownGracefully": "true", "shutdownWaitTimeSeconds": "60"}, func(cfg *Config) {
		cfg.RouteTTL = time.Minute // the route the broker had before it unregistered
		cfg.Remoting.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := redirect.Load(addr); ok {
				addr = to.(string)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	t.Cleanup(func() {
		// Cut the graceful wait of a test that failed before its own
		// Shutdown (the cluster's cleanup waits for the stop).
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.broker.Shutdown(ctx)
	})
	next, _ := clustertest.StartBroker(t, "", nil)
	const topic = "GoAwaySend"
	c.createTopic(t, topic, 1, "")
	if resp := c.invoke(t, next.Addr(), remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil); resp.Code != remoting.Success {
		t.Fatalf("create topic on the next broker: %d %s", resp.Code, resp.Remark)
	}
	c.send(t, "goaway-client", newMessage(topic, "before"))

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.broker.Shutdown(ctx) }()
	defer func() {
		cancel()
		<-stopped
	}()
	probe, err := remoting.Dial(t.Context(), c.brokerAddr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := probe.Invoke(t.Context(), remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
		if errors.Is(err, remoting.ErrGoAway) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker never began to go away: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	sendStatus := func(body string) *rmqpb.Status {
		t.Helper()
		resp, err := c.rpc.SendMessage(callCtx(t, "goaway-client", 10*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, body)}})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		return resp.GetStatus()
	}
	redirect.Store(c.brokerAddr, next.Addr())
	if st := sendStatus("retried"); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("send whose retry reaches another broker behind the address: %v, want OK", st)
	}
	// The broker's address is the going-away broker's again, and the
	// proxy's connection to it is new.
	redirect.Delete(c.brokerAddr)
	c.proxy.pool.CloseAddr(c.brokerAddr)
	if st := sendStatus("twice"); st.GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR ||
		!strings.Contains(st.GetMessage(), "GO_AWAY") || !strings.Contains(st.GetMessage(), "twice") {
		t.Errorf("send whose retry reached the same going-away broker: %v, want INTERNAL_SERVER_ERROR naming GO_AWAY twice", st)
	}
	// A consumer's receive, whose requests go on the proxy's connection
	// to the going-away broker, is retried on a new one too, which
	// reaches the other broker and the message stored there.
	redirect.Store(c.brokerAddr, next.Addr())
	st, msgs := c.receiveOnce(t, "goaway-client", receiveRequest("GoAwayGroup", topic, time.Minute, time.Second), 10*time.Second)
	if st.GetCode() != rmqpb.Code_OK || len(msgs) != 1 || string(msgs[0].GetBody()) != "retried" {
		t.Fatalf("receive through the going-away broker's address: %v, %d messages, want the one the other broker stored", st, len(msgs))
	}
}
