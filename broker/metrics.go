package broker

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
)

// countTTL is how long a counted number of topics or groups serves
// scrapes: counting scans a keyspace (a million keys at a million topics).
const countTTL = time.Minute

// startMetrics starts the Prometheus exporter when metricsExporterType is
// PROM, on metricsPromExporterHost (brokerIP1 when empty, as RocketMQ) and
// metricsPromExporterPort.
func (b *Broker) startMetrics() error {
	if b.cfg.MetricsExporterType != configs.MetricsPROM {
		return nil
	}
	labels := map[string]string{}
	for _, pair := range strings.Split(b.cfg.MetricsLabel, ",") {
		k, v, ok := strings.Cut(pair, ":")
		if pair == "" {
			continue
		}
		if !ok || k == "" || strings.Contains(v, ":") {
			b.log.Warn().Str("metricsLabel", b.cfg.MetricsLabel).Str("pair", pair).Msg("metricsLabel pair is not key:value; ignored")
			continue
		}
		labels[k] = v
	}
	labels["node_type"] = "broker"
	labels["cluster"] = b.cfg.BrokerClusterName
	labels["node_id"] = b.cfg.BrokerName
	topics := &cachedCount{ttl: countTTL, count: b.topics.table.Count}
	groups := &cachedCount{ttl: countTTL, count: b.groups.Count}
	b.metrics = metrics.New(labels, metrics.Sources{
		BrokerPermission:    b.permission,
		TopicCount:          func() int { return topics.get(b.log) },
		ConsumerGroupCount:  func() int { return groups.get(b.log) },
		Producers:           b.clients.producerMetrics,
		Consumers:           b.clients.consumerMetrics,
		DispatchBehindBytes: b.disp.Lag,
		FlushBehindBytes:    func() int64 { return max(0, b.clog.MaxOffset()-b.clog.FlushedOffset()) },
	})
	host := b.cfg.MetricsPromExporterHost
	if host == "" {
		host = b.hostIP.String()
	}
	exp, err := metrics.Serve(net.JoinHostPort(host, strconv.Itoa(b.cfg.MetricsPromExporterPort)), b.metrics, b.component("metrics"))
	if err != nil {
		return err
	}
	b.exporter = exp
	return nil
}

// stopMetrics stops the exporter.
func (b *Broker) stopMetrics(ctx context.Context) error {
	if b.exporter == nil {
		return nil
	}
	err := b.exporter.Close(ctx)
	b.exporter = nil
	return err
}

// MetricsAddr returns the address of the Prometheus exporter, or nil when
// it is off.
func (b *Broker) MetricsAddr() net.Addr {
	if b.exporter == nil {
		return nil
	}
	return b.exporter.Addr()
}

// countIn counts a producer's send of n records (bytes in all) to topic,
// as RocketMQ does: not sends to retry or dead-letter topics, typed by the
// properties of the send.
func (b *Broker) countIn(topic, props string, n int, bytes int64) {
	if b.metrics == nil || meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) {
		return
	}
	b.metrics.In(topic, messageTypeOf(props), b.isSystemTopic(topic), n, bytes)
}

// countOut counts n records (bytes in all) of topic delivered to group.
func (b *Broker) countOut(topic, group string, n int, bytes int) {
	if b.metrics == nil || meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) {
		return
	}
	b.metrics.Out(topic, group, b.isSystemTopic(topic) || strings.HasPrefix(group, "CID_RMQ_SYS_"), n, int64(bytes))
}

// messageTypeOf is RocketMQ's TopicMessageType of a send's properties.
func messageTypeOf(props string) string {
	if v, _ := commitlog.LookupProperty(props, "TRAN_MSG"); v == "true" {
		return metrics.TypeTransaction
	}
	for _, k := range []string{"DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"} {
		if _, ok := commitlog.LookupProperty(props, k); ok {
			return metrics.TypeDelay
		}
	}
	if _, ok := commitlog.LookupProperty(props, "__SHARDINGKEY"); ok {
		return metrics.TypeFIFO
	}
	return metrics.TypeNormal
}

// cachedCount is a count kept for ttl.
type cachedCount struct {
	ttl   time.Duration
	count func() (int, error)

	mu sync.Mutex
	at time.Time
	n  int
}

func (c *cachedCount) get(log zerolog.Logger) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.ttl {
		return c.n
	}
	n, err := c.count()
	if err != nil {
		log.Warn().Err(err).Msg("count for metrics")
		return c.n
	}
	c.n, c.at = n, time.Now()
	return n
}
