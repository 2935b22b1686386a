package broker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A controller-mode broker's Prometheus metrics live across its role
// switches, as RocketMQ's one BrokerMetricsManager does: the exporter's
// port serves every scrape from the first role to the Supervisor's
// Shutdown (each Broker had its own exporter, closed while the switch
// ran and opened on another port when metricsPromExporterPort is 0),
// the counters go on from the count before the switches (they started
// from zero with each Broker), and the gauges read the running Broker.
// A scrape during a switch never reads the stopped Broker's stores
// (pebble panics on a closed database, failing the run).
func TestControllerModeSwitchKeepsMetrics(t *testing.T) {
	ctlAddr, a, b := newCtlGroup(t, map[string]string{"metricsExporterType": "PROM",
		"metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"})
	a.start()
	b.start()
	if !a.isMaster() {
		t.Fatal("the first broker is not the master")
	}
	addr := a.sup.Broker().MetricsAddr().String()
	ca := dialCtl(t, a.addr())
	const before, after = 5, 3
	for i := range before {
		mustSend(t, ca, "TopicTest", 0, fmt.Sprintf("before %d", i), "")
	}
	in := func(text string) float64 {
		t.Helper()
		return metricValue(t, text, "rocketmq_messages_in_total", `topic="TopicTest"`)
	}
	text := testutil.Scrape(t, addr)
	if got := in(text); got != before {
		t.Fatalf("rocketmq_messages_in_total before the switches: %v, want %d", got, before)
	}
	// A master serves no rocketkv_ha_diverged, as a standalone one; the
	// slave it becomes serves it, in the same metrics.
	const diverged = "rocketkv_ha_diverged{"
	if strings.Contains(text, diverged) {
		t.Fatalf("the master's scrape shows rocketkv_ha_diverged:\n%s", text)
	}
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool {
		return len(a.sup.role().syncSet) == 2 && b.end() == a.end()
	})
	// And the slave to hold the topic: once a follows b it takes b's
	// topic table, as RocketMQ's slave does, and with a topic b lacks go
	// its series (TopicDeleted). A switch before b's first copy of the
	// table (the slave's sync runs every few seconds) made the count
	// vanish from a's scrape.
	waitUntil(t, 20*time.Second, "the slave to copy the master's topics", func() bool {
		_, ok, err := b.sup.Broker().topicConfig("TopicTest")
		return ok && err == nil
	})

	// Scrapes in a loop while a switches to slave and back to master.
	var scrapes int
	var failed []string
	switchAwayAndBack(t, ctlAddr, a, b, func() {
		// While a follows b: the slave's scrape shows
		// rocketkv_ha_diverged, with the counters a counted as master.
		waitUntil(t, 20*time.Second, "the slave's scrape to show rocketkv_ha_diverged", func() bool {
			text = testutil.Scrape(t, addr)
			return strings.Contains(text, diverged)
		})
		if v := metricValue(t, text, "rocketkv_ha_diverged", `node_id="broker-a"`); v != 0 {
			t.Fatalf("rocketkv_ha_diverged of the slave in sync: %v", v)
		}
		if got := in(text); got != before {
			t.Fatalf("rocketmq_messages_in_total of the slave: %v, want the %d counted by the master", got, before)
		}
	}, func() {
		scrapes++
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			failed = append(failed, err.Error())
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			failed = append(failed, fmt.Sprintf("status %d, read: %v", resp.StatusCode, err))
		}
	})
	if len(failed) > 0 {
		t.Fatalf("%d of %d scrapes during the switches failed: %v", len(failed), scrapes, failed[:min(len(failed), 5)])
	}
	if got := a.sup.Broker().MetricsAddr().String(); got != addr {
		t.Fatalf("the exporter moved from %s to %s", addr, got)
	}
	text = testutil.Scrape(t, addr)
	if got := in(text); got != before {
		t.Fatalf("rocketmq_messages_in_total after the switches: %v, want the %d counted before", got, before)
	}
	// The gauges read the running Broker: a master's permission, 6.
	if got := metricValue(t, text, "rocketmq_broker_permission", `node_id="broker-a"`); got != 6 {
		t.Fatalf("rocketmq_broker_permission after the switches: %v, want 6", got)
	}
	if strings.Contains(text, diverged) {
		t.Fatalf("the master again shows rocketkv_ha_diverged:\n%s", text)
	}
	ca = dialCtl(t, a.addr())
	for i := range after {
		mustSend(t, ca, "TopicTest", 0, fmt.Sprintf("after %d", i), "")
	}
	if got := in(testutil.Scrape(t, addr)); got != before+after {
		t.Fatalf("rocketmq_messages_in_total after more sends: %v, want %d", got, before+after)
	}

	// The Supervisor's Shutdown closes the port.
	a.stop()
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("the exporter at %s still answers after the Supervisor's Shutdown: status %d", addr, resp.StatusCode)
	}
}

