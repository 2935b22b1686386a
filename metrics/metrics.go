// Package metrics exposes a broker's metrics to Prometheus under the names
// and labels RocketMQ 5 uses when it runs with metricsExporterType=PROM,
// so that dashboards and alerts written for RocketMQ 5 read rocketkv
// unchanged. A controller's metrics (RocketMQ's ControllerMetricsManager)
// are Controller's (controller.go), served by the same Exporter.
//
// Counters (messages and bytes in and out) and histograms are kept here
// and fed by the broker's processors (the POP counters by its POP
// service), rocketmq_rpc_latency by the
// remoting servers (Answered, their OnAnswer); gauges (permission, topic
// and group numbers, connections, the store's, the consumers' lag, in
// flight and ready messages, the timer's, the POP revive backlog, the
// transactions open) are read from
// the broker at each scrape
// through Sources. Every series carries the
// broker's constant labels: cluster, node_type="broker", node_id (the
// broker name) and the pairs of metricsLabel.
//
// Names: RocketMQ 5.1.4 and later append a metric's unit to its name
// (rocketmq_rpc_latency_milliseconds), 5.0 to 5.1.3 do not; New takes the
// Naming to serve (names.go).
//
// Cardinality: like RocketMQ's, the message counters have a series per
// topic (and per consumer group for the out counters); the exporter is
// off unless metricsExporterType=PROM. Two things bound them:
//
//   - Deletion: the series of a topic go when the topic is deleted
//     (TopicDeleted), and those of a consumer group when its
//     subscription group is (GroupDeleted), so topics and groups that
//     come and go leave nothing behind.
//   - A cap: RocketMQ 5.3 caps each metric at metricsOtelCardinalityLimit
//     series (DefaultCardinalityLimit, 50,000), OTel's cardinality limit,
//     which records what the label sets past the limit measure in one
//     overflow series carrying the attribute otel.metric.overflow=true
//     and none of the others. A Prometheus vector cannot add a label to
//     some of its series (a registry refuses a name collected with two
//     label sets), so here the overflow series of a metric has the
//     metric's own labels, each with the value OverflowValue
//     ("otel_metric_overflow"): the nearest Prometheus shape, one series
//     a query can select or exclude by any of its labels. The first
//     overflow of a metric logs a warning (Sources.Log). A series
//     deleted frees its room; the overflow series stays, cumulative.
//     rocketmq_messages_out_total and rocketmq_throughput_out_total
//     count their pull series (no is_retry) and pop series together, and
//     overflow into one series of each shape.
//
// The cap covers the metrics the processors feed, whose label sets come
// from topic and group names. rocketmq_rpc_latency and the creation-time
// histograms have a bounded set of label values (rpc.go); the gauges
// read at a scrape (lags, connections, timing messages) show only the
// live groups, clients and topics of that scrape, keep nothing between
// scrapes, and are not capped.
package metrics

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
)

// Metric names, as RocketMQ 5's BrokerMetricsConstant and
// DefaultStoreMetricsConstant spell them: the bare names. Naming.Name
// gives the name a scrape shows, which from RocketMQ 5.1.4 on carries the
// metric's unit.
const (
	MessagesInTotal       = "rocketmq_messages_in_total"
	MessagesOutTotal      = "rocketmq_messages_out_total"
	ThroughputInTotal     = "rocketmq_throughput_in_total"
	ThroughputOutTotal    = "rocketmq_throughput_out_total"
	BrokerPermission      = "rocketmq_broker_permission"
	TopicNumber           = "rocketmq_topic_number"
	ConsumerGroupNumber   = "rocketmq_consumer_group_number"
	ProducerConnections   = "rocketmq_producer_connections"
	ConsumerConnections   = "rocketmq_consumer_connections"
	StorageDispatchBehind = "rocketmq_storage_dispatch_behind_bytes"
	StorageFlushBehind    = "rocketmq_storage_flush_behind_bytes"
	StorageSize           = "rocketmq_storage_size"
	StorageReserveTime    = "rocketmq_storage_message_reserve_time"
	ConsumerLagMessages   = "rocketmq_consumer_lag_messages"
	ConsumerLagLatency    = "rocketmq_consumer_lag_latency"
	ConsumerInflight      = "rocketmq_consumer_inflight_messages"
	ConsumerReady         = "rocketmq_consumer_ready_messages"
	ConsumerQueueing      = "rocketmq_consumer_queueing_latency"
	SendToDLQTotal        = "rocketmq_send_to_dlq_messages_total"
	CommitMessagesTotal   = "rocketmq_commit_messages_total"
	RollbackMessagesTotal = "rocketmq_rollback_messages_total"
	HalfMessages          = "rocketmq_half_messages"
	MessageSize           = "rocketmq_message_size"
	FinishMessageLatency  = "rocketmq_finish_message_latency"
	TopicCreateTime       = "rocketmq_topic_create_execution_time"
	GroupCreateTime       = "rocketmq_consumer_group_create_execution_time"
	TimerEnqueueTotal     = "rocketmq_timer_enqueue_total"
	TimerDequeueTotal     = "rocketmq_timer_dequeue_total"
	DelayMessageLatency   = "rocketmq_delay_message_latency"
	TimerEnqueueLag       = "rocketmq_timer_enqueue_lag"
	TimerEnqueueLatency   = "rocketmq_timer_enqueue_latency"
	TimerDequeueLag       = "rocketmq_timer_dequeue_lag"
	TimerDequeueLatency   = "rocketmq_timer_dequeue_latency"
	TimingMessages        = "rocketmq_timing_messages"
	TimerMessageSnapshot  = "rocketmq_timer_message_snapshot"
	// The POP metrics of RocketMQ's PopMetricsConstant (see PopRevivePut
	// and PopReviveBacklog for what rocketkv counts under them).
	PopReviveInTotal    = "rocketmq_pop_revive_in_message_total"
	PopReviveOutTotal   = "rocketmq_pop_revive_out_message_total"
	PopReviveRetryTotal = "rocketmq_pop_revive_retry_messages_total"
	PopReviveLag        = "rocketmq_pop_revive_lag"
	PopReviveLatency    = "rocketmq_pop_revive_latency"
	// HADiverged is rocketkv's own: 1 on a slave that refuses to
	// replicate because its CommitLog holds records its master does not
	// have (ha.ErrDiverged) or, in controller mode, its epochs share none
	// with its master's (autoswitch.ErrNoConsistentPoint), else 0.
	// RocketMQ exports no replication metric.
	HADiverged = "rocketkv_ha_diverged"
)

