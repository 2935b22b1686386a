package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// slowCode is a request code no RocketMQ client sends, served by the
// handler blockHandler installs.
const slowCode = 31999

// blockHandler makes tb answer slowCode with a handler that ignores its
// context until release is called (when the test ends at the latest),
// then reads the stores and reports their error on readErr; it sends one
// such request and returns once the handler runs.
func blockHandler(t *testing.T, tb *testBroker) (release func(), readErr <-chan error) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	errs := make(chan error, 1)
	tb.mux.Handle(slowCode, remoting.RespondFunc(func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		close(entered)
		<-gate // a handler that does not look at its context
		v, err := tb.clog.ReadRecord(0)
		if err == nil {
			v.Release()
			err = tb.db.Scan([]byte{0x01}, func(k, v []byte) bool { return false })
		}
		errs <- err
		return remoting.NewResponse(req, remoting.Success, "")
	}))
	c := tb.client(nil)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = c.Invoke(ctx, remoting.NewRequest(slowCode, nil, nil))
	}()
	<-entered
	return release, errs
}

// shutdownWithin calls Shutdown with a context of d.
func shutdownWithin(tb *testBroker, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return tb.Shutdown(ctx)
}

// A request handler still running when Shutdown's context ends reads the
// stores as if nothing had happened: they close once it returned, never
// under it (Pebble panics on a closed database; the CommitLog's mapping
// is gone). A second Shutdown meanwhile waits for that stop, as long as
// its own context allows, instead of reporting a stop that has not
// happened.
func TestAShutdownPastItsDeadlineClosesTheStoresAfterTheLastHandler(t *testing.T) {
	tb := startTestBroker(t, nil)
	mustSend(t, tb.client(nil), "TopicShutdown", 0, "kept", "")
	release, readErr := blockHandler(t, tb)

	if err := shutdownWithin(tb, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a handler running past its deadline: %v, want the deadline's error", err)
	}
	if err := shutdownWithin(tb, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Shutdown while the first's stop waits for a handler: %v, want the deadline's error", err)
	}
	select {
	case <-tb.Closed():
		t.Fatal("the stores were closed while a handler still ran")
	default:
	}
	release()
	if err := <-readErr; err != nil {
		t.Fatalf("the handler running past the shutdown deadline read the stores: %v", err)
	}
	if err := shutdownWithin(tb, 20*time.Second); err != nil {
		t.Fatalf("a Shutdown once the handler returned: %v", err)
	}
	select {
	case <-tb.Closed():
	default:
		t.Fatal("Shutdown returned nil before the stores were closed")
	}
	if tb.clog != nil || tb.db != nil {
		t.Fatal("Closed reported a stop that left the stores open")
	}
}

// A broker past its shutdown deadline does not register itself with the
// name servers again while its last handlers drain: the registration
// loop stops before the unregistration.
func TestAStoppingBrokerDoesNotRegisterAgain(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "registerNameServerPeriod": "100"})
	waitFor(t, "the broker registered", func() bool { return len(ns.Registry().ClusterInfo().BrokerAddrTable) == 1 })
	blockHandler(t, tb)
	if err := shutdownWithin(tb, 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a handler running past its deadline: %v", err)
	}
	if n := len(ns.Registry().ClusterInfo().BrokerAddrTable); n != 0 {
		t.Fatalf("%d brokers registered after the unregistration", n)
	}
	time.Sleep(800 * time.Millisecond) // eight registration periods
	if n := len(ns.Registry().ClusterInfo().BrokerAddrTable); n != 0 {
		t.Fatalf("the stopping broker registered itself again (%d brokers)", n)
	}
}

// Closed is closed for a broker never started, once Shutdown is called,
// and after a Start that failed closed what it opened.
func TestClosedAfterAFailedStartOrWithoutOne(t *testing.T) {
	loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "brokerIP1": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := New(loaded.Broker, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of a broker never started: %v", err)
	}
	select {
	case <-idle.Closed():
	default:
		t.Fatal("Closed stayed open after Shutdown of a broker never started")
	}

	busy := startTestBroker(t, nil)
	port := busy.hostAddr().Port()
	err = startErrorWith(t, map[string]string{"storePathRootDir": t.TempDir(), "brokerIP1": "127.0.0.1",
		"listenPort": strconv.Itoa(int(port))}, func(b *Broker) {
		t.Cleanup(func() {
			select {
			case <-b.Closed():
			case <-time.After(time.Second):
				t.Error("Closed stayed open after a failed Start")
			}
		})
	})
	if err == nil {
		t.Fatal("a broker started on a port in use")
	}
}

// With enableShutdownGracefully a stopping broker answers GO_AWAY on its
// main port to clients newer than RocketMQ 5.3.1 for
// shutdownWaitTimeSeconds, serves older clients (the Go client v2 says
// 317) and its fast port meanwhile, then closes the main port; then its
// fast port does the same for as long, as RocketMQ's broker stops its
// main server and then its fast one, each after its own wait.
func TestGracefulShutdownTellsNewerClientsToGoAway(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableShutdownGracefully": "true", "shutdownWaitTimeSeconds": "3"})
	if w := b.GoAwayWait(); w != 6*time.Second {
		t.Errorf("GoAwayWait %v, want 6s: the main port's wait and then the fast port's", w)
	}
	c := b.client(nil)
	fast, err := remoting.Dial(t.Context(), b.FastAddr().String(), remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	ask := func(c *remoting.Client, version int32) (*remoting.Command, error) {
		req := remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "TBW102", "queueId": "0"}, nil)
		req.Version = version
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Invoke(ctx, req)
	}
	maxOffset := func(c *remoting.Client, version int32) *remoting.Command {
		t.Helper()
		resp, err := ask(c, version)
		if err != nil {
			t.Fatalf("GET_MAX_OFFSET as version %d: %v", version, err)
		}
		return resp
	}
	if r := maxOffset(c, 481); r.Code != remoting.Success {
		t.Fatalf("before the shutdown: %d %s", r.Code, r.Remark)
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- b.Shutdown(ctx)
	}()
	deadline := time.Now().Add(2 * time.Second)
	for {
		// A client of no pool fails the request answered GO_AWAY.
		_, err := ask(c, 481)
		if errors.Is(err, remoting.ErrGoAway) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a 5.3.4 client was never told to go away")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := maxOffset(c, 317); r.Code != remoting.Success {
		t.Errorf("going away, a Go client v2 got %d %s, want it served", r.Code, r.Remark)
	}
	if r := maxOffset(fast, 481); r.Code != remoting.Success {
		t.Errorf("going away, the fast port answered a 5.3.4 client %d %s, want it served as RocketMQ's", r.Code, r.Remark)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the broker stopped before its graceful wait: %v", err)
	default:
	}

	// The main port's wait ends, it closes, and the fast port goes away.
	deadline = time.Now().Add(20 * time.Second)
	for {
		_, err := ask(fast, 481)
		if errors.Is(err, remoting.ErrGoAway) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the fast port never told a 5.3.4 client to go away")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The main port was closed before (its client sees so at once).
	waitFor(t, "the main port's connection closed", c.Closed)
	if r := maxOffset(fast, 317); r.Code != remoting.Success {
		t.Errorf("the fast port going away answered a Go client v2 %d %s, want it served", r.Code, r.Remark)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the broker stopped before the fast port's graceful wait: %v", err)
	default:
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
