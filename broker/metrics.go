package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
	"github.com/rocketkv/rocketkv/txn"
)

// countTTL is how long a counted number of topics or groups serves
// scrapes: counting scans a keyspace (a million keys at a million topics).
const countTTL = time.Minute

// lagTTL is how long computed consumer gauges serve scrapes: computing
// reads every committed offset and its queue's bounds (consumerLags).
const lagTTL = 15 * time.Second

// startMetrics starts the Prometheus exporter when metricsExporterType is
// PROM, on metricsPromExporterHost (brokerIP1 when empty, as RocketMQ) and
// metricsPromExporterPort, under the names metricsNameUnitSuffix chooses,
// each metric capped at metricsOtelCardinalityLimit series. A limit <= 0
// stops the start, as RocketMQ's metrics manager stops its (OTel's
// cardinality limit must be positive); with the exporter off the key is
// not read, there as here.
func (b *Broker) startMetrics() error {
	if b.cfg.MetricsExporterType != configs.MetricsPROM {
		return nil
	}
	if err := checkMetricsConfig(b.cfg); err != nil {
		return err
	}
	labels := map[string]string{}
	for _, pair := range strings.Split(b.cfg.MetricsLabel, ",") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, ":")
		if !ok || strings.Contains(v, ":") || !metrics.ValidConstLabel(k) {
			b.log.Warn().Str("metricsLabel", b.cfg.MetricsLabel).Str("pair", pair).
				Msg("metricsLabel pair is not key:value with a label name of its own; ignored")
			continue
		}
		labels[k] = v
	}
	if b.cfg.MetricsInDelta {
		labels["aggregation"] = "delta"
	}
	labels["node_type"] = "broker"
	labels["cluster"] = b.cfg.BrokerClusterName
	labels["node_id"] = b.cfg.BrokerName
	topics := &cached[int]{ttl: countTTL, compute: uncancelled(b.topics.table.Count)}
	groups := &cached[int]{ttl: countTTL, compute: uncancelled(b.groups.Count)}
	src := metrics.Sources{
		Off: metrics.Families{Stats: !b.cfg.EnableStatsMetrics, Request: !b.cfg.EnableRequestMetrics,
			Connection: !b.cfg.EnableConnectionMetrics, Transaction: !b.cfg.EnableTransactionMetrics,
			Remoting: !b.cfg.EnableRemotingMetrics, Store: !b.cfg.EnableMessageStoreMetrics,
			Pop: !b.cfg.EnablePopMetrics},
		CardinalityLimit:    b.cfg.MetricsOtelCardinalityLimit,
		Log:                 b.component("metrics"),
		BrokerPermission:    b.permission,
		TopicCount:          func() int { return topics.get(context.Background(), b.log) },
		ConsumerGroupCount:  func() int { return groups.get(context.Background(), b.log) },
		Producers:           b.clients.producerMetrics,
		Consumers:           b.clients.consumerMetrics,
		DispatchBehindBytes: b.disp.Lag,
		FlushBehindBytes:    func() int64 { return max(0, b.clog.MaxOffset()-b.clog.FlushedOffset()) },
		StorageSize:         b.storageUsedBytes,
		MessageReserveMillis: func() (int64, bool) {
			if t := b.earliestMessageTime(); t > 0 {
				return max(time.Now().UnixMilli()-t, 0), true
			}
			return 0, false
		},
	}
	if c := b.repl.client; c != nil {
		src.Diverged = func() bool { return c.Status().Diverged != nil }
	}
	if c := b.repl.autoClient; c != nil {
		src.Diverged = func() bool { return c.Status().NoConsistentPoint }
	}
	if b.cfg.TimerWheelEnable {
		cut := false // logged that rocketmq_timing_messages leaves topics out
		census := &cached[metrics.TimerCensus]{ttl: b.timerCensusTTL, compute: func(context.Context) (metrics.TimerCensus, error) {
			c, err := b.timerCensus()
			if err != nil {
				return c, err
			}
			var topics int
			if c.Timing, topics = b.timingRows(); topics > maxTimingSeries && !cut {
				cut = true
				b.log.Warn().Int("topics", topics).Int("series", maxTimingSeries).
					Msg("more topics have timer messages waiting than rocketmq_timing_messages has series: those with the fewest are left out")
			}
			return c, nil
		}}
		src.Timers = func() (metrics.TimerCensus, bool) {
			c := census.get(context.Background(), b.log)
			now := time.Now()
			c.EnqueueLag, c.EnqueueLatencyMillis = b.timerEnqueueBehind(now.UnixMilli())
			if behind, err := b.timerReadBehind(now); err != nil {
				b.log.Warn().Err(err).Msg("rocketmq_timer_dequeue_latency: read how far the timer is behind")
			} else {
				c.BehindSeconds = behind
			}
			return c, true
		}
	}
	halves := &cached[[]metrics.TopicMessages]{ttl: b.lagTTL, compute: uncancelled(b.openTransactions)}
	src.HalfMessages = func() []metrics.TopicMessages { return halves.get(context.Background(), b.log) }
	if b.cfg.EnablePopMetrics {
		backlog := &cached[metrics.ReviveBacklog]{ttl: b.lagTTL, compute: uncancelled(b.reviveBacklog)}
		src.PopRevive = func() metrics.ReviveBacklog { return backlog.get(context.Background(), b.log) }
	}
	if b.cfg.EnableLagAndDlqMetrics {
		lags := &cached[[]metrics.Lag]{ttl: b.lagTTL, compute: b.consumerLags}
		// A switch's Detach cancels ctx: the computation stops at the
		// next queue, and this scrape goes without the consumer gauges.
		src.Lags = func(ctx context.Context) []metrics.Lag { return lags.get(ctx, b.log) }
	}
	names := metrics.Bare
	if b.cfg.MetricsNameUnitSuffix {
		names = metrics.UnitSuffixed
	}
	host := b.cfg.MetricsPromExporterHost
	if host == "" {
		host = b.hostIP.String()
	}
	addr := net.JoinHostPort(host, strconv.Itoa(b.cfg.MetricsPromExporterPort))
	if b.shared != nil {
		// Controller mode: the process's metrics and exporter, which
		// outlive this Broker (sharedMetrics). A master has no Diverged
		// source and serves no rocketkv_ha_diverged, as a standalone
		// one; its metrics and a slave's are yet one layout (Rebind).
		m, err := b.shared.metrics.bind(b, labels, src, names, addr, b.component("metrics"))
		if err != nil {
			return err
		}
		b.metrics = m
		b.earlyMetrics.Store(m)
		return nil
	}
	b.metrics = metrics.New(labels, src, names)
	b.earlyMetrics.Store(b.metrics)
	exp, err := metrics.Serve(addr, b.metrics, b.component("metrics"))
	if err != nil {
		return err
	}
	b.exporter = exp
	return nil
}

