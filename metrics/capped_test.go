package metrics

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// row is one series of a gathered metric: its variable labels (the
// constant ones left out) and its value (a histogram's sample count).
type row struct {
	labels string // k="v" pairs, comma-separated, in label-name order
	value  float64
}

// gather returns the series of the metric named name, sorted.
func gather(t *testing.T, m *Broker, name string) []row {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var pairs []string
			for _, l := range s.GetLabel() {
				if l.GetName() == "cluster" || l.GetName() == "node_type" || l.GetName() == "node_id" ||
					l.GetName() == "storage_type" || l.GetName() == "storage_medium" {
					continue
				}
				pairs = append(pairs, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out = append(out, row{strings.Join(pairs, ","), value(s)})
		}
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.labels, b.labels) })
	return out
}

// value is a series' counter value or histogram sample count.
func value(s *dto.Metric) float64 {
	if h := s.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return s.GetCounter().GetValue()
}

func cappedBroker(limit int) (*Broker, *testutil.SyncBuffer) {
	logs := &testutil.SyncBuffer{}
	return New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"},
		Sources{CardinalityLimit: limit, Log: zerolog.New(logs)}, UnitSuffixed), logs
}

const ovf = `"` + OverflowValue + `"`

// A metric holding its limit of series counts the label sets past it in
// one overflow series whose variable labels all read
// otel_metric_overflow, as RocketMQ's OTel cardinality limit counts them
// in its otel.metric.overflow series; the label sets it holds keep
// counting in their own series, and the first overflow of each metric
// logs one warning.
func TestCardinalityLimitOverflows(t *testing.T) {
	m, logs := cappedBroker(4)
	for _, topic := range []string{"T1", "T2", "T3"} {
		m.In(topic, TypeNormal, false, 1, 100)
	}
	if logs.String() != "" {
		t.Fatalf("logged before any overflow: %s", logs)
	}
	m.In("T4", TypeNormal, false, 2, 200)
	m.In("T5", TypeFIFO, true, 3, 300)
	m.In("T1", TypeNormal, false, 4, 400) // held: its own series
	m.In("T6", TypeNormal, false, 5, 500)
	const over = `is_system=` + ovf + `,message_type=` + ovf + `,topic=` + ovf
	want := []row{
		{`is_system="false",message_type="normal",topic="T1"`, 5},
		{`is_system="false",message_type="normal",topic="T2"`, 1},
		{`is_system="false",message_type="normal",topic="T3"`, 1},
		{over, 10},
	}
	if got := gather(t, m, MessagesInTotal); !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", MessagesInTotal, got, want)
	}
	if got := gather(t, m, ThroughputInTotal); len(got) != 4 || got[3] != (row{over, 1000}) {
		t.Errorf("%s: %v, want 4 series, the overflow one 1000", ThroughputInTotal, got)
	}
	if got := gather(t, m, UnitSuffixed.Name(MessageSize)); len(got) != 4 || got[3] != (row{over, 3}) {
		t.Errorf("%s: %v, want 4 series, the overflow one of 3 observations", MessageSize, got)
	}
	// One warning per metric, however many overflows.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d warnings, want one for each of the three metrics:\n%s", len(lines), logs)
	}
	for i, name := range []string{MessagesInTotal, ThroughputInTotal, UnitSuffixed.Name(MessageSize)} {
		if !strings.Contains(lines[i], `"level":"warn"`) || !strings.Contains(lines[i], `"metric":"`+name+`"`) ||
			!strings.Contains(lines[i], `"metricsOtelCardinalityLimit":4`) {
			t.Errorf("warning %d: %s, want one of %s", i, lines[i], name)
		}
	}
	// Another metric has room of its own, and warns at its own overflow.
	m.TransactionEnded("T1", true, time.Second)
	if n := strings.Count(logs.String(), "\n"); n != 3 {
		t.Errorf("%d warnings after a commit, want still 3", n)
	}
}

