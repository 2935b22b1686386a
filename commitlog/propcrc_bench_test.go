package commitlog

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// The benchmarks of the CRC property (Config.AppendPropCRC and
// Config.ForceVerifyPropCRC) run every setting on the same records in
// the same run, in alternating blocks (each setting first in turn), so
// that the machine's load (2 shared vCPUs) falls on all of them alike,
// and report each setting's time beside its baseline and their ratio,
// by the wall clock and by the CPU time of the benchmark's thread
// (testutil.ThreadCPU: what a thread waiting for the CPU does not
// accrue). Nothing is asserted of the times.

// propCRCBlock is how many operations one setting runs before the next
// setting takes its turn.
const propCRCBlock = 32

// propCRCRotate is the size at which a benchmark's log is closed,
// removed and opened empty again (untimed), so that a long run does
// not fill the disk.
const propCRCRotate = 256 << 20

// propCRCAppender is one log of BenchmarkAppendPropCRC and the time its
// appends took.
type propCRCAppender struct {
	cfg   Config
	l     *Log
	a     *benchAssigner
	clock testutil.BlockClock
}

func (p *propCRCAppender) open(b *testing.B) {
	b.Helper()
	if err := os.RemoveAll(p.cfg.Dir); err != nil {
		b.Fatal(err)
	}
	p.l = mustOpen(b, p.cfg)
	p.a = &benchAssigner{}
}

// BenchmarkAppendPropCRC appends the same messages to two logs, one with
// AppendPropCRC off (the default, the baseline) and one with it on, in
// alternating blocks of propCRCBlock appends from one goroutine (async
// flush, 64 MiB segments, the flusher's msync on its own goroutine), and
// reports the mean time of an append (a batch for batch16) with the
// setting off and on, by the wall clock (off-ns/append, on-ns/append,
// on/off) and by the thread's CPU time (off-cpu-ns/append, ...,
// cpu-on/off). On, each record gets one CRC-32 pass under the lock.
//
// The cases: one message of a 1 KiB and of a 4 KiB body, one carrying a
// __CRC32# property of its own (dropped before the append when on), and
// a producer's batch of 16 messages of 1 KiB. Run it with a fixed count,
// e.g. -benchtime 100000x: the logs are rotated at propCRCRotate bytes,
// so the disk holds at most about twice that per log.
func BenchmarkAppendPropCRC(b *testing.B) {
	cases := []struct {
		name  string
		body  int
		batch int
		own   bool
	}{
		{"1KiB", 1024, 1, false},
		{"4KiB", 4096, 1, false},
		{"1KiB-own-crc", 1024, 1, true},
		{"batch16x1KiB", 1024, 16, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			msgs := make([]*Message, c.batch)
			for i := range msgs {
				msgs[i] = testMessage("BenchTopic", 3, i, c.body)
				if c.own {
					msgs[i].Properties += "\x02" + PropertyCRC32 + "\x011234567890"
				}
			}
			req := AppendRequest{Message: msgs[0]}
			if c.batch > 1 {
				req = AppendRequest{Batch: msgs, ProducerBatch: true}
			}
			sides := [2]*propCRCAppender{}
			for i := range sides {
				cfg := testConfig(b, 64<<20)
				cfg.AppendPropCRC = i == 1
				sides[i] = &propCRCAppender{cfg: cfg}
				sides[i].open(b)
			}
			defer func() {
				for _, s := range sides {
					s.l.Close()
				}
			}()
			ctx := context.Background()
			// A few untimed blocks each: the first segments are made and
			// their first pages faulted in before the timing starts.
			for _, s := range sides {
				r := req
				r.Assigner = s.a
				for i := 0; i < 8*propCRCBlock; i++ {
					mustAppend(b, s.l, r)
				}
			}
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(propCRCBlock, b.N-done)
				for j := range sides {
					// Each side goes first in turn.
					s := sides[(done/propCRCBlock+j)%len(sides)]
					if s.l.MaxOffset() > propCRCRotate {
						b.StopTimer()
						if err := s.l.Close(); err != nil {
							b.Fatal(err)
						}
						s.open(b)
						b.StartTimer()
					}
					r := req
					r.Assigner = s.a
					s.clock.Start(b)
					for i := 0; i < n; i++ {
						if res, err := s.l.Append(ctx, r); err != nil || res.Status != PutOK {
							b.Fatalf("append: %v %v", err, res.Status)
						}
					}
					s.clock.Stop(b)
				}
				done += n
			}
			b.StopTimer()
			testutil.ReportPair(b, "ns/append", float64(b.N), "off", &sides[0].clock, "on", &sides[1].clock)
		})
	}
}

