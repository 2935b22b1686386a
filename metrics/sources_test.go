package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Broker rebound to another broker's sources keeps its counters and
// reads the new sources' gauges; detached, it shows its counters and no
// gauge read from sources, and a scrape never reads a detached source.
func TestRebindKeepsCountersAndDetachStopsReads(t *testing.T) {
	labels := map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}
	var closed atomic.Bool // the first sources' store is closed
	first := Sources{
		BrokerPermission: func() int {
			if closed.Load() {
				t.Error("a scrape read a detached source")
			}
			return 6
		},
		Diverged: func() bool { return true },
	}
	m := New(labels, first, UnitSuffixed)
	m.In("t", TypeNormal, false, 3, 300)
	out := scrape(t, m)
	for _, want := range []string{`rocketmq_broker_permission{cluster="c1",node_id="b",node_type="broker"} 6`,
		`rocketkv_ha_diverged{cluster="c1",node_id="b",node_type="broker"} 1`} {
		if !strings.Contains(out, want) {
			t.Fatalf("scrape lacks %s:\n%s", want, out)
		}
	}
	m.Detach()
	closed.Store(true)
	out = scrape(t, m)
	if strings.Contains(out, "rocketmq_broker_permission{") || strings.Contains(out, "rocketkv_ha_diverged{") {
		t.Fatalf("detached gauges are scraped:\n%s", out)
	}
	in := `rocketmq_messages_in_total{cluster="c1",is_system="false",message_type="normal",node_id="b",node_type="broker",topic="t"} 3`
	if !strings.Contains(out, in) {
		t.Fatalf("detached scrape lacks %s:\n%s", in, out)
	}
	// The next broker: a master, without Diverged.
	if !m.Rebind(labels, Sources{BrokerPermission: func() int { return 4 }}, UnitSuffixed) {
		t.Fatal("Rebind refused sources of the same layout")
	}
	m.In("t", TypeNormal, false, 2, 200)
	out = scrape(t, m)
	for _, want := range []string{`rocketmq_broker_permission{cluster="c1",node_id="b",node_type="broker"} 4`,
		`rocketmq_messages_in_total{cluster="c1",is_system="false",message_type="normal",node_id="b",node_type="broker",topic="t"} 5`} {
		if !strings.Contains(out, want) {
			t.Fatalf("rebound scrape lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rocketkv_ha_diverged{") {
		t.Fatalf("a gauge whose source the rebind left out is scraped:\n%s", out)
	}
}

// A Rebind may leave out any source the first broker had: every gauge
// read from sources is then left out of the scrape, none reads a source
// that is not set.
func TestRebindLeavingOutEverySource(t *testing.T) {
	labels := map[string]string{"node_id": "b"}
	full := Sources{
		BrokerPermission:     func() int { return 6 },
		TopicCount:           func() int { return 2 },
		ConsumerGroupCount:   func() int { return 3 },
		Producers:            func() []Connection { return nil },
		Consumers:            func() []Connection { return nil },
		DispatchBehindBytes:  func() int64 { return 4 },
		FlushBehindBytes:     func() int64 { return 5 },
		StorageSize:          func() (int64, bool) { return 7, true },
		MessageReserveMillis: func() (int64, bool) { return 8, true },
		Lags:                 func(context.Context) []Lag { return []Lag{{Group: "g", Topic: "T", Messages: 1}} },
		Timers:               func() (TimerCensus, bool) { return TimerCensus{Waiting: 9}, true },
		PopRevive:            func() ReviveBacklog { return ReviveBacklog{Due: 1} },
		HalfMessages:         func() []TopicMessages { return []TopicMessages{{Topic: "T", Messages: 1}} },
		Diverged:             func() bool { return false },
	}
	m := New(labels, full, UnitSuffixed)
	gauges := []string{"rocketmq_broker_permission{", "rocketmq_topic_number{", "rocketmq_consumer_group_number{",
		"rocketmq_storage_dispatch_behind_bytes{", "rocketmq_storage_flush_behind_bytes{", "rocketmq_storage_size_bytes{",
		"rocketmq_storage_message_reserve_time_milliseconds{", "rocketmq_consumer_lag_messages{", "rocketmq_timer_dequeue_lag{",
		"rocketmq_pop_revive_lag_milliseconds{", "rocketmq_half_messages{", "rocketkv_ha_diverged{"}
	out := scrapeOnce(m)
	for _, g := range gauges {
		if !strings.Contains(out, g) {
			t.Fatalf("the first scrape lacks %s:\n%s", g, out)
		}
	}
	if !m.Rebind(labels, Sources{}, UnitSuffixed) {
		t.Fatal("Rebind refused sources that lack some of the layout's")
	}
	if _, err := m.reg.Gather(); err != nil {
		t.Fatalf("a scrape of the rebound sources fails: %v", err)
	}
	out = scrapeOnce(m)
	for _, g := range gauges {
		if strings.Contains(out, g) {
			t.Errorf("a gauge whose source the rebind left out is scraped: %s", g)
		}
	}
}

// A master's metrics (no Diverged source) show no rocketkv_ha_diverged,
// as a standalone master's, and are yet the layout of the slave it may
// switch to in controller mode: a Rebind either way keeps the counters
// and shows the gauge only while the sources have it.
func TestDivergedIsNoPartOfTheLayout(t *testing.T) {
	labels := map[string]string{"node_id": "b"}
	master := Sources{BrokerPermission: func() int { return 6 }}
	slave := Sources{BrokerPermission: func() int { return 4 }, Diverged: func() bool { return false }}
	m := New(labels, master, UnitSuffixed)
	m.In("t", TypeNormal, false, 3, 300)
	const diverged = "rocketkv_ha_diverged"
	if out := scrape(t, m); strings.Contains(out, diverged) {
		t.Fatalf("a master's scrape shows %s:\n%s", diverged, out)
	}
	for i, next := range []Sources{slave, master} {
		if !m.Rebind(labels, next, UnitSuffixed) {
			t.Fatalf("switch %d: Rebind refused the other role's sources", i)
		}
		out := scrape(t, m)
		if got, want := strings.Contains(out, diverged+`{node_id="b"} 0`), next.Diverged != nil; got != want {
			t.Fatalf("switch %d: scrape shows %s: %v, want %v:\n%s", i, diverged, got, want, out)
		}
		if in := `rocketmq_messages_in_total{is_system="false",message_type="normal",node_id="b",topic="t"} 3`; !strings.Contains(out, in) {
			t.Fatalf("switch %d: the counters did not carry over, scrape lacks %s:\n%s", i, in, out)
		}
	}
}

// Rebind refuses sources New would serve other metrics for.
func TestRebindRefusesAnotherLayout(t *testing.T) {
	labels := map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}
	perm := func() int { return 6 }
	m := New(labels, Sources{BrokerPermission: perm}, UnitSuffixed)
	other := map[string]string{"cluster": "c2", "node_type": "broker", "node_id": "b"}
	for name, ok := range map[string]bool{
		"same":          m.Rebind(labels, Sources{BrokerPermission: perm}, UnitSuffixed),
		"labels":        m.Rebind(other, Sources{BrokerPermission: perm}, UnitSuffixed),
		"names":         m.Rebind(labels, Sources{BrokerPermission: perm}, Bare),
		"extra source":  m.Rebind(labels, Sources{BrokerPermission: perm, TopicCount: func() int { return 1 }}, UnitSuffixed),
		"families off":  m.Rebind(labels, Sources{BrokerPermission: perm, Off: Families{Request: true}}, UnitSuffixed),
		"another limit": m.Rebind(labels, Sources{BrokerPermission: perm, CardinalityLimit: 10}, UnitSuffixed),
	} {
		if ok != (name == "same") {
			t.Errorf("%s: Rebind = %v", name, ok)
		}
	}
}

