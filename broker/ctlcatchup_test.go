package broker

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A controller-mode slave that comes back far behind its master logs
// the catch-up report a classic slave logs: its begin (tailBytes from
// the replica's end at the AutoSwitch handshake to the master's end the
// handshake told), its progress, and its end once its dispatcher reached
// that end.
func TestControllerModeSlaveCatchUpReport(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	a.start()
	b.start()
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "CtlCatchUp", 0, "first", "")
	waitUntil(t, 20*time.Second, "the slave to replicate", func() bool { return b.end() == a.end() })
	from := b.end()
	b.stop()
	items := make([]batchItem, 64)
	for i := range items {
		items[i] = batchItem{body: strings.Repeat("x", 1024)}
	}
	for range 40 {
		mustSendBatch(t, ca, "CtlCatchUp", items)
	}
	end := a.end()

	logs := &testutil.SyncBuffer{}
	b.configure = func(br *Broker) {
		br.log = zerolog.New(logs)
		br.catchUpFrom = 1 << 20
		br.catchUpEvery = 5 * time.Millisecond
	}
	b.start()
	waitUntil(t, 30*time.Second, "the end of the catch-up to be logged", func() bool {
		return len(logLines(logs, "indexed the master's CommitLog tail")) > 0
	})
	began := logLines(logs, "indexing the master's CommitLog tail while serving")
	if len(began) != 1 || began[0]["tailBytes"] != float64(end-from) || began[0]["masterEnd"] != float64(end) || began[0]["from"] != float64(from) {
		t.Fatalf("begin of the catch-up logged %v, want one line from %d with tailBytes %d and masterEnd %d", began, from, end-from, end)
	}
	ended := logLines(logs, "indexed the master's CommitLog tail")
	if len(ended) != 1 || ended[0]["percent"] != float64(100) || ended[0]["tailBytes"] != float64(end-from) {
		t.Fatalf("end of the catch-up logged %v, want one line with percent 100", ended)
	}
}

// A controller-mode slave whose epoch file shares no epoch start with
// its master's (ErrNoConsistentPoint: nothing of its log is known to be
// the master's) takes nothing and shows it as a classic slave whose log
// differs from its first record: brokerStatus haDivergedAt 0 and
// haDivergedExact false (rebuild, no cut mends it), rocketkv_ha_diverged
// 1.
func TestControllerModeNoConsistentPointShown(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	for k, v := range map[string]string{"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"} {
		b.settings[k] = v
	}
	a.start()
	b.start()
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "CtlNoPoint", 0, "shared", "")
	waitUntil(t, 20*time.Second, "the slave to replicate", func() bool { return b.end() == a.end() })
	if info := runtimeInfo(t, dialCtl(t, b.addr())); info["haDivergedAt"] != "" {
		t.Fatalf("a slave in step shows haDivergedAt %q", info["haDivergedAt"])
	}
	held := b.end()
	path := epochFilePath(b.sup.cfg)
	b.stop()
	// The slave's epoch starts where the master's does not.
	ef, err := autoswitch.OpenEpochFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries := ef.Entries()
	if len(entries) == 0 {
		t.Fatal("the slave's epoch file is empty")
	}
	last := entries[len(entries)-1]
	if err := ef.TruncateSuffixByOffset(0); err != nil {
		t.Fatal(err)
	}
	if err := ef.Append(autoswitch.EpochEntry{Epoch: last.Epoch, StartOffset: last.StartOffset + 1}); err != nil {
		t.Fatal(err)
	}
	mustSend(t, ca, "CtlNoPoint", 0, "only on the master", "")
	b.start()
	cb := dialCtl(t, b.addr())
	waitUntil(t, 20*time.Second, "haDivergedAt in the slave's brokerStatus", func() bool {
		return runtimeInfo(t, cb)["haDivergedAt"] != ""
	})
	if info := runtimeInfo(t, cb); info["haDivergedAt"] != "0" || info["haDivergedExact"] != "false" {
		t.Fatalf("brokerStatus of the slave: haDivergedAt %q, haDivergedExact %q, want 0 and false", info["haDivergedAt"], info["haDivergedExact"])
	}
	resp, err := http.Get("http://" + b.sup.Broker().MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, string(text), "rocketkv_ha_diverged", `node_id="broker-a"`); v != 1 {
		t.Fatalf("rocketkv_ha_diverged of the slave: %v", v)
	}
	if got := b.end(); got != held {
		t.Fatalf("the slave took records: its end %d, %d before", got, held)
	}
}