// TimerBounds are the windows of rocketmq_timer_message_snapshot, in
// seconds ahead (RocketMQ's TimerMetrics timerDist): 5 s, 1 min, 5 min,
// 15 min, 1 h, 4 h, 8 h, 24 h.
var TimerBounds = []int{5, 60, 300, 900, 3600, 14400, 28800, 86400}

// TimerCensus is what the timer gauges read at a scrape.
type TimerCensus struct {
	// EnqueueLag counts the timer messages stored and not yet taken into
	// the timer (rocketmq_timer_enqueue_lag: RocketMQ counts the
	// messages of its timer topic's queue past its timer's read
	// position; rocketkv's timer takes a message in as the dispatcher
	// indexes it).
	EnqueueLag int64
	// EnqueueLatencyMillis is how long the timer is behind in taking
	// messages in, in ms (rocketmq_timer_enqueue_latency).
	EnqueueLatencyMillis int64
	// Timing counts the timer messages waiting by destination topic
	// (rocketmq_timing_messages); nil leaves the metric out.
	Timing []TopicMessages
	// Waiting counts the timer messages not yet delivered
	// (rocketmq_timer_dequeue_lag: RocketMQ counts every message left in
	// its timing wheel).
	Waiting int64
	// BehindSeconds is how far the timer's read time is behind the clock,
	// in seconds (rocketmq_timer_dequeue_latency: RocketMQ's
	// getDequeueBehind, recorded in seconds under the unit ms).
	BehindSeconds int64
	// Within counts the messages due in each window of TimerBounds.
	Within []int64
}

// The revive_message_type label of the POP revive counters
// (PopReviveMessageType's names): a checkpoint, or an ack.
const (
	ReviveCK  = "CK"
	ReviveACK = "ACK"
)

// PutOK is the put_status of a put that stored its message
// (PutMessageStatus.PUT_OK).
const PutOK = "PUT_OK"

// ReviveBacklog is what the POP revive gauges read at a scrape.
type ReviveBacklog struct {
	// Due counts the checkpoints whose deadline passed and that revive
	// has not handled yet (rocketmq_pop_revive_lag).
	Due int64
	// BehindMillis is how long the earliest of them has been due, in ms
	// (rocketmq_pop_revive_latency); 0 when none is.
	BehindMillis int64
}

// TopicMessages is a number of messages of one topic.
type TopicMessages struct {
	Topic    string
	Messages int64
}

// The buckets of the histograms, as RocketMQ 5 registers their views:
// message sizes in bytes, transaction finish latencies in seconds (RocketMQ
// records seconds though it names the unit ms), creation times in ms.
var (
	messageSizeBuckets   = []float64{1 << 10, 4 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}
	finishLatencyBuckets = []float64{5, 60, 10 * 60, 60 * 60, 12 * 60 * 60, 24 * 60 * 60}
	createTimeBuckets    = []float64{10, 100, 1000, 3000, 5000}
	// delayLatencyBuckets are seconds from a timer message's birth to its
	// delivery time: 1 min, 10 min, 1 h, 12 h, 1 day, 3 days.
	delayLatencyBuckets = []float64{60, 600, 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600}
)

// Message types of the message_type label (TopicMessageType's metrics
// values).
const (
	TypeNormal      = "normal"
	TypeFIFO        = "fifo"
	TypeDelay       = "delay"
	TypeTransaction = "transaction"
)

// Connection is one row of the connection gauges: how many live clients
// share these labels.
type Connection struct {
	// Group is the consumer group; empty for producers.
	Group string
	// Language and Version are the client's, lower case ("go", "v5_3_3").
	Language, Version string
	// ConsumeMode is "push", "pull" or "pop" for consumers.
	ConsumeMode string
	// System marks a system consumer group.
	System bool
	Count  int
}

// Lag is how far one consumer group is behind on one topic, the
// consumer gauges of RocketMQ's ConsumerLagCalculator. A queue's messages
// fall in three spans: committed (or acknowledged), in flight (delivered
// by a pull or a pop, not yet committed or acknowledged) and ready
// (stored, not yet delivered); the lag is the last two.
type Lag struct {
	Group, Topic  string
	Retry, System bool
	// Messages are those past the committed offsets, and LatencyMillis
	// how long ago the oldest of them was stored (0 when none is
	// waiting): rocketmq_consumer_lag_messages and _latency.
	Messages      int64
	LatencyMillis int64
	// Inflight are the messages delivered and not yet committed or
	// acknowledged: rocketmq_consumer_inflight_messages.
	Inflight int64
	// Ready are the messages stored and not yet delivered, and
	// QueueingMillis how long ago the oldest of them was stored (0 when
	// none is ready): rocketmq_consumer_ready_messages and
	// rocketmq_consumer_queueing_latency.
	Ready          int64
	QueueingMillis int64
}

