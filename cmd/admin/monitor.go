package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Defaults of RocketMQ's MonitorService: the first round 20 s after the
// start, then one every MonitorConfig.roundInterval.
const (
	monitorFirstDelay = 20 * time.Second
	monitorInterval   = 60 * time.Second
)

// minRunningInfoVersion is the client version from which RocketMQ's
// monitor asks a client for its running info (MQVersion.Version
// V3_1_8_SNAPSHOT's ordinal).
const minRunningInfoVersion = 62

// Lines of RocketMQ's DefaultMonitorListener.
const (
	monitorPrefix = "[MONITOR] "
	monitorNotify = monitorPrefix + " [NOTIFY] "
)

// startMonitoringCmd is mqadmin startMonitoring: RocketMQ's MonitorService
// with its DefaultMonitorListener, printing on stdout what the listener
// logs to tools_default.log.
func startMonitoringCmd(g *globals) *cobra.Command {
	var delay, interval time.Duration
	var rounds int
	cmd := &cobra.Command{
		Use:   "startMonitoring",
		Short: "watch every consumer group in rounds: undone messages per topic and blocked or unsubscribed clients, as mqadmin startMonitoring",
		Long: `startMonitoring runs RocketMQ's monitoring rounds until interrupted (SIGINT,
SIGTERM): the first after --delay, then one every --interval. A round takes
the topics the name servers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER) and, for
the consumer group of each %RETRY% topic:

  - while the group has a client online (GET_CONSUMER_CONNECTION_LIST), its
    consume stats (GET_CONSUME_STATS on a broker of every group of the route
    of its %RETRY% topic), reported per topic as mqadmin's UndoneMsgs: the
    messages not consumed in all (undoneMsgsTotal) and in the worst queue
    (undoneMsgsSingleMQ), and how much older the last consumed message is
    than the newest one of its queue, the worst queue's
    (undoneMsgsDelayTimeMills: GET_MAX_OFFSET, then a PULL_MESSAGE of the
    newest message as TOOLS_CONSUMER, committing nothing);
  - the running info of its clients (GET_CONSUMER_RUNNING_INFO, relayed by
    the broker), with a NOTIFY line when push consumers started over two
    minutes ago subscribe differently, or when a push consumer's queue holds
    messages it has not consumed for a minute (an orderly one's: a queue it
    cannot lock).

Each line is the text RocketMQ's DefaultMonitorListener logs, led by the time
and level as its log file has them. A group that cannot be read is left out
of the round, as RocketMQ's monitor leaves it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return fmt.Errorf("--interval must be positive, not %s", interval)
			}
			if delay < 0 || rounds < 0 {
				return fmt.Errorf("--delay %s and --rounds %d must not be negative", delay, rounds)
			}
			m := &monitor{g: g, out: cmd.OutOrStdout(), now: time.Now}
			return m.run(cmd.Context(), delay, interval, rounds)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&delay, "delay", monitorFirstDelay, "time before the first round (RocketMQ's monitor waits 20 s)")
	f.DurationVar(&interval, "interval", monitorInterval, "time between the starts of two rounds (RocketMQ's MonitorConfig.roundInterval)")
	f.IntVar(&rounds, "rounds", 0, "stop after this many rounds (0: go on until interrupted, as mqadmin)")
	return cmd
}

// monitor runs the rounds of startMonitoring and prints what RocketMQ's
// DefaultMonitorListener logs. It is used by one goroutine, the command's.
type monitor struct {
	g   *globals
	out io.Writer
	now func() time.Time
	// routes caches, for one round, the routes of the topics whose queues
	// are read (RocketMQ's pull consumer keeps them between its 30 s
	// route updates).
	routes map[string]namesrv.TopicRouteData
}

// run does a round after delay, then one every interval, until ctx is
// done or rounds rounds (0: no limit) have run. An interrupted monitor
// returns nil.
func (m *monitor) run(ctx context.Context, delay, interval time.Duration, rounds int) error {
	wait := time.NewTimer(delay)
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-wait.C:
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for done := 0; ; {
		m.round(ctx)
		if done++; rounds > 0 && done >= rounds {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// logf prints one INFO line as RocketMQ's tools log has it: the time, the
// level, the monitor's thread, the message.
func (m *monitor) logf(format string, args ...any) { m.logAt("INFO", format, args...) }

// logAt prints one line at level.
func (m *monitor) logAt(level, format string, args ...any) {
	fmt.Fprintf(m.out, "%s %s MonitorService - %s\n", m.now().Format("2006-01-02 15:04:05"), level, fmt.Sprintf(format, args...))
}

// round is MonitorService.doMonitorWork: every group of a %RETRY% topic,
// its undone messages then its clients' running info. A failure of the
// topic list ends the round without endRound, as RocketMQ's exception
// does; a group's failures leave its reports out.
func (m *monitor) round(ctx context.Context) {
	began := m.now()
	m.routes = map[string]namesrv.TopicRouteData{}
	m.logf(monitorPrefix + "=========================================beginRound")
	topics, err := m.g.allTopics(ctx)
	if err != nil {
		m.logAt("ERROR", "doMonitorWork Exception: %v", err)
		return
	}
	seen := map[string]bool{}
	for _, t := range topics {
		if !meta.IsRetryTopic(t) || ctx.Err() != nil {
			continue
		}
		group := retryTopicGroup(t)
		if seen[group] {
			continue
		}
		seen[group] = true
		m.reportUndoneMsgs(ctx, group)
		m.reportConsumerRunningInfo(ctx, group)
	}
	if ctx.Err() != nil {
		return
	}
	m.logf(monitorPrefix + "=========================================endRound")
	m.logf("Execute one round monitor work, spent timemills: %d", m.now().Sub(began).Milliseconds())
}

// reportUndoneMsgs reports, per topic, the messages group has not
// consumed, when its consume stats and its online clients can be read.
func (m *monitor) reportUndoneMsgs(ctx context.Context, group string) {
	table, err := m.consumeStats(ctx, group)
	if err != nil {
		return
	}
	if _, _, err := m.connections(ctx, group); err != nil {
		return
	}
	byTopic := map[string]map[adminbody.MessageQueue]adminbody.OffsetWrapper{}
	for q, ow := range table {
		if byTopic[q.Topic] == nil {
			byTopic[q.Topic] = map[adminbody.MessageQueue]adminbody.OffsetWrapper{}
		}
		byTopic[q.Topic][q] = ow
	}
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		total, single, delay := m.undone(ctx, byTopic[topic])
		m.logf(monitorPrefix+"reportUndoneMsgs: UndoneMsgs [consumerGroup=%s, topic=%s, undoneMsgsTotal=%d, undoneMsgsSingleMQ=%d, undoneMsgsDelayTimeMills=%d]",
			group, topic, total, single, delay)
	}
}

// undone is MonitorService.computeUndoneMsgs: the sum of the queues'
// positive lags, the largest lag, and the largest time between the last
// consumed message of a queue and its newest message.
func (m *monitor) undone(ctx context.Context, table map[adminbody.MessageQueue]adminbody.OffsetWrapper) (total, single, delay int64) {
	for _, q := range sortedQueues(table) {
		ow := table[q]
		diff := ow.BrokerOffset - ow.ConsumerOffset
		single = max(single, diff)
		if diff > 0 {
			total += diff
		}
		if ow.LastTimestamp > 0 {
			if stored, ok := m.newestStoreTime(ctx, q); ok {
				delay = max(delay, stored-ow.LastTimestamp)
			}
		}
	}
	return total, single, delay
}

// newestStoreTime reads the store time of the newest message of q as
// RocketMQ's monitor does: the queue's max offset from its master, then a
// pull of the message before it, as TOOLS_CONSUMER, committing nothing.
func (m *monitor) newestStoreTime(ctx context.Context, q adminbody.MessageQueue) (int64, bool) {
	route, ok := m.routes[q.Topic]
	if !ok {
		var err error
		if route, err = m.g.route(ctx, q.Topic); err != nil {
			return 0, false
		}
		m.routes[q.Topic] = route
	}
	master, ok := mastersByName(route)[q.BrokerName]
	if !ok {
		return 0, false
	}
	maxOff, err := m.g.queueOffsetAt(ctx, master, q.Topic, int(q.QueueID), math.MaxInt64)
	if err != nil || maxOff <= 0 {
		return 0, false
	}
	addr, ok := brokerAddrOf(route, q.BrokerName)
	if !ok {
		return 0, false
	}
	p, err := m.g.pullOnce(ctx, toolsConsumerGroup, addr, q.BrokerName, q.Topic, "*", int(q.QueueID), maxOff-1, 1)
	if err != nil || p.code != remoting.Success || len(p.msgs) == 0 {
		return 0, false
	}
	return p.msgs[0].StoreTimestamp, true
}

// consumeStats is RocketMQ's examineConsumeStats of a group: the
// GET_CONSUME_STATS of a broker of every group of the route of its
// %RETRY% topic (the master, else a slave), merged. Any failure fails it.
func (m *monitor) consumeStats(ctx context.Context, group string) (map[adminbody.MessageQueue]adminbody.OffsetWrapper, error) {
	route, err := m.g.route(ctx, meta.RetryTopic(group))
	if err != nil {
		return nil, err
	}
	all := map[adminbody.MessageQueue]adminbody.OffsetWrapper{}
	for _, bd := range route.BrokerDatas {
		addr, ok := selectBrokerAddr(bd.BrokerAddrs)
		if !ok {
			continue
		}
		resp, err := m.g.invoke(ctx, addr, remoting.GetConsumeStats, remoting.Header{"consumerGroup": group}, nil)
		if err != nil {
			return nil, err
		}
		table, _, err := adminbody.DecodeConsumeStats(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("consume stats of %s on %s: %w", group, addr, err)
		}
		maps.Copy(all, table)
	}
	return all, nil
}

// connections is RocketMQ's examineConsumerConnectionInfo: the group's
// clients as a broker of its %RETRY% topic's route knows them, and that
// broker's address; none is an error (CONSUMER_NOT_ONLINE).
func (m *monitor) connections(ctx context.Context, group string) (adminbody.ConsumerConnection, string, error) {
	addr, err := m.g.groupBroker(ctx, group)
	if err != nil {
		return adminbody.ConsumerConnection{}, "", err
	}
	cc, err := m.g.consumerConnections(ctx, addr, group)
	if err == nil && len(cc.ConnectionSet) == 0 {
		err = fmt.Errorf("not found the consumer group connection: no client of %s on %s", group, addr)
	}
	return cc, addr, err
}

// reportConsumerRunningInfo asks each online client of group (of version
// 3.1.8 or later) for its running info and reports as RocketMQ's
// DefaultMonitorListener does: a NOTIFY line when the push consumers
// subscribe differently, one per client with queues that look blocked.
func (m *monitor) reportConsumerRunningInfo(ctx context.Context, group string) {
	cc, addr, err := m.connections(ctx, group)
	if err != nil {
		return
	}
	infos := map[string]*adminbody.ConsumerRunningInfo{}
	for _, c := range cc.ConnectionSet {
		if c.Version < minRunningInfoVersion {
			continue
		}
		info, err := m.g.consumerRunningInfo(ctx, addr, group, c.ClientID, false)
		if err != nil {
			continue
		}
		infos[c.ClientID] = &info
	}
	if len(infos) == 0 {
		return
	}
	ids := slices.Sorted(maps.Keys(infos))
	// RocketMQ names the group as its first client's properties do.
	named := "null"
	if v, ok := infos[ids[0]].Properties["consumerGroup"]; ok {
		named = v
	}
	now := m.now()
	if !sameSubscriptions(ids, infos, now) {
		m.logf(monitorNotify+"reportConsumerRunningInfo: ConsumerGroup: %s, Subscription different", named)
	}
	for _, id := range ids {
		if warn := processQueueWarnings(id, infos[id], now); warn != "" {
			m.logf(monitorNotify+"reportConsumerRunningInfo: ConsumerGroup: %s, ClientId: %s, %s", named, id, strings.TrimSuffix(warn, "\n"))
		}
	}
}
