package ha

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// appendSized appends records i in [from, from+n) with bodies of size
// bytes of fill^i.
func appendSized(size int) func(t *testing.T, l *commitlog.Log, from, n int, fill byte) {
	return func(t *testing.T, l *commitlog.Log, from, n int, fill byte) {
		t.Helper()
		for i := from; i < from+n; i++ {
			m := &commitlog.Message{Topic: "TopicHA", Body: bytes.Repeat([]byte{fill ^ byte(i)}, size), BornTimestamp: int64(i),
				BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), Properties: fmt.Sprintf("UNIQ_KEY\x01K%06d", i), QueueOffset: int64(i)}
			if _, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func openLogSegments(t *testing.T, dir string, replica bool, segment int64) *commitlog.Log {
	t.Helper()
	l, err := commitlog.Open(logConfig(dir, replica, segment))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// divergedLogsOfSize is divergedLogs with segment bytes and records of one
// size: the master holds the shared records and then others (fill 0x55),
// the replica the shared ones and its orphans (0xAA), up to replicaEnd
// (0: all of them).
func divergedLogsOfSize(t *testing.T, segment int64, size, shared, orphans int, replicaEnd int64) (master, replica *commitlog.Log, sharedEnd int64, masterDir string) {
	t.Helper()
	add := appendSized(size)
	old := openLogSegments(t, t.TempDir(), false, segment)
	add(t, old, 0, shared, 0x11)
	sharedEnd = old.MaxOffset()
	add(t, old, shared, orphans, 0xAA)
	dir := t.TempDir()
	promoted := openLogSegments(t, dir, true, segment)
	copyInto(t, old, promoted, sharedEnd)
	if err := promoted.Close(); err != nil {
		t.Fatal(err)
	}
	master = openLogSegments(t, dir, false, segment)
	add(t, master, shared, orphans+10, 0x55)
	replica = openLogSegments(t, t.TempDir(), true, segment)
	if replicaEnd == 0 {
		replicaEnd = old.MaxOffset()
	}
	copyInto(t, old, replica, replicaEnd)
	return master, replica, sharedEnd, dir
}

// runClient runs a client of master's server with the given window until
// the test ends.
func runClient(t *testing.T, s *Server, r *commitlog.Log, window int64) *Client {
	t.Helper()
	hb, hk := fast()
	c := NewClient(ClientConfig{MasterAddr: func() string { return s.Addr().String() }, Log: r, VerifyWindow: window,
		HeartbeatInterval: hb, HousekeepingInterval: hk, RetryInterval: 20 * time.Millisecond, Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// A segment's blank filler is the same in any two logs with a record
// ending at the same offset (records of one size put one there): bytes of
// a filler agreeing say nothing of whose log it is. A comparison that
// begins on one must still find the orphan records before it.
func TestAFillerDoesNotVouchForALog(t *testing.T) {
	t.Run("the slave ends at a segment end whose filler is longer than the window", func(t *testing.T) {
		const segment = 1 << 20
		// Six records of 150 KB fill the segment, the seventh rolls: the
		// slave holds segment 0 to its end, three orphans and a 148 KB filler.
		m, r, shared, _ := divergedLogsOfSize(t, segment, 150_000, 3, 4, segment)
		end := r.ReplicaOffset()
		if filler, _ := r.RecordStart(end - 1); end-filler <= DefaultVerifyWindow {
			t.Fatalf("the filler (%d bytes) must be longer than the window", end-filler)
		}
		c := runClient(t, startServer(t, m), r, 0)
		if d := waitDiverged(t, c); !d.Exact || d.At != shared {
			t.Fatalf("divergence %+v; the slave's records from %d are not the master's", *d, shared)
		}
		if r.ReplicaOffset() != end {
			t.Fatalf("the slave took the master's bytes after its orphans: end %d, was %d", r.ReplicaOffset(), end)
		}
	})
	t.Run("the comparison would begin inside a filler", func(t *testing.T) {
		m, r, shared, _ := divergedLogsOfSize(t, testSegment, 1000, 40, 40, 0)
		filler, err := r.RecordStart(testSegment - 1)
		if err != nil {
			t.Fatal(err)
		}
		if filler <= shared {
			t.Fatalf("orphans must precede segment 0's filler (at %d, shared end %d)", filler, shared)
		}
		c := runClient(t, startServer(t, m), r, r.ReplicaOffset()-filler-1)
		if d := waitDiverged(t, c); !d.Exact || d.At != shared {
			t.Fatalf("divergence %+v; the slave's records from %d are not the master's", *d, shared)
		}
	})
}

// A slave whose end is less than a window above its master's first offset
// (retention deleted the segment before) compares from the master's first
// offset and goes on, as a slave did before it compared at all.
func TestSlaveResumesWhenRetentionDeletedWhereItWouldCompareFrom(t *testing.T) {
	m, r := slaveEndingJustPastRetention(t)
	var addr atomic.Value
	addr.Store(startServer(t, m).Addr().String())
	c, _ := startClient(t, r, &addr)
	waitFor(t, "the slave to catch up", func() bool { return r.ReplicaOffset() == m.MaxOffset() })
	sameBytes(t, m, r, m.MinOffset())
	if d := c.Status().Diverged; d != nil {
		t.Fatalf("a slave of the same log found a divergence %+v", *d)
	}
}

// Comparing from further back stops at the master's first offset: the
// divergence above it is found, and one below it is final.
func TestWideningStopsAtTheMastersFirstOffset(t *testing.T) {
	m, r, shared, dir := divergedLogsOfSize(t, testSegment, 1000, 80, 30, 0)
	old := time.Now().Add(-1000 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0)), old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := m.DeleteExpired(time.Now(), false); n != 1 || err != nil {
		t.Fatalf("retention deleted %d segments (%v), want the first", n, err)
	}
	const window = 16 << 10
	end := r.ReplicaOffset()
	if end-window <= shared || end-4*window >= m.MinOffset() || shared <= m.MinOffset() {
		t.Fatalf("the first comparison (from %d) must begin among the orphans (from %d), the second (from %d) below the master's first offset %d",
			end-window, shared, end-4*window, m.MinOffset())
	}
	c := runClient(t, startServer(t, m), r, window)
	if d := waitDiverged(t, c); !d.Exact || d.At != shared {
		t.Fatalf("divergence %+v; the slave's records from %d are not the master's", *d, shared)
	}
}

// A slave holding records past the end of a master that writes nothing
// learns it at once, not when the master writes again.
func TestASlaveAheadOfAnIdleMasterIsFound(t *testing.T) {
	m, r, shared := divergedLogs(t, 40, 10)
	dir := t.TempDir()
	p := openLog(t, dir, true)
	copyInto(t, m, p, shared)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	idle := openLog(t, dir, false)
	defer idle.Close()
	end := r.ReplicaOffset()
	c := runClient(t, startServer(t, idle), r, 0)
	if d := waitDiverged(t, c); !d.Exact || d.At != shared {
		t.Fatalf("divergence %+v; the slave's records from %d are past the master's end", *d, shared)
	}
	if r.ReplicaOffset() != end {
		t.Fatalf("the slave's end moved from %d to %d", end, r.ReplicaOffset())
	}
}

// A slave whose end is below everything its master still holds takes
// nothing and says that it must be rebuilt.
func TestASlaveBehindTheMastersRetentionIsToldToRebuild(t *testing.T) {
	m := openLog(t, t.TempDir(), false)
	defer m.Close()
	appendN(t, m, 0, 30)
	r := openLog(t, t.TempDir(), true)
	defer r.Close()
	copyInto(t, m, r, 4096)
	appendN(t, m, 30, 120)
	if _, err := m.DeleteExpired(time.Now(), true); err != nil {
		t.Fatal(err)
	}
	end := r.ReplicaOffset()
	if m.MinOffset() <= end {
		t.Fatalf("the master's first offset %d must lie past the slave's end %d", m.MinOffset(), end)
	}
	s := startServer(t, m)
	var logs testutil.SyncBuffer
	hb, hk := fast()
	c := NewClient(ClientConfig{MasterAddr: func() string { return s.Addr().String() }, Log: r,
		HeartbeatInterval: hb, HousekeepingInterval: hk, RetryInterval: 20 * time.Millisecond, Logger: zerolog.New(&logs)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the slave to say it must be rebuilt", func() bool { return strings.Contains(logs.String(), "rebuild the slave's store") })
	if r.ReplicaOffset() != end {
		t.Fatalf("the slave's end moved from %d to %d", end, r.ReplicaOffset())
	}
}

// rocketmqSource serves a log as Apache RocketMQ's master does
// (DefaultHAConnection.WriteSocketService): it transfers from the offset
// the slave asked for, and CommitLog.getData below the first segment
// returns null, so the master sends nothing there but a heartbeat at
// that offset every haSendHeartbeatInterval; it never skips to its first
// offset.
type rocketmqSource struct{ l *commitlog.Log }

func (s rocketmqSource) ReadStream(offset int64, max int) (*commitlog.View, error) {
	if offset < s.l.MinOffset() {
		return &commitlog.View{Offset: offset}, nil // getCommitLogData: null
	}
	return s.l.ReadStream(offset, max)
}
func (s rocketmqSource) WaitBeyond(ctx context.Context, offset int64) error {
	return s.l.WaitBeyond(ctx, offset)
}
func (s rocketmqSource) MaxOffset() int64   { return s.l.MaxOffset() }
func (s rocketmqSource) MinOffset() int64   { return 0 } // no skip to the first offset
func (s rocketmqSource) SegmentSize() int64 { return s.l.SegmentSize() }

// A rocketkv slave of an Apache RocketMQ master whose retention deleted
// the segment below the slave's end, less than VerifyWindow under it,
// holds exactly the master's bytes, and follows it, as RocketMQ's slave
// would. Asking for its verify window it gets only heartbeats there
// (RocketMQ's master does not skip to its first offset); it compares from
// its last segment on the next connection instead of taking them for
// "the master has nothing from here" and widening to a final refusal.
func TestASlaveOfARocketMQMasterFollowsItPastRetention(t *testing.T) {
	m, r := slaveEndingJustPastRetention(t)
	hb, hk := fast()
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", Log: rocketmqSource{m}, HeartbeatInterval: hb, HousekeepingInterval: hk,
		TransferBatchSize: 5000, Logger: zerolog.Nop()})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := runClient(t, s, r, 0)
	deadline := time.Now().Add(5 * time.Second)
	for r.ReplicaOffset() != m.MaxOffset() {
		if time.Now().After(deadline) {
			d := c.Status().Diverged
			t.Fatalf("the slave never caught up with a master holding its bytes: replica end %d, master end %d, diverged %+v",
				r.ReplicaOffset(), m.MaxOffset(), d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slaveEndingJustPastRetention returns a master whose retention deleted
// the segment before its first offset and a slave holding its bytes up to
// less than a verify window above that offset, the master having gone on
// since.
func slaveEndingJustPastRetention(t *testing.T) (m, r *commitlog.Log) {
	t.Helper()
	m = openLog(t, t.TempDir(), false)
	t.Cleanup(func() { m.Close() })
	appendN(t, m, 0, 150)
	r = openLog(t, t.TempDir(), true)
	t.Cleanup(func() { r.Close() })
	copyInto(t, m, r, m.MaxOffset())
	if _, err := m.DeleteExpired(time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if end := r.ReplicaOffset(); end-DefaultVerifyWindow >= m.MinOffset() || end < m.MinOffset() {
		t.Fatalf("the slave's end %d must lie less than a window above the master's first offset %d", end, m.MinOffset())
	}
	appendN(t, m, 150, 20)
	return m, r
}