// Detach waits for a gauge read in progress: once it returns, the
// detached sources are never called again.
func TestDetachWaitsForReads(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var detached atomic.Bool
	m := New(map[string]string{"node_id": "b"}, Sources{TopicCount: func() int {
		if detached.Load() {
			t.Error("a source was read after Detach returned")
		}
		once.Do(func() { close(entered); <-release })
		return 1
	}}, UnitSuffixed)
	done := make(chan string)
	go func() { done <- scrapeOnce(m) }()
	<-entered
	detachDone := make(chan struct{})
	go func() { m.Detach(); detached.Store(true); close(detachDone) }()
	select {
	case <-detachDone:
		t.Fatal("Detach returned while a source read was in progress")
	default:
	}
	close(release)
	<-detachDone
	if out := <-done; !strings.Contains(out, "rocketmq_topic_number") {
		t.Fatalf("the scrape begun before Detach lost its gauge:\n%s", out)
	}
	if out := scrapeOnce(m); strings.Contains(out, "rocketmq_topic_number{") {
		t.Fatalf("a scrape after Detach shows the gauge:\n%s", out)
	}
}

// Detach and Rebind do not wait for a scrape's whole computation of the
// consumer gauges (seconds at a million queues, and a role switch waits
// on Detach): they cancel the context Lags was handed, and wait only
// until Lags returns. Lags here computes until it is cancelled, as a
// computation over endless queues that checks its context between them;
// the scrape it serves returns without the consumer gauges.
func TestDetachCancelsALongLagComputation(t *testing.T) {
	for _, how := range []string{"Detach", "Rebind"} {
		t.Run(how, func(t *testing.T) {
			labels := map[string]string{"node_id": "b"}
			entered := make(chan struct{})
			var once sync.Once
			var detached atomic.Bool
			lags := func(ctx context.Context) []Lag {
				if detached.Load() {
					t.Error("Lags was called after its sources were detached")
				}
				once.Do(func() { close(entered) })
				<-ctx.Done()
				return nil
			}
			m := New(labels, Sources{Lags: lags}, UnitSuffixed)
			done := make(chan string)
			go func() { done <- scrapeOnce(m) }()
			<-entered
			switched := make(chan struct{})
			go func() {
				defer close(switched)
				if how == "Detach" {
					m.Detach()
				} else if !m.Rebind(labels, Sources{Lags: func(context.Context) []Lag {
					return []Lag{{Group: "g", Topic: "T", Messages: 2}}
				}}, UnitSuffixed) {
					t.Error("Rebind refused sources of the same layout")
				}
				detached.Store(true)
			}()
			select {
			case <-switched:
			case <-time.After(30 * time.Second): // a hang guard, not a timing
				t.Fatalf("%s still waits for a lag computation it should have cancelled", how)
			}
			if out := <-done; strings.Contains(out, "rocketmq_consumer_lag_messages{") {
				t.Fatalf("the cancelled scrape shows consumer gauges:\n%s", out)
			}
			out := scrapeOnce(m)
			if got := strings.Contains(out, `rocketmq_consumer_lag_messages{consumer_group="g"`); got != (how == "Rebind") {
				t.Fatalf("after %s the next scrape shows consumer gauges: %v\n%s", how, got, out)
			}
		})
	}
}

