package broker

import (
	"context"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// BenchmarkPopAck pops and batch-acks b.N messages of 1 KiB with 8
// concurrent consumers popping every queue; it reports the mean pop and
// ack latencies. POP_BENCH_METRICS=1 runs it with the Prometheus exporter
// on (the POP counters fed on every pop and ack).
func BenchmarkPopAck(b *testing.B) {
	keys := map[string]string{"storePathRootDir": b.TempDir(), "listenPort": "0", "brokerIP1": "127.0.0.1"}
	if os.Getenv("POP_BENCH_METRICS") == "1" {
		keys["metricsExporterType"], keys["metricsPromExporterHost"], keys["metricsPromExporterPort"] = "PROM", "127.0.0.1", "0"
	}
	loaded, err := configs.LoadBroker("", keys)
	if err != nil {
		b.Fatal(err)
	}
	br, err := New(loaded.Broker, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := br.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = br.Shutdown(ctx) }()
	dial := func() *remoting.Client {
		c, err := remoting.Dial(ctx, br.Addr(), remoting.ClientOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	rc := dial()
	body := []byte(strings.Repeat("x", 1024))
	for i := 0; i < b.N; i++ {
		resp, err := rc.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "BP", "c": "TBW102", "d": "8", "e": strconv.Itoa(i % 8), "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "WAIT\x01false\x02"}, body))
		if err != nil || resp.Code != remoting.Success {
			b.Fatalf("send: %v %v", err, resp)
		}
	}
	if err := br.disp.CatchUp(ctx); err != nil {
		b.Fatal(err)
	}
	if f := os.Getenv("POP_BENCH_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	var got, popNs, ackNs, pops, empty atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < popBenchConsumers(); w++ {
		c := popclient.New(dial(), br.cfg.BrokerName)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(b.N) {
				t0 := time.Now()
				res, err := c.Pop(ctx, popclient.PopRequest{Group: "g", Topic: "BP", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
				popNs.Add(int64(time.Since(t0)))
				pops.Add(1)
				if err != nil || res.Code != remoting.Success {
					empty.Add(1)
					continue
				}
				t1 := time.Now()
				if code, err := c.BatchAck(ctx, "g", "BP", res.Messages); err != nil || code != remoting.Success {
					b.Errorf("ack %d %v", code, err)
					return
				}
				ackNs.Add(int64(time.Since(t1)))
				got.Add(int64(len(res.Messages)))
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(popNs.Load())/float64(pops.Load())/1e6, "ms/pop")
	b.ReportMetric(float64(ackNs.Load())/float64(pops.Load()-empty.Load())/1e6, "ms/ack")
	b.ReportMetric(float64(empty.Load())/float64(pops.Load()), "empty/pop")
}

// popBenchConsumers is the consumer count of BenchmarkPopAck
// (POP_BENCH_CONSUMERS, default 8).
func popBenchConsumers() int {
	if n, err := strconv.Atoi(os.Getenv("POP_BENCH_CONSUMERS")); err == nil && n > 0 {
		return n
	}
	return 8
}