// maxReviveBacklog bounds the count of rocketmq_pop_revive_lag: one scrape
// reads at most this many deadline entries.
const maxReviveBacklog = 100_000

// reviveBacklog is what the POP revive gauges show: the checkpoints due
// that revive has not handled (at most maxReviveBacklog), and how long
// the earliest of them has been due. Zero while revive does not run (a
// slave's, before the POP service starts), as RocketMQ's revive services
// report before their first round.
func (b *Broker) reviveBacklog() (metrics.ReviveBacklog, error) {
	svc := b.reviving.Load()
	if svc == nil {
		return metrics.ReviveBacklog{}, nil
	}
	now := time.Now().UnixMilli()
	r, err := svc.ReviveBacklog(now, maxReviveBacklog)
	if err != nil || r.Due == 0 {
		return metrics.ReviveBacklog{}, err
	}
	return metrics.ReviveBacklog{Due: r.Due, BehindMillis: max(now-r.Earliest, 0)}, nil
}

// popObserver returns the pop.Observer that feeds m's POP counters: nil
// when the exporter is off (m nil) or the POP metrics are (on false,
// enablePopMetrics), so that the pop, ack and revive paths then make no
// call at all.
func popObserver(m *metrics.Broker, on bool) pop.Observer {
	if m == nil || !on {
		return nil
	}
	return popMetrics{m}
}

// popMetrics feeds RocketMQ's POP counters from the POP service's events
// (pop.Observer).
type popMetrics struct{ m *metrics.Broker }

// reviveKinds are the revive_message_type values of pop.ReviveRecord.
var reviveKinds = [...]string{pop.ReviveCheckpoint: metrics.ReviveCK, pop.ReviveAck: metrics.ReviveACK}

// Put implements pop.Observer: rocketmq_pop_revive_in_message_total.
func (p popMetrics) Put(group, topic string, r pop.ReviveRecord, err error) {
	p.m.PopRevivePut(group, topic, reviveKinds[r], putStatus(commitlog.PutOK, err))
}

// Got implements pop.Observer: rocketmq_pop_revive_out_message_total,
// under revive queue 0 (rocketkv's handles all name it).
func (p popMetrics) Got(group, topic string, r pop.ReviveRecord) {
	p.m.PopReviveGot(group, topic, 0, reviveKinds[r])
}

// Retried implements pop.Observer:
// rocketmq_pop_revive_retry_messages_total.
func (p popMetrics) Retried(group, topic string, n int, status commitlog.AppendStatus, err error) {
	p.m.PopRetried(group, topic, putStatus(status, err), n)
}

