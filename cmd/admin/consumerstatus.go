package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// consumerStatusCmd is mqadmin consumerStatus: the running info of a
// consumer group's clients (GET_CONSUMER_RUNNING_INFO, which the broker
// relays to the client on its connection). With -i, one client's info is
// printed; without, every client of the group's connection list is asked,
// each answer written to the file <ms>/<clientId> under the working
// directory as mqadmin writes it, a line printed per client, and the
// group's subscriptions and queues checked.
func consumerStatusCmd(g *globals) *cobra.Command {
	var group, clientID string
	var jstack bool
	cmd := &cobra.Command{
		Use:   "consumerStatus",
		Short: "print the running info of a consumer group's clients, relayed by a broker (GET_CONSUMER_RUNNING_INFO)",
		Long: `consumerStatus asks a consumer group's clients for their running info (their
properties, subscriptions, queues, rates), as mqadmin consumerStatus: through
the -b broker, or else a broker of the route of the group's %RETRY% topic.
With -i, that client's info is printed. Without, the clients of the group's
connection list (GET_CONSUMER_CONNECTION_LIST) are asked in turn, each
answer written to <ms>/<clientId> under the working directory, and a
summary printed. -s asks the clients for their threads' stacks too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			group, clientID = strings.TrimSpace(group), strings.TrimSpace(clientID)
			addr := strings.TrimSpace(g.broker)
			if !cmd.Flags().Changed("broker") {
				var err error
				if addr, err = g.groupBroker(ctx, group); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if clientID != "" {
				info, err := g.consumerRunningInfo(ctx, addr, group, clientID, jstack)
				if err != nil {
					return err
				}
				_, err = io.WriteString(w, formatRunningInfo(&info))
				return err
			}
			cc, err := g.consumerConnections(ctx, addr, group)
			if err != nil {
				return err
			}
			if len(cc.ConnectionSet) == 0 {
				return fmt.Errorf("not found the consumer group connection: no client of %s on %s", group, addr)
			}
			sort.Slice(cc.ConnectionSet, func(i, j int) bool { return cc.ConnectionSet[i].ClientID < cc.ConnectionSet[j].ClientID })
			now := time.Now()
			fmt.Fprintf(w, "%-10s %-40s %-20s %s\n", "#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")
			infos := map[string]*adminbody.ConsumerRunningInfo{}
			var ids []string
			for _, c := range cc.ConnectionSet {
				info, err := g.consumerRunningInfo(ctx, addr, group, c.ClientID, jstack)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					continue
				}
				path := filepath.Join(strconv.FormatInt(now.UnixMilli(), 10), c.ClientID)
				if err := writeRunningInfo(path, &info); err != nil {
					return err
				}
				infos[c.ClientID] = &info
				ids = append(ids, c.ClientID)
				fmt.Fprintf(w, "%-10d %-40s %-20s %s\n", len(ids), c.ClientID, remoting.VersionName(int(c.Version)), path)
			}
			if len(ids) == 0 {
				return nil
			}
			if !sameSubscriptions(ids, infos, now) {
				fmt.Fprint(w, "\n\nWARN: Different subscription in the same group of consumer!!!\n")
				return nil
			}
			fmt.Fprint(w, "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n")
			for _, id := range ids {
				fmt.Fprint(w, processQueueWarnings(id, infos[id], now))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "consumerGroup", "g", "", "consumer group name")
	f.StringVarP(&clientID, "clientId", "i", "", "the client id of one consumer")
	f.BoolVarP(&jstack, "jstack", "s", false, "ask the clients for their threads' stacks too")
	_ = cmd.MarkFlagRequired("consumerGroup")
	return cmd
}

// groupBroker returns the broker mqadmin asks about a consumer group: one
// of the route of the group's %RETRY% topic (firstBroker).
func (g *globals) groupBroker(ctx context.Context, group string) (string, error) {
	topic := meta.RetryTopic(group)
	route, err := g.route(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("-g %s: %w", group, err)
	}
	if addr, ok := firstBroker(route); ok {
		return addr, nil
	}
	return "", fmt.Errorf("-g %s: the route of %s names no broker", group, topic)
}

// firstBroker returns the broker mqadmin asks about a route's clients:
// of the broker groups with an address, the first by name here (mqadmin
// picks one at random), its master or else a slave.
func firstBroker(route namesrv.TopicRouteData) (string, bool) {
	names := make([]string, 0, len(route.BrokerDatas))
	for _, bd := range route.BrokerDatas {
		names = append(names, bd.BrokerName)
	}
	sort.Strings(names)
	for _, name := range names {
		if addr, ok := brokerAddrOf(route, name); ok {
			return addr, true
		}
	}
	return "", false
}

// consumerConnections asks the broker at addr for a consumer group's
// connections (GET_CONSUMER_CONNECTION_LIST).
func (g *globals) consumerConnections(ctx context.Context, addr, group string) (adminbody.ConsumerConnection, error) {
	var cc adminbody.ConsumerConnection
	resp, err := g.invoke(ctx, addr, remoting.GetConsumerConnectionList, remoting.Header{"consumerGroup": group}, nil)
	if err != nil {
		return cc, fmt.Errorf("connections of consumer group %s on %s: %w", group, addr, err)
	}
	if err := json.Unmarshal(resp.Body, &cc); err != nil {
		return cc, fmt.Errorf("decode the connections of %s from %s: %w", group, addr, err)
	}
	return cc, nil
}

// consumerRunningInfo asks the broker at addr for a client's running info.
func (g *globals) consumerRunningInfo(ctx context.Context, addr, group, clientID string, jstack bool) (adminbody.ConsumerRunningInfo, error) {
	h := remoting.Header{"consumerGroup": group, "clientId": clientID}
	h.SetBool("jstackEnable", jstack)
	resp, err := g.invoke(ctx, addr, remoting.GetConsumerRunningInfo, h, nil)
	if err != nil {
		return adminbody.ConsumerRunningInfo{}, fmt.Errorf("running info of %s of %s through %s: %w", clientID, group, addr, err)
	}
	info, err := adminbody.DecodeConsumerRunningInfo(resp.Body)
	if err != nil {
		return info, fmt.Errorf("running info of %s of %s: %w", clientID, group, err)
	}
	return info, nil
}

// writeRunningInfo writes a client's formatted running info to path,
// creating its directory.
func writeRunningInfo(path string, info *adminbody.ConsumerRunningInfo) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("running info file %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(formatRunningInfo(info)), 0o644); err != nil {
		return fmt.Errorf("running info file %s: %w", path, err)
	}
	return nil
}

// Properties of a ConsumerRunningInfo that consumerStatus reads.
const (
	propConsumeType    = "PROP_CONSUME_TYPE"
	propConsumeOrderly = "PROP_CONSUMEORDERLY"
	propStartTimestamp = "PROP_CONSUMER_START_TIMESTAMP"
	consumePassively   = "CONSUME_PASSIVELY"
)

// sameSubscriptions is mqadmin's check of a group's clients: push
// consumers started over two minutes ago (as the first client says) must
// subscribe the same topics with the same expressions (RocketMQ compares
// the sets by topic and expression).
func sameSubscriptions(ids []string, infos map[string]*adminbody.ConsumerRunningInfo, now time.Time) bool {
	first := infos[ids[0]]
	start, err := strconv.ParseInt(first.Properties[propStartTimestamp], 10, 64)
	if first.Properties[propConsumeType] != consumePassively || err != nil || now.UnixMilli()-start <= 2*60*1000 {
		return true
	}
	key := func(info *adminbody.ConsumerRunningInfo) string {
		subs := make([]string, 0, len(info.SubscriptionSet))
		for _, s := range info.SubscriptionSet {
			subs = append(subs, s.Topic+"@"+s.SubString)
		}
		sort.Strings(subs)
		return strings.Join(subs, "\n")
	}
	want := key(first)
	for _, id := range ids[1:] {
		if key(infos[id]) != want {
			return false
		}
	}
	return true
}

// processQueueWarnings is mqadmin's check of a push consumer's queues: an
// orderly one's queues it cannot lock or unlock, a concurrent one's queues
// with cached messages and nothing consumed for a minute.
func processQueueWarnings(clientID string, info *adminbody.ConsumerRunningInfo, now time.Time) string {
	if info.Properties[propConsumeType] != consumePassively {
		return ""
	}
	orderly := strings.EqualFold(info.Properties[propConsumeOrderly], "true")
	var sb strings.Builder
	for _, q := range sortedQueues(info.MQTable) {
		pq := info.MQTable[q]
		switch {
		case orderly && !pq.Locked:
			fmt.Fprintf(&sb, "%s %s can't lock for a while, %dms\n", clientID, queueString(q), now.UnixMilli()-pq.LastLockTimestamp)
		case orderly && pq.Droped && pq.TryUnlockTimes > 0:
			fmt.Fprintf(&sb, "%s %s unlock %d times, still failed\n", clientID, queueString(q), pq.TryUnlockTimes)
		case !orderly:
			if diff := now.UnixMilli() - pq.LastConsumeTimestamp; diff > 60*1000 && pq.CachedMsgCount > 0 {
				fmt.Fprintf(&sb, "%s %s can't consume for a while, maybe blocked, %dms\n", clientID, queueString(q), diff)
			}
		}
	}
	return sb.String()
}

// queueString writes a queue as Java's MessageQueue.toString.
func queueString(q adminbody.MessageQueue) string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", q.Topic, q.BrokerName, q.QueueID)
}

// humanMillis writes a time in ms as RocketMQ's timeMillisToHumanString:
// yyyyMMddHHmmssSSS in local time.
func humanMillis(ms int64) string {
	t := time.UnixMilli(ms)
	return t.Format("20060102150405") + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
}

// formatRunningInfo writes a client's running info as RocketMQ's
// ConsumerRunningInfo.formatString: properties, subscriptions, each
// queue's offset and state, POP queues, rates per topic, the user's info,
// then the stacks when the client sent them. Maps are in key order.
func formatRunningInfo(info *adminbody.ConsumerRunningInfo) string {
	var sb strings.Builder
	sb.WriteString("#Consumer Properties#\n")
	for _, k := range sortedKeys(info.Properties) {
		fmt.Fprintf(&sb, "%-40s: %s\n", k, info.Properties[k])
	}
	sb.WriteString("\n\n#Consumer Subscription#\n")
	subs := append([]adminbody.SubscriptionData(nil), info.SubscriptionSet...)
	sort.Slice(subs, func(i, j int) bool { return subs[i].Topic+"@"+subs[i].SubString < subs[j].Topic+"@"+subs[j].SubString })
	for i, s := range subs {
		fmt.Fprintf(&sb, "%03d Topic: %-40s ClassFilter: %-8t SubExpression: %s\n", i+1, s.Topic, s.ClassFilterMode, s.SubString)
	}
	queues := sortedQueues(info.MQTable)
	sb.WriteString("\n\n#Consumer Offset#\n")
	fmt.Fprintf(&sb, "%-64s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#Consumer Offset")
	for _, q := range queues {
		fmt.Fprintf(&sb, "%-32s  %-32s  %-4d  %-20d\n", q.Topic, q.BrokerName, q.QueueID, info.MQTable[q].CommitOffset)
	}
	sb.WriteString("\n\n#Consumer MQ Detail#\n")
	fmt.Fprintf(&sb, "%-64s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo")
	for _, q := range queues {
		pq := info.MQTable[q]
		fmt.Fprintf(&sb, "%-64s  %-32s  %-4d  ProcessQueueInfo [commitOffset=%d, cachedMsgMinOffset=%d, cachedMsgMaxOffset=%d, "+
			"cachedMsgCount=%d, cachedMsgSizeInMiB=%d, transactionMsgMinOffset=%d, transactionMsgMaxOffset=%d, transactionMsgCount=%d, "+
			"locked=%t, tryUnlockTimes=%d, lastLockTimestamp=%s, droped=%t, lastPullTimestamp=%s, lastConsumeTimestamp=%s]\n",
			q.Topic, q.BrokerName, q.QueueID, pq.CommitOffset, pq.CachedMsgMinOffset, pq.CachedMsgMaxOffset,
			pq.CachedMsgCount, pq.CachedMsgSizeInMiB, pq.TransactionMsgMinOffset, pq.TransactionMsgMaxOffset, pq.TransactionMsgCount,
			pq.Locked, pq.TryUnlockTimes, humanMillis(pq.LastLockTimestamp), pq.Droped, humanMillis(pq.LastPullTimestamp), humanMillis(pq.LastConsumeTimestamp))
	}
	sb.WriteString("\n\n#Consumer Pop Detail#\n")
	fmt.Fprintf(&sb, "%-32s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo")
	for _, q := range sortedQueues(info.MQPopTable) {
		pp := info.MQPopTable[q]
		fmt.Fprintf(&sb, "%-32s  %-32s  %-4d  PopProcessQueueInfo [waitAckCount:%d, droped:%t, lastPopTimestamp:%d]\n",
			q.Topic, q.BrokerName, q.QueueID, pp.WaitAckCount, pp.Droped, pp.LastPopTimestamp)
	}
	sb.WriteString("\n\n#Consumer RT&TPS#\n")
	fmt.Fprintf(&sb, "%-64s  %14s %14s %14s %14s %18s %25s\n", "#Topic", "#Pull RT", "#Pull TPS", "#Consume RT",
		"#ConsumeOK TPS", "#ConsumeFailed TPS", "#ConsumeFailedMsgsInHour")
	for _, topic := range sortedKeys(info.StatusTable) {
		s := info.StatusTable[topic]
		fmt.Fprintf(&sb, "%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d\n", topic, s.PullRT, s.PullTPS, s.ConsumeRT,
			s.ConsumeOKTPS, s.ConsumeFailedTPS, s.ConsumeFailedMsgs)
	}
	// Always, as RocketMQ's: its userConsumerInfo is never null, only
	// empty when the client sent none.
	sb.WriteString("\n\n#User Consume Info#\n")
	for _, k := range sortedKeys(info.UserConsumerInfo) {
		fmt.Fprintf(&sb, "%-40s: %s\n", k, info.UserConsumerInfo[k])
	}
	if info.Jstack != nil {
		sb.WriteString("\n\n#Consumer jstack#\n")
		sb.WriteString(*info.Jstack)
	}
	return sb.String()
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
