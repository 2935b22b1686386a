package autoswitch

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// lockedBuffer is a log sink safe for the client's goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A slave that waits for its master's HA address logs the wait once, not
// once per retry: a controller-mode slave whose master did not answer
// EXCHANGE_BROKER_HA_INFO used to write a warning every RetryInterval.
func TestClientLogsUnknownMasterOnce(t *testing.T) {
	var out lockedBuffer
	var asked atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := NewClient(ClientConfig{
		MasterAddr: func() string {
			if asked.Add(1) >= 50 {
				cancel()
			}
			return ""
		},
		BrokerID: 2, Log: openLog(t, logConfig(t.TempDir(), true)), Epochs: NewEpochCache(nil),
		RetryInterval: time.Millisecond, Logger: zerolog.New(&out),
	})
	if err := c.Run(ctx); err == nil {
		t.Fatal("Run returned no error after its context ended")
	}
	if n := asked.Load(); n < 50 {
		t.Fatalf("the address asked %d times, want 50", n)
	}
	if n := strings.Count(out.String(), "not known yet"); n != 1 {
		t.Fatalf("%d lines about the unknown HA address over 50 tries, want 1:\n%s", n, out.String())
	}
}
