package brokerstats

import (
	"strconv"
	"testing"
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