// recoverySettings are the three ways recovery checks a record:
// structure only (checkCRCOnRecover off), the body CRC (on, RocketMQ's
// and rocketkv's default) and the CRC property in its place
// (forceVerifyPropCRC).
var recoverySettings = []struct {
	name            string
	checkCRC, force bool
}{
	{"structure", false, false},
	{"bodycrc", true, false},
	{"propcrc", true, true},
}

// propCRCLog writes a closed log of segs 16 MiB segments of records of
// body bytes, appended with AppendPropCRC so that every check passes, and
// returns its configuration.
func propCRCLog(b *testing.B, segs, body int) Config {
	b.Helper()
	cfg := testConfig(b, 16<<20)
	cfg.AppendPropCRC = true
	l := mustOpen(b, cfg)
	a := &benchAssigner{}
	for i := 0; l.MaxOffset() < int64(segs)*cfg.SegmentSize-int64(2*body); i++ {
		mustAppend(b, l, AppendRequest{Message: testMessage("BenchTopic", int32(i%8), i, body), Assigner: a})
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkRecoverPropCRC measures what recovery pays to check records
// under each of recoverySettings, on one log of 1 KiB-body records
// written with AppendPropCRC, every setting in turn within each
// iteration (each first in turn):
//
//	scan: the record walk of recovery (Log.checkOnRecover over every
//	record of a 16 MiB segment in memory), per record: bodycrc against
//	structure (what checkCRCOnRecover costs) and propcrc against
//	bodycrc (what forceVerifyPropCRC changes).
//
//	open: Open and Close of the log (a normal recovery of its last
//	three 16 MiB segments, page cache warm), per open, the same pairs.
//
// Each pair is reported as testutil.ReportPair does (wall and thread CPU time).
func BenchmarkRecoverPropCRC(b *testing.B) {
	b.Run("scan", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cfg := propCRCLog(b, 1, 1024)
		l := mustOpen(b, cfg)
		defer l.Close()
		seg := l.segs[0]
		data := seg.data[:l.MaxOffset()-seg.start]
		logs := make([]*Log, len(recoverySettings))
		for i, s := range recoverySettings {
			c := cfg
			c.CheckCRCOnRecover, c.ForceVerifyPropCRC = s.checkCRC, s.force
			logs[i] = &Log{cfg: c}
		}
		clocks := make([]testutil.BlockClock, len(recoverySettings))
		records := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for j := range logs {
				// Each setting goes first in turn.
				k := (i + j) % len(logs)
				rl := logs[k]
				clocks[k].Start(b)
				n := 0
				for pos := 0; pos < len(data); n++ {
					size, err := rl.checkOnRecover(data[pos:])
					if err != nil {
						b.Fatalf("%s: record at %d: %v", recoverySettings[k].name, pos, err)
					}
					pos += int(size)
				}
				clocks[k].Stop(b)
				records = n
			}
		}
		b.StopTimer()
		reportRecoverySettings(b, "ns/record", float64(b.N*records), clocks)
	})
	b.Run("open", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cfg := propCRCLog(b, 4, 1024)
		clocks := make([]testutil.BlockClock, len(recoverySettings))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for j := range recoverySettings {
				k := (i + j) % len(recoverySettings)
				s := recoverySettings[k]
				c := cfg
				c.CheckCRCOnRecover, c.ForceVerifyPropCRC = s.checkCRC, s.force
				clocks[k].Start(b)
				l := mustOpen(b, c)
				clocks[k].Stop(b)
				info := l.RecoveryInfo()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				if info.CutReason != nil || info.Records == 0 {
					b.Fatalf("%s: recovery scanned %d records and cut: %v", s.name, info.Records, info.CutReason)
				}
			}
		}
		b.StopTimer()
		reportRecoverySettings(b, "ns/open", float64(b.N), clocks)
	})
}

// reportRecoverySettings reports, of the clocks of recoverySettings, the
// pairs bodycrc against structure and propcrc against bodycrc.
func reportRecoverySettings(b *testing.B, unit string, ops float64, clocks []testutil.BlockClock) {
	testutil.ReportPair(b, unit, ops, "structure", &clocks[0], "bodycrc", &clocks[1])
	cpuProp := float64(clocks[2].CPU) / float64(clocks[1].CPU)
	b.ReportMetric(float64(clocks[2].Wall.Nanoseconds())/ops, "propcrc-"+unit)
	b.ReportMetric(float64(clocks[2].CPU.Nanoseconds())/ops, "propcrc-cpu-"+unit)
	b.ReportMetric(float64(clocks[2].Wall)/float64(clocks[1].Wall), "propcrc/bodycrc")
	b.ReportMetric(cpuProp, "cpu-propcrc/bodycrc")
}
