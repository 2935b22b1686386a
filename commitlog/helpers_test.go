package commitlog

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

var testStoreHost = netip.MustParseAddrPort("192.168.1.10:10911")

// testConfig returns a small-segment configuration in a temporary store.
func testConfig(t testing.TB, segSize int64) Config {
	cfg := DefaultConfig(t.TempDir())
	cfg.SegmentSize = segSize
	cfg.StoreHost = testStoreHost
	cfg.Logger = testLogger(t)
	return cfg
}

// testLogger writes the log's events to the test log when -v is given.
func testLogger(t testing.TB) zerolog.Logger {
	if !testing.Verbose() {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}, NoColor: true}).With().Timestamp().Logger()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func mustOpen(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// testMessage returns a message whose body has bodyLen bytes derived
// from i.
func testMessage(topic string, queue int32, i, bodyLen int) *Message {
	body := make([]byte, bodyLen)
	for j := range body {
		body[j] = byte(i*31 + j)
	}
	return &Message{
		Topic: topic, QueueID: queue, Body: body, BornTimestamp: int64(1000 + i),
		BornHost:   netip.MustParseAddrPort("10.0.0.2:4000"),
		Properties: fmt.Sprintf("TAGS\x01tag%d\x02UNIQ_KEY\x01U%08d", i%3, i),
	}
}

// counter is a QueueOffsetAssigner keeping one counter per topic/queue.
type counter struct {
	mu    sync.Mutex
	next  map[string]int64
	calls int
}

func newCounter() *counter { return &counter{next: map[string]int64{}} }

func (c *counter) Assign(topic string, queueID int32, n int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := fmt.Sprintf("%s/%d", topic, queueID)
	base := c.next[k]
	c.next[k] = base + int64(n)
	c.calls++
	return base
}

func mustAppend(t testing.TB, l *Log, req AppendRequest) AppendResult {
	t.Helper()
	res, err := l.Append(context.Background(), req)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if res.Status != PutOK {
		t.Fatalf("Append status %v", res.Status)
	}
	return res
}

// scanAll reads every record with a Reader, checking each one.
func scanAll(t testing.TB, l *Log) []Message {
	t.Helper()
	r := l.NewReader(l.MinOffset())
	defer r.Close()
	var out []Message
	for {
		e, err := r.Next()
		if err == ErrNoMoreData {
			break
		}
		if err != nil {
			t.Fatalf("Reader.Next at %d: %v", r.Offset(), err)
		}
		m, err := DecodeWith(e.Data, DecodeOptions{VerifyCRC: true})
		if err != nil {
			t.Fatalf("record at %d: %v", e.Offset, err)
		}
		if m.PhyOffset != e.Offset || m.StoreSize != e.Size {
			t.Fatalf("record at %d: physical offset %d, size %d/%d", e.Offset, m.PhyOffset, m.StoreSize, e.Size)
		}
		m.Body = append([]byte(nil), m.Body...)
		out = append(out, m)
	}
	if r.Offset() != l.MaxOffset() {
		t.Fatalf("reader stopped at %d, MaxOffset %d", r.Offset(), l.MaxOffset())
	}
	return out
}