// putStatus is the name of RocketMQ's PutMessageStatus for a write that
// ended with status, or failed with err: a failed CommitLog append as
// appendErrorCode sorts it, UNKNOWN_ERROR for the rest (a write of the
// POP state in the index, which RocketMQ would have put to its revive
// topic, among them).
func putStatus(status commitlog.AppendStatus, err error) string {
	if err == nil {
		return status.String()
	}
	if errors.Is(err, commitlog.ErrMapFailed) {
		return "CREATE_MAPPED_FILE_FAILED" // among SERVICE_NOT_AVAILABLE's causes for a client
	}
	switch appendErrorCode(err) {
	case remoting.MessageIllegal:
		return "MESSAGE_ILLEGAL"
	case remoting.ServiceNotAvailable:
		return "SERVICE_NOT_AVAILABLE"
	}
	return "UNKNOWN_ERROR"
}

// storageUsedBytes is rocketmq_storage_size as RocketMQ's store computes
// it: the size of the file system holding storePathRootDir minus its free
// bytes (Java's File.getTotalSpace - getFreeSpace), one statfs. It counts
// every file on that file system, not only the store's; ok is false when
// statfs fails.
func (b *Broker) storageUsedBytes() (int64, bool) {
	u, err := vfs.OS{}.Statfs(b.cfg.StorePathRootDir)
	if err != nil || u.Total == 0 {
		return 0, false
	}
	return int64(u.Total - u.Free), true
}

// stopMetrics stops the exporter (behind a Supervisor, detaches this
// Broker's sources from the process's metrics, whose exporter serves on),
// and the count of the timer messages waiting if it still runs (before
// the stores close).
func (b *Broker) stopMetrics(ctx context.Context) error {
	if b.timers != nil {
		b.timers.StopCounting()
	}
	if b.shared != nil {
		// The exporter outlives this Broker: its gauges stop reading
		// this Broker's stores before they close.
		b.shared.metrics.unbind(b)
		return nil
	}
	// A scrape's reads end before the stores close, also when ctx ends
	// before the exporter's scrapes in progress: Detach cancels a long
	// computation and waits for the reads.
	b.metrics.Detach()
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
	if b.shared != nil {
		return b.shared.metrics.addr()
	}
	if b.exporter == nil {
		return nil
	}
	return b.exporter.Addr()
}

// countIn counts a producer's send of n records (bytes in all) stored in
// topic: in the broker statistics, and in the metrics as RocketMQ does
// (not sends to retry or dead-letter topics, typed by the properties of
// the send). topic is where the records went, as RocketMQ counts the
// message after its store rewrote it: a delayed message's send counts in
// SCHEDULE_TOPIC_XXXX (its delivery in its own topic, deliverScheduled), a
// timer message's in rmq_sys_wheel_timer, a half's in
// RMQ_SYS_TRANS_HALF_TOPIC (its commit in its own topic, recordStore.Put),
// so that a rolled-back half is no put of its topic.
func (b *Broker) countIn(topic, props string, n int, bytes int64) {
	msgType := "" // read only by the metrics
	if b.metrics != nil {
		msgType = messageTypeOf(props)
	}
	b.countInAs(topic, msgType, n, bytes)
}

// countInAs is countIn of records of message type msgType.
func (b *Broker) countInAs(topic, msgType string, n int, bytes int64) {
	b.stats.Put(topic, n, bytes)
	if b.metrics == nil || meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) {
		return
	}
	b.metrics.In(topic, msgType, b.isSystemTopic(topic), n, bytes)
}

// countStored counts msgs, appended to the CommitLog by one put (bytes in
// all): every one in the store's put rate and totals, and in the day
// totals of GET_BROKER_RUNTIME_INFO (msgPutTotal*) those RocketMQ counts
// in BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC (countsInDayTotals), unless
// dayTotals is false (a consumer's send-back, see countsInDayTotals).
func (b *Broker) countStored(msgs []*commitlog.Message, bytes int64, dayTotals bool) {
	b.stats.Stored(len(msgs), bytes)
	if !dayTotals {
		return
	}
	n := 0
	var last string
	counted := false
	for i, m := range msgs {
		if i == 0 || m.Topic != last { // a batch is of one topic
			last, counted = m.Topic, !b.isSystemTopic(m.Topic)
		}
		if counted && b.countsInDayTotals(m) {
			n++
		}
	}
	if n > 0 {
		b.stats.PutWithoutSystemTopic(n)
	}
}

