package pop

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
)

// thresholdBenchBroker is the pop.Broker of BenchmarkPopAckThreshold:
// its topic has thresholdBenchQueues queues, every other topic (the
// pop-retry topics) one, and nothing is put (revive does not run).
type thresholdBenchBroker struct{}

const (
	thresholdBenchTopic  = "BenchTopic"
	thresholdBenchQueues = 4
	thresholdBenchBatch  = 32
	// thresholdBenchLimit is popInflightMessageThreshold's default.
	thresholdBenchLimit = 10000
)

func (thresholdBenchBroker) ReadQueueNums(topic string) (int, bool, error) {
	if topic == thresholdBenchTopic {
		return thresholdBenchQueues, true, nil
	}
	return 1, true, nil
}
func (thresholdBenchBroker) EnsureTopic(string) error                  { return nil }
func (thresholdBenchBroker) RetryMaxTimes(string) (int32, bool, error) { return 16, true, nil }
func (thresholdBenchBroker) WaitDispatched(context.Context) error      { return nil }
func (thresholdBenchBroker) Put(context.Context, []*commitlog.Message) (commitlog.AppendStatus, error) {
	return commitlog.PutOK, nil
}

// thresholdModes are the settings BenchmarkPopAckThreshold compares:
// no InFlightLimit at all (the pop path as it was before the threshold,
// the baseline), the threshold off as the broker configures it by
// default (a function that says off), and on at the default limit.
var thresholdModes = []struct {
	name  string
	limit func() (int64, bool)
}{
	{"none", nil},
	{"off", func() (int64, bool) { return thresholdBenchLimit, false }},
	{"on", func() (int64, bool) { return thresholdBenchLimit, true }},
}

// BenchmarkPopAckThreshold measures the cost of the in-flight threshold
// (enablePopMessageThreshold, popInflightMessageThreshold) on the pop and
// ack path: one Service pops 32 messages of 256 bytes from every queue
// of a 4-queue topic (QueueID -1) and acknowledges them in one AckBatch,
// one group per setting of thresholdModes, the settings taking turns
// within each iteration so that the machine's load falls on them alike.
// The index syncs its write-ahead log as the broker's default (indexWalSync
// auto with async flush) does between its timer's syncs: not at all here.
//
// held is how many messages each group popped before the timing and
// keeps in flight unacknowledged (spread over the queues), which the
// threshold's count walks through on each pop of a queue; it stays under
// the limit, so no pop is refused.
//
// Reported, of each setting, the mean time of a Pop call and an AckBatch
// call (timed alone: ns/op also counts the client's parsing of the
// answer into the ack's entries) by the wall clock (none-ns/popack,
// off-ns/popack, on-ns/popack) and by the CPU time of the benchmark's
// thread (none-cpu-ns/popack, ...; testutil.ThreadCPU, which a thread
// waiting for the CPU does not accrue, nor the index's own goroutines),
// and the ratios off/none, on/none, cpu-off/none and cpu-on/none. Run it with a
// fixed count (e.g. -benchtime 2000x); the messages are produced, untimed,
// as the groups need them. Nothing is asserted of the times.
func BenchmarkPopAckThreshold(b *testing.B) {
	for _, held := range []int{0, 8192} {
		b.Run(fmt.Sprintf("held%d", held), func(b *testing.B) { benchPopAckThreshold(b, held) })
	}
}