// Sources are the values read from the broker at each scrape. A nil
// function leaves its metric out. A Broker reads the Sources New got
// until Rebind gives it another broker's (a controller-mode broker's
// next role) or Detach takes them away (sources.go).
type Sources struct {
	BrokerPermission    func() int
	TopicCount          func() int
	ConsumerGroupCount  func() int
	Producers           func() []Connection
	Consumers           func() []Connection
	DispatchBehindBytes func() int64
	FlushBehindBytes    func() int64
	// StorageSize is the bytes used on the file system that holds the
	// store, and MessageReserveMillis how long ago the oldest message the
	// CommitLog still holds was stored; ok false leaves the series out
	// of the scrape, as RocketMQ leaves it out when it cannot tell.
	StorageSize          func() (bytes int64, ok bool)
	MessageReserveMillis func() (millis int64, ok bool)
	// Lags feeds the consumer gauges (enableLagAndDlqMetrics): lag,
	// in flight, ready and queueing latency. ctx ends when the sources
	// are detached or replaced (Detach, Rebind), which wait for Lags to
	// return: a computation over many queues checks it between them and
	// returns what it has (nil leaves the gauges out of that scrape).
	Lags func(ctx context.Context) []Lag
	// Timers feeds the timer gauges (enqueue and dequeue lag and
	// latency, timing messages, the snapshot); ok false leaves them out
	// of the scrape.
	Timers func() (TimerCensus, bool)
	// PopRevive feeds the POP revive gauges (rocketmq_pop_revive_lag
	// and _latency, one series with queue_id="0": rocketkv revives from
	// one deadline index, where RocketMQ has a revive service per queue of
	// its revive topic); nil leaves them out.
	PopRevive func() ReviveBacklog
	// HalfMessages feeds rocketmq_half_messages: the transactions open,
	// by the topic their message is sent to (a series per topic with
	// some); nil leaves it out, and so does enableTransactionMetrics=false.
	HalfMessages func() []TopicMessages
	// Diverged feeds rocketkv_ha_diverged, a slave's only: nil (a
	// master's) leaves it out. It is no part of the layout (Rebind): a
	// controller-mode master's metrics and its slave's are the same.
	Diverged func() bool
	// Off turns families of metrics off; the zero value serves them all.
	Off Families
	// CardinalityLimit caps the series of each metric the processors
	// feed (metricsOtelCardinalityLimit); <= 0 means
	// DefaultCardinalityLimit. See the package doc.
	CardinalityLimit int
	// Log gets the warning a metric logs when it first reaches its
	// cardinality limit; the zero Logger logs nothing.
	Log zerolog.Logger
}

// Families names the families of metrics RocketMQ 5.3's switches turn
// off, each set one off.
type Families struct {
	// Stats: broker permission, topic and group counts
	// (enableStatsMetrics=false).
	Stats bool
	// Request: messages and bytes in and out, message sizes, topic and
	// group creation times (enableRequestMetrics=false).
	Request bool
	// Connection: producer and consumer connections
	// (enableConnectionMetrics=false).
	Connection bool
	// Transaction: commits, rollbacks, finish latency, half messages
	// (enableTransactionMetrics=false).
	Transaction bool
	// Remoting: rocketmq_rpc_latency (enableRemotingMetrics=false).
	Remoting bool
	// Store: the storage and timer metrics
	// (enableMessageStoreMetrics=false).
	Store bool
	// Pop: the POP counters and revive gauges (enablePopMetrics=false).
	// Unlike the other families, whose counters count unseen, the POP
	// counters then count nothing: RocketMQ's PopMetricsManager keeps
	// no-op counters unless it is on.
	Pop bool
}

// variableLabels are the label names the metrics set per series; a
// constant label of the same name would clash with them.
var variableLabels = map[string]bool{
	"topic": true, "message_type": true, "is_system": true, "consumer_group": true, "is_retry": true,
	"language": true, "version": true, "protocol_type": true, "consume_mode": true,
	"cluster": true, "node_type": true, "node_id": true, "invocation_status": true,
	"request_code": true, "response_code": true, "is_long_polling": true, "result": true,
	"storage_type": true, "storage_medium": true, "timer_bound_s": true,
	"revive_message_type": true, "put_status": true, "queue_id": true,
}

// ValidConstLabel reports whether name may be a constant label (from
// metricsLabel): a Prometheus label name that none of the metrics uses
// already, and not one of the labels New always sets. Names are checked
// against the classic character set ([a-zA-Z_][a-zA-Z0-9_]*) that every
// Prometheus server accepts.
func ValidConstLabel(name string) bool {
	return validLabelName(name) && !variableLabels[name]
}

// validLabelName reports whether name is a label name of the classic
// character set that is not reserved (a leading "__").
func validLabelName(name string) bool {
	return model.LegacyValidation.IsValidLabelName(name) && !strings.HasPrefix(name, "__")
}

// Broker holds one broker's metrics. A nil *Broker ignores every call, so
// the processors need not ask whether the exporter is on.
type Broker struct {
	reg *prometheus.Registry
	// in holds rocketmq_messages_in_total, rocketmq_throughput_in_total
	// and rocketmq_message_size, which a send feeds together.
	in *capped
	// out holds rocketmq_messages_out_total and
	// rocketmq_throughput_out_total: the series of pulls (shapePull) and
	// of pops (shapePop), which RocketMQ labels with is_retry.
	out   *capped
	toDLQ *capped
	// commits holds rocketmq_commit_messages_total and
	// rocketmq_finish_message_latency, fed by each commit.
	commits   *capped
	rollbacks *capped
	// timerEnqueue holds rocketmq_timer_enqueue_total and
	// rocketmq_delay_message_latency, fed by each timer message taken in.
	timerEnqueue *capped
	timerDequeue *capped
	// popReviveIn, popReviveOut and popRetry hold the POP counters
	// (PopRevivePut, PopReviveGot, PopRetried).
	popReviveIn  *capped
	popReviveOut *capped
	popRetry     *capped
	// popOff: the POP family is off (Families.Pop), its counters fed
	// nothing.
	popOff bool
	// topicCreate and groupCreate have a few series each, whatever the
	// topics and groups (invocation_status, is_system): not capped.
	topicCreate *prometheus.HistogramVec
	groupCreate *prometheus.HistogramVec
	rpc         *rpcSeries
	// sources are what the gauges read (Rebind, Detach), and layout
	// what New registered for them.
	sources bound
	layout  layout
}

