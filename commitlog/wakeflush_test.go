package commitlog

import (
	"testing"
	"time"
)

// With WakeFlushOnAppend, an async flusher whose period never comes
// flushes as soon as an append leaves FlushLeastPages dirty.
func TestWakeFlushOnAppend(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	cfg.FlushInterval = time.Hour
	cfg.FlushThoroughInterval = time.Hour
	cfg.FlushLeastPages = 1
	cfg.WakeFlushOnAppend = true
	l := mustOpen(t, cfg)
	defer l.Close()
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 5000), Assigner: newCounter()})
	end := l.MaxOffset()
	for deadline := time.Now().Add(10 * time.Second); l.FlushedOffset() < end; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("flushed %d of %d: the append did not wake the flusher", l.FlushedOffset(), end)
		}
	}
}