// countsInDayTotals reports whether RocketMQ would count m, stored in a
// topic that is not a system topic, in BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC.
// RocketMQ counts there the messages its processors store for a client or
// deliver after holding them, each under the topic it is stored in
// (BrokerStatsManager.incBrokerPutNums(topic, n), which leaves out system
// topics): sends (SendMessageProcessor), commits (EndTransactionProcessor),
// due delayed and timer messages (ScheduleMessageService,
// TimerMessageStore), POP revives (PopReviveService), replies and recalls
// (ReplyMessageProcessor, RecallMessageProcessor). So a half, its op
// message, a delayed message parked in the schedule or timer topic, a
// recall's cancel (parked in the timer topic) and a stored reply (in the
// cluster's reply topic) are system-topic records, never counted; a
// committed transaction counts once, a delayed message once, when it is
// delivered. A consumer's send-back counts nowhere
// (AbstractSendMessageProcessor.consumerSendMsgBack): its copy for a
// retry topic waits in the schedule topic, and counts when delivered; its
// copy moved to a dead-letter topic does not count (processSendBack puts
// it uncounted, not asking this). rocketkv's POP revive moves a message
// consumed retryMaxTimes to the DLQ where RocketMQ's consumer sends it
// back, so that copy does not count either: it carries the revive's own
// property (kvindex.PropertyRevivedFrom, which the broker refuses from a
// client in a dead-letter topic), which a send to a retry topic that
// lands in the DLQ (counted, as RocketMQ counts it) does not.
func (b *Broker) countsInDayTotals(m *commitlog.Message) bool {
	if !meta.IsDLQTopic(m.Topic) {
		return true
	}
	_, moved := commitlog.LookupProperty(m.Properties, kvindex.PropertyRevivedFrom)
	return !moved
}

// countOut counts n records (bytes in all) of topic delivered to group by
// a pull, in the broker statistics and the metrics.
func (b *Broker) countOut(topic, group string, n int, bytes int) {
	b.countGet(topic, group, n, bytes)
	if b.metrics == nil || meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) {
		return
	}
	b.metrics.Out(topic, group, b.isSystemTopic(topic) || isSysGroup(group), n, int64(bytes))
}

// countGet counts n records (bytes in all) of topic delivered to group in
// the broker statistics: all of them in the store's get rates, those of a
// topic that is not a system topic in the day totals (RocketMQ's
// BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC, counted under the requested topic
// by its pulls and pops).
func (b *Broker) countGet(topic, group string, n int, bytes int) {
	b.stats.Get(group, topic, n, int64(bytes))
	if !b.isSystemTopic(topic) {
		b.stats.GetWithoutSystemTopic(n)
	}
}

// countPopOut counts the records of a pop of topic by group, in the
// broker statistics as a pull's, and in the metrics as RocketMQ's
// PopMessageProcessor does: under the requested topic, whether a retry or
// dead-letter topic or not, for each queue read with is_retry telling
// the group's pop-retry topics (true) from topic itself (false).
func (b *Broker) countPopOut(topic, group string, res *pop.PopResult) {
	b.countGet(topic, group, len(res.Records), len(res.Body))
	if b.metrics == nil {
		return
	}
	system := b.isSystemTopic(topic) || isSysGroup(group)
	retried, retriedBytes := popRetried(res.Records, res.MsgOffsetInfo)
	b.metrics.PopOut(topic, group, system, false, len(res.Records)-retried, int64(len(res.Body))-retriedBytes)
	b.metrics.PopOut(topic, group, system, true, retried, retriedBytes)
}

// popRetried returns how many of a pop's records came from the group's
// pop-retry topics, and their bytes. msgOffsetInfo lists the queues read
// in the order their records were added, each as
// "<retryFlag> <queueId> <offset>,<offset>,..." (entries joined by ';',
// pop.InfoBuilder), the flag pop.FlagNormal for the requested topic. It
// walks the string in place, without allocating.
func popRetried(records [][]byte, msgOffsetInfo string) (n int, bytes int64) {
	next := 0
	for rest := msgOffsetInfo; rest != "" && next < len(records); {
		var entry string
		entry, rest, _ = strings.Cut(rest, ";")
		flag, tail, _ := strings.Cut(entry, " ")
		_, offsets, _ := strings.Cut(tail, " ")
		k := min(strings.Count(offsets, ",")+1, len(records)-next)
		if flag != pop.FlagNormal {
			n += k
			for _, r := range records[next : next+k] {
				bytes += int64(len(r))
			}
		}
		next += k
	}
	return n, bytes
}

// countRetrySendToDLQ counts in rocketmq_send_to_dlq_messages_total a
// send to retryTopic (%RETRY%group) that retryOrDLQ moved to the group's
// dead-letter topic. The labels are those RocketMQ's
// SendMessageProcessor.handleRetryAndDLQ writes: consumer_group the
// send's producer group (a consumer sends its retries as the group it
// consumes for), topic the retry topic sent to. RocketMQ counts when it
// decides; rocketkv counts once the message is stored, so a put that
// fails is not counted.
func (b *Broker) countRetrySendToDLQ(producerGroup, retryTopic string) {
	if b.metrics == nil {
		return
	}
	b.metrics.ToDLQ(producerGroup, retryTopic, b.isSystemTopic(retryTopic) || isSystemGroup(producerGroup))
}

