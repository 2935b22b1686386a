package metrics

import (
	"strconv"
	"testing"
)

// benchTopics are the topics the hot-path benchmarks spread their calls
// over, so that each call finds an existing series among many.
var benchTopics = func() []string {
	out := make([]string, 1000)
	for i := range out {
		out[i] = "BenchTopic-" + strconv.Itoa(i)
	}
	return out
}()

// BenchmarkIn is the cost a send pays for its metrics (In: three series
// of one label set), once the series exist.
func BenchmarkIn(b *testing.B) {
	m := newBenchBroker()
	for _, t := range benchTopics {
		m.In(t, TypeNormal, false, 1, 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.In(benchTopics[i%len(benchTopics)], TypeNormal, false, 1, 100)
		i++
	}
}

// BenchmarkInParallel is BenchmarkIn from every processor at once.
func BenchmarkInParallel(b *testing.B) {
	m := newBenchBroker()
	for _, t := range benchTopics {
		m.In(t, TypeNormal, false, 1, 100)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.In(benchTopics[i%len(benchTopics)], TypeNormal, false, 1, 100)
			i++
		}
	})
}

// BenchmarkOut is the cost a pull pays for its metrics (Out: two series
// of one label set), once the series exist.
func BenchmarkOut(b *testing.B) {
	m := newBenchBroker()
	for _, t := range benchTopics {
		m.Out(t, "BenchGroup", false, 1, 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Out(benchTopics[i%len(benchTopics)], "BenchGroup", false, 1, 100)
		i++
	}
}

// BenchmarkPopOut is the cost a pop pays for its metrics (PopOut twice,
// as countPopOut calls it), once the series exist.
func BenchmarkPopOut(b *testing.B) {
	m := newBenchBroker()
	for _, t := range benchTopics {
		m.PopOut(t, "BenchGroup", false, false, 1, 100)
		m.PopOut(t, "BenchGroup", false, true, 1, 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t := benchTopics[i%len(benchTopics)]
		m.PopOut(t, "BenchGroup", false, false, 1, 100)
		m.PopOut(t, "BenchGroup", false, true, 1, 100)
		i++
	}
}

// BenchmarkInPastTheLimit is BenchmarkIn with all but ten of the topics
// past the cardinality limit: their sends are counted in the overflow
// series, found under the read lock as a held label set's are.
func BenchmarkInPastTheLimit(b *testing.B) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"},
		Sources{CardinalityLimit: 10}, UnitSuffixed)
	for _, t := range benchTopics {
		m.In(t, TypeNormal, false, 1, 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.In(benchTopics[i%len(benchTopics)], TypeNormal, false, 1, 100)
		i++
	}
}

// newBenchBroker is the exporter the counter benchmarks feed: one
// broker's constant labels, no sources, the default limit.
func newBenchBroker() *Broker {
	return New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, Sources{}, UnitSuffixed)
}

// BenchmarkPopRevivePut is the cost a pop or an ack pays for its POP
// counter (one checkpoint or ack), once the series exist.
func BenchmarkPopRevivePut(b *testing.B) {
	m := newBenchBroker()
	for _, t := range benchTopics {
		m.PopRevivePut("BenchGroup", t, ReviveCK, PutOK)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.PopRevivePut("BenchGroup", benchTopics[i%len(benchTopics)], ReviveCK, PutOK)
		i++
	}
}
