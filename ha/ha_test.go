package ha

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

const testSegment = 64 << 10

func openLog(t *testing.T, dir string, replica bool) *commitlog.Log {
	t.Helper()
	l, err := commitlog.Open(logConfig(dir, replica, testSegment))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// logConfig is the configuration of the tests' logs.
func logConfig(dir string, replica bool, segment int64) commitlog.Config {
	cfg := commitlog.DefaultConfig(dir)
	cfg.SegmentSize = segment
	cfg.StoreHost = netip.MustParseAddrPort("10.0.0.1:10911")
	cfg.Replica = replica
	return cfg
}

func appendN(t *testing.T, l *commitlog.Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		body := bytes.Repeat([]byte{byte(i)}, 200+(i*53)%2500)
		m := &commitlog.Message{Topic: "TopicHA", QueueID: int32(i % 3), Body: body, BornTimestamp: int64(i),
			BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), Properties: fmt.Sprintf("UNIQ_KEY\x01K%06d", i),
			QueueOffset: int64(i)}
		if _, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
}

func fast() (time.Duration, time.Duration) { return 50 * time.Millisecond, 2 * time.Second }

func startServer(t *testing.T, l *commitlog.Log) *Server {
	t.Helper()
	return startServerWith(t, l, nil)
}

// startServerWith is startServer with a function that adjusts the
// server's configuration first.
func startServerWith(t *testing.T, l *commitlog.Log, adjust func(*ServerConfig)) *Server {
	t.Helper()
	hb, hk := fast()
	cfg := ServerConfig{Addr: "127.0.0.1:0", Log: l, HeartbeatInterval: hb, HousekeepingInterval: hk,
		TransferBatchSize: 5000, Logger: zerolog.Nop()}
	if adjust != nil {
		adjust(&cfg)
	}
	s := NewServer(cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startClient(t *testing.T, r *commitlog.Log, addr *atomic.Value) (*Client, context.CancelFunc) {
	t.Helper()
	hb, hk := fast()
	c := NewClient(ClientConfig{MasterAddr: func() string { return addr.Load().(string) }, Log: r,
		HeartbeatInterval: hb, HousekeepingInterval: hk, RetryInterval: 50 * time.Millisecond, Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return c, stop
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

// sameBytes compares the replica with the master over [from, end).
func sameBytes(t *testing.T, m, r *commitlog.Log, from int64) {
	t.Helper()
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

func TestSlaveFollowsMaster(t *testing.T) {
	m := openLog(t, t.TempDir(), false)
	defer m.Close()
	appendN(t, m, 0, 100) // a few segments before the slave comes
	s := startServer(t, m)
	r := openLog(t, t.TempDir(), true)
	defer r.Close()
	var addr atomic.Value
	addr.Store(s.Addr().String())
	startClient(t, r, &addr)

	appendN(t, m, 100, 300)
	waitFor(t, "the slave to catch up", func() bool { return r.MaxOffset() == m.MaxOffset() })
	newest := r.MinOffset()
	if newest%testSegment != 0 || newest == 0 {
		t.Fatalf("an empty slave starts at %d; want a later segment's start", newest)
	}
	sameBytes(t, m, r, newest)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !s.WaitAcked(ctx, m.MaxOffset(), 1) {
		t.Fatal("the slave's acknowledgement of the end never came")
	}
	if n := s.InSyncSlaves(m.MaxOffset()); n != 1 {
		t.Fatalf("in-sync slaves %d, want 1", n)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if s.WaitAcked(short, m.MaxOffset(), 2) {
		t.Fatal("two acknowledgements from one slave")
	}
	if sl := s.Slaves(m.MaxOffset()); len(sl) != 1 || sl[0].AckOffset != m.MaxOffset() || !sl[0].InSync {
		t.Fatalf("slaves %+v", sl)
	}
}

func TestSlaveResumesAfterMasterRestart(t *testing.T) {
	m := openLog(t, t.TempDir(), false)
	defer m.Close()
	s := startServer(t, m)
	dir := t.TempDir()
	r := openLog(t, dir, true)
	var addr atomic.Value
	addr.Store(s.Addr().String())
	_, stopClient := startClient(t, r, &addr)
	appendN(t, m, 0, 150)
	waitFor(t, "the first catch-up", func() bool { return r.MaxOffset() == m.MaxOffset() })

	// The slave restarts with the master gone meanwhile, then the master
	// comes back on another port with more records.
	stopClient()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	appendN(t, m, 150, 150)
	r = openLog(t, dir, true)
	defer r.Close()
	s2 := startServer(t, m)
	addr.Store(s2.Addr().String())
	c, _ := startClient(t, r, &addr)
	waitFor(t, "the second catch-up", func() bool { return r.MaxOffset() == m.MaxOffset() })
	sameBytes(t, m, r, r.MinOffset())
	if st := c.Status(); st.Diverged != nil {
		t.Fatalf("the slave found its tail differing from its master's: %+v", *st.Diverged)
	}
}

func TestNothingIsAcknowledgedWithoutASlave(t *testing.T) {
	m := openLog(t, t.TempDir(), false)
	defer m.Close()
	s := startServer(t, m)
	appendN(t, m, 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if s.WaitAcked(ctx, m.MaxOffset(), 1) {
		t.Fatal("acknowledged without a slave")
	}
	if n := s.InSyncSlaves(m.MaxOffset()); n != 0 {
		t.Fatalf("in-sync slaves %d without one", n)
	}
}

// A master that sends bytes at the wrong offset is dropped and dialled
// again; nothing is written.
func TestSlaveRefusesATransferElsewhere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer conn.Close()
				var rep [ReportSize]byte
				if _, err := conn.Read(rep[:]); err != nil {
					return
				}
				b := appendTransferHeader(nil, 4096, 4)
				b = append(b, 1, 2, 3, 4)
				_, _ = conn.Write(b)
				time.Sleep(time.Second)
			}()
		}
	}()
	m := openLog(t, t.TempDir(), false)
	appendN(t, m, 0, 3)
	v, err := m.ReadStream(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r := openLog(t, t.TempDir(), true)
	defer r.Close()
	if err := r.AppendReplica(0, v.Data); err != nil {
		t.Fatal(err)
	}
	v.Release()
	m.Close()
	end := r.ReplicaOffset()
	var addr atomic.Value
	addr.Store(ln.Addr().String())
	startClient(t, r, &addr)
	waitFor(t, "a second dial", func() bool { return accepted.Load() >= 2 })
	if r.ReplicaOffset() != end {
		t.Fatalf("the replica took bytes at the wrong offset: end %d, was %d", r.ReplicaOffset(), end)
	}
}

func TestTransferReader(t *testing.T) {
	var stream []byte
	stream = appendTransferHeader(stream, 100, 3)
	stream = append(stream, 'a', 'b', 'c')
	stream = appendTransferHeader(stream, 103, 0)
	stream = appendTransferHeader(stream, 103, 2)
	stream = append(stream, 'd', 'e')
	type got struct {
		off  int64
		body string
	}
	var out []got
	var r transferReader
	for i := range stream { // one byte at a time
		r.feed(stream[i : i+1])
		for {
			off, body, ok, err := r.next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			out = append(out, got{off, string(body)})
		}
	}
	want := []got{{100, "abc"}, {103, ""}, {103, "de"}}
	if fmt.Sprint(out) != fmt.Sprint(want) || r.buffered() != 0 {
		t.Fatalf("transfers %v (buffered %d), want %v", out, r.buffered(), want)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"negative offset", appendTransferHeader(nil, -1, 0)},
		{"negative size", binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 0), 0xffffffff)},
		{"oversized body", appendTransferHeader(nil, 0, MaxTransferBody+1)},
	} {
		var r transferReader
		r.feed(tc.b)
		if _, _, _, err := r.next(); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", tc.name, err)
		}
	}
}

func TestDecodeReports(t *testing.T) {
	a := appendReport(appendReport(nil, 7), 4096)
	last, ok, rest, err := decodeReports(nil, a[:11])
	if err != nil || !ok || last != 7 || len(rest) != 3 {
		t.Fatalf("first read: %d %v rest %d %v", last, ok, len(rest), err)
	}
	last, ok, rest, err = decodeReports(rest, a[11:])
	if err != nil || !ok || last != 4096 || len(rest) != 0 {
		t.Fatalf("second read: %d %v rest %d %v", last, ok, len(rest), err)
	}
	if _, _, _, err := decodeReports(nil, appendReport(nil, -5)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("negative report: %v", err)
	}
}

func TestRateCountsWholeSeconds(t *testing.T) {
	var r Rate
	t0 := time.Unix(1000, 0)
	r.addAt(t0, 100)
	r.addAt(t0.Add(500*time.Millisecond), 50)
	if got := r.perSecondAt(t0.Add(900 * time.Millisecond)); got != 0 {
		t.Fatalf("inside the first second: %d", got)
	}
	if got := r.perSecondAt(t0.Add(1100 * time.Millisecond)); got != 150 {
		t.Fatalf("after the first second: %d, want 150", got)
	}
	r.addAt(t0.Add(1500*time.Millisecond), 7)
	if got := r.perSecondAt(t0.Add(2200 * time.Millisecond)); got != 7 {
		t.Fatalf("after the second second: %d, want 7", got)
	}
	if got := r.perSecondAt(t0.Add(5 * time.Second)); got != 0 {
		t.Fatalf("after idle seconds: %d, want 0", got)
	}
}

// A transfer, header included, fits the 4 MiB read buffer of RocketMQ's
// slave whatever haTransferBatchSize says: a 4 MiB body made a 4 MiB+12
// transfer that slave never completes.
func TestTransferFitsRocketMQSlaveBuffer(t *testing.T) {
	const rocketmqSlaveBuffer = 4 << 20 // DefaultHAClient.READ_MAX_BUFFER_SIZE
	cfg := commitlog.DefaultConfig(t.TempDir())
	cfg.SegmentSize = 16 << 20
	cfg.StoreHost = netip.MustParseAddrPort("10.0.0.1:10911")
	m, err := commitlog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	body := bytes.Repeat([]byte{7}, 256<<10)
	for i := range 20 { // 5 MiB
		msg := &commitlog.Message{Topic: "TopicHA", Body: body, BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), QueueOffset: int64(i)}
		if _, err := m.Append(context.Background(), commitlog.AppendRequest{Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	hb, hk := fast()
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", Log: m, HeartbeatInterval: hb, HousekeepingInterval: hk,
		TransferBatchSize: 4 << 20, Logger: zerolog.Nop()})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(appendReport(nil, 0)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [TransferHeaderSize]byte
	if _, err := io.ReadFull(conn, h[:]); err != nil {
		t.Fatal(err)
	}
	if size := int(binary.BigEndian.Uint32(h[8:])); TransferHeaderSize+size > rocketmqSlaveBuffer {
		t.Fatalf("a transfer of %d bytes, header included: RocketMQ's slave reads into %d", TransferHeaderSize+size, rocketmqSlaveBuffer)
	}
}

// A slave ahead of its master (a demoted master, or a master that lost
// its unflushed tail to a power cut) acknowledges offsets the master
// never sent it: counted, a SYNC_MASTER answered sends the slave did not
// hold. The slave here reports its end as RocketMQ's slave does (a
// rocketkv slave compares its tail first, see TestDivergedSlaveIsRefused).
func TestAckOfASlaveAheadNeverCounts(t *testing.T) {
	old := openLog(t, t.TempDir(), false) // the slave's former master
	defer old.Close()
	appendN(t, old, 0, 30)

	m := openLog(t, t.TempDir(), false) // the new master: fewer records
	defer m.Close()
	appendN(t, m, 0, 5)
	s := startServer(t, m)
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(appendReport(nil, old.MaxOffset())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slave's report", func() bool { return len(s.Slaves(0)) == 1 && s.Slaves(0)[0].AckOffset > 0 })

	appendN(t, m, 100, 3) // a SYNC_MASTER's send
	end := m.MaxOffset()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if s.WaitAcked(ctx, end, 1) {
		t.Fatalf("a send ending at %d counted as on the slave, which was never sent it (slave acks %d)", end, s.Slaves(0)[0].AckOffset)
	}
	if st := s.Slaves(end); st[0].InSync || s.InSyncSlaves(end) != 0 {
		t.Fatalf("a slave ahead of the master is in sync: %+v", st)
	}
}

// appendFilled appends records i in [from, from+n) of appendN's sizes,
// topic and properties with bodies of fill: another log's records at the
// same offsets, with other bytes.
func appendFilled(t *testing.T, l *commitlog.Log, from, n int, fill byte) {
	t.Helper()
	for i := from; i < from+n; i++ {
		body := bytes.Repeat([]byte{fill}, 200+(i*53)%2500)
		m := &commitlog.Message{Topic: "TopicHA", QueueID: int32(i % 3), Body: body, BornTimestamp: int64(i),
			BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), Properties: fmt.Sprintf("UNIQ_KEY\x01K%06d", i),
			QueueOffset: int64(i)}
		if _, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
}

// copyInto writes l's bytes [0, end) into the replica r.
func copyInto(t *testing.T, l, r *commitlog.Log, end int64) {
	t.Helper()
	for off := int64(0); off < end; {
		v, err := l.ReadStream(off, int(end-off))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.AppendReplica(off, v.Data); err != nil {
			t.Fatal(err)
		}
		off += int64(len(v.Data))
		v.Release()
	}
}

// A demoted master rejoins as a slave of the slave that replaced it: the
// records it took after the last it replicated are not the new master's,
// and the new master wrote others of the same sizes at the same offsets,
// so its records start exactly where the old tail ends and parse as its
// continuation. The slave must find that its tail differs and take
// nothing, rather than splice the new master's records after its own.
func TestDivergedSlaveIsRefused(t *testing.T) {
	m, r, shared := divergedLogs(t, 40, 20)
	end := r.ReplicaOffset()
	if end >= m.MaxOffset() {
		t.Fatalf("the new master (%d) must be ahead of the slave (%d) for its bytes to follow the slave's", m.MaxOffset(), end)
	}

	s := startServer(t, m)
	var addr atomic.Value
	addr.Store(s.Addr().String())
	c, _ := startClient(t, r, &addr)
	d := waitDiverged(t, c)
	if !d.Exact || d.At != shared {
		t.Fatalf("divergence found %+v; the slave's records from %d are not the master's", *d, shared)
	}
	time.Sleep(200 * time.Millisecond) // a few heartbeats and redials
	if r.ReplicaOffset() != end {
		t.Fatalf("the diverged slave took the master's bytes: end %d, was %d", r.ReplicaOffset(), end)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if s.WaitAcked(ctx, shared+1, 1) {
		t.Fatalf("the diverged slave acknowledged bytes past the shared prefix (%d)", shared)
	}
}

// waitDiverged waits for the client to know where its log parts from the
// master's.
func waitDiverged(t *testing.T, c *Client) *Divergence {
	t.Helper()
	waitFor(t, "the divergence to be found", func() bool { d := c.Status().Diverged; return d != nil && d.Final })
	return c.Status().Diverged
}

// divergedLogs returns a master and a replica that share their first
// shared records, then hold orphan records on the replica and other
// records of the same sizes on the master.
func divergedLogs(t *testing.T, shared, orphans int) (master, replica *commitlog.Log, sharedEnd int64) {
	t.Helper()
	oldMaster := openLog(t, t.TempDir(), false)
	appendN(t, oldMaster, 0, shared)
	sharedEnd = oldMaster.MaxOffset()
	appendFilled(t, oldMaster, shared, orphans, 0xAA)
	dir := t.TempDir()
	promoted := openLog(t, dir, true)
	copyInto(t, oldMaster, promoted, sharedEnd)
	if err := promoted.Close(); err != nil {
		t.Fatal(err)
	}
	master = openLog(t, dir, false)
	t.Cleanup(func() { master.Close() })
	appendFilled(t, master, shared, orphans+20, 0x55)
	replica = openLog(t, t.TempDir(), true)
	t.Cleanup(func() { replica.Close() })
	copyInto(t, oldMaster, replica, oldMaster.MaxOffset())
	oldMaster.Close()
	return master, replica, sharedEnd
}

// A slave whose orphan records fill more than its first comparison
// compares from further back until it finds the records both logs share.
func TestDivergenceBeforeTheWindowIsFound(t *testing.T) {
	m, r, shared := divergedLogs(t, 30, 30)
	const window = 8 << 10
	if r.ReplicaOffset()-shared <= 2*window {
		t.Fatalf("the orphans (%d bytes) must fill more than two windows of %d", r.ReplicaOffset()-shared, window)
	}
	c := runClient(t, startServer(t, m), r, window)
	if d := waitDiverged(t, c); !d.Exact || d.At != shared {
		t.Fatalf("divergence found %+v; the slave's records from %d are not the master's", *d, shared)
	}
}

// Logs that share nothing are refused for good: no comparison from
// further back can find where they part.
func TestUnrelatedLogsAreRefusedForGood(t *testing.T) {
	m, r, _ := divergedLogs(t, 0, 20)
	s := startServer(t, m)
	var addr atomic.Value
	addr.Store(s.Addr().String())
	c, _ := startClient(t, r, &addr)
	end := r.ReplicaOffset()
	if d := waitDiverged(t, c); d.Exact {
		t.Fatalf("logs that share nothing parted at %+v", *d)
	}
	if r.ReplicaOffset() != end {
		t.Fatalf("the slave took the master's bytes: end %d, was %d", r.ReplicaOffset(), end)
	}
}

// failingListener is a listener whose first fails Accepts fail as when the
// process is out of file descriptors.
type failingListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// A master whose accepts fail for a while (EMFILE on a broker with many
// client connections) takes slaves again once they succeed, as RocketMQ's
// HA accept loop logs and goes on: giving up left the port open with no
// one serving it, and a SYNC_MASTER timing out every send until a
// restart.
func TestTheMasterAcceptsSlavesAgainAfterFailedAccepts(t *testing.T) {
	m := openLog(t, t.TempDir(), false)
	defer m.Close()
	appendN(t, m, 0, 20)
	var ln *failingListener
	s := startServerWith(t, m, func(cfg *ServerConfig) {
		cfg.Listen = func(addr string) (net.Listener, error) {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, err
			}
			ln = &failingListener{Listener: l}
			ln.fails.Store(3)
			return ln, nil
		}
	})
	r := openLog(t, t.TempDir(), true)
	defer r.Close()
	var addr atomic.Value
	addr.Store(s.Addr().String())
	startClient(t, r, &addr)
	deadline := time.Now().Add(30 * time.Second)
	for r.MaxOffset() != m.MaxOffset() {
		if time.Now().After(deadline) {
			t.Fatalf("no slave was served after %d failed accepts: replica end %d, master end %d",
				3-max(ln.fails.Load(), 0), r.MaxOffset(), m.MaxOffset())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ln.fails.Load() >= 0 {
		t.Fatalf("only %d of the 3 failing accepts ran", 3-ln.fails.Load())
	}
}
