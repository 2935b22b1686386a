package txn

import (
	"context"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// BenchmarkOpenByTopic times one computation of rocketmq_half_messages
// over 50,000 open transactions on 10 topics (OpenByTopic: the index's
// open halves, each half read from the CommitLog), beside the scan of
// the open halves in the index alone (index-scan), the part that does
// not grow with the records read:
//
//	go test -run '^$' -bench BenchmarkOpenByTopic -count 5 ./txn/
func BenchmarkOpenByTopic(b *testing.B) {
	const open = 50_000
	f := newFixture(b, Config{})
	for i := range open {
		m := &commitlog.Message{Topic: "T" + strconv.Itoa(i%10), BornTimestamp: f.now.UnixMilli(), Body: []byte("b"),
			Properties: "PGROUP\x01pg\x02UNIQ_KEY\x01U" + strconv.Itoa(i) + "\x02TRAN_MSG\x01true\x02"}
		ToHalf(m)
		if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store}); err != nil {
			b.Fatal(err)
		}
	}
	f.caughtUp()
	b.Run("census", func(b *testing.B) {
		for b.Loop() {
			counts, err := f.svc.OpenByTopic(context.Background())
			if err != nil || len(counts) != 10 || counts["T0"] != open/10 {
				b.Fatalf("OpenByTopic = %v, %v", counts, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/open, "ns/half")
	})
	b.Run("index-scan", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := f.db.Transactions().OpenHalves(func(kvindex.TxnHalf) bool { n++; return true }); err != nil || n != open {
				b.Fatalf("OpenHalves: %d, %v", n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/open, "ns/half")
	})
}