func benchPopAckThreshold(b *testing.B, held int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lcfg := commitlog.DefaultConfig(b.TempDir())
	lcfg.SegmentSize = 64 << 20
	lcfg.Logger = zerolog.Nop()
	l, err := commitlog.Open(lcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	db, err := kvindex.Open(kvindex.Options{Dir: b.TempDir(), Logger: zerolog.Nop(), WALSync: kvindex.WALSyncInterval})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	mem := cqtest.NewMemory()
	svc, err := New(Config{DB: db, CQ: mem, Log: l, Offsets: db.ConsumerOffsets(), Broker: thresholdBenchBroker{}, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()

	host := netip.MustParseAddrPort("127.0.0.1:10911")
	body := []byte(strings.Repeat("b", 256))
	produced := 0 // messages per queue
	// produce appends messages until every queue holds perQueue.
	produce := func(perQueue int) {
		var ds []cq.Dispatch
		for ; produced < perQueue; produced++ {
			for q := int32(0); q < thresholdBenchQueues; q++ {
				res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{
					Topic: thresholdBenchTopic, QueueID: q, Body: body, BornHost: host, StoreHost: host}})
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, cq.Dispatch{Topic: thresholdBenchTopic, QueueID: q,
					Entry: cq.Entry{QueueOffset: int64(produced), PhyOffset: res.PhyOffset, Size: res.Records[0].Size}})
			}
		}
		if err := mem.Put(ds); err != nil {
			b.Fatal(err)
		}
	}
	pop := func(group string, c *testutil.BlockClock) PopResult {
		if c != nil {
			c.Start(b)
		}
		res, err := svc.Pop(PopRequest{Group: group, Topic: thresholdBenchTopic, QueueID: -1,
			MaxMsgNums: thresholdBenchBatch, InvisibleTime: 600_000, InitMode: InitMin})
		if c != nil {
			c.Stop(b)
		}
		if err != nil {
			b.Fatalf("pop of %s: %v", group, err)
		}
		if len(res.Records) != thresholdBenchBatch {
			b.Fatalf("pop of %s: %d messages, want %d", group, len(res.Records), thresholdBenchBatch)
		}
		return res
	}
	groups := make([]string, len(thresholdModes))
	for k, m := range thresholdModes {
		groups[k] = "G-" + m.name
		svc.cfg.InFlightLimit = m.limit
		produce(held/thresholdBenchQueues + thresholdBenchBatch)
		for n := 0; n < held; n += thresholdBenchBatch {
			pop(groups[k], nil)
		}
	}
	clocks := make([]testutil.BlockClock, len(thresholdModes)) // pop and ack
	// consumed bounds what any group took of any queue; the pops of -1
	// spread over the queues, each pop's 32 taken from one or two, so
	// the held ones are held/4 a queue give or take a batch.
	consumed := held/thresholdBenchQueues + thresholdBenchBatch
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if produced < consumed+thresholdBenchBatch {
			b.StopTimer()
			produce(consumed + 64*thresholdBenchBatch)
			b.StartTimer()
		}
		for j := range thresholdModes {
			// Each setting goes first in turn: the first of an
			// iteration runs slower than the others.
			k := (i + j) % len(thresholdModes)
			svc.cfg.InFlightLimit = thresholdModes[k].limit
			res := pop(groups[k], &clocks[k])
			entries, err := thresholdBenchAcks(groups[k], res)
			if err != nil {
				b.Fatal(err)
			}
			clocks[k].Start(b)
			results, err := svc.AckBatch(entries)
			clocks[k].Stop(b)
			if err != nil {
				b.Fatalf("ack of %s: %v", groups[k], err)
			}
			acked := 0
			for _, r := range results {
				acked += r.Deleted
			}
			if acked != thresholdBenchBatch {
				b.Fatalf("ack of %s: %d messages acknowledged, want %d", groups[k], acked, thresholdBenchBatch)
			}
		}
		consumed += thresholdBenchBatch
	}
	b.StopTimer()
	ops := float64(b.N)
	testutil.ReportPair(b, "ns/popack", ops, "none", &clocks[0], "off", &clocks[1])
	b.ReportMetric(float64(clocks[2].Wall.Nanoseconds())/ops, "on-ns/popack")
	b.ReportMetric(float64(clocks[2].CPU.Nanoseconds())/ops, "on-cpu-ns/popack")
	b.ReportMetric(float64(clocks[2].Wall)/float64(clocks[0].Wall), "on/none")
	b.ReportMetric(float64(clocks[2].CPU)/float64(clocks[0].CPU), "cpu-on/none")
}

// thresholdBenchAcks turns a pop's answer into the entries of the batch
// ack of all its messages, as a client builds them from the handles.
func thresholdBenchAcks(group string, res PopResult) ([]AckEntry, error) {
	starts, err := ParseStartOffsetInfo(res.StartOffsetInfo)
	if err != nil {
		return nil, err
	}
	offsets, err := ParseMsgOffsetInfo(res.MsgOffsetInfo)
	if err != nil {
		return nil, err
	}
	var entries []AckEntry
	for q := int32(0); q < thresholdBenchQueues; q++ {
		key := InfoKey(FlagNormal, q)
		if len(offsets[key]) == 0 {
			continue
		}
		entries = append(entries, AckEntry{Group: group, Topic: thresholdBenchTopic, QueueID: q, CKOffset: starts[key],
			Offsets: offsets[key], PopTime: res.PopTime, InvisibleTime: res.InvisibleTime})
	}
	return entries, nil
}
