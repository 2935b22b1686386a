package ha

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestRateBudget(t *testing.T) {
	var r Rate
	t0 := time.Unix(1000, 0)
	if left, _ := r.budgetAt(t0, 100); left != 100 {
		t.Fatalf("an idle second's budget: %d, want 100", left)
	}
	r.addAt(t0, 60)
	if left, _ := r.budgetAt(t0.Add(100*time.Millisecond), 100); left != 40 {
		t.Fatalf("after 60 bytes: %d, want 40", left)
	}
	r.addAt(t0.Add(200*time.Millisecond), 40)
	if left, wait := r.budgetAt(t0.Add(300*time.Millisecond), 100); left != 0 || wait != 700*time.Millisecond {
		t.Fatalf("a spent second: %d bytes, wait %v; want 0 and 700ms", left, wait)
	}
	if left, _ := r.budgetAt(t0.Add(1100*time.Millisecond), 100); left != 100 {
		t.Fatalf("the next second's budget: %d, want 100", left)
	}
}

// Under MaxBytesPerSecond a slave is sent no more than that in a second:
// about 55 KiB at 20 KiB a second spans three one-second windows, so the
// slave takes over a second to catch up (the first window may have begun
// before the appends), and it does catch up.
func TestTransferFlowControl(t *testing.T) {
	m := openLog(t, t.TempDir(), false)
	defer m.Close()
	hb, hk := fast()
	const limit = 20 << 10
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", Log: m, HeartbeatInterval: hb, HousekeepingInterval: hk,
		TransferBatchSize: 5000, MaxBytesPerSecond: limit, Logger: zerolog.Nop()})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := openLog(t, t.TempDir(), true)
	defer r.Close()
	var addr atomic.Value
	addr.Store(s.Addr().String())
	startClient(t, r, &addr)
	waitFor(t, "the slave to connect", func() bool { return len(s.Slaves(m.MaxOffset())) == 1 })

	start := time.Now()
	appendN(t, m, 0, 40)
	if end := m.MaxOffset(); end < 5*limit/2 || end > testSegment {
		t.Fatalf("the test wants 2.5 to 4 seconds' worth in one segment, the log has %d bytes", end)
	}
	waitFor(t, "the slave to catch up", func() bool { return r.MaxOffset() == m.MaxOffset() })
	if took := time.Since(start); took < time.Second {
		t.Fatalf("%d bytes reached the slave in %v, faster than %d bytes a second", m.MaxOffset(), took, limit)
	}
	sameBytes(t, m, r, 0)
}
