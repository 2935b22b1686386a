package main

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// fakeSendServer answers SEND_MESSAGE_V2: SYSTEM_BUSY for the first busy
// sends, then code (SUCCESS unless set), counting what it stored.
func fakeSendServer(t *testing.T, busy int64, code int32) (srv *remoting.Server, stored *atomic.Int64) {
	t.Helper()
	var seen atomic.Int64
	stored = new(atomic.Int64)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.SendMessageV2, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		answer := code
		if seen.Add(1) <= busy {
			answer = remoting.SystemBusy
		} else if answer == remoting.Success {
			stored.Add(1)
		}
		_ = conn.Reply(req, remoting.NewResponse(req, answer, "fake"))
	})
	return remotingtest.StartServer(t, mux), stored
}

// A pre-fill sends again what the broker refused as busy (flow control),
// as a client does, until every message is stored; any other failed send
// fails it.
func TestPrefillRetriesBusySends(t *testing.T) {
	cfg := loadConfig{topic: "T", queues: 2, producers: 2, inflight: 4, bodySize: 16, count: 200}
	srv, stored := fakeSendServer(t, 150, remoting.Success)
	res, err := prefill(context.Background(), srv.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalAcked != 200 || stored.Load() != 200 || res.Busy != 150 || res.Rate <= 0 {
		t.Fatalf("pre-fill stored %d (server: %d), %d busy answers, first round %.0f msg/s; want 200, 200, 150 and a rate", res.TotalAcked, stored.Load(), res.Busy, res.Rate)
	}
	srv, _ = fakeSendServer(t, 0, remoting.SystemError)
	if _, err := prefill(context.Background(), srv.Addr().String(), cfg); err == nil {
		t.Fatal("a pre-fill whose sends failed with SYSTEM_ERROR succeeded")
	}
}

// A bench producer's send that a broker stopping gracefully answers
// GO_AWAY goes once more on a new connection, as the sends of RocketMQ's
// benchmark producer do (its client's enableReconnectForGoAway), which
// behind a load balancer reaches another broker; it failed the run
// before, each producer's connection dialled outside a pool.
func TestPrefillReconnectsOnGoAway(t *testing.T) {
	old, oldStored := fakeSendServer(t, 0, remoting.Success)
	next, nextStored := fakeSendServer(t, 0, remoting.Success)
	remotingtest.GoAway(t, old)
	// The first connection reaches the going-away broker, every later one
	// the next (two first connections to it raced the reconnect of the
	// first producer, which could meet it twice).
	f := testutil.StartForwarder(t, old.Addr().String())
	f.Route(old.Addr().String(), next.Addr().String())
	cfg := loadConfig{topic: "T", queues: 2, producers: 2, inflight: 4, bodySize: 16, count: 40}
	res, err := prefill(context.Background(), f.Addr(), cfg)
	if err != nil {
		t.Fatalf("pre-fill through an address whose broker goes away: %v", err)
	}
	if res.TotalAcked != 40 || oldStored.Load() != 0 || nextStored.Load() != 40 {
		t.Fatalf("%d stored: %d by the going-away broker, %d by the next; want 40, 0, 40", res.TotalAcked, oldStored.Load(), nextStored.Load())
	}
}