// The shapes of Broker.out.
const (
	shapePull = 0
	shapePop  = 1
)

// New builds the metrics of a broker with the given constant labels,
// named as names says.
func New(labels map[string]string, src Sources, names Naming) *Broker {
	c := prometheus.Labels(labels)
	in := []string{"topic", "message_type", "is_system"}
	out := []string{"topic", "consumer_group", "is_system"}
	popOut := []string{"topic", "consumer_group", "is_system", "is_retry"}
	dlq := []string{"consumer_group", "topic", "is_system"}
	byTopic := []string{"topic"}
	// A pull's and a pop's series of one metric share its help.
	outOpts := prometheus.CounterOpts{Name: names.Name(MessagesOutTotal),
		Help: "Messages delivered by pulls (not of retry or dead-letter topics) and pops (is_retry: from the group's pop-retry topics).", ConstLabels: c}
	outBytesOpts := prometheus.CounterOpts{Name: names.Name(ThroughputOutTotal),
		Help: "Bytes of the records delivered by pulls and pops.", ConstLabels: c}
	messagesIn := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(MessagesInTotal),
		Help: "Messages stored by producers' sends (not retries or dead letters).", ConstLabels: c}, in)
	throughputIn := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(ThroughputInTotal),
		Help: "Bytes of the CommitLog records stored by producers' sends.", ConstLabels: c}, in)
	messagesOut := prometheus.NewCounterVec(outOpts, out)
	throughputOut := prometheus.NewCounterVec(outBytesOpts, out)
	popMessagesOut := prometheus.NewCounterVec(outOpts, popOut)
	popThroughputOut := prometheus.NewCounterVec(outBytesOpts, popOut)
	toDLQ := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(SendToDLQTotal),
		Help: "Messages moved to a group's dead-letter topic (send-back or POP revive past retryMaxTimes).", ConstLabels: c}, dlq)
	commits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(CommitMessagesTotal),
		Help: "Transactional messages committed by END_TRANSACTION.", ConstLabels: c}, byTopic)
	rollbacks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(RollbackMessagesTotal),
		Help: "Transactional messages rolled back by END_TRANSACTION.", ConstLabels: c}, byTopic)
	messageSize := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(MessageSize),
		Help: "Size in bytes of the records stored by producers' sends (the mean of a batch).", ConstLabels: c,
		Buckets: messageSizeBuckets}, in)
	finishLatency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(FinishMessageLatency),
		Help: "Seconds from a transactional message's birth to its commit.", ConstLabels: c,
		Buckets: finishLatencyBuckets}, byTopic)
	// The store's metrics carry DefaultStoreMetricsManager's two labels.
	sc := prometheus.Labels{"storage_type": "local", "storage_medium": "disk"}
	maps.Copy(sc, c)
	timerEnqueue := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(TimerEnqueueTotal),
		Help: "Timer messages taken in, by destination topic.", ConstLabels: sc}, byTopic)
	timerDequeue := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(TimerDequeueTotal),
		Help: "Timer messages delivered, by destination topic.", ConstLabels: sc}, byTopic)
	delayLatency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(DelayMessageLatency),
		Help: "Seconds from a timer message's birth to its delivery time, when taken in.", ConstLabels: sc,
		Buckets: delayLatencyBuckets}, byTopic)
	// RocketMQ's PopMetricsManager labels its counters by the
	// checkpoint's or the ack's group and topic.
	reviveIn := []string{"consumer_group", "topic", "revive_message_type", "put_status"}
	reviveOut := []string{"consumer_group", "topic", "queue_id", "revive_message_type"}
	popRetry := []string{"consumer_group", "topic", "put_status"}
	popReviveIn := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(PopReviveInTotal),
		Help: "POP checkpoints written (CK: a pop of a queue, a change of invisible time) and acks applied (ACK: an ack, a batch ack entry, a change of invisible time), non-orderly.", ConstLabels: c}, reviveIn)
	popReviveOut := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(PopReviveOutTotal),
		Help: "POP checkpoints read by revive once their deadline passed with messages not acknowledged.", ConstLabels: c}, reviveOut)
	popRetryTotal := prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(PopReviveRetryTotal),
		Help: "Messages revive put to a group's pop-retry topic, by the topic popped.", ConstLabels: c}, popRetry)
	limit, log := src.CardinalityLimit, src.Log
	m := &Broker{
		reg: prometheus.NewRegistry(),
		in: newCapped(limit, log, []string{names.Name(MessagesInTotal), names.Name(ThroughputInTotal), names.Name(MessageSize)},
			shape{labels: in, count: messagesIn, bytes: throughputIn, hist: messageSize}),
		out: newCapped(limit, log, []string{names.Name(MessagesOutTotal), names.Name(ThroughputOutTotal)},
			shape{labels: out, count: messagesOut, bytes: throughputOut},
			shape{labels: popOut, count: popMessagesOut, bytes: popThroughputOut}),
		toDLQ: newCapped(limit, log, []string{names.Name(SendToDLQTotal)}, shape{labels: dlq, count: toDLQ}),
		commits: newCapped(limit, log, []string{names.Name(CommitMessagesTotal), names.Name(FinishMessageLatency)},
			shape{labels: byTopic, count: commits, hist: finishLatency}),
		rollbacks: newCapped(limit, log, []string{names.Name(RollbackMessagesTotal)}, shape{labels: byTopic, count: rollbacks}),
		timerEnqueue: newCapped(limit, log, []string{names.Name(TimerEnqueueTotal), names.Name(DelayMessageLatency)},
			shape{labels: byTopic, count: timerEnqueue, hist: delayLatency}),
		timerDequeue: newCapped(limit, log, []string{names.Name(TimerDequeueTotal)}, shape{labels: byTopic, count: timerDequeue}),
		popReviveIn:  newCapped(limit, log, []string{names.Name(PopReviveInTotal)}, shape{labels: reviveIn, count: popReviveIn}),
		popReviveOut: newCapped(limit, log, []string{names.Name(PopReviveOutTotal)}, shape{labels: reviveOut, count: popReviveOut}),
		popRetry:     newCapped(limit, log, []string{names.Name(PopReviveRetryTotal)}, shape{labels: popRetry, count: popRetryTotal}),
	}
	m.topicCreate = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(TopicCreateTime),
		Help: "Milliseconds an UPDATE_AND_CREATE_TOPIC(_LIST) took.", ConstLabels: c,
		Buckets: createTimeBuckets}, []string{"invocation_status", "is_system"})
	m.groupCreate = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(GroupCreateTime),
		Help: "Milliseconds an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP(_LIST) took.", ConstLabels: c,
		Buckets: createTimeBuckets}, []string{"invocation_status"})
	rpc := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(RPCLatency),
		Help: "Milliseconds from the read of a request to its answer (a long-polling hold included).", ConstLabels: c,
		Buckets: rpcLatencyBuckets}, []string{"protocol_type", "request_code", "response_code", "is_long_polling", "result"})
	m.rpc = newRPCSeries(rpc)
	// A family turned off is not registered: its counters still count,
	// unseen, but for the POP ones, which count nothing (RocketMQ
	// creates its POP instruments only under enablePopMetrics).
	off := src.Off
	src = prepare(src)
	m.layout = layoutOf(labels, &src, names)
	m.sources.set(&src)
	m.reg.MustRegister(toDLQ)
	m.popOff = off.Pop
	if !off.Pop {
		m.reg.MustRegister(popReviveIn, popReviveOut, popRetryTotal)
	}
	if !off.Request {
		m.reg.MustRegister(messagesIn, throughputIn, messageSize, m.topicCreate, m.groupCreate,
			unchecked{messagesOut, throughputOut, popMessagesOut, popThroughputOut})
	}
	if !off.Transaction {
		m.reg.MustRegister(commits, rollbacks, finishLatency)
	}
	if !off.Store {
		m.reg.MustRegister(timerEnqueue, timerDequeue, delayLatency)
	}
	if !off.Remoting {
		m.reg.MustRegister(rpc)
	}
	// The gauges read the sources bound at each scrape (bound), which
	// Rebind replaces and Detach takes away; the layout says which
	// they are.
	has := func(bit uint32) bool { return m.layout.has&bit != 0 }
	// gauge registers, when on, a gauge of the value get takes from the
	// sources bound; a scrape without one (sources detached, or the
	// source not set, or without a value) leaves the gauge out.
	gauge := func(on bool, name, help string, cl prometheus.Labels, get func(s *Sources) (int64, bool)) {
		if on {
			m.reg.MustRegister(&maybeGauge{desc: prometheus.NewDesc(name, help, nil, cl),
				f: func() (int64, bool) { return readSource(&m.sources, get) }})
		}
	}
	gauge(has(hasPermission), names.Name(BrokerPermission), "brokerPermission: 4 read, 2 write.", c,
		func(s *Sources) (int64, bool) { return count(s.BrokerPermission) })
	gauge(has(hasTopics), names.Name(TopicNumber), "Topics of the broker.", c,
		func(s *Sources) (int64, bool) { return count(s.TopicCount) })
	gauge(has(hasGroups), names.Name(ConsumerGroupNumber), "Subscription groups of the broker.", c,
		func(s *Sources) (int64, bool) { return count(s.ConsumerGroupCount) })
	gauge(has(hasDispatch), names.Name(StorageDispatchBehind), "CommitLog bytes not yet indexed.", sc,
		func(s *Sources) (int64, bool) { return count(s.DispatchBehindBytes) })
	gauge(has(hasFlush), names.Name(StorageFlushBehind), "CommitLog bytes not yet flushed to disk.", sc,
		func(s *Sources) (int64, bool) { return count(s.FlushBehindBytes) })
	gauge(has(hasSize), names.Name(StorageSize), "Bytes used on the file system that holds the store (its size minus its free bytes).", sc,
		func(s *Sources) (int64, bool) { return optional(s.StorageSize) })
	gauge(has(hasReserve), names.Name(StorageReserveTime), "Milliseconds since the oldest message still stored was stored.", sc,
		func(s *Sources) (int64, bool) { return optional(s.MessageReserveMillis) })
	// Registered whatever the sources: a master has none and serves no
	// series, as RocketMQ's brokers export no such metric, and the slave
	// it may become in controller mode (which has one) serves the same
	// layout, so that the Rebind of a role switch keeps the counters.
	gauge(true, HADiverged, "1 while this slave refuses to replicate: its CommitLog holds records its master does not have.", c,
		func(s *Sources) (int64, bool) {
			d, ok := always(s.Diverged)
			if d {
				return 1, ok
			}
			return 0, ok
		})
	if has(hasProducers) || has(hasConsumers) {
		m.reg.MustRegister(&connections{src: &m.sources,
			producers: prometheus.NewDesc(names.Name(ProducerConnections), "Live producer clients.",
				[]string{"language", "version", "protocol_type"}, c),
			consumers: prometheus.NewDesc(names.Name(ConsumerConnections), "Live consumer clients.",
				[]string{"consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"}, c),
		})
	}
	if has(hasHalf) {
		m.reg.MustRegister(&topicGauge{desc: prometheus.NewDesc(names.Name(HalfMessages),
			"Transactions not yet ended (their half messages), by the topic their message is sent to.", []string{"topic"}, c),
			src: func() []TopicMessages {
				rows, _ := readSource(&m.sources, func(s *Sources) ([]TopicMessages, bool) { return always(s.HalfMessages) })
				return rows
			}})
	}
	if has(hasTimers) {
		m.reg.MustRegister(&timerGauges{
			src: func() (TimerCensus, bool) {
				return readSource(&m.sources, func(s *Sources) (TimerCensus, bool) { return optional(s.Timers) })
			},
			enqueueLag: prometheus.NewDesc(names.Name(TimerEnqueueLag), "Timer messages stored and not yet indexed by the timer.", nil, sc),
			enqueueLatency: prometheus.NewDesc(names.Name(TimerEnqueueLatency),
				"Milliseconds the oldest timer message not yet indexed has waited; with none, since the last one indexed was stored, within 2 s of its indexing.", nil, sc),
			lag:      prometheus.NewDesc(names.Name(TimerDequeueLag), "Timer messages not yet delivered.", nil, sc),
			latency:  prometheus.NewDesc(names.Name(TimerDequeueLatency), "Seconds the timer's read time is behind the clock.", nil, sc),
			timing:   prometheus.NewDesc(names.Name(TimingMessages), "Timer messages waiting, by destination topic (less the cancels waiting).", []string{"topic"}, sc),
			snapshot: prometheus.NewDesc(names.Name(TimerMessageSnapshot), "Timer messages due within each bound (seconds ahead) past the one before.", []string{"timer_bound_s"}, sc),
		})
	}
	if has(hasRevive) {
		byQueue := []string{"queue_id"}
		m.reg.MustRegister(&reviveGauges{
			src: func() (ReviveBacklog, bool) {
				return readSource(&m.sources, func(s *Sources) (ReviveBacklog, bool) { return always(s.PopRevive) })
			},
			lag: prometheus.NewDesc(names.Name(PopReviveLag),
				"POP checkpoints due and not yet revived (a count, though RocketMQ declares the unit milliseconds).", byQueue, c),
			latency: prometheus.NewDesc(names.Name(PopReviveLatency),
				"Milliseconds the earliest POP checkpoint due and not yet revived has waited.", byQueue, c),
		})
	}
	if has(hasLags) {
		labels := []string{"consumer_group", "topic", "is_retry", "is_system"}
		m.reg.MustRegister(&lags{
			src: func() (rows []Lag) {
				m.sources.readContext(func(ctx context.Context, s *Sources) bool {
					if s.Lags != nil {
						rows = s.Lags(ctx)
					}
					return true
				})
				return rows
			},
			messages: prometheus.NewDesc(names.Name(ConsumerLagMessages), "Messages past the group's committed offsets.", labels, c),
			latency: prometheus.NewDesc(names.Name(ConsumerLagLatency),
				"Milliseconds since the oldest message past the group's committed offsets was stored.", labels, c),
			inflight: prometheus.NewDesc(names.Name(ConsumerInflight),
				"Messages pulled or popped and not yet committed or acknowledged.", labels, c),
			ready: prometheus.NewDesc(names.Name(ConsumerReady), "Messages stored and not yet pulled or popped.", labels, c),
			queueing: prometheus.NewDesc(names.Name(ConsumerQueueing),
				"Milliseconds since the oldest message not yet pulled or popped was stored.", labels, c),
		})
	}
	return m
}

