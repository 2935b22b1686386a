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
// stores of the Broker behind it close after); a request, oneway or not,
// arriving with no handler attached waits for the next one, which serves
// it on the same connection.
func TestHandlerGateHandsConnectionsToTheNextHandler(t *testing.T) {
	gate := handlerGate{log: zerolog.Nop(), wait: time.Minute}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, &gate, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	c := dialCtl(t, srv.Addr().String())

	early := invokeAsync(c, remoting.GetBrokerRuntimeInfo)
	awaitParked(t, &gate, 1)
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
	if r := awaitAnswer(t, early); r.Code != remoting.Success || r.Remark != "first" {
		t.Fatalf("a request sent before any handler: code %d %q, want the first handler's answer", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success || r.Remark != "first" {
		t.Fatalf("the first handler: code %d %q", r.Code, r.Remark)
	}
	slow := invokeAsync(c, remoting.PullMessage)
	<-entered

	// The detach waits for the request the first handler still serves.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := gate.detach(ctx, first)
	cancel()
	if err == nil {
		t.Fatal("detach returned while a request of the handler was being served")
	}
	between := invokeAsync(c, remoting.GetBrokerRuntimeInfo)
	oneway, cancelOneway := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelOneway()
	if err := c.InvokeOneway(oneway, remoting.NewRequest(remoting.UnregisterClient, nil, nil)); err != nil {
		t.Fatal(err)
	}
	awaitParked(t, &gate, 2)
	close(release)
	if r := awaitAnswer(t, slow); r.Code != remoting.Success || r.Remark != "first" {
		t.Fatalf("the request taken before the detach: code %d %q", r.Code, r.Remark)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gate.detach(ctx, first); err != nil {
		t.Fatalf("detach once the handler returned: %v", err)
	}
	servedBefore := firstServed.Load()

	onewaySeen := make(chan struct{})
	gate.attach(remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		if req.IsOneway() {
			close(onewaySeen)
			return
		}
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, "second"))
	}))
	if r := awaitAnswer(t, between); r.Code != remoting.Success || r.Remark != "second" {
		t.Fatalf("a request sent between the handlers: code %d %q, want the second handler's answer", r.Code, r.Remark)
	}
	select {
	case <-onewaySeen:
	case <-time.After(10 * time.Second):
		t.Fatal("the oneway request sent between the handlers never reached the second")
	}
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success || r.Remark != "second" {
		t.Fatalf("the second handler on the same connection: code %d %q", r.Code, r.Remark)
	}
	if got := firstServed.Load(); got != servedBefore {
		t.Fatalf("the detached handler served %d more requests", got-servedBefore)
	}
}

// A request that waits longer than the gate's wait for a handler, or
// waits when the gate closes, is answered SERVICE_NOT_AVAILABLE (which
// the clients retry elsewhere); a closed gate answers at once, and the
// connection stays usable.
func TestHandlerGateAnswersWhatWaitsTooLong(t *testing.T) {
	gate := handlerGate{log: zerolog.Nop(), wait: 50 * time.Millisecond}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, &gate, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	c := dialCtl(t, srv.Addr().String())
	for i := range 3 {
		if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.ServiceNotAvailable || r.Remark != switchingRemark {
			t.Fatalf("request %d with no handler past the wait: code %d %q, want SERVICE_NOT_AVAILABLE %q", i, r.Code, r.Remark, switchingRemark)
		}
	}
	gate.mu.Lock()
	left := len(gate.parked)
	gate.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d answered requests still held", left)
	}

	long := handlerGate{log: zerolog.Nop(), wait: time.Hour}
	srv2 := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, &long, zerolog.Nop())
	if err := srv2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv2.Shutdown(context.Background()) })
	c2 := dialCtl(t, srv2.Addr().String())
	waiting := invokeAsync(c2, remoting.GetBrokerRuntimeInfo)
	awaitParked(t, &long, 1)
	long.close()
	if r := awaitAnswer(t, waiting); r.Code != remoting.ServiceNotAvailable {
		t.Fatalf("a request waiting when the gate closed: code %d %q, want SERVICE_NOT_AVAILABLE", r.Code, r.Remark)
	}
	if r := call(t, c2, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.ServiceNotAvailable {
		t.Fatalf("a request after the gate closed: code %d %q, want SERVICE_NOT_AVAILABLE", r.Code, r.Remark)
	}
}

// What waits is bounded: a request past the count, or whose body would
// pass the bytes, is answered SERVICE_NOT_AVAILABLE at once while the
// others go on waiting for the next handler.
func TestHandlerGateBoundsWhatWaits(t *testing.T) {
	gate := handlerGate{log: zerolog.Nop(), wait: time.Hour, maxRequests: 2, maxBytes: 100}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, &gate, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	c := dialCtl(t, srv.Addr().String())
	if r := call(t, c, remoting.SendMessageV2, nil, make([]byte, 101)); r.Code != remoting.ServiceNotAvailable {
		t.Fatalf("a body past the bytes that may wait: code %d %q, want SERVICE_NOT_AVAILABLE", r.Code, r.Remark)
	}
	first, second := invokeAsync(c, remoting.GetBrokerRuntimeInfo), invokeAsync(c, remoting.GetBrokerRuntimeInfo)
	awaitParked(t, &gate, 2)
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.ServiceNotAvailable {
		t.Fatalf("a third request with two waiting: code %d %q, want SERVICE_NOT_AVAILABLE", r.Code, r.Remark)
	}
	gate.attach(remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, "served"))
	}))
	for _, ch := range []<-chan asyncAnswer{first, second} {
		if r := awaitAnswer(t, ch); r.Code != remoting.Success {
			t.Fatalf("a request that waited within the bounds: code %d %q", r.Code, r.Remark)
		}
	}
}

// invokeAsync sends a request of code on c and returns where its answer
// (or the error) arrives.
func invokeAsync(c *remoting.Client, code int32) <-chan asyncAnswer {
	out := make(chan asyncAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := c.Invoke(ctx, remoting.NewRequest(code, nil, nil))
		out <- asyncAnswer{r, err}
	}()
	return out
}

// asyncAnswer is the outcome of invokeAsync.
type asyncAnswer struct {
	resp *remoting.Command
	err  error
}

// awaitAnswer waits for an invokeAsync answer and fails the test on an
// error.
func awaitAnswer(t *testing.T, ch <-chan asyncAnswer) *remoting.Command {
	t.Helper()
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.resp
}

// awaitParked waits until n requests wait at g.
func awaitParked(t *testing.T, g *handlerGate, n int) {
	t.Helper()
	waitUntil(t, 10*time.Second, "the requests to wait at the gate", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.parked) == n
	})
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
