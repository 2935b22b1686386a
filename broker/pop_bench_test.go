package broker

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// BenchmarkPopAck pops and batch-acks b.N messages of 1 KiB with 8
// concurrent consumers popping every queue; it reports the mean pop and
// ack latencies.
func BenchmarkPopAck(b *testing.B) {
	tb := startTestBroker(&testing.T{}, nil)
	defer tb.stop()
	t := &testing.T{}
	rc := tb.client(nil)
	body := strings.Repeat("x", 1024)
	for i := 0; i < b.N; i++ {
		sendV2(t, rc, "BP", int32(i%8), body, "WAIT\x01false\x02")
	}
	tb.caughtUp()
	b.ResetTimer()
	var got, popNs, ackNs, pops atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		c := popclient.New(tb.client(nil), tb.cfg.BrokerName)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for got.Load() < int64(b.N) {
				t0 := time.Now()
				res, err := c.Pop(ctx, popclient.PopRequest{Group: "g", Topic: "BP", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
				popNs.Add(int64(time.Since(t0)))
				pops.Add(1)
				if err != nil || res.Code != remoting.Success {
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
	b.ReportMetric(float64(ackNs.Load())/float64(pops.Load())/1e6, "ms/ack")
}
