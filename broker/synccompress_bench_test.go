package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// BenchmarkSlaveSyncTables measures the master's answers to a slave's
// table requests at a million queues (100,000 topics of 10 queues, and
// one group's offsets on all of them): each sub-benchmark's loop asks as
// a rocketkv slave does (zstd accepted), and reports the plain answer's
// size, the one sent and their ratio, with the time of a plain answer in
// the same run as the baseline of the time per compressed one.
func BenchmarkSlaveSyncTables(b *testing.B) {
	const topics, queues = 100_000, 10
	master := startTestBroker(b, nil)
	// A plain answer is larger than a frame a client takes by default
	// (RocketMQ's slave fails on it): the baseline's client takes more.
	c, err := remoting.Dial(context.Background(), master.Addr(), remoting.ClientOptions{MaxFrameSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	invoke := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := c.Invoke(ctx, remoting.NewRequest(code, ext, body))
		if err != nil || r.Code != remoting.Success {
			b.Fatalf("request %d: %v %+v", code, err, r)
		}
		return r
	}
	var ups []kvindex.OffsetUpdate
	for from := 0; from < topics; from += 10_000 {
		var list struct {
			TopicConfigList []meta.TopicConfig `json:"topicConfigList"`
		}
		for i := from; i < from+10_000; i++ {
			topic := fmt.Sprintf("SyncBench-%06d", i)
			list.TopicConfigList = append(list.TopicConfigList, meta.NewTopicConfig(topic, queues))
			for q := range queues {
				ups = append(ups, kvindex.OffsetUpdate{Group: "cg-sync-bench", Topic: topic, QueueID: int32(q), Offset: int64(i*100 + q)})
			}
		}
		raw, err := json.Marshal(list)
		if err != nil {
			b.Fatal(err)
		}
		invoke(remoting.UpdateAndCreateTopicList, nil, raw)
	}
	if err := master.offsets.SetMany(ups, true); err != nil {
		b.Fatal(err)
	}
	for _, table := range []struct {
		name string
		code int32
	}{{"topics", remoting.GetAllTopicConfig}, {"offsets", remoting.GetAllConsumerOffset}} {
		b.Run(table.name, func(b *testing.B) {
			start := time.Now()
			plain := invoke(table.code, nil, nil)
			plainTime := time.Since(start)
			var sent int
			b.ResetTimer()
			for b.Loop() {
				r := invoke(table.code, map[string]string{syncFieldAccept: syncEncodingZstd}, nil)
				if r.ExtFields[syncFieldEncoding] != syncEncodingZstd {
					b.Fatalf("the %s answer went plain", table.name)
				}
				sent = len(r.Body)
			}
			b.ReportMetric(float64(len(plain.Body)), "plain-B")
			b.ReportMetric(float64(sent), "sent-B")
			b.ReportMetric(float64(len(plain.Body))/float64(sent), "size-ratio")
			b.ReportMetric(float64(plainTime.Nanoseconds()), "plain-ns")
		})
	}
}
