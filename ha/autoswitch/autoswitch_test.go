package autoswitch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/ha"
)

const testSegment = 64 << 10

func logConfig(dir string, replica bool) commitlog.Config {
	cfg := commitlog.DefaultConfig(dir)
	cfg.SegmentSize = testSegment
	cfg.StoreHost = netip.MustParseAddrPort("10.0.0.1:10911")
	cfg.Replica = replica
	return cfg
}

func openLog(t *testing.T, cfg commitlog.Config) *commitlog.Log {
	t.Helper()
	l, err := commitlog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendN appends n records; fill tells two histories apart.
func appendN(t *testing.T, l *commitlog.Log, from, n int, fill byte) {
	t.Helper()
	for i := from; i < from+n; i++ {
		body := bytes.Repeat([]byte{byte(i) ^ fill}, 200+(i*53)%2500)
		m := &commitlog.Message{Topic: "TopicHA", QueueID: int32(i % 3), Body: body, BornTimestamp: int64(i),
			BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), Properties: fmt.Sprintf("UNIQ_KEY\x01K%06d", i), QueueOffset: int64(i)}
		if _, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
}

func openEpochs(t *testing.T, dir string) *EpochCache {
	t.Helper()
	c, err := OpenEpochFile(filepath.Join(dir, EpochFileName))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// syncLog is a thread-safe log sink.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// proposals records what SyncStateSetChanged was called with.
type proposals struct {
	mu   sync.Mutex
	sets [][]int64
}

func (p *proposals) add(set []int64) {
	p.mu.Lock()
	p.sets = append(p.sets, set)
	p.mu.Unlock()
}

func (p *proposals) last() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sets) == 0 {
		return nil
	}
	return p.sets[len(p.sets)-1]
}

type master struct {
	log    *commitlog.Log
	epochs *EpochCache
	srv    *Server
	props  *proposals
	out    *syncLog
}

func startMaster(t *testing.T, l *commitlog.Log, epochs *EpochCache, adjust func(*ServerConfig)) *master {
	t.Helper()
	m := &master{log: l, epochs: epochs, props: &proposals{}, out: &syncLog{}}
	cfg := ServerConfig{Addr: "127.0.0.1:0", Log: l, Epochs: epochs, BrokerID: 1, SyncStateSet: []int64{1}, StoredConfirmOffset: -1,
		SyncStateSetChanged: m.props.add, HeartbeatInterval: 50 * time.Millisecond, HousekeepingInterval: 2 * time.Second,
		TransferBatchSize: 5000, CheckSyncStateSetPeriod: 20 * time.Millisecond, Logger: zerolog.New(m.out)}
	if adjust != nil {
		adjust(&cfg)
	}
	m.srv = NewServer(cfg)
	if err := m.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.srv.Close() })
	return m
}

type follower struct {
	c    *Client
	out  *syncLog
	done chan struct{} // closed when Run returned err
	err  error
	stop func() error
}

func startSlave(t *testing.T, addr string, id int64, l *commitlog.Log, epochs *EpochCache) *follower {
	t.Helper()
	return startSlaveWith(t, addr, id, l, epochs, nil)
}

// startSlaveWith is startSlave with adjust applied to the client's
// configuration.
func startSlaveWith(t *testing.T, addr string, id int64, l *commitlog.Log, epochs *EpochCache, adjust func(*ClientConfig)) *follower {
	t.Helper()
	f := &follower{out: &syncLog{}, done: make(chan struct{})}
	cfg := ClientConfig{MasterAddr: func() string { return addr }, BrokerID: id, Log: l, Epochs: epochs,
		HeartbeatInterval: 50 * time.Millisecond, HousekeepingInterval: 2 * time.Second, RetryInterval: 50 * time.Millisecond,
		Logger: zerolog.New(f.out)}
	if adjust != nil {
		adjust(&cfg)
	}
	f.c = NewClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(f.done)
		f.err = f.c.Run(ctx)
	}()
	f.stop = func() error {
		cancel()
		<-f.done
		return f.err
	}
	t.Cleanup(func() { f.stop() })
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sameBytes compares the replica with the master over [from, master end).
func sameBytes(t *testing.T, m, r *commitlog.Log, from int64) {
	t.Helper()
	if r.MaxOffset() != m.MaxOffset() {
		t.Fatalf("replica ends at %d, master at %d", r.MaxOffset(), m.MaxOffset())
	}
	for off := from; off < m.MaxOffset(); {
		mv, err := m.ReadStream(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		rv, err := r.ReadStream(off, len(mv.Data))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mv.Data, rv.Data) {
			t.Fatalf("bytes at %d differ (%d and %d bytes)", off, len(mv.Data), len(rv.Data))
		}
		off += int64(len(mv.Data))
		mv.Release()
		rv.Release()
	}
}

