package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/pop"
)

// popMetricsBenchBroker is the pop.Broker of BenchmarkPopMetricsCost:
// every topic has one queue, and a revive's put stores nothing (what the
// benchmark compares is the POP service's work with and without its
// Observer, not the CommitLog's).
type popMetricsBenchBroker struct{}

func (popMetricsBenchBroker) ReadQueueNums(string) (int, bool, error)   { return 1, true, nil }
func (popMetricsBenchBroker) EnsureTopic(string) error                  { return nil }
func (popMetricsBenchBroker) RetryMaxTimes(string) (int32, bool, error) { return 16, true, nil }
func (popMetricsBenchBroker) WaitDispatched(context.Context) error      { return nil }
func (popMetricsBenchBroker) Put(context.Context, []*commitlog.Message) (commitlog.AppendStatus, error) {
	return commitlog.PutOK, nil
}

const (
	popMetricsBenchTopic = "BenchTopic"
	popMetricsBenchGroup = "BenchGroup"
	// Each iteration pops popMetricsBenchBatch messages, acknowledges all
	// but popMetricsBenchLeft of them, and revives those.
	popMetricsBenchBatch = 32
	popMetricsBenchLeft  = 8
	// popMetricsBenchInvisible is the pops' invisible time (ms); the
	// benchmark's clock moves past it before each revive.
	popMetricsBenchInvisible = 60_000
)

// popMetricsBenchSettings are what BenchmarkPopMetricsCost compares: the
// exporter off (no Observer: the baseline), the exporter on with
// enablePopMetrics=false, and on with it true, each built as startMetrics
// and startPop build them.
var popMetricsBenchSettings = []struct {
	name     string
	exporter bool
	pop      bool
}{
	{"none", false, false},
	{"off", true, false},
	{"on", true, true},
}

// popMetricsBenchStore is one setting's POP service, on a store of its
// own (a revive round revives every group's checkpoints due).
type popMetricsBenchStore struct {
	svc      *pop.Service
	m        *metrics.Broker // nil: the exporter is off
	log      *commitlog.Log
	mem      *cqtest.Memory
	now      atomic.Int64 // the service's clock, Unix ms
	produced int64
}

// BenchmarkPopMetricsCost measures what RocketMQ's POP metrics cost the
// pop, ack and revive path (enablePopMetrics, the pop.Observer that feeds
// rocketmq_pop_revive_in_message_total, _out_message_total and
// _retry_messages_total). Each iteration, for each setting of
// popMetricsBenchSettings in turn (each first in turn), one pop.Service
// (no network) pops 32 messages of 256 B from a one-queue topic (a CK
// put), batch-acknowledges 24 of them (one ACK put), then, its clock
// moved past their invisible time, runs one revive round that reads their
// checkpoint (a CK got) and puts the other 8 to the pop-retry topic (a
// retry, stored nowhere). The index waits for no fsync, as the broker's
// default indexWalSync (auto, with async flush) between its timer's syncs.
//
// Reported, of each setting: the mean pop+ack by the wall clock and by
// the CPU time of the benchmark's thread (testutil.ThreadCPU: the pop and
// the ack run on it), and the mean revive round by the wall clock and by
// the process's CPU time (testutil.ProcessCPU: a round revives its queues
// on goroutines of its own; the index's background work is counted too,
// spread over the settings alike), as none-ns/popack, none-cpu-ns/popack,
// none-ns/revive, ...; and the ratios of off and on to none of each
// (off/none-popack, cpu-off/none-popack, ..., cpu-on/none-revive). Run it with a fixed count (-benchtime 2000x). Nothing is asserted
// of the times.
func BenchmarkPopMetricsCost(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	stores := make([]*popMetricsBenchStore, len(popMetricsBenchSettings))
	for k, set := range popMetricsBenchSettings {
		stores[k] = newPopMetricsBenchStore(b, set.exporter, set.pop)
	}
	popack := make([]testutil.BlockClock, len(stores))
	revive := make([]testutil.BlockClock, len(stores))
	for k := range revive {
		revive[k].Process = true
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range stores {
			k := (i + j) % len(stores)
			st := stores[k]
			if st.produced < int64(i+1)*popMetricsBenchBatch {
				b.StopTimer()
				st.produce(b, 64*popMetricsBenchBatch)
				b.StartTimer()
			}
			popack[k].Start(b)
			res, err := st.svc.Pop(pop.PopRequest{Group: popMetricsBenchGroup, Topic: popMetricsBenchTopic, QueueID: 0,
				MaxMsgNums: popMetricsBenchBatch, InvisibleTime: popMetricsBenchInvisible, InitMode: pop.InitMin})
			popack[k].Stop(b)
			if err != nil || len(res.Records) != popMetricsBenchBatch {
				b.Fatalf("%s: pop: %d messages, %v", popMetricsBenchSettings[k].name, len(res.Records), err)
			}
			entry, err := popMetricsBenchAck(res)
			if err != nil {
				b.Fatal(err)
			}
			popack[k].Start(b)
			acked, err := st.svc.AckBatch([]pop.AckEntry{entry})
			popack[k].Stop(b)
			if err != nil || len(acked) != 1 || acked[0].Deleted != popMetricsBenchBatch-popMetricsBenchLeft {
				b.Fatalf("%s: ack: %+v %v", popMetricsBenchSettings[k].name, acked, err)
			}
			st.now.Add(popMetricsBenchInvisible + 1_000)
			revive[k].Start(b)
			n, err := st.svc.ReviveOnce(context.Background())
			revive[k].Stop(b)
			if err != nil || n != popMetricsBenchLeft {
				b.Fatalf("%s: revive: %d messages, %v", popMetricsBenchSettings[k].name, n, err)
			}
		}
	}
	b.StopTimer()
	// The settings did what they are named for: "on" counted every
	// revive's retries, "off" served no POP metric.
	for k, st := range stores {
		if st.m == nil {
			continue
		}
		rec := httptest.NewRecorder()
		st.m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		want := fmt.Sprintf(`put_status="PUT_OK",topic="%s"} %d`, popMetricsBenchTopic, b.N*popMetricsBenchLeft)
		if on := popMetricsBenchSettings[k].pop; on != strings.Contains(rec.Body.String(), want) ||
			!on && strings.Contains(rec.Body.String(), "rocketmq_pop_") {
			b.Fatalf("%s: scrape:\n%s", popMetricsBenchSettings[k].name, rec.Body.String())
		}
	}
	for _, path := range []struct {
		name   string
		clocks []testutil.BlockClock
	}{{"popack", popack}, {"revive", revive}} {
		base := path.clocks[0]
		for k, set := range popMetricsBenchSettings {
			c := path.clocks[k]
			b.ReportMetric(float64(c.Wall.Nanoseconds())/float64(b.N), set.name+"-ns/"+path.name)
			b.ReportMetric(float64(c.CPU.Nanoseconds())/float64(b.N), set.name+"-cpu-ns/"+path.name)
			if k > 0 {
				b.ReportMetric(float64(c.Wall)/float64(base.Wall), set.name+"/none-"+path.name)
				b.ReportMetric(float64(c.CPU)/float64(base.CPU), "cpu-"+set.name+"/none-"+path.name)
			}
		}
	}
}

