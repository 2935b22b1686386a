package kvindex

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"
)

// The stall counter adds up Pebble's begin/end events, counting a stall in
// progress up to the moment it is asked.
func TestWriteStallsCount(t *testing.T) {
	s := &writeStalls{log: zerolog.Nop()}
	l := s.listener()
	if n, d := s.snapshot(); n != 0 || d != 0 {
		t.Fatalf("fresh counter: %d stalls, %s", n, d)
	}
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	time.Sleep(5 * time.Millisecond)
	if n, d := s.snapshot(); n != 1 || d < 5*time.Millisecond {
		t.Fatalf("during a stall: %d stalls, %s; want 1, at least 5ms", n, d)
	}
	l.WriteStallEnd()
	_, first := s.snapshot()
	time.Sleep(2 * time.Millisecond)
	if _, d := s.snapshot(); d != first {
		t.Fatalf("total grew from %s to %s with no stall in progress", first, d)
	}
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "L0 file count limit exceeded"})
	l.WriteStallEnd()
	l.WriteStallEnd() // an unmatched end changes nothing
	if n, d := s.snapshot(); n != 2 || d < first {
		t.Fatalf("after two stalls: %d, %s", n, d)
	}
}