// timerGauges collects the timer gauges at each scrape, from one census.
type timerGauges struct {
	src                                                        func() (TimerCensus, bool)
	enqueueLag, enqueueLatency, lag, latency, timing, snapshot *prometheus.Desc
}

func (g *timerGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.enqueueLag
	ch <- g.enqueueLatency
	ch <- g.lag
	ch <- g.latency
	ch <- g.timing
	ch <- g.snapshot
}

func (g *timerGauges) Collect(ch chan<- prometheus.Metric) {
	c, ok := g.src()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(g.enqueueLag, prometheus.GaugeValue, float64(c.EnqueueLag))
	ch <- prometheus.MustNewConstMetric(g.enqueueLatency, prometheus.GaugeValue, float64(c.EnqueueLatencyMillis))
	ch <- prometheus.MustNewConstMetric(g.lag, prometheus.GaugeValue, float64(c.Waiting))
	ch <- prometheus.MustNewConstMetric(g.latency, prometheus.GaugeValue, float64(c.BehindSeconds))
	var seen labelSet
	for _, t := range c.Timing {
		if !utf8.ValidString(t.Topic) {
			seen = labelSet{}
			break
		}
	}
	for _, t := range c.Timing {
		if v := label(t.Topic); seen.add([]string{v}) {
			ch <- prometheus.MustNewConstMetric(g.timing, prometheus.GaugeValue, float64(t.Messages), v)
		}
	}
	for i, b := range TimerBounds {
		if i < len(c.Within) {
			ch <- prometheus.MustNewConstMetric(g.snapshot, prometheus.GaugeValue, float64(c.Within[i]), strconv.Itoa(b))
		}
	}
}

