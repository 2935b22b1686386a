package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// A request handler still running when Shutdown's context ends reads the
// stores as if nothing had happened: they close once it returned, never
// under it (Pebble panics on a closed database; the CommitLog's mapping
// is gone).
func TestAShutdownPastItsDeadlineClosesTheStoresAfterTheLastHandler(t *testing.T) {
	tb := startTestBroker(t, nil)
	c := tb.client(nil)
	mustSend(t, c, "TopicShutdown", 0, "kept", "")

	const slowCode = 31999 // no RocketMQ code
	entered, release := make(chan struct{}), make(chan struct{})
	readErr := make(chan error, 1)
	tb.mux.Handle(slowCode, remoting.RespondFunc(func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		close(entered)
		<-release // a handler that does not look at its context
		v, err := tb.clog.ReadRecord(0)
		if err == nil {
			v.Release()
			err = tb.db.Scan([]byte{0x01}, func(k, v []byte) bool { return false })
		}
		readErr <- err
		return remoting.NewResponse(req, remoting.Success, "")
	}))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = c.Invoke(ctx, remoting.NewRequest(slowCode, nil, nil))
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := tb.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a handler running past its deadline: %v, want the deadline's error", err)
	}
	select {
	case <-tb.Closed():
		t.Fatal("the stores were closed while a handler still ran")
	default:
	}
	close(release)
	if err := <-readErr; err != nil {
		t.Fatalf("the handler running past the shutdown deadline read the stores: %v", err)
	}
	select {
	case <-tb.Closed():
	case <-time.After(20 * time.Second):
		t.Fatal("the stores were not closed after the last handler returned")
	}
	if tb.clog != nil || tb.db != nil {
		t.Fatal("Closed reported a stop that left the stores open")
	}
}
