package kvindex

import (
	"fmt"
	"testing"
)

// BenchmarkPassDeletedTopics times dispatch passing the deletions the
// first open of a RocketMQ store records, one per topic: 20,000 topics
// whose records begin 100 bytes apart, passed in dispatch batches that
// each move 100 deletions on. "passed" is the code's way (a low mark over
// the sorted offsets, the set built again once half are passed);
// "rebuild" builds the set again at every batch, as before, in the same
// run: the baseline the ratio is taken against.
func BenchmarkPassDeletedTopics(b *testing.B) {
	const topics, perBatch = 20_000, 100
	at := make(map[string]int64, topics)
	for i := range topics {
		at[fmt.Sprintf("Topic%05d", i)] = int64(i) * 100
	}
	for _, mode := range []string{"passed", "rebuild"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				t := newDeletedTopics(at, -1)
				for end := int64(0); t != nil; end += perBatch * 100 {
					if t.low > end {
						continue
					}
					if mode == "passed" {
						t = t.passed(end)
					} else {
						t = newDeletedTopics(t.at, end)
					}
				}
			}
		})
	}
}
