package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// startNameServer starts a name server that, once stopping, tells newer
// clients to go away for goAway.
func startNameServer(t *testing.T, goAway time.Duration) *namesrv.Server {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.Remoting.GoAwayWait = goAway
	s, err := namesrv.NewServer(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// A request mqadmin's client sends to a name server that answers GO_AWAY
// goes once more on a new connection (enableReconnectForGoAway), which
// behind a load balancer reaches another name server.
func TestInvokeReconnectsOnGoAway(t *testing.T) {
	old, next := startNameServer(t, time.Minute), startNameServer(t, 0)
	f := testutil.StartForwarder(t, old.Addr().String())
	addr := f.Addr()
	if _, err := run(t, "getNamesrvConfig", "-n", addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- old.Shutdown(ctx) }()
	defer func() {
		cancel()
		<-stopped
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := run(t, "getNamesrvConfig", "-n", old.Addr().String())
		if err != nil && strings.Contains(err.Error(), "GO_AWAY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old name server never went away: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The request's first connection reaches the old name server, which
	// answers GO_AWAY; the next one reaches the other.
	f.Route(old.Addr().String(), next.Addr().String())
	if out, err := run(t, "getNamesrvConfig", "-n", addr); err != nil || !strings.Contains(out, "enableAllTopicList=") {
		t.Fatalf("through the address whose server went away: %v\n%s", err, out)
	}
}

// sendBroker starts a server that stores SEND_MESSAGE_V2 as a broker
// would, answering with its name as msgId, and counts the sends.
func sendBroker(t *testing.T, name string) (*remoting.Server, *atomic.Int32) {
	t.Helper()
	return remotingtest.StartAnswering(t, remoting.SendMessageV2, map[string]string{"msgId": name, "queueOffset": "0"})
}

// A send of sendMsgStatus, checkMsgSendRT or clusterRT that a broker
// stopping gracefully answers GO_AWAY goes once more on a new connection,
// as mqadmin's producer's client (enableReconnectForGoAway) sends it,
// and that connection carries the sends after it; it failed before, the
// producer's connection being dialled outside a pool.
func TestToolProducerReconnectsOnGoAway(t *testing.T) {
	old, oldSends := sendBroker(t, "old")
	next, nextSends := sendBroker(t, "next")
	f := testutil.StartForwarder(t, old.Addr().String())
	g := &globals{timeout: 10 * time.Second}
	p := g.newToolProducer("PID_GOAWAY")
	defer p.Close()
	target := sendTarget{brokerName: "broker-a", addr: f.Addr()}
	if _, err := p.send(t.Context(), target, "T", nil, []byte("first")); err != nil {
		t.Fatal(err)
	}
	remotingtest.GoAway(t, old)
	f.Route(next.Addr().String())
	for i := range 2 {
		res, err := p.send(t.Context(), target, "T", nil, []byte("after"))
		if err != nil || res.offsetMsgID != "next" {
			t.Fatalf("send %d after the broker began to go away: %+v %v, want it stored by the next broker", i, res, err)
		}
	}
	if o, n := oldSends.Load(), nextSends.Load(); o != 1 || n != 2 {
		t.Errorf("the going-away broker stored %d sends, the next %d; want 1 and 2", o, n)
	}
}