// topicGauge collects a gauge with a series per topic at each scrape.
type topicGauge struct {
	src  func() []TopicMessages
	desc *prometheus.Desc
}

func (g *topicGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *topicGauge) Collect(ch chan<- prometheus.Metric) {
	rows := g.src()
	var seen labelSet
	for _, r := range rows {
		if !utf8.ValidString(r.Topic) {
			seen = labelSet{}
			break
		}
	}
	for _, r := range rows {
		if v := label(r.Topic); seen.add([]string{v}) {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(r.Messages), v)
		}
	}
}

// reviveGauges collects the POP revive gauges at each scrape.
type reviveGauges struct {
	src          func() (ReviveBacklog, bool)
	lag, latency *prometheus.Desc
}

func (g *reviveGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.lag
	ch <- g.latency
}

func (g *reviveGauges) Collect(ch chan<- prometheus.Metric) {
	r, ok := g.src()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(g.lag, prometheus.GaugeValue, float64(r.Due), "0")
	ch <- prometheus.MustNewConstMetric(g.latency, prometheus.GaugeValue, float64(r.BehindMillis), "0")
}

// PopRevivePut counts one record of what RocketMQ puts to its revive
// topic, of messages of topic (the topic popped: a pop-retry topic for
// retried messages) popped by group: kind ReviveCK for a checkpoint,
// ReviveACK for an ack; status is the put's (PutOK, or the name of
// RocketMQ's PutMessageStatus for the failure).
func (m *Broker) PopRevivePut(group, topic, kind, status string) {
	if m == nil || m.popOff {
		return
	}
	m.popReviveIn.get(seriesKey{vals: [maxCappedLabels]string{label(group), label(topic), kind, status}}).count.Inc()
}

