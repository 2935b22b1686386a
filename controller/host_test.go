package controller

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// TestStartHostFreePort: a single peer at port 0 is served on a free port,
// which GET_METADATA_INFO names as the leader's address.
func TestStartHostFreePort(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Peers = "n0-127.0.0.1:0"
	h, err := StartHost(context.Background(), Options{Config: cfg, Log: zerolog.Nop()}, remoting.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if err := h.Controller.WaitLeader(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, h.Addr())
	md := invoke(t, cl, remoting.ControllerGetMetadataInfo, nil, nil)
	if md.ExtFields["controllerLeaderAddress"] != h.Addr() || md.ExtFields["isLeader"] != "true" {
		t.Fatalf("metadata %v, served on %s", md.ExtFields, h.Addr())
	}
}
