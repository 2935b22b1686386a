package kvindex

import (
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// BenchmarkCQGetRotating reads 32 entries at a time from queues in
// rotation, each queue advancing by 32 per visit, as a consumer catching
// up on many queues does: with more queues than the chunk cache holds,
// every chunk is evicted before it is read again.
func BenchmarkCQGetRotating(b *testing.B) {
	for _, queues := range []int{8, 4096} {
		for _, mode := range []string{"chunks", "nochunks"} {
			b.Run(fmt.Sprintf("queues%d/%s", queues, mode), func(b *testing.B) {
				db := openTestDB(b)
				c := db.ConsumeQueue(0)
				if mode == "nochunks" {
					c.cache = newCQCache(DefaultCQTailQueues, DefaultCQChunks, 1<<40)
				}
				const perQueue = 1024
				var ds []cq.Dispatch
				for q := range queues {
					for off := int64(0); off < perQueue; off++ {
						ds = append(ds, cq.Dispatch{Topic: "T", QueueID: int32(q), Entry: cq.Entry{QueueOffset: off, PhyOffset: off*1000 + int64(q), Size: 100}})
						if len(ds) == 4096 {
							if err := c.Put(ds); err != nil {
								b.Fatal(err)
							}
							ds = ds[:0]
						}
					}
				}
				if err := c.Put(ds); err != nil {
					b.Fatal(err)
				}
				if err := db.pdb.Flush(); err != nil {
					b.Fatal(err)
				}
				pos := make([]int64, queues)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q := i % queues
					got, err := c.Get("T", int32(q), pos[q], 32)
					if err != nil || len(got) == 0 {
						b.Fatalf("get: %v %d", err, len(got))
					}
					pos[q] = (pos[q] + 32) % (perQueue - 64)
				}
			})
		}
	}
}

// BenchmarkCQReadRange reads a chunk's worth of entries of a queue with a
// topic name of the length clients use, straight from the database: the
// cost of one chunk load, or of a read the caches miss.
func BenchmarkCQReadRange(b *testing.B) {
	db := openTestDB(b)
	c := db.ConsumeQueue(0)
	const topic, entries = "OrderEvents_Production_01", 4 * defaultCQChunkEntries
	var ds []cq.Dispatch
	for off := int64(0); off < entries; off++ {
		ds = append(ds, cq.Dispatch{Topic: topic, QueueID: 3, Entry: cq.Entry{QueueOffset: off, PhyOffset: off * 1000, Size: 100}})
	}
	if err := c.Put(ds); err != nil {
		b.Fatal(err)
	}
	if err := db.pdb.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		from := (i % 4) * defaultCQChunkEntries
		i++
		got, err := c.readRange(topic, 3, from, defaultCQChunkEntries, entries)
		if err != nil || len(got) != defaultCQChunkEntries {
			b.Fatalf("read %d entries: %v", len(got), err)
		}
	}
}
