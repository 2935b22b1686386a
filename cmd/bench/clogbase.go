package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocketkv/rocketkv/commitlog"
)

// queueCounters assigns queue offsets for the baseline; the Log calls
// Assign under its append lock, so it needs no lock of its own.
type queueCounters struct{ next map[string][]int64 }

// Assign implements commitlog.QueueOffsetAssigner.
func (a *queueCounters) Assign(topic string, queueID int32, n int) int64 {
	qs := a.next[topic]
	for int(queueID) >= len(qs) {
		qs = append(qs, 0)
	}
	base := qs[queueID]
	qs[queueID] += int64(n)
	a.next[topic] = qs
	return base
}

// clogResult is one CommitLog append measurement.
type clogResult struct {
	Appends int64         `json:"appends"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Rate    float64       `json:"appends_per_s"`
}

// clogAppendRate measures the CommitLog's own append rate: a fresh Log in
// a temporary directory under dir (the same disk as the broker's store),
// async flush, segments of segSize bytes (0: the default 1 GiB), writers goroutines appending messages of bodySize bytes
// with the properties a broker stores, over queues queues, for d. The page
// cache is synced first so earlier phases' dirty pages do not slow it.
func clogAppendRate(ctx context.Context, dir string, segSize int64, writers, bodySize, queues int, d time.Duration) (clogResult, error) {
	root, err := os.MkdirTemp(dir, "rocketkv-bench-clog-")
	if err != nil {
		return clogResult{}, fmt.Errorf("commitlog baseline: %w", err)
	}
	defer os.RemoveAll(root)
	cfg := commitlog.DefaultConfig(root)
	cfg.FlushType = commitlog.AsyncFlush
	if segSize > 0 {
		cfg.SegmentSize = segSize
	}
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	l, err := commitlog.Open(cfg)
	if err != nil {
		return clogResult{}, fmt.Errorf("commitlog baseline: %w", err)
	}
	defer l.Close()
	body := make([]byte, bodySize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	born := netip.MustParseAddrPort("127.0.0.1:50000")
	assigner := &queueCounters{next: map[string][]int64{}}
	unix.Sync()
	var total atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				// The properties a broker stores for a bench send: the
				// client's TAGS and UNIQ_KEY plus the broker's CLUSTER.
				props := "TAGS\x01" + benchTag + "\x02UNIQ_KEY\x01BENCH" + strconv.Itoa(w) + "-" + strconv.Itoa(n) +
					"\x02CLUSTER\x01DefaultCluster\x02"
				m := &commitlog.Message{
					Topic:         "BenchBaseline",
					QueueID:       int32((w + n*writers) % queues),
					BornTimestamp: time.Now().UnixMilli(),
					BornHost:      born,
					Body:          body,
					Properties:    props,
				}
				if _, err := l.Append(ctx, commitlog.AppendRequest{Message: m, Assigner: assigner}); err != nil {
					errs <- fmt.Errorf("commitlog baseline append: %w", err)
					return
				}
				total.Add(1)
			}
		}()
	}
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	case err := <-errs:
		close(stop)
		wg.Wait()
		return clogResult{}, err
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return clogResult{}, err
	default:
	}
	n := total.Load()
	return clogResult{Appends: n, Elapsed: elapsed, Rate: float64(n) / elapsed.Seconds()}, ctx.Err()
}