// isSystemGroup reports whether group is a system consumer group as
// RocketMQ's BrokerMetricsManager.isSystemGroup tells it for the is_system
// label of the DLQ counter, the consumer lag gauges and the consumer
// connections: its name starts with CID_RMQ_SYS_ in any case. The
// messages_out counters use isSysGroup (MixAll.isSysConsumerGroup),
// which is case-sensitive, as RocketMQ's PullMessageProcessor and
// PopMessageProcessor do.
func isSystemGroup(group string) bool {
	return len(group) >= len(sysGroupPrefix) && strings.EqualFold(group[:len(sysGroupPrefix)], sysGroupPrefix)
}

// sysGroupPrefix is RocketMQ's MixAll.CID_RMQ_SYS_PREFIX.
const sysGroupPrefix = "CID_RMQ_SYS_"

// countDLQ counts messages put to dead-letter topics: the group is the
// DLQ's, the topic the original one the message carries.
func (b *Broker) countDLQ(msgs []*commitlog.Message) {
	if b.metrics == nil {
		return
	}
	for _, m := range msgs {
		group, ok := strings.CutPrefix(m.Topic, meta.DLQGroupTopicPrefix)
		if !ok {
			continue
		}
		origin, ok := commitlog.LookupProperty(m.Properties, propDLQOriginTopic)
		real, hasReal := commitlog.LookupProperty(m.Properties, propRetryTopic)
		if !ok || (hasReal && meta.IsRetryTopic(origin)) {
			// A send-back's copy names the record it copied only in
			// RETRY_TOPIC, as RocketMQ's; a retried message's origin is
			// the topic it was first sent to.
			origin = real
		}
		b.metrics.ToDLQ(group, origin, b.isSystemTopic(origin) || isSystemGroup(group))
	}
}

// messageTypeOf is RocketMQ's TopicMessageType of a send's properties
// (BrokerMetricsManager.getMessageType): a prepared transaction, else a
// message group's (FIFO), else one with a delivery time or delay level.
func messageTypeOf(props string) string {
	prepared, sharded, delayed := false, false, false
	for k, v := range commitlog.PropertyPairs(props) {
		switch k {
		case txn.PropTransactionPrepared:
			prepared = strings.EqualFold(v, "true") // the last one counts
		case "__SHARDINGKEY":
			sharded = true
		case "__STARTDELIVERTIME", propDelay, timer.PropDeliverMs, timer.PropDelaySec, timer.PropDelayMs:
			delayed = true
		}
	}
	switch {
	case prepared:
		return metrics.TypeTransaction
	case sharded:
		return metrics.TypeFIFO
	case delayed:
		return metrics.TypeDelay
	}
	return metrics.TypeNormal
}

// timerCensusTTL bounds how often a scrape counts the timer messages
// waiting (a read of every timer key).
const timerCensusTTL = 15 * time.Second

// timerCensus counts the timer messages waiting, for the timer gauges
// (the enqueue gauges, rocketmq_timer_dequeue_latency and
// rocketmq_timing_messages apart: timerEnqueueBehind,
// timer.Service.ReadBehind, timingRows).
func (b *Broker) timerCensus() (metrics.TimerCensus, error) {
	now := time.Now().UnixMilli()
	bounds := make([]int64, len(metrics.TimerBounds))
	for i, s := range metrics.TimerBounds {
		bounds[i] = int64(s) * 1000
	}
	c, err := b.db.Timers().Census(now, bounds)
	if err != nil {
		return metrics.TimerCensus{}, err
	}
	return metrics.TimerCensus{Waiting: c.Waiting, Within: c.Within}, nil
}

// timingRows are the series of rocketmq_timing_messages (nil before the
// timer has counted them), and how many topics have timer messages
// waiting. A slave that copied its master's timer metrics reports the
// copy, as RocketMQ's gauge reads the TimerMetrics its slave copies.
func (b *Broker) timingRows() ([]metrics.TopicMessages, int) {
	if m, ok := b.slaveTimerMetrics(); ok {
		return copiedTimingRows(m, maxTimingSeries)
	}
	rows, topics, ok := b.timers.Waiting(maxTimingSeries)
	if !ok {
		return nil, 0
	}
	out := make([]metrics.TopicMessages, len(rows))
	for i, r := range rows {
		out[i] = metrics.TopicMessages{Topic: r.Topic, Messages: r.Messages}
	}
	return out, topics
}

