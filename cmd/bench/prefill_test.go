package main

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// fakeSendServer answers SEND_MESSAGE_V2: SYSTEM_BUSY for the first busy
// sends, then code (SUCCESS unless set), counting what it stored.
func fakeSendServer(t *testing.T, busy int64, code int32) (addr string, stored *atomic.Int64) {
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
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String(), stored
}

// A pre-fill sends again what the broker refused as busy (flow control),
// as a client does, until every message is stored; any other failed send
// fails it.
func TestPrefillRetriesBusySends(t *testing.T) {
	cfg := loadConfig{topic: "T", queues: 2, producers: 2, inflight: 4, bodySize: 16, count: 200}
	addr, stored := fakeSendServer(t, 150, remoting.Success)
	res, err := prefill(context.Background(), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalAcked != 200 || stored.Load() != 200 || res.Busy != 150 || res.Rate <= 0 {
		t.Fatalf("pre-fill stored %d (server: %d), %d busy answers, first round %.0f msg/s; want 200, 200, 150 and a rate", res.TotalAcked, stored.Load(), res.Busy, res.Rate)
	}
	addr, _ = fakeSendServer(t, 0, remoting.SystemError)
	if _, err := prefill(context.Background(), addr, cfg); err == nil {
		t.Fatal("a pre-fill whose sends failed with SYSTEM_ERROR succeeded")
	}
}
