package broker

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
)

// timerMetrics is the body of GET_TIMER_METRICS, RocketMQ's
// TimerMetricsSerializeWrapper: the timer messages waiting by REAL_TOPIC
// and the data version of that table.
type timerMetrics struct {
	DataVersion meta.DataVersion       `json:"dataVersion"`
	TimingCount map[string]timerMetric `json:"timingCount"`
}

// timerMetric is one topic's row of timerMetrics (RocketMQ's
// TimerMetrics.Metric).
type timerMetric struct {
	Count     int64 `json:"count"`
	TimeStamp int64 `json:"timeStamp"`
}

// parseTimerMetrics decodes a GET_TIMER_METRICS answer.
func parseTimerMetrics(body []byte) (timerMetrics, error) {
	var m timerMetrics
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("decode the timer metrics: %w", err)
	}
	if m.TimingCount == nil {
		m.TimingCount = map[string]timerMetric{}
	}
	return m, nil
}

// applyMasterTimerMetrics takes over the master's timer metrics when
// their data version differs from the copy's, as RocketMQ's
// SlaveSynchronize.syncTimerMetrics (in syncAll, so with the full sync)
// replaces its slave's TimerMetrics table and version; the slave answers
// GET_TIMER_METRICS and rocketmq_timing_messages from the copy
// (slaveTimerMetrics).
func (b *Broker) applyMasterTimerMetrics(body []byte) error {
	m, err := parseTimerMetrics(body)
	if err != nil {
		return err
	}
	if prev := b.repl.masterTimerMetrics.Load(); prev != nil && prev.DataVersion == m.DataVersion {
		return nil
	}
	b.repl.masterTimerMetrics.Store(&m)
	return nil
}

// slaveTimerMetrics returns the master's timer metrics as this slave last
// copied them; ok is false on a master, or before the first copy (the
// slave's own count answers then).
func (b *Broker) slaveTimerMetrics() (timerMetrics, bool) {
	if !b.isSlave() {
		return timerMetrics{}, false
	}
	m := b.repl.masterTimerMetrics.Load()
	if m == nil {
		return timerMetrics{}, false
	}
	return *m, true
}

// copiedTimingRows are the series of rocketmq_timing_messages from the
// master's timer metrics a slave copied: the topics with the most
// messages waiting first (ties by name), at most limit of them, topics
// with none left out as from the slave's own count; and how many topics
// have some.
func copiedTimingRows(m timerMetrics, limit int) ([]metrics.TopicMessages, int) {
	rows := make([]metrics.TopicMessages, 0, len(m.TimingCount))
	for topic, c := range m.TimingCount {
		if c.Count > 0 {
			rows = append(rows, metrics.TopicMessages{Topic: topic, Messages: c.Count})
		}
	}
	topics := len(rows)
	slices.SortFunc(rows, func(a, c metrics.TopicMessages) int {
		return cmp.Or(cmp.Compare(c.Messages, a.Messages), strings.Compare(a.Topic, c.Topic))
	})
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, topics
}