func TestSlaveFollowsMasterAndJoinsSyncStateSet(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 100, 0)
	m := startMaster(t, ml, mEpochs, func(c *ServerConfig) { c.AllAckInSyncStateSet = true })

	rl := openLog(t, logConfig(t.TempDir(), true))
	rEpochs := openEpochs(t, t.TempDir())
	if err := BecomeSlave(rEpochs, 1); err != nil {
		t.Fatal(err)
	}
	s := startSlave(t, m.srv.Addr().String(), 2, rl, rEpochs)
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	sameBytes(t, ml, rl, 0)
	if got := rEpochs.Entries(); !slices.Equal(got, mEpochs.Entries()) {
		t.Fatalf("slave epochs %v, master's %v", got, mEpochs.Entries())
	}
	waitFor(t, "the slave proposed for the SyncStateSet", func() bool { return slices.Equal(m.props.last(), []int64{1, 2}) })
	if got := m.srv.InSyncReplicas(); got != 2 {
		t.Fatalf("InSyncReplicas while the proposal is in flight = %d, want 2", got)
	}
	m.srv.SetSyncStateSet([]int64{1, 2})

	appendN(t, ml, 100, 50, 0)
	waitFor(t, "the slave to follow", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	sameBytes(t, ml, rl, 0)
	end := ml.MaxOffset()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !m.srv.WaitAcked(ctx, end, 1) {
		t.Fatal("the slave never acknowledged the end")
	}
	if !m.srv.WaitSyncStateSet(ctx, end) {
		t.Fatal("the SyncStateSet never acknowledged the end")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if m.srv.WaitAcked(short, end, 2) {
		t.Fatal("two acknowledgements with one slave")
	}
	waitFor(t, "the confirm offset to reach the end", func() bool { return m.srv.ConfirmOffset() == end })
	waitFor(t, "the slave's confirm offset", func() bool { return s.c.ConfirmOffset() == end })
	sl := m.srv.Slaves()
	if len(sl) != 1 || sl[0].BrokerID != 2 || !sl[0].InSync || sl[0].AckOffset != end {
		t.Fatalf("Slaves() = %+v", sl)
	}
	info := m.srv.RuntimeInfo(end)
	if info.InSyncSlaveNums != 1 || len(info.HAConnectionInfo) != 1 || info.HAConnectionInfo[0].Diff != 0 {
		t.Fatalf("RuntimeInfo = %+v", info)
	}

	// A member that is not connected: its acknowledgement never comes,
	// and the confirm offset stays.
	m.srv.SetSyncStateSet([]int64{1, 2, 9})
	short2, cancelShort2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort2()
	if m.srv.WaitSyncStateSet(short2, end) {
		t.Fatal("a SyncStateSet with a member not connected acknowledged")
	}
	appendN(t, ml, 150, 5, 0)
	waitFor(t, "the slave to follow", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	time.Sleep(100 * time.Millisecond)
	if got := m.srv.ConfirmOffset(); got != end {
		t.Fatalf("confirm offset %d with a member not connected, want it held at %d", got, end)
	}
	m.srv.SetSyncStateSet([]int64{1, 2})
	waitFor(t, "the confirm offset to move", func() bool { return m.srv.ConfirmOffset() == ml.MaxOffset() })

	// The slave leaves: the master proposes the set without it at once.
	if err := s.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	waitFor(t, "the set without the slave", func() bool { return slices.Equal(m.props.last(), []int64{1}) })
}

// tap records the bytes the master sends through a proxy.
type tap struct {
	ln  net.Listener
	mu  sync.Mutex
	buf []byte
	wg  sync.WaitGroup
}

func startTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() {
				defer p.wg.Done()
				b := make([]byte, 32<<10)
				for {
					n, err := up.Read(b)
					if n > 0 {
						p.mu.Lock()
						p.buf = append(p.buf, b[:n]...)
						p.mu.Unlock()
						if _, werr := c.Write(b[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *tap) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.buf)
}

func TestTransfersStayInsideEpochs(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	for i, epoch := range []int32{1, 2, 5} {
		if err := BecomeMaster(mEpochs, epoch, ml.MaxOffset(), zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
		appendN(t, ml, i*60, 60, 0)
	}
	// A term with no record leaves no entry (RocketMQ's appendEntry
	// refuses a start that is not past the last one).
	if err := BecomeMaster(mEpochs, 6, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if err := BecomeMaster(mEpochs, 7, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if got := mEpochs.Len(); got != 4 {
		t.Fatalf("epochs %v, want 1, 2, 5 and 6", mEpochs.Entries())
	}
	appendN(t, ml, 180, 10, 0)
	m := startMaster(t, ml, mEpochs, nil)
	p := startTap(t, m.srv.Addr().String())

	rl := openLog(t, logConfig(t.TempDir(), true))
	rEpochs := openEpochs(t, t.TempDir())
	startSlave(t, p.ln.Addr().String(), 2, rl, rEpochs)
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	sameBytes(t, ml, rl, 0)
	if got, want := rEpochs.Entries(), mEpochs.Entries(); !slices.Equal(got, want) {
		t.Fatalf("slave epochs %v, master's %v", got, want)
	}

	var r MasterReader
	r.Feed(p.bytes())
	transfers := 0
	for {
		f, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if f.State != StateTransfer || len(f.Body) == 0 {
			continue
		}
		transfers++
		e, ok := mEpochs.Entry(f.Transfer.Epoch)
		if !ok || e.StartOffset != f.Transfer.EpochStartOffset {
			t.Fatalf("transfer at %d labelled with epoch %d starting at %d, not in %v", f.Transfer.Offset, f.Transfer.Epoch, f.Transfer.EpochStartOffset, mEpochs.Entries())
		}
		if f.Transfer.Offset < e.StartOffset || f.Transfer.Offset+int64(len(f.Body)) > e.EndOffset {
			t.Fatalf("transfer [%d, %d) crosses its epoch %v", f.Transfer.Offset, f.Transfer.Offset+int64(len(f.Body)), e)
		}
	}
	if transfers < 10 {
		t.Fatalf("only %d transfers seen", transfers)
	}
}

// divergedLogs builds a master and a slave that share shared records of
// epoch 1; then the slave, master in epoch 2, took orphans records the
// master never had, and the master, elected in epoch 3, took others.
func divergedLogs(t *testing.T, shared, orphans int) (ml *commitlog.Log, mEpochs *EpochCache, rdir string, rEpochs *EpochCache, sharedEnd int64) {
	t.Helper()
	ml = openLog(t, logConfig(t.TempDir(), false))
	mEpochs = openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, shared, 0)
	sharedEnd = ml.MaxOffset()

	rdir = t.TempDir()
	rEpochs = openEpochs(t, t.TempDir())
	if err := rEpochs.Append(EpochEntry{Epoch: 1, StartOffset: 0}); err != nil {
		t.Fatal(err)
	}
	rl, err := commitlog.Open(logConfig(rdir, true))
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < sharedEnd; {
		v, err := ml.ReadStream(off, 7000)
		if err != nil {
			t.Fatal(err)
		}
		if err := rl.AppendReplica(off, v.Data); err != nil {
			t.Fatal(err)
		}
		off += int64(len(v.Data))
		v.Release()
	}
	if err := rl.Close(); err != nil {
		t.Fatal(err)
	}
	// The slave is elected in epoch 2 and takes orphans.
	ol, err := commitlog.Open(logConfig(rdir, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := BecomeMaster(rEpochs, 2, ol.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ol, shared, orphans, 0x5a)
	if err := ol.Close(); err != nil {
		t.Fatal(err)
	}
	// The old master is elected again in epoch 3 and takes other records.
	if err := BecomeMaster(mEpochs, 3, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, shared, orphans+20, 0)
	return ml, mEpochs, rdir, rEpochs, sharedEnd
}

func TestDivergedSlaveIsCutToTheConsistentPoint(t *testing.T) {
	ml, mEpochs, rdir, rEpochs, sharedEnd := divergedLogs(t, 80, 30)
	m := startMaster(t, ml, mEpochs, nil)

	rl, err := commitlog.Open(logConfig(rdir, true))
	if err != nil {
		t.Fatal(err)
	}
	orphanEnd := rl.MaxOffset()
	if err := BecomeSlave(rEpochs, 3); err != nil {
		t.Fatal(err)
	}
	s := startSlave(t, m.srv.Addr().String(), 2, rl, rEpochs)
	var cut *CutError
	select {
	case <-s.done:
		if !errors.As(s.err, &cut) {
			t.Fatalf("Run = %v, want a CutError", s.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the slave did not stop at the cut")
	}
	if cut.At != sharedEnd || cut.End != orphanEnd {
		t.Fatalf("cut %+v, want at %d (the shared end), end %d", cut, sharedEnd, orphanEnd)
	}
	if got := rEpochs.Entries(); !slices.Equal(got, entries(1, 0)) {
		t.Fatalf("slave epochs after the handshake %v, want 1-0 alone", got)
	}
	if rl.MaxOffset() != orphanEnd {
		t.Fatalf("the slave's log moved to %d before the cut", rl.MaxOffset())
	}
	if err := rl.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted with the CommitLog cut there, it follows the master.
	cfg := logConfig(rdir, true)
	cfg.CutAt = cut.At
	rl = openLog(t, cfg)
	if rl.MaxOffset() != sharedEnd {
		t.Fatalf("cut log ends at %d, want %d", rl.MaxOffset(), sharedEnd)
	}
	rEpochs = openEpochs(t, filepath.Dir(rEpochs.path))
	startSlave(t, m.srv.Addr().String(), 2, rl, rEpochs)
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	sameBytes(t, ml, rl, 0)
	if got, want := rEpochs.Entries(), mEpochs.Entries(); !slices.Equal(got, want) {
		t.Fatalf("slave epochs %v, master's %v", got, want)
	}
}

func TestSlaveWithoutOrphansIsNotCut(t *testing.T) {
	// The slave was master in epoch 2 but took nothing: its epoch goes,
	// its log stays.
	ml, mEpochs, rdir, rEpochs, sharedEnd := divergedLogs(t, 50, 0)
	if got := rEpochs.Entries(); !slices.Equal(got, entries(1, 0, 2, sharedEnd)) {
		t.Fatalf("slave epochs %v, want its own empty epoch 2 at %d", got, sharedEnd)
	}
	m := startMaster(t, ml, mEpochs, nil)
	rl := openLog(t, logConfig(rdir, true))
	if rl.MaxOffset() != sharedEnd {
		t.Fatalf("slave ends at %d, want %d", rl.MaxOffset(), sharedEnd)
	}
	startSlave(t, m.srv.Addr().String(), 2, rl, rEpochs)
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	sameBytes(t, ml, rl, 0)
	if got, want := rEpochs.Entries(), mEpochs.Entries(); !slices.Equal(got, want) {
		t.Fatalf("slave epochs %v, master's %v", got, want)
	}
}

// gatedConn blocks the master's writes while its gate is closed.
type gatedConn struct {
	net.Conn
	g *gate
}

type gate struct {
	mu     sync.Mutex
	closed bool
	open   chan struct{}
}

func (g *gate) shut() {
	g.mu.Lock()
	g.closed, g.open = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	if g.closed {
		close(g.open)
		g.closed = false
	}
	g.mu.Unlock()
}

func (c gatedConn) Write(p []byte) (int, error) {
	c.g.mu.Lock()
	closed, open := c.g.closed, c.g.open
	c.g.mu.Unlock()
	if closed {
		<-open
	}
	return c.Conn.Write(p)
}

type gatedListener struct {
	net.Listener
	g *gate
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return gatedConn{Conn: c, g: l.g}, nil
}

func TestSyncStateSetShrinksAndExpands(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 40, 0)
	g := &gate{}
	m := startMaster(t, ml, mEpochs, func(c *ServerConfig) {
		c.MaxTimeSlaveNotCatchup = 300 * time.Millisecond
		c.Listen = func(addr string) (net.Listener, error) {
			ln, err := net.Listen("tcp", addr)
			return gatedListener{Listener: ln, g: g}, err
		}
	})
	rl := openLog(t, logConfig(t.TempDir(), true))
	startSlave(t, m.srv.Addr().String(), 2, rl, openEpochs(t, t.TempDir()))
	waitFor(t, "the slave proposed", func() bool { return slices.Equal(m.props.last(), []int64{1, 2}) })
	m.srv.SetSyncStateSet([]int64{1, 2})

	// The master's writes to the slave stall: it falls behind.
	g.shut()
	appendN(t, ml, 40, 20, 0)
	waitFor(t, "the slave dropped from the set", func() bool { return slices.Equal(m.props.last(), []int64{1}) })
	if got := m.srv.InSyncReplicas(); got != 2 {
		t.Fatalf("InSyncReplicas while the shrink is in flight = %d, want 2 (the larger set)", got)
	}
	m.srv.SetSyncStateSet([]int64{1})
	if got := m.srv.InSyncReplicas(); got != 1 {
		t.Fatalf("InSyncReplicas = %d, want 1", got)
	}

	// It catches up and is proposed again.
	g.release()
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	waitFor(t, "the slave proposed again", func() bool { return slices.Equal(m.props.last(), []int64{1, 2}) })
	sameBytes(t, ml, rl, 0)
}

func TestGarbageIsRefused(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	m := startMaster(t, ml, mEpochs, nil)
	for _, tc := range []struct {
		name, send, want string
	}{
		{"http", "GET / HTTP/1.1\r\n\r\n", "slave frame in state State(1195725856)"},
		{"classic slave report", "\x00\x00\x00\x00\x00\x00\x10\x00", "a classic HA slave"},
		{"report before handshake", "\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x10\x00", "slave report before its handshake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", m.srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte(tc.send)); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := c.Read(make([]byte, 64)); err != io.EOF {
				t.Fatalf("read after garbage: %d bytes, %v; want the connection closed", n, err)
			}
			waitFor(t, "the refusal logged", func() bool {
				return bytes.Contains([]byte(m.out.String()), []byte(tc.want))
			})
		})
	}

	// A master that answers with garbage: the slave drops it and says why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.ReadFull(c, make([]byte, SlaveHandshakeSize))
			c.Write(unhex(t, "00000001 0000000d 0000000000000000 00000001"))
			c.Close()
		}
	}()
	s := startSlave(t, ln.Addr().String(), 2, openLog(t, logConfig(t.TempDir(), true)), openEpochs(t, t.TempDir()))
	waitFor(t, "the slave's refusal", func() bool {
		return bytes.Contains([]byte(s.out.String()), []byte("master handshake with 13 bytes of epoch entries"))
	})
}

func TestBecomeMaster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		have   []EpochEntry
		epoch  int32
		start  int64
		want   []EpochEntry
		refuse bool
	}{
		{name: "first", epoch: 1, start: 0, want: entries(1, 0)},
		{name: "next", have: entries(1, 0), epoch: 3, start: 500, want: entries(1, 0, 3, 500)},
		{name: "older epoch", have: entries(1, 0, 3, 500), epoch: 2, start: 900, refuse: true},
		{name: "same epoch again", have: entries(1, 0, 3, 500), epoch: 3, start: 700, want: entries(1, 0, 3, 500)},
		{name: "same epoch, its records lost", have: entries(1, 0, 3, 500), epoch: 3, start: 400, want: entries(1, 0, 3, 400)},
		{name: "no record since the last epoch", have: entries(1, 0, 3, 500), epoch: 4, start: 500, want: entries(1, 0, 3, 500)},
		{name: "epoch past the log's end", have: entries(1, 0, 3, 500, 4, 900), epoch: 5, start: 700, want: entries(1, 0, 3, 500, 5, 700)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openEpochs(t, t.TempDir())
			for _, e := range tc.have {
				if err := c.Append(e); err != nil {
					t.Fatal(err)
				}
			}
			err := BecomeMaster(c, tc.epoch, tc.start, zerolog.Nop())
			if tc.refuse {
				if err == nil {
					t.Fatalf("BecomeMaster(%d, %d) accepted: %v", tc.epoch, tc.start, c.Entries())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, tc.want) {
				t.Fatalf("epochs %v, want %v", got, tc.want)
			}
		})
	}
	c := NewEpochCache(entries(1, 0, 4, 100))
	if err := BecomeSlave(c, 3); err == nil {
		t.Fatal("BecomeSlave of an older epoch accepted")
	}
	if err := BecomeSlave(c, 4); err != nil {
		t.Fatal(err)
	}
}

func TestSlaveAheadNeverJoins(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 10, 0)
	m := startMaster(t, ml, mEpochs, nil)
	c, err := net.Dial("tcp", m.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := AppendSlaveHandshake(nil, SlaveHandshake{BrokerID: 4})
	if _, err := c.Write(append(hello, AppendSlaveReport(nil, ml.MaxOffset()+1000)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the report", func() bool {
		sl := m.srv.Slaves()
		return len(sl) == 1 && sl[0].AckOffset == ml.MaxOffset()+1000
	})
	time.Sleep(100 * time.Millisecond) // several SyncStateSet checks and heartbeats
	if p := m.props.last(); p != nil {
		t.Fatalf("a slave ahead of the master was proposed: %v", p)
	}
	if !bytes.Contains([]byte(m.out.String()), []byte("ahead of the master")) {
		t.Fatal("the slave ahead was not logged")
	}
}

// broker is one store of a group: its log's directory and epoch file.
type broker struct {
	id     int64
	dir    string
	epochs *EpochCache
	log    *commitlog.Log
}

func newBroker(t *testing.T, id int64) *broker {
	return &broker{id: id, dir: t.TempDir(), epochs: openEpochs(t, t.TempDir())}
}

// open (re)opens the broker's log in a role, cut at cut when positive.
func (b *broker) open(t *testing.T, replica bool, cut int64) {
	t.Helper()
	if b.log != nil {
		if err := b.log.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := logConfig(b.dir, replica)
	cfg.CutAt = cut
	b.log = openLog(t, cfg)
}

// A group of three: the master fails with a tail one slave lacks, the
// other slave is elected, and the old master rejoins as a slave: it is
// cut at the new epoch's start, and all three end with the same log and
// the same epochs.
func TestFailover(t *testing.T) {
	a, b, c := newBroker(t, 1), newBroker(t, 2), newBroker(t, 3)
	a.open(t, false, 0)
	b.open(t, true, 0)
	c.open(t, true, 0)
	if err := BecomeMaster(a.epochs, 1, 0, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, a.log, 0, 60, 0)
	ma := startMaster(t, a.log, a.epochs, nil)
	sb := startSlave(t, ma.srv.Addr().String(), b.id, b.log, b.epochs)
	sc := startSlave(t, ma.srv.Addr().String(), c.id, c.log, c.epochs)
	waitFor(t, "both slaves", func() bool { return b.log.MaxOffset() == a.log.MaxOffset() && c.log.MaxOffset() == a.log.MaxOffset() })
	sc.stop() // c falls behind
	appendN(t, a.log, 60, 20, 0)
	waitFor(t, "b", func() bool { return b.log.MaxOffset() == a.log.MaxOffset() })
	sb.stop()
	appendN(t, a.log, 80, 15, 0) // a's tail no slave has
	ma.srv.Close()
	aEnd := a.log.MaxOffset()

	// b is elected in epoch 2.
	b.open(t, false, 0)
	if err := BecomeMaster(b.epochs, 2, b.log.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	epoch2 := b.log.MaxOffset()
	mb := startMaster(t, b.log, b.epochs, nil)
	if err := BecomeSlave(c.epochs, 2); err != nil {
		t.Fatal(err)
	}
	startSlave(t, mb.srv.Addr().String(), c.id, c.log, c.epochs)
	appendN(t, b.log, 80, 25, 0x33)

	// a rejoins as b's slave: cut at epoch 2's start.
	a.open(t, true, 0)
	if err := BecomeSlave(a.epochs, 2); err != nil {
		t.Fatal(err)
	}
	sa := startSlave(t, mb.srv.Addr().String(), a.id, a.log, a.epochs)
	<-sa.done
	var cut *CutError
	if !errors.As(sa.err, &cut) || cut.At != epoch2 || cut.End != aEnd {
		t.Fatalf("a's Run = %v, want a cut at %d of its end %d", sa.err, epoch2, aEnd)
	}
	a.open(t, true, cut.At)
	startSlave(t, mb.srv.Addr().String(), a.id, a.log, a.epochs)

	waitFor(t, "all three alike", func() bool {
		return a.log.MaxOffset() == b.log.MaxOffset() && c.log.MaxOffset() == b.log.MaxOffset()
	})
	sameBytes(t, b.log, a.log, 0)
	sameBytes(t, b.log, c.log, 0)
	want := entries(1, 0, 2, epoch2)
	for _, x := range []*broker{a, b, c} {
		if got := x.epochs.Entries(); !slices.Equal(got, want) {
			t.Fatalf("broker %d epochs %v, want %v", x.id, got, want)
		}
	}
}

// TestSlaveWithOnlyEmptyEpochsFollows: a broker that was master of an
// epoch and wrote nothing in it (elected, then replaced before any
// record or transfer) follows a master that never heard of that epoch:
// an epoch starting at the slave's end holds none of its records, so it
// cannot stand between the two logs.
func TestSlaveWithOnlyEmptyEpochsFollows(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 2, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	m := startMaster(t, ml, mEpochs, nil)

	rl := openLog(t, logConfig(t.TempDir(), true))
	rEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(rEpochs, 1, rl.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if err := BecomeSlave(rEpochs, 2); err != nil {
		t.Fatal(err)
	}
	startSlave(t, m.srv.Addr().String(), 2, rl, rEpochs)
	appendN(t, ml, 0, 20, 0)
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })
	sameBytes(t, ml, rl, 0)
	if got := rEpochs.Entries(); !slices.Equal(got, mEpochs.Entries()) {
		t.Fatalf("slave epochs %v, master's %v", got, mEpochs.Entries())
	}
}

// countingSource counts the master's reads of its log.
type countingSource struct {
	ha.Source
	reads atomic.Int64
}

func (c *countingSource) ReadStream(offset int64, max int) (*commitlog.View, error) {
	c.reads.Add(1)
	return c.Source.ReadStream(offset, max)
}

// TestStrayWakeDoesNotSpinTheWriter: a wake of a slave's writer left
// over from its handshake (the first report's wake lands after the
// writer saw the report) is taken once; the writer of a caught-up slave
// then waits for the next record or heartbeat again, instead of reading
// the log in a loop for the connection's life.
func TestStrayWakeDoesNotSpinTheWriter(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 10, 0)
	src := &countingSource{Source: ml}
	m := startMaster(t, ml, mEpochs, func(c *ServerConfig) {
		c.Log = src
		c.HeartbeatInterval = 100 * time.Millisecond
	})
	rl := openLog(t, logConfig(t.TempDir(), true))
	startSlave(t, m.srv.Addr().String(), 2, rl, openEpochs(t, t.TempDir()))
	waitFor(t, "the slave to catch up", func() bool { return rl.MaxOffset() == ml.MaxOffset() })

	m.srv.mu.Lock()
	for c := range m.srv.slaves {
		c.poke()
	}
	m.srv.mu.Unlock()
	before := src.reads.Load()
	time.Sleep(time.Second)
	// Idle, the writer reads once a heartbeat (about 10 here); a writer
	// that keeps waking itself reads without pause (many thousands).
	if n := src.reads.Load() - before; n > 100 {
		t.Fatalf("the idle writer read the log %d times in a second", n)
	}
}
