package remoting

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A server that stops reading (a stalled process, a full receive window)
// blocks the writer and fills the send queue: InvokeAsync then waits for
// room at most AsyncTimeout and fails; it used to wait with no bound. The
// failure comes as its error, or, when the call's own timer fires first
// (both end after AsyncTimeout), as its callback's error while it still
// waits.
func TestInvokeAsyncGivesUpOnAFullSendQueue(t *testing.T) {
	c, err := Dial(testCtx(t), "stalled", ClientOptions{
		AsyncTimeout: 50 * time.Millisecond,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe() // server end never read
			t.Cleanup(func() { _ = server.Close() })
			return client, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var timedOut, refused atomic.Int64
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for range sendQueueLen + maxWriteBatch + 8 {
			var back atomic.Bool // InvokeAsync returned
			err := c.InvokeAsync(NewRequest(GetRouteInfoByTopic, nil, nil), func(_ *Command, err error) {
				if err != nil {
					timedOut.Add(1)
					if !back.Load() {
						refused.Add(1) // failed while it waited for room
					}
				}
			})
			back.Store(true)
			if errors.Is(err, context.DeadlineExceeded) {
				refused.Add(1)
			}
		}
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatalf("InvokeAsync blocked on a full send queue (AsyncTimeout 50ms; %d callbacks already got ErrTimeout)", timedOut.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("no InvokeAsync failed for a full send queue")
	}
}