// rocketmq_messages_out_total counts its pull and pop series against one
// limit, as RocketMQ's one instrument does, and overflows into a series
// of each shape; it warns once, whichever shape overflows first.
func TestCardinalityLimitCoversPullsAndPops(t *testing.T) {
	m, logs := cappedBroker(4)
	m.Out("T", "g1", false, 1, 10)
	m.Out("T", "g2", false, 1, 10)
	m.PopOut("T", "g3", false, false, 1, 10)
	m.PopOut("T", "g3", false, true, 2, 20)  // the fourth label set
	m.Out("T", "g4", false, 3, 30)           // the fifth
	m.PopOut("T", "g3", false, false, 4, 40) // held
	want := []row{
		{`consumer_group="g1",is_system="false",topic="T"`, 1},
		{`consumer_group="g2",is_system="false",topic="T"`, 1},
		{`consumer_group="g3",is_retry="false",is_system="false",topic="T"`, 5},
		{`consumer_group=` + ovf + `,is_retry=` + ovf + `,is_system=` + ovf + `,topic=` + ovf, 2},
		{`consumer_group=` + ovf + `,is_system=` + ovf + `,topic=` + ovf, 3},
	}
	if got := gather(t, m, MessagesOutTotal); !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", MessagesOutTotal, got, want)
	}
	if n := strings.Count(logs.String(), "\n"); n != 2 {
		t.Errorf("%d warnings, want one for each of messages and bytes out:\n%s", n, logs)
	}
}

// Deleting a topic's or a group's series frees their room under the
// limit: a new label set gets a series of its own again.
func TestDeletionsFreeRoomUnderTheCardinalityLimit(t *testing.T) {
	m, logs := cappedBroker(4)
	for _, topic := range []string{"T1", "T2", "T3"} {
		m.In(topic, TypeNormal, false, 1, 100)
		m.Out(topic, "g-"+topic, false, 1, 100)
	}
	m.TopicDeleted("T1")
	m.GroupDeleted("g-T2")
	m.In("T4", TypeNormal, false, 2, 200)
	m.Out("T4", "g-T4", false, 2, 200)
	if got, want := gather(t, m, MessagesInTotal), []row{
		{`is_system="false",message_type="normal",topic="T2"`, 1},
		{`is_system="false",message_type="normal",topic="T3"`, 1},
		{`is_system="false",message_type="normal",topic="T4"`, 2},
	}; !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", MessagesInTotal, got, want)
	}
	// T1 and g-T2 both went from the out counters: room for two.
	m.Out("T5", "g-T5", false, 1, 100)
	if got, want := gather(t, m, MessagesOutTotal), []row{
		{`consumer_group="g-T3",is_system="false",topic="T3"`, 1},
		{`consumer_group="g-T4",is_system="false",topic="T4"`, 2},
		{`consumer_group="g-T5",is_system="false",topic="T5"`, 1},
	}; !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", MessagesOutTotal, got, want)
	}
	if logs.String() != "" {
		t.Errorf("logged without an overflow: %s", logs)
	}
	// Full again: the next label set overflows.
	m.In("T6", TypeNormal, false, 1, 100)
	if got := gather(t, m, MessagesInTotal); len(got) != 4 || got[3].labels != `is_system=`+ovf+`,message_type=`+ovf+`,topic=`+ovf {
		t.Errorf("%s after filling up again: %v", MessagesInTotal, got)
	}
}