// A scrape computing the consumer gauges when a role switch begins does
// not hold the switch up: the old Broker's Detach cancels the computation,
// which stops before its next committed queue, and waits only until the
// scrape has let go of the Broker's stores. Without that the switch waited
// for the whole computation (seconds at a million queues), and the
// requests waiting at the gate past its second were refused. The test's
// computation reads its first queue until it is cancelled and would then
// read the next one until the test ends; the scrape it serves returns
// whole, without the consumer gauges.
func TestControllerModeSwitchCancelsASlowLagScrape(t *testing.T) {
	ctlAddr, a, b := newCtlGroup(t, map[string]string{"metricsExporterType": "PROM",
		"metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0", "enableLagAndDlqMetrics": "true"})
	entered, hold := make(chan struct{}), make(chan struct{})
	var queues atomic.Int32
	var starts atomic.Int32
	a.configure = func(br *Broker) {
		if starts.Add(1) > 1 {
			return // the Brokers after the first compute as usual
		}
		br.beforeLagQueue = func(ctx context.Context) {
			if queues.Add(1) == 1 {
				close(entered)
				select {
				case <-ctx.Done():
				case <-hold:
				}
				return
			}
			<-hold // the rest of a long computation
		}
	}
	a.start()
	b.start()
	t.Cleanup(func() { close(hold) }) // before the brokers' stops
	if !a.isMaster() {
		t.Fatal("the first broker is not the master")
	}
	first := a.sup.Broker()
	addr := first.MetricsAddr().String()
	mustSend(t, dialCtl(t, a.addr()), "TopicTest", 0, "counted", "")
	for q := range int32(2) {
		if err := first.offsets.Set("g-slow", "TopicTest", q, 0); err != nil {
			t.Fatal(err)
		}
	}
	// (Not ctlBroker.end: it reads a Broker's CommitLog field, which the
	// switch below clears, without a lock.)
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool {
		return len(a.sup.role().syncSet) == 2
	})

	type scraped struct {
		status int
		body   string
		err    error
	}
	done := make(chan scraped, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			done <- scraped{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		done <- scraped{status: resp.StatusCode, body: string(body), err: err}
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the scrape did not compute the consumer gauges")
	}

	designateMaster(t, ctlAddr, b.sup.BrokerID())
	waitUntil(t, 20*time.Second, "the first broker to follow the second while a scrape computes its lags", func() bool {
		return b.isMaster() && a.sup.role().running && !a.isMaster()
	})
	if a.sup.Broker() == first {
		t.Fatal("the first broker follows without a new Broker: no switch was tested")
	}
	var got scraped
	select {
	case got = <-done:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the scrape begun before the switch did not return")
	}
	if got.err != nil || got.status != http.StatusOK {
		t.Fatalf("the scrape begun before the switch: status %d, %v", got.status, got.err)
	}
	if n := queues.Load(); n != 1 {
		t.Fatalf("the cancelled computation read %d queues, want 1", n)
	}
	if !strings.Contains(got.body, "rocketmq_messages_in_total{") {
		t.Fatalf("the scrape begun before the switch lacks the counters:\n%s", got.body)
	}
	if strings.Contains(got.body, "rocketmq_consumer_lag_messages{") {
		t.Fatalf("the cancelled computation's scrape shows consumer gauges:\n%s", got.body)
	}
}