// openTransactions are the series of rocketmq_half_messages: the
// transactions open by the topic their message is sent to, counted from
// the index at each computation (one CommitLog read per open half), where
// RocketMQ keeps a counter per topic in its transactionMetrics file (one
// up per half sent, one down per commit, rollback or give-up, 0 series
// kept until the topic is deleted).
func (b *Broker) openTransactions() ([]metrics.TopicMessages, error) {
	counts, err := b.txns.OpenByTopic(b.ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]metrics.TopicMessages, 0, len(counts))
	for t, n := range counts {
		rows = append(rows, metrics.TopicMessages{Topic: t, Messages: n})
	}
	slices.SortFunc(rows, func(a, c metrics.TopicMessages) int { return strings.Compare(a.Topic, c.Topic) })
	return rows, nil
}

// maxTimingSeries bounds the series of rocketmq_timing_messages: the
// topics with the most timer messages waiting. RocketMQ has a series for
// every topic its timer has held messages of (TimerMetrics).
const maxTimingSeries = 1000

// countWaitingTimers starts the count of the timer messages waiting by
// topic (rocketmq_timing_messages, GET_TIMER_METRICS), which the timer
// service keeps from then on; stopMetrics stops it if it still runs. Nothing persists the
// count: every start counts the timer index again, beside the rest (the
// series appear when it is done: about a second for a million messages
// waiting, see timer.BenchmarkCountWaiting). A failure leaves the metric
// out.
func (b *Broker) countWaitingTimers() {
	b.timers.StartCounting(b.ctx, func(n int, took time.Duration, err error) {
		if err != nil {
			if b.ctx.Err() == nil {
				b.log.Warn().Err(err).Msg("rocketmq_timing_messages left out")
			}
			return
		}
		b.log.Info().Int("messages", n).Dur("took", took).Msg("counted the timer messages waiting by topic")
	})
}

// enqueueRecentMs is how long after the timer took a message in
// rocketmq_timer_enqueue_latency still tells how long it waited
// (TimerMessageStore.getEnqueueBehindMillis).
const enqueueRecentMs = 2000

// timerEnqueueBehind is rocketmq_timer_enqueue_lag and _latency at nowMs.
//
// RocketMQ's timer reads its topic's ConsumeQueue behind the dispatch
// (TimerEnqueueGetService): its lag is the messages of the queue past its
// read position (getEnqueueBehindMessages), its latency how long ago the
// last message it read was stored, while it read one within the last 2 s,
// else 0 (getEnqueueBehindMillis). rocketkv's dispatcher indexes a timer
// message as it dispatches its record (timer.Service.Hook), so the timer
// is behind as far as the dispatcher is on the timer topic: the lag is
// the queue offsets of rmq_sys_wheel_timer handed out and not yet
// dispatched, and, while there are some, the latency is the age of the
// first of them; with none, RocketMQ's: since the last message indexed
// was stored, within 2 s of its indexing.
//
// Under timerStopEnqueue the messages held back count in the lag too, from
// the first of them (timer.Service.HeldFrom), as RocketMQ's read
// position stays there; they are not taken in, so the latency's second
// rule does not see them.
//
// On a slave the master hands out the queue offsets: the lag reads 0
// there, and the latency the second rule alone.
func (b *Broker) timerEnqueueBehind(nowMs int64) (messages, millis int64) {
	// The dispatched end first: the offsets handed out only grow.
	end, err := b.cqs.MaxOffset(meta.TimerTopic, 0)
	undispatched := int64(0)
	if err == nil {
		next, err := b.qoffsets.Next(meta.TimerTopic, 0)
		if err == nil {
			undispatched = max(0, next-end)
			messages = undispatched
			if held, ok := b.timers.HeldFrom(); ok && held < end {
				messages += end - held
			}
		}
	}
	if undispatched > 0 {
		if stored, ok := b.firstUndispatchedTimer(); ok {
			return messages, max(0, nowMs-stored)
		}
	}
	if stored, indexed := b.timers.LastIndexed(); indexed > 0 && nowMs-indexed < enqueueRecentMs {
		millis = max(0, nowMs-stored)
	}
	return messages, millis
}

// enqueueScanBytes bounds the CommitLog a scrape reads to find the first
// timer message not yet dispatched (maxDispatchLagBytes, 4 MiB by
// default, bounds how far the dispatcher trails the appends).
const enqueueScanBytes = 4 << 20