// A deleted topic's series go from every metric with a topic label, and
// a deleted group's from every metric with a consumer_group label; the
// others stay.
func TestDeletedTopicsAndGroupsLeaveNoSeries(t *testing.T) {
	m, _ := cappedBroker(0)
	for _, topic := range []string{"TA", "TB"} {
		for _, group := range []string{"GA", "GB"} {
			m.Out(topic, group, false, 1, 10)
			m.PopOut(topic, group, false, true, 1, 10)
			m.ToDLQ(group, topic, false)
		}
		m.In(topic, TypeNormal, false, 1, 10)
		m.TransactionEnded(topic, true, time.Second)
		m.TransactionEnded(topic, false, 0)
		m.TimerEnqueued(topic, time.Minute)
		m.TimerDequeued(topic)
	}
	m.TopicDeleted("TA")
	m.GroupDeleted("GA")
	m.GroupDeleted("never-seen")
	var nilBroker *Broker
	nilBroker.TopicDeleted("TB") // the exporter is off: no panic
	nilBroker.GroupDeleted("GB")
	for _, metric := range []string{MessagesInTotal, ThroughputInTotal, MessageSize,
		MessagesOutTotal, ThroughputOutTotal, SendToDLQTotal, CommitMessagesTotal,
		RollbackMessagesTotal, FinishMessageLatency, TimerEnqueueTotal,
		TimerDequeueTotal, DelayMessageLatency} {
		name := UnitSuffixed.Name(metric)
		got := gather(t, m, name)
		if len(got) == 0 {
			t.Errorf("%s: no series left", name)
		}
		for _, r := range got {
			if strings.Contains(r.labels, `topic="TA"`) || strings.Contains(r.labels, `consumer_group="GA"`) {
				t.Errorf("%s keeps %s", name, r.labels)
			}
			if !strings.Contains(r.labels, `topic="TB"`) {
				t.Errorf("%s: %s, want TB's series alone", name, r.labels)
			}
		}
	}
	if got := gather(t, m, MessagesOutTotal); len(got) != 2 {
		t.Errorf("%s: %v, want TB's of GB, a pull's and a pop's", MessagesOutTotal, got)
	}
	for _, c := range []*capped{m.in, m.out, m.toDLQ, m.commits, m.rollbacks, m.timerEnqueue, m.timerDequeue} {
		if n := c.size(); n != 1 && !(c == m.out && n == 2) {
			t.Errorf("%v counts %d label sets, want those left in the scrape", c.names, n)
		}
	}
}

// Sends and deletions racing on the same topics leave the label sets
// counted and the vectors' series in agreement: a deletion never leaves
// a counted label set without its series, or a series uncounted.
func TestCappedSeriesAgreeUnderChurn(t *testing.T) {
	m, _ := cappedBroker(8)
	topics := []string{"C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9"}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				topic := topics[(i*7+w)%len(topics)]
				if (i+w)%5 == 0 {
					m.TopicDeleted(topic)
				} else {
					m.In(topic, TypeNormal, false, 1, 10)
				}
			}
		})
	}
	wg.Wait()
	real := 0
	for _, r := range gather(t, m, MessagesInTotal) {
		if !strings.Contains(r.labels, OverflowValue) {
			real++
		}
	}
	if n := m.in.size(); n != real || n > 7 {
		t.Errorf("%d label sets counted, %d series in the scrape, limit 8 (7 and the overflow series)", n, real)
	}
}

// A metric capped at limit holds at most limit series, its overflow
// series among them, as OTel's cardinality limit (RocketMQ's) keeps
// limit-1 attribute sets and the overflow one: at limit 1 every label set
// is counted in the overflow series.
func TestCardinalityLimitCountsTheOverflowSeries(t *testing.T) {
	for _, limit := range []int{1, 2, 5} {
		m, _ := cappedBroker(limit)
		for i := range limit + 3 {
			m.In("E"+strings.Repeat("x", i), TypeNormal, false, 1, 10)
			m.TimerDequeued("E" + strings.Repeat("x", i))
		}
		for _, name := range []string{MessagesInTotal, UnitSuffixed.Name(TimerDequeueTotal)} {
			got := gather(t, m, name)
			if len(got) != limit {
				t.Errorf("limit %d: %s holds %d series, want %d: %v", limit, name, len(got), limit, got)
			}
			var overflowed float64
			for _, r := range got {
				if strings.Contains(r.labels, OverflowValue) {
					overflowed = r.value
				}
			}
			if overflowed != 4 {
				t.Errorf("limit %d: %s overflow series counts %v, want the 4 label sets past the %d held", limit, name, overflowed, limit-1)
			}
		}
	}
}
