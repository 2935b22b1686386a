package controller

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// startEnforcingRecorder is startNotifyRecorder on a listener that
// enforces TLS, with a self-signed certificate (tls.test.mode.enable), as
// a broker with tls.server.mode=enforcing listens; its log is returned.
func startEnforcingRecorder(t *testing.T) (*notifyRecorder, *testutil.SyncBuffer) {
	t.Helper()
	mode, tc, err := remoting.ServerTLS("enforcing", remoting.TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &notifyRecorder{}
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.NotifyBrokerRoleChanged, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, req)
	})
	logs := &testutil.SyncBuffer{}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", TLSMode: mode, TLS: tc}, mux, zerolog.New(logs))
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	r.addr = srv.Addr().String()
	return r, logs
}

// electWithNotice registers one broker at addr with the controller at
// ctlAddr and has it elected master, which makes the controller send it
// NOTIFY_BROKER_ROLE_CHANGED.
func electWithNotice(t *testing.T, ctlAddr, addr string) {
	t.Helper()
	b := &broker{t: t, cl: dial(t, ctlAddr), addr: addr}
	b.applyID()
	wantCode(t, "register", b.register(), remoting.Success)
	b.heartbeat(60000, 0, 10)
	wantCode(t, "elect", b.elect(), remoting.Success)
}

// A controller given client TLS (tls.enable, useTLS) delivers its
// role-change notice to a broker whose listener enforces TLS; one without
// sends it in plaintext, and the broker closes the connection unread and
// says why in its log.
func TestNoticesFollowClientTLS(t *testing.T) {
	for _, withTLS := range []bool{true, false} {
		name := "plaintext"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			opts := Options{Config: testConfig(""), Log: zerolog.Nop()}
			if withTLS {
				opts.ClientTLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a self-signed test certificate
			}
			c, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ctlAddr := startServerFor(t, c)
			waitFor(t, "the controller to lead", c.IsLeader)

			rec, logs := startEnforcingRecorder(t)
			electWithNotice(t, ctlAddr, rec.addr)
			if withTLS {
				waitFor(t, "the notice over TLS", func() bool { return rec.last() != nil })
				if n := rec.last(); n.ExtFields["masterBrokerId"] != "1" || n.ExtFields["masterAddress"] != rec.addr {
					t.Fatalf("notice header %v", n.ExtFields)
				}
				return
			}
			waitFor(t, "the broker to refuse the plaintext notice", func() bool {
				return strings.Contains(logs.String(), "plaintext refused, TLS is enforced")
			})
			if rec.last() != nil {
				t.Fatal("a plaintext notice reached a broker enforcing TLS")
			}
		})
	}
}

// startServerFor serves c's handler on a loopback port (plaintext) and
// returns its address.
func startServerFor(t *testing.T, c *Controller) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, c.Handler(), zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String()
}
