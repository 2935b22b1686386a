package brokerstats

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// BenchmarkSendAndPull is the statistics' cost on the hot path: what a
// send (Put and Stored) and a pull (Get) add, spread over 1,000 topics.
func BenchmarkSendAndPull(b *testing.B) {
	s := New("DefaultCluster", nil)
	topics := make([]string, 1000)
	for i := range topics {
		topics[i] = "Topic" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			t := topics[i%len(topics)]
			s.Put(t, 1, 1100)
			s.Stored(1, 1100)
			s.Get("G", t, 1, 1100)
			i++
		}
	})
}

// BenchmarkMemoryPerTopic reports the heap a topic's put statistics hold
// once all three windows are full (26 hours of samplings), for 100,000
// topics: what the statistics cost at scale.
func BenchmarkMemoryPerTopic(b *testing.B) {
	const topics = 100000
	for n := 0; n < b.N; n++ {
		c := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New("C", c.Now)
		for h := 0; h < 26; h++ {
			for i := 0; i < topics; i++ {
				s.Put("Topic"+strconv.Itoa(i), 1, 1)
			}
			c.Advance(time.Hour)
			s.Tick()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/topics, "B/topic")
		runtime.KeepAlive(s)
	}
}

// BenchmarkPutTook is what timing a put adds to the send path: the clock
// read at the store's taking it, the one at the end of its waits, and
// PutTook's two bucket counts and maximum, from every P at once (the
// counters are shared, not striped).
func BenchmarkPutTook(b *testing.B) {
	s := New("DefaultCluster", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			began := time.Now()
			s.PutTook(time.Since(began), false)
		}
	})
}