// firstUndispatchedTimer returns the store time of the first record of
// rmq_sys_wheel_timer past the dispatched offset; past enqueueScanBytes
// without one, that of the last record read (the timer message is later
// still: its age is at most that one's). ok is false when no record
// could be read.
func (b *Broker) firstUndispatchedTimer() (storeMs int64, ok bool) {
	from := b.disp.Dispatched()
	r := b.clog.NewReader(from)
	defer r.Close()
	timerOnly := commitlog.DecodeOptions{Topics: func(t []byte) string {
		if string(t) == meta.TimerTopic {
			return meta.TimerTopic
		}
		return "" // not allocated: only the timer topic is looked for
	}}
	for {
		e, err := r.Next()
		if err != nil {
			return storeMs, ok
		}
		m, err := commitlog.DecodeWith(e.Data, timerOnly)
		if err != nil {
			return storeMs, ok
		}
		storeMs, ok = m.StoreTimestamp, true
		if m.Topic == meta.TimerTopic || e.Offset+int64(e.Size)-from >= enqueueScanBytes {
			return storeMs, ok
		}
	}
}

// recordProperties returns the properties of the record at phy, for the
// timer's count of the messages waiting (timer.Options.Properties): the
// record is decoded where it lies, its body neither copied nor read.
func (b *Broker) recordProperties(phy int64) (string, bool, error) {
	v, err := b.clog.ReadRecord(phy)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the properties of the record at %d: %w", phy, err)
	}
	defer v.Release()
	m, err := commitlog.DecodeWith(v.Data, commitlog.DecodeOptions{Topics: func([]byte) string { return "" }})
	if err != nil {
		return "", false, nil // as readRecord: not a record
	}
	return m.Properties, true, nil
}

// cached is a value computed at most once per ttl, for scrapes: the
// counts and lags read whole keyspaces. A failed computation keeps the
// last value, logs, and is not tried again before the ttl has passed
// either, so a lasting failure costs one computation and one log line per
// ttl, not one per scrape. A computation cancelled (its ctx ended: the
// sources were detached) gives the zero value, logs nothing, and does
// not count as one.
type cached[T any] struct {
	ttl     time.Duration
	compute func(ctx context.Context) (T, error)

	mu sync.Mutex
	at time.Time // of the last computation, failed or not
	v  T
}

func (c *cached[T]) get(ctx context.Context, log zerolog.Logger) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.ttl {
		return c.v
	}
	last := c.at
	c.at = time.Now()
	v, err := c.compute(ctx)
	if err != nil && ctx.Err() != nil {
		c.at = last
		var zero T
		return zero
	}
	if err != nil {
		log.Warn().Err(err).Msg("compute for metrics")
		return c.v
	}
	c.v = v
	return v
}

// uncancelled adapts a computation that runs to its end to cached's.
func uncancelled[T any](f func() (T, error)) func(context.Context) (T, error) {
	return func(context.Context) (T, error) { return f() }
}