// Rebinds and Detaches that race each other and scrapes still cancel
// the context of every binding they replace: once the last Detach
// returns, no context a source was handed is left live.
func TestConcurrentSetsCancelEveryBinding(t *testing.T) {
	labels := map[string]string{"node_id": "b"}
	var mu sync.Mutex
	var handed []context.Context
	src := Sources{Lags: func(ctx context.Context) []Lag {
		mu.Lock()
		handed = append(handed, ctx)
		mu.Unlock()
		return nil
	}}
	m := New(labels, src, UnitSuffixed)
	scrapeOnce(m) // New's binding hands out a context, whatever the schedule below
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				switch (g + i) % 3 {
				case 0:
					if !m.Rebind(labels, src, UnitSuffixed) {
						t.Error("Rebind refused sources of the same layout")
					}
				case 1:
					m.Detach()
				default:
					scrapeOnce(m)
				}
			}
		}()
	}
	wg.Wait()
	m.Detach()
	mu.Lock()
	defer mu.Unlock()
	for i, ctx := range handed {
		if ctx.Err() == nil {
			t.Fatalf("the context handed to read %d of %d is live after Detach", i, len(handed))
		}
	}
}

// scrapeOnce runs one scrape of m's handler, without a listener.
func scrapeOnce(m *Broker) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
