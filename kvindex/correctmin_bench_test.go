package kvindex

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
)

// BenchmarkCorrectMin times a retention pass over many queues. Each queue
// holds correctMinBenchEntries entries whose records interleave in the
// CommitLog; iteration i moves the minimum past the i-th entry of every
// queue ("cut": one range deletion per queue per pass) or leaves it
// where it was ("nocut": the visit alone, the baseline). reads-ns/op is
// the mean time of a one-entry read of every queue right after the
// pass, before the memtable is flushed: what consumers pay for the pass's
// range deletions. Run with -benchtime=Nx, N < correctMinBenchEntries.
func BenchmarkCorrectMin(b *testing.B) {
	for _, queues := range []int{20_000, 100_000} {
		for _, mode := range []string{"nocut", "cut"} {
			b.Run(fmt.Sprintf("queues%d/%s", queues, mode), func(b *testing.B) {
				if b.N >= correctMinBenchEntries {
					b.Skipf("at most %d passes", correctMinBenchEntries-1)
				}
				dir := b.TempDir()
				db, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				c := db.ConsumeQueue(0)
				fillInterleaved(b, c, queues, correctMinBenchEntries)
				if err := db.pdb.Flush(); err != nil {
					b.Fatal(err)
				}
				var reads time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					minPhy := int64(0)
					if mode == "cut" {
						minPhy = int64(i+1) * int64(queues) * 100
					}
					if err := c.CorrectMin(minPhy); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					start := time.Now()
					for q := 0; q < queues; q++ {
						if _, err := c.readRange("T", int32(q), int64(i+1), 1, correctMinBenchEntries); err != nil {
							b.Fatal(err)
						}
					}
					reads += time.Since(start)
					b.StartTimer()
				}
				b.ReportMetric(float64(reads.Nanoseconds())/float64(b.N*queues), "reads-ns/op")
			})
		}
	}
}

const correctMinBenchEntries = 8

// fillInterleaved puts entries entries into each of queues queues of
// topic T, entry k of queue q at CommitLog offset (k*queues+q)*100.
func fillInterleaved(tb testing.TB, c *CQ, queues, entries int) {
	tb.Helper()
	var ds []cq.Dispatch
	for k := 0; k < entries; k++ {
		for q := 0; q < queues; q++ {
			phy := (int64(k)*int64(queues) + int64(q)) * 100
			ds = append(ds, cq.Dispatch{Topic: "T", QueueID: int32(q), Entry: cq.Entry{QueueOffset: int64(k), PhyOffset: phy, Size: 100, StoreTimestamp: 1}})
			if len(ds) == 8192 {
				if err := c.Put(ds); err != nil {
					tb.Fatal(err)
				}
				ds = ds[:0]
			}
		}
	}
	if err := c.Put(ds); err != nil {
		tb.Fatal(err)
	}
}