// consumerLags computes the consumer gauges per consumer group with a
// live client and topic it subscribes to with committed offsets, as
// RocketMQ's ConsumerLagCalculator reports them for pull, push and POP
// consumers, queue by queue:
//
//   - lag: the messages past the committed offset (from the queue's
//     minimum when retention deleted the committed one), and the age of
//     the oldest of them;
//   - in flight: on a queue the group pops, the messages its checkpoints
//     and orderly batch hold (the pop state); else those between the
//     committed offset and the nextBeginOffset of the group's last pull
//     (pullPositions);
//   - ready: the messages past the pop position, or past the last pull,
//     and the age of the oldest of them (the queueing latency).
//
// Ages are now minus the message's store time, in ms, the largest over
// the topic's queues.
//
// Cost of one computation (at most one per lagTTL, whatever the scrape
// rate): a read of every committed offset; per committed queue its bounds
// (two seeks) and the store time of at most two ConsumeQueue entries; one
// scan of the POP state (PopStore.Queues: the popped queues and the
// checkpoints in flight) and a copy of the pull table (the queues with
// pulled messages in flight). At 100,000 committed queues that is some
// 400,000 point reads and seeks, a few seconds of one core; memory is a
// row per group and topic and an entry per popped queue.
//
// It checks ctx before each committed queue and returns ctx's error once
// it ended: a role switch detaching the metrics' sources waits for the
// queue being read, not for the rest.
func (b *Broker) consumerLags(ctx context.Context) ([]metrics.Lag, error) {
	if err := ctx.Err(); err != nil {
		// A scrape that waited for another's computation (cached) after
		// the sources were detached.
		return nil, fmt.Errorf("consumer lags: %w", err)
	}
	popped, err := b.db.Pop().Queues(ctx)
	var skipped *kvindex.SkippedError
	if errors.As(err, &skipped) {
		// The gauges of every other queue still stand.
		b.log.Warn().Err(err).Msg("consumer gauges computed without the POP records that do not decode")
	} else if err != nil {
		return nil, fmt.Errorf("consumer lags: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("consumer lags: %w", err)
	}
	pops := make(map[groupQueue]kvindex.PopQueue, len(popped))
	for _, q := range popped {
		pops[groupQueue{q.Group, q.Topic, q.QueueID}] = q
	}
	// Only groups with a live client, and the topics they subscribe to,
	// as RocketMQ's ConsumerLagCalculator: a group gone leaves no series
	// behind (its committed offsets stay).
	online := b.clients.onlineSubscriptions()
	pulled := b.pulled.snapshot()
	inflight := map[groupQueue]bool{} // the pull positions worth keeping
	var out []metrics.Lag
	now := time.Now().UnixMilli()
	age := func(topic string, queueID int32, offset int64) int64 {
		if ts, ok, err := b.storeTimeAt(topic, queueID, offset); err == nil && ok {
			return max(now-ts, 0)
		}
		return 0
	}
	var failed error
	err = b.offsets.Each("", func(u kvindex.OffsetUpdate) bool {
		if b.beforeLagQueue != nil {
			b.beforeLagQueue(ctx)
		}
		if err := ctx.Err(); err != nil {
			failed = err
			return false
		}
		lo, hi, err := b.queueRange(u.Topic, u.QueueID)
		if err != nil {
			failed = err
			return false
		}
		// A retry topic is reported as RocketMQ's ConsumerLagCalculator
		// does: a POP group's retry topic of T as T with is_retry, a push
		// group's own %RETRY%group not at all.
		topic, retry := u.Topic, false
		if meta.IsRetryTopic(u.Topic) {
			origin, ok := pop.RetryOrigin(u.Topic, u.Group)
			if !ok {
				return true
			}
			topic, retry = origin, true
		}
		if !online[u.Group][topic] {
			return true
		}
		// Each returns a group's offsets of a topic together (key
		// order), so one row is open at a time.
		if n := len(out); n == 0 || out[n-1].Group != u.Group || out[n-1].Topic != topic || out[n-1].Retry != retry {
			out = append(out, metrics.Lag{Group: u.Group, Topic: topic, Retry: retry,
				System: b.isSystemTopic(topic) || isSystemGroup(u.Group)})
		}
		l := &out[len(out)-1]
		from := min(max(u.Offset, lo), hi)
		key := groupQueue{u.Group, u.Topic, u.QueueID}
		pos := from
		lag := hi - from
		if q, ok := pops[key]; ok {
			l.Inflight += q.InFlight
			if q.Position >= 0 {
				pos = min(max(q.Position, from), hi)
			}
			// RocketMQ's POP lag: what is not popped yet and what is in
			// flight, not what was acknowledged out of order.
			lag = hi - pos + q.InFlight
		} else if next, ok := pulled[key]; ok && next > from {
			inflight[key] = true
			pos = min(next, hi)
			l.Inflight += pos - from
		}
		if hi <= from {
			return true
		}
		l.Messages += lag
		oldest := age(u.Topic, u.QueueID, from)
		l.LatencyMillis = max(l.LatencyMillis, oldest)
		if hi > pos {
			l.Ready += hi - pos
			if pos != from {
				oldest = age(u.Topic, u.QueueID, pos)
			}
			l.QueueingMillis = max(l.QueueingMillis, oldest)
		}
		return true
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, fmt.Errorf("consumer lags: %w", err)
	}
	b.pulled.prune(pulled, inflight)
	return out, nil
}

// timedTopicCreate serves f's topic creations (answerRegistered) and
// records how long each took until its answer, the wait for the
// registration included as in RocketMQ, and whether it succeeded, in
// rocketmq_topic_create_execution_time.
func (b *Broker) timedTopicCreate(f registeringResponder) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		start := time.Now()
		resp, register := f(ctx, conn, req)
		return b.answerRegistered(conn, req, resp, register, func(resp *remoting.Command) *remoting.Command {
			b.metrics.TopicCreated(b.isSystemTopic(req.ExtFields["topic"]), resp != nil && resp.Code == remoting.Success, time.Since(start))
			return resp
		})
	}
}

// timedGroupCreate records how long a subscription group creation took in
// rocketmq_consumer_group_create_execution_time.
func (b *Broker) timedGroupCreate(f remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		start := time.Now()
		resp := f(ctx, conn, req)
		b.metrics.GroupCreated(resp != nil && resp.Code == remoting.Success, time.Since(start))
		return resp
	}
}

// checkMetricsConfig refuses a Prometheus exporter whose metrics could
// hold no series (metricsOtelCardinalityLimit <= 0); with the exporter
// off the key is not read.
func checkMetricsConfig(cfg configs.Broker) error {
	if cfg.MetricsExporterType != configs.MetricsPROM {
		return nil
	}
	if limit := cfg.MetricsOtelCardinalityLimit; limit <= 0 {
		return fmt.Errorf("metrics: metricsOtelCardinalityLimit %d: the series a metric may hold must be > 0", limit)
	}
	return nil
}
