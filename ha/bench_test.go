package ha

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// BenchmarkReplicatedAppend appends 1 KiB records to a master log with a
// slave following it over loopback: "async" only appends (an ASYNC_MASTER;
// the slave copies in the background), "sync" waits for the slave's
// acknowledgement of each record's end (a SYNC_MASTER with
// inSyncReplicas=2). Both run in the same process on the same disk, so
// their ratio is the cost of waiting for the slave; p99-us is the append
// (and wait) latency.
func BenchmarkReplicatedAppend(b *testing.B) {
	for _, writers := range []int{1, 16} {
		for _, mode := range []string{"async", "sync"} {
			b.Run(fmt.Sprintf("%s/w%d", mode, writers), func(b *testing.B) {
				benchReplicated(b, writers, mode == "sync")
			})
		}
	}
}

func benchReplicated(b *testing.B, writers int, wait bool) {
	open := func(replica bool) *commitlog.Log {
		cfg := commitlog.DefaultConfig(b.TempDir())
		cfg.SegmentSize = 256 << 20
		cfg.StoreHost = netip.MustParseAddrPort("10.0.0.1:10911")
		cfg.Replica = replica
		l, err := commitlog.Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	m, r := open(false), open(true)
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", Log: m, Logger: zerolog.Nop()})
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c := NewClient(ClientConfig{MasterAddr: func() string { return s.Addr().String() }, Log: r, Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	for len(s.Slaves(0)) == 0 || s.Slaves(0)[0].AckOffset < 0 {
		time.Sleep(time.Millisecond)
	}

	body := bytes.Repeat([]byte{'x'}, 1024)
	var next atomic.Int64
	lat := make([][]time.Duration, writers)
	b.SetBytes(1024)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				start := time.Now()
				res, err := m.Append(ctx, commitlog.AppendRequest{Message: &commitlog.Message{Topic: "TopicBench",
					QueueID: int32(w), Body: body, BornHost: netip.MustParseAddrPort("10.0.0.2:4000"), QueueOffset: i}})
				if err != nil {
					b.Error(err)
					return
				}
				if wait {
					wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
					ok := s.WaitAcked(wctx, res.PhyOffset+res.WroteBytes, 1)
					wcancel()
					if !ok {
						b.Error("no acknowledgement in 10 s")
						return
					}
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-us")
	}
	// The slave must hold everything before the next run's timer starts.
	for r.MaxOffset() < m.MaxOffset() {
		time.Sleep(time.Millisecond)
	}
}