// PopReviveGot counts a record revive read (RocketMQ's revive scan of its
// revive topic): kind ReviveCK or ReviveACK, of group's messages of topic;
// queueID is the revive queue, 0 for rocketkv.
func (m *Broker) PopReviveGot(group, topic string, queueID int, kind string) {
	if m == nil || m.popOff {
		return
	}
	m.popReviveOut.get(seriesKey{vals: [maxCappedLabels]string{label(group), label(topic), strconv.Itoa(queueID), kind}}).count.Inc()
}

// PopRetried counts n messages of group popped from topic that revive
// put to the group's pop-retry topic, with the put's status.
func (m *Broker) PopRetried(group, topic, status string, n int) {
	if m == nil || m.popOff || n <= 0 {
		return
	}
	m.popRetry.get(seriesKey{vals: [maxCappedLabels]string{label(group), label(topic), status}}).count.Add(float64(n))
}

// TimerEnqueued counts a timer message taken in for topic (its
// destination) and records how far ahead of its birth it is due.
func (m *Broker) TimerEnqueued(topic string, dueAfterBirth time.Duration) {
	if m == nil {
		return
	}
	s := m.timerEnqueue.get(seriesKey{vals: [maxCappedLabels]string{label(topic)}})
	s.count.Inc()
	s.hist.Observe(float64(dueAfterBirth / time.Second))
}

// TimerDequeued counts a timer message delivered to topic.
func (m *Broker) TimerDequeued(topic string) {
	if m == nil {
		return
	}
	m.timerDequeue.get(seriesKey{vals: [maxCappedLabels]string{label(topic)}}).count.Inc()
}

// maybeGauge is a gauge read at each scrape that may have no value.
type maybeGauge struct {
	f    func() (int64, bool)
	desc *prometheus.Desc
}

func (g *maybeGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *maybeGauge) Collect(ch chan<- prometheus.Metric) {
	if v, ok := g.f(); ok {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(v))
	}
}

// lags collects the consumer gauges at each scrape.
type lags struct {
	src                                          func() []Lag
	messages, latency, inflight, ready, queueing *prometheus.Desc
}

func (l *lags) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.messages
	ch <- l.latency
	ch <- l.inflight
	ch <- l.ready
	ch <- l.queueing
}

func (l *lags) Collect(ch chan<- prometheus.Metric) {
	rows := l.src()
	var seen labelSet
	for _, g := range rows {
		if !utf8.ValidString(g.Group) || !utf8.ValidString(g.Topic) {
			seen = labelSet{}
			break
		}
	}
	for _, g := range rows {
		vals := []string{label(g.Group), label(g.Topic), strconv.FormatBool(g.Retry), strconv.FormatBool(g.System)}
		if !seen.add(vals) {
			continue
		}
		for _, v := range []struct {
			desc  *prometheus.Desc
			value int64
		}{
			{l.messages, g.Messages}, {l.latency, g.LatencyMillis},
			{l.inflight, g.Inflight}, {l.ready, g.Ready}, {l.queueing, g.QueueingMillis},
		} {
			ch <- prometheus.MustNewConstMetric(v.desc, prometheus.GaugeValue, float64(v.value), vals...)
		}
	}
}

// Handler serves the metrics in Prometheus' text format.
func (m *Broker) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// In counts messages stored by a send to topic: how many, and the bytes
// of their records.
func (m *Broker) In(topic, messageType string, system bool, messages int, bytes int64) {
	if m == nil || messages <= 0 {
		return
	}
	s := m.in.get(seriesKey{vals: [maxCappedLabels]string{label(topic), messageType, strconv.FormatBool(system)}})
	s.count.Add(float64(messages))
	s.bytes.Add(float64(bytes))
	s.hist.Observe(float64(bytes / int64(messages)))
}

// Out counts messages of topic delivered to group by a pull or a pop.
func (m *Broker) Out(topic, group string, system bool, messages int, bytes int64) {
	if m == nil || messages <= 0 {
		return
	}
	s := m.out.get(seriesKey{vals: [maxCappedLabels]string{label(topic), label(group), strconv.FormatBool(system)}, shape: shapePull})
	s.count.Add(float64(messages))
	s.bytes.Add(float64(bytes))
}

// PopOut counts messages of topic popped by group, from the group's
// pop-retry topics of topic when retry is set: RocketMQ's
// PopMessageProcessor labels a pop's series with is_retry, which a pull's
// (Out) lack.
func (m *Broker) PopOut(topic, group string, system, retry bool, messages int, bytes int64) {
	if m == nil || messages <= 0 {
		return
	}
	s := m.out.get(seriesKey{vals: [maxCappedLabels]string{label(topic), label(group), strconv.FormatBool(system), strconv.FormatBool(retry)},
		shape: shapePop})
	s.count.Add(float64(messages))
	s.bytes.Add(float64(bytes))
}

// unchecked registers collectors whose metrics share a name but not their
// label names, as rocketmq_messages_out_total's pull series (no is_retry)
// and pop series do. A registry refuses two collectors that describe one
// name with different labels; a collector that describes nothing is
// registered unchecked, and its metrics of one name are gathered into one
// family (their help must match).
type unchecked []prometheus.Collector

// Describe describes nothing: the collector is unchecked.
func (unchecked) Describe(chan<- *prometheus.Desc) {}

