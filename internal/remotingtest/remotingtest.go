// Package remotingtest holds helpers for tests of Remoting clients: a
// server on a loopback port, and making it go away as a broker or a name
// server stopping with enableShutdownGracefully does.
package remotingtest

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// StartServer starts a Remoting server on a loopback port that answers
// with h and, once GoAway is called, tells clients newer than RocketMQ
// 5.3.1 to go away for a minute; the test's cleanup shuts it down.
func StartServer(t testing.TB, h remoting.Handler) *remoting.Server {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", GoAwayWait: time.Minute}, h, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// StartAnswering starts a server (StartServer) that answers every request
// of code SUCCESS with a copy of fields as its header, and counts them:
// a broker or name server as far as one request of a tool goes.
func StartAnswering(t testing.TB, code int32, fields map[string]string) (*remoting.Server, *atomic.Int32) {
	t.Helper()
	var asked atomic.Int32
	mux := remoting.NewMux()
	mux.HandleFunc(code, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		asked.Add(1)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.ExtFields = maps.Clone(fields)
		_ = conn.Reply(req, resp)
	})
	return StartServer(t, mux), &asked
}

// GoAway makes s answer GO_AWAY to newer clients, as a server stopping
// gracefully does before it closes, until the test ends; it returns once
// the server answers so.
func GoAway(t testing.TB, s *remoting.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.GoAway(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for !s.GoingAway() {
		if time.Now().After(deadline) {
			t.Fatal("the server never began to go away")
		}
		time.Sleep(time.Millisecond)
	}
}