// newPopMetricsBenchStore opens a CommitLog, an index and a POP service
// whose Observer is what the broker gives it with the exporter on or
// off and enablePopMetrics set to popOn.
func newPopMetricsBenchStore(b *testing.B, exporter, popOn bool) *popMetricsBenchStore {
	lcfg := commitlog.DefaultConfig(b.TempDir())
	lcfg.SegmentSize = 64 << 20
	lcfg.Logger = zerolog.Nop()
	l, err := commitlog.Open(lcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	db, err := kvindex.Open(kvindex.Options{Dir: b.TempDir(), Logger: zerolog.Nop(), WALSync: kvindex.WALSyncInterval})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	var m *metrics.Broker
	if exporter {
		m = metrics.New(map[string]string{"cluster": "c", "node_type": "broker", "node_id": "b"},
			metrics.Sources{Off: metrics.Families{Pop: !popOn}}, metrics.UnitSuffixed)
	}
	st := &popMetricsBenchStore{m: m, log: l, mem: cqtest.NewMemory()}
	st.now.Store(time.Now().UnixMilli())
	st.svc, err = pop.New(pop.Config{DB: db, CQ: st.mem, Log: l, Offsets: db.ConsumerOffsets(), Broker: popMetricsBenchBroker{},
		Observer: popObserver(m, popOn), Now: func() time.Time { return time.UnixMilli(st.now.Load()) }, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.svc.Close() })
	return st
}

// produce appends n messages to the topic's queue and indexes them.
func (st *popMetricsBenchStore) produce(b *testing.B, n int) {
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	body := []byte(strings.Repeat("b", 256))
	ds := make([]cq.Dispatch, 0, n)
	for range n {
		res, err := st.log.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{
			Topic: popMetricsBenchTopic, Body: body, BornHost: host, StoreHost: host}})
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, cq.Dispatch{Topic: popMetricsBenchTopic,
			Entry: cq.Entry{QueueOffset: st.produced, PhyOffset: res.PhyOffset, Size: res.Records[0].Size}})
		st.produced++
	}
	if err := st.mem.Put(ds); err != nil {
		b.Fatal(err)
	}
}

// popMetricsBenchAck is the batch ack entry of all but the last
// popMetricsBenchLeft messages of a pop of the topic's queue, as a client
// builds it from the answer.
func popMetricsBenchAck(res pop.PopResult) (pop.AckEntry, error) {
	starts, err := pop.ParseStartOffsetInfo(res.StartOffsetInfo)
	if err != nil {
		return pop.AckEntry{}, err
	}
	offsets, err := pop.ParseMsgOffsetInfo(res.MsgOffsetInfo)
	if err != nil {
		return pop.AckEntry{}, err
	}
	key := pop.InfoKey(pop.FlagNormal, 0)
	offs := offsets[key]
	return pop.AckEntry{Group: popMetricsBenchGroup, Topic: popMetricsBenchTopic, CKOffset: starts[key],
		Offsets: offs[:len(offs)-popMetricsBenchLeft], PopTime: res.PopTime, InvisibleTime: res.InvisibleTime}, nil
}