// Collect collects every collector's metrics.
func (u unchecked) Collect(ch chan<- prometheus.Metric) {
	for _, c := range u {
		c.Collect(ch)
	}
}

// ToDLQ counts a message of topic (its original topic) that group's
// consumption moved to the group's dead-letter topic.
func (m *Broker) ToDLQ(group, topic string, system bool) {
	if m == nil {
		return
	}
	m.toDLQ.get(seriesKey{vals: [maxCappedLabels]string{label(group), label(topic), strconv.FormatBool(system)}}).count.Inc()
}

// TransactionEnded counts a transaction of topic committed (or rolled
// back when committed is false); a commit's latency since the message was
// born (age) goes to the finish-latency histogram, in whole seconds as
// RocketMQ records it.
func (m *Broker) TransactionEnded(topic string, committed bool, age time.Duration) {
	if m == nil {
		return
	}
	k := seriesKey{vals: [maxCappedLabels]string{label(topic)}}
	if committed {
		s := m.commits.get(k)
		s.count.Inc()
		s.hist.Observe(float64(age / time.Second))
	} else {
		m.rollbacks.get(k).count.Inc()
	}
}

// TopicDeleted deletes the series of topic: those of the metrics the
// processors feed that carry it in their topic label (a deleted retry or
// dead-letter topic's too). Their room under the cardinality limit is
// free again; a topic created again under the name starts from zero.
func (m *Broker) TopicDeleted(topic string) {
	if m == nil {
		return
	}
	topic = label(topic)
	for _, c := range []*capped{m.in, m.out, m.toDLQ, m.commits, m.rollbacks, m.timerEnqueue, m.timerDequeue,
		m.popReviveIn, m.popReviveOut, m.popRetry} {
		c.drop("topic", topic)
	}
}

// GroupDeleted deletes the series of a consumer group: those carrying it
// in their consumer_group label (messages and bytes out, dead letters,
// the POP counters).
func (m *Broker) GroupDeleted(group string) {
	if m == nil {
		return
	}
	group = label(group)
	for _, c := range []*capped{m.out, m.toDLQ, m.popReviveIn, m.popReviveOut, m.popRetry} {
		c.drop("consumer_group", group)
	}
}

// invocationStatus is the invocation_status label of a request's outcome.
func invocationStatus(ok bool) string {
	if ok {
		return "success"
	}
	return "failure"
}

// TopicCreated records how long a topic creation took and whether it
// succeeded.
func (m *Broker) TopicCreated(system, ok bool, took time.Duration) {
	if m == nil {
		return
	}
	m.topicCreate.WithLabelValues(invocationStatus(ok), strconv.FormatBool(system)).Observe(float64(took.Milliseconds()))
}

// GroupCreated records how long a subscription group creation took and
// whether it succeeded.
func (m *Broker) GroupCreated(ok bool, took time.Duration) {
	if m == nil {
		return
	}
	m.groupCreate.WithLabelValues(invocationStatus(ok)).Observe(float64(took.Milliseconds()))
}

// connections collects the connection gauges from Sources at each scrape.
type connections struct {
	src                  *bound
	producers, consumers *prometheus.Desc
}

func (c *connections) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.producers
	ch <- c.consumers
}

func (c *connections) Collect(ch chan<- prometheus.Metric) {
	var producers, consumers []Connection
	c.src.read(func(s *Sources) bool {
		if s.Producers != nil {
			producers = s.Producers()
		}
		if s.Consumers != nil {
			consumers = s.Consumers()
		}
		return true
	})
	if len(producers) > 0 {
		seen := newLabelSet(producers)
		for _, p := range producers {
			vals := []string{label(p.Language), label(p.Version), "remoting"}
			if seen.add(vals) {
				ch <- prometheus.MustNewConstMetric(c.producers, prometheus.GaugeValue, float64(p.Count), vals...)
			}
		}
	}
	if len(consumers) > 0 {
		seen := newLabelSet(consumers)
		for _, p := range consumers {
			vals := []string{label(p.Group), label(p.Language), label(p.Version), label(p.ConsumeMode), "remoting",
				strconv.FormatBool(p.System)}
			if seen.add(vals) {
				ch <- prometheus.MustNewConstMetric(c.consumers, prometheus.GaugeValue, float64(p.Count), vals...)
			}
		}
	}
}

// label makes s a value Prometheus accepts as a label value: valid UTF-8.
// Topic and group names, client languages and versions come from clients,
// and a ROCKETMQ binary header carries them as raw bytes; WithLabelValues
// and MustNewConstMetric panic on a value that is not UTF-8, and a metric
// must never fail the request (or the scrape) that records it. Each run
// of invalid bytes becomes U+FFFD; a valid value is returned as is,
// without allocating.
func label(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// labelSet keeps the label values a collector has sent in one scrape,
// once label repaired one: two names that differ only in their invalid
// bytes get the same values, and a registry refuses a scrape that
// collects one series twice. The nil labelSet (no value needed repair:
// the source's rows are distinct) keeps nothing.
type labelSet map[string]struct{}

// newLabelSet returns the labelSet for rows: nil unless a row has a
// value label must repair.
func newLabelSet(rows []Connection) labelSet {
	for _, r := range rows {
		if !utf8.ValidString(r.Group) || !utf8.ValidString(r.Language) || !utf8.ValidString(r.Version) ||
			!utf8.ValidString(r.ConsumeMode) {
			return labelSet{}
		}
	}
	return nil
}

// add reports whether vals are new to the scrape, and records them; the
// first row of a repaired name is kept, the others are left out.
func (s labelSet) add(vals []string) bool {
	if s == nil {
		return true
	}
	k := strings.Join(vals, "\xff") // 0xff never occurs in valid UTF-8
	if _, ok := s[k]; ok {
		return false
	}
	s[k] = struct{}{}
	return true
}
