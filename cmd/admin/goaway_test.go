package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
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

