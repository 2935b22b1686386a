package broker

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// The gate of a Supervisor's servers serves each request with the
// handler attached last; detaching waits for the requests it took (the
// stores of the Broker behind it close after), answers
// SERVICE_NOT_AVAILABLE in between and drops oneway requests; the connection stays open and the
// next handler attached serves it.
func TestHandlerGateHandsConnectionsToTheNextHandler(t *testing.T) {
	var gate handlerGate
	gate.log = zerolog.Nop()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, &gate, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	c := dialCtl(t, srv.Addr().String())

	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.ServiceNotAvailable || r.Remark != switchingRemark {
		t.Fatalf("before any handler: code %d %q, want SERVICE_NOT_AVAILABLE %q", r.Code, r.Remark, switchingRemark)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var firstServed atomic.Int32
	first := gate.attach(remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		firstServed.Add(1)
		if req.Code == remoting.PullMessage {
			entered <- struct{}{}
			<-release
		}
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, "first"))
	}))
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success || r.Remark != "first" {
		t.Fatalf("the first handler: code %d %q", r.Code, r.Remark)
	}
	slow := make(chan *remoting.Command, 1)
	go func() { slow <- call(t, c, remoting.PullMessage, nil, nil) }()
	<-entered

	// The detach waits for the request the first handler still serves.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := gate.detach(ctx, first)
	cancel()
	if err == nil {
		t.Fatal("detach returned while a request of the handler was being served")
	}
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.ServiceNotAvailable {
		t.Fatalf("between two handlers: code %d %q, want SERVICE_NOT_AVAILABLE", r.Code, r.Remark)
	}
	oneway, cancelOneway := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelOneway()
	if err := c.InvokeOneway(oneway, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if r := <-slow; r.Code != remoting.Success {
		t.Fatalf("the request taken before the detach: code %d %q", r.Code, r.Remark)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gate.detach(ctx, first); err != nil {
		t.Fatalf("detach once the handler returned: %v", err)
	}
	servedBefore := firstServed.Load()

	gate.attach(remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, "second"))
	}))
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success || r.Remark != "second" {
		t.Fatalf("the second handler on the same connection: code %d %q", r.Code, r.Remark)
	}
	if got := firstServed.Load(); got != servedBefore {
		t.Fatalf("the detached handler served %d more requests", got-servedBefore)
	}
}

// A process whose fast channel cannot listen does not start, says which
// port, and leaves its main port free again.
func TestProcessServersFastPortTakenFailsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := testutil.FreePortPair(t)
	loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "brokerIP1": "127.0.0.1",
		"listenPort": strconv.Itoa(port), "fastListenPort": strconv.Itoa(taken.Addr().(*net.TCPAddr).Port), "tls.config.file": ""})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProcessServers(loaded.Broker, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	err = p.start(context.Background(), port, fastListenPortOf(loaded.Broker))
	if err == nil || !strings.Contains(err.Error(), "fast channel") {
		_ = p.shutdown(context.Background())
		t.Fatalf("start with the fast port taken: %v, want an error naming the fast channel", err)
	}
	again, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("the main port is still held after the failed start: %v", err)
	}
	_ = again.Close()
}
