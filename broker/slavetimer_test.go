package broker

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave with timerWheelEnable copies its master's timer checkpoint
// and reports from it, as RocketMQ's slave (syncTimerCheckPoint, then
// syncLastReadTimeMs): timerReadBehind in GET_BROKER_RUNTIME_INFO and
// rocketmq_timer_dequeue_latency are the seconds since the master's read
// time, which grow while the master does not move it (down, or its
// delivery stopped) whatever the slave's own entries; GET_TIMER_CHECK_POINT
// answers the master's read time, queue offset and version, the slave's
// own queue offset bounded by the master's. Before the first copy the
// slave answers for its own timer.
func TestSlaveTimerReadsFromItsMastersCheckpoint(t *testing.T) {
	masterRead := time.Now().Add(-30 * time.Second).UnixMilli()
	masterRead -= masterRead % 1000
	version := meta.DataVersion{StateVersion: 1, Timestamp: 2, Counter: 3}
	master := startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetTimerCheckPoint {
			return remoting.NotSupportedResponse(req)
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = rmqconfig.TimerCheckpoint{ReadMs: masterRead, QueueOffset: 7, MasterQueueOffset: 7, Version: version}.Encode()
		return resp
	}))
	slaveStore := t.TempDir()
	slaveConf := map[string]string{
		"brokerRole": "SLAVE", "brokerId": "1", "timerWheelEnable": "true",
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	}
	slave := startTestBrokerWith(t, slaveStore, slaveConf, func(b *Broker) { b.timerCensusTTL = 0 })
	c := slave.client(nil)

	behind := func() int64 {
		t.Helper()
		n, err := strconv.ParseInt(runtimeInfo(t, c)["timerReadBehind"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	checkpoint := func() rmqconfig.TimerCheckpoint {
		t.Helper()
		r := call(t, c, remoting.GetTimerCheckPoint, nil, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_TIMER_CHECK_POINT on the slave: %d %s", r.Code, r.Remark)
		}
		ck, err := rmqconfig.DecodeTimerCheckpoint(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return ck
	}
	if n := behind(); n > 1 {
		t.Fatalf("timerReadBehind of an idle slave before its first copy: %d, want 0 or 1", n)
	}
	if ck := checkpoint(); ck.ReadMs < masterRead+20_000 {
		t.Fatalf("checkpoint of the slave before its first copy: read time %d, want its own (about now)", ck.ReadMs)
	}

	if _, err := slave.syncTimerFromMaster(t.Context(), master, true); err != nil {
		t.Fatalf("copy the master's timer checkpoint: %v", err)
	}
	if n := behind(); n < 30 || n > 32 {
		t.Fatalf("timerReadBehind of the slave after the copy: %d, want the seconds since the master's read time (30)", n)
	}
	store := []string{`storage_type="local"`, `storage_medium="disk"`}
	if v := metricValue(t, scrapeMetrics(t, slave), "rocketmq_timer_dequeue_latency_milliseconds", store...); v < 30 || v > 32 {
		t.Fatalf("rocketmq_timer_dequeue_latency of the slave after the copy: %v, want 30", v)
	}
	want := rmqconfig.TimerCheckpoint{ReadMs: masterRead, QueueOffset: 0, MasterQueueOffset: 7, Version: version}
	if ck := checkpoint(); ck != want {
		t.Fatalf("checkpoint of the slave after the copy: %+v, want %+v", ck, want)
	}

	// Restarted while its master is away, the slave reports from the
	// copy it saved, as RocketMQ's slave from its saved checkpoint.
	slave.stop()
	slave = startTestBrokerAt(t, slaveStore, slaveConf)
	c = slave.client(nil)
	if n := behind(); n < 30 || n > 32 {
		t.Fatalf("timerReadBehind of the restarted slave before its first copy: %d, want 30 from the copy it saved", n)
	}
}

// A master's timer read time survives a restart, as RocketMQ's
// checkpoint's lastReadTimeMs: restarted with delivery stopped
// (timerStopDequeue), its timerReadBehind counts from the read time its
// last run saved, not from its start.
func TestTimerReadTimeResumesAfterARestart(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	b.stop()
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(store, kvindex.DirName), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	saved := time.Now().Add(-time.Minute).UnixMilli()
	if err := db.SetTimerReadTime(saved); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b = startTestBrokerAt(t, store, map[string]string{"timerStopDequeue": "true"})
	c := b.client(nil)
	var n int64
	// The timer's goroutine sets the read time as it starts.
	waitFor(t, "timerReadBehind of 60 s from the saved read time", func() bool {
		n, err = strconv.ParseInt(runtimeInfo(t, c)["timerReadBehind"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n >= 60
	})
	if n > 62 {
		t.Fatalf("timerReadBehind after a restart with delivery stopped: %d, want 60 from the saved read time", n)
	}
}

// The first start on a moved RocketMQ store takes its timer's read time
// from RocketMQ's checkpoint (config/timercheck lastReadTimeMs), as
// RocketMQ's own start would: with delivery stopped, timerReadBehind
// counts from there.
func TestTimerReadTimeOfAMovedRocketMQStore(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	binary.BigEndian.PutUint64(page, uint64(time.Now().Add(-time.Minute).UnixMilli()))
	writeRocketMQConfig(t, store, "timercheck", string(page))
	b = startTestBrokerAt(t, store, map[string]string{"timerStopDequeue": "true"})
	c := b.client(nil)
	var n int64
	waitFor(t, "timerReadBehind of 60 s from RocketMQ's checkpoint", func() bool {
		var err error
		n, err = strconv.ParseInt(runtimeInfo(t, c)["timerReadBehind"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n >= 60
	})
	if n > 62 {
		t.Fatalf("timerReadBehind on a moved RocketMQ store with delivery stopped: %d, want 60", n)
	}
}

// A slave with timerWheelEnable copies its master's timer metrics with
// the full sync and answers from the copy, as RocketMQ's slave
// (SlaveSynchronize.syncTimerMetrics in syncAll) answers GET_TIMER_METRICS
// and rocketmq_timing_messages from the TimerMetrics it copied: the
// master's counts and data version, timer messages the slave has not
// received included. Before its first copy it answers its own count.
func TestSlaveTimerMetricsAreItsMasters(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"timerPrecisionMs": "100"}))
	slaveConf := map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": master.haServerAddr()}
	for k, v := range earlyMetricsSettings {
		slaveConf[k] = v
	}
	slave := startTestBrokerWith(t, t.TempDir(), withHA(slaveConf), func(b *Broker) { b.timerCensusTTL = 0 })
	mc, sc := master.client(nil), slave.client(nil)
	later := "TIMER_DELIVER_MS\x01" + strconv.FormatInt(time.Now().Add(10*time.Minute).UnixMilli(), 10) + "\x02"
	mustSend(t, mc, "StmA", 0, "a1", "UNIQ_KEY\x01SA1\x02"+later)
	waitReplicated(t, master, slave)
	// The HA link goes: the slave does not get what follows.
	if err := master.repl.server.Close(); err != nil {
		t.Fatal(err)
	}
	mustSend(t, mc, "StmA", 0, "a2", "UNIQ_KEY\x01SA2\x02"+later)
	mustSend(t, mc, "StmB", 0, "b1", "UNIQ_KEY\x01SB1\x02"+later)
	master.caughtUp()

	metricsOf := func(c *remoting.Client) (timerMetrics, []byte) {
		t.Helper()
		r := call(t, c, remoting.GetTimerMetrics, nil, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_TIMER_METRICS: %d %s", r.Code, r.Remark)
		}
		m, err := parseTimerMetrics(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return m, r.Body
	}
	var want timerMetrics
	waitFor(t, "the master's count of its timer messages", func() bool {
		want, _ = metricsOf(mc)
		return want.TimingCount["StmA"].Count == 2 && want.TimingCount["StmB"].Count == 1
	})
	waitFor(t, "the slave's own count before its first copy", func() bool {
		own, _ := metricsOf(sc)
		return own.TimingCount["StmA"].Count == 1
	})
	if own, body := metricsOf(sc); len(own.TimingCount) != 1 {
		t.Fatalf("GET_TIMER_METRICS of the slave before its first copy: %s, want its own StmA 1", body)
	}

	if err := slave.syncFromMaster(t.Context(), master.Addr()); err != nil {
		t.Fatalf("sync from the master: %v", err)
	}
	got, body := metricsOf(sc)
	if got.DataVersion != want.DataVersion || len(got.TimingCount) != 2 ||
		got.TimingCount["StmA"] != want.TimingCount["StmA"] || got.TimingCount["StmB"] != want.TimingCount["StmB"] {
		t.Fatalf("GET_TIMER_METRICS of the slave after the sync: %s, want the master's %+v", body, want)
	}
	store := []string{`storage_type="local"`, `storage_medium="disk"`}
	text := scrapeMetrics(t, slave)
	for topic, n := range map[string]float64{"StmA": 2, "StmB": 1} {
		if v := metricValue(t, text, "rocketmq_timing_messages", append([]string{`topic="` + topic + `"`}, store...)...); v != n {
			t.Errorf("rocketmq_timing_messages of %s on the slave after the sync: %v, want the master's %v", topic, v, n)
		}
	}
}
