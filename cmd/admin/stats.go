package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// sortedQueues returns the queues of a table by topic, broker and queue id.
func sortedQueues[V any](table map[adminbody.MessageQueue]V) []adminbody.MessageQueue {
	qs := make([]adminbody.MessageQueue, 0, len(table))
	for q := range table {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Less(qs[j]) })
	return qs
}

// formatMillis writes a store time in ms as RFC 3339 in the local zone,
// or "-" when there is none (0).
func formatMillis(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(time.RFC3339)
}

// newTable returns a writer aligning tab-separated columns.
func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
}

// statsTargets returns the brokers a statistics command asks: the -b
// broker when given, else every master of routeTopic's route (mqadmin's
// examineTopicStats and examineConsumeStats).
func (g *globals) statsTargets(cmd *cobra.Command, routeTopic string) ([]string, error) {
	if cmd.Flags().Changed("broker") {
		return []string{g.broker}, nil
	}
	return g.masters(cmd.Context(), routeTopic)
}

// topicStatusCmd is mqadmin topicStatus: GET_TOPIC_STATS_INFO of every
// master of the topic's route, or of -b; with -c, of a broker of each
// group of the route of -c instead (a cluster, or an LMQ's parent topic),
// the master or else a slave (RocketMQ's BrokerData.selectBrokerAddr), as
// mqadmin's asks for a light message queue, which has no route.
func topicStatusCmd(g *globals) *cobra.Command {
	var topic, cluster string
	cmd := &cobra.Command{
		Use:   "topicStatus",
		Short: "print the offset range and last store time of every queue of a topic, from every master of its route or -b (GET_TOPIC_STATS_INFO)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var addrs []string
			var err error
			if cluster = strings.TrimSpace(cluster); cluster != "" && !cmd.Flags().Changed("broker") {
				addrs, err = g.routeBrokers(cmd.Context(), cluster)
			} else {
				addrs, err = g.statsTargets(cmd, topic)
			}
			if err != nil {
				return err
			}
			all := map[adminbody.MessageQueue]adminbody.TopicOffset{}
			for _, addr := range addrs {
				resp, err := g.invoke(cmd.Context(), addr, remoting.GetTopicStatsInfo, remoting.Header{"topic": topic}, nil)
				if err != nil {
					return err
				}
				table, _, err := adminbody.DecodeTopicStats(resp.Body)
				if err != nil {
					return fmt.Errorf("topic status of %s on %s: %w", topic, addr, err)
				}
				maps.Copy(all, table)
			}
			return printTopicStatus(cmd.OutOrStdout(), all)
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&cluster, "cluster", "c", "", "ask the brokers of this cluster's route (or an LMQ parent topic's) instead of the topic's")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// routeBrokers returns a broker of each group of routeTopic's route, the
// master or else its slave of lowest id, sorted.
func (g *globals) routeBrokers(ctx context.Context, routeTopic string) ([]string, error) {
	route, err := g.route(ctx, routeTopic)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, bd := range route.BrokerDatas {
		if a, ok := selectBrokerAddr(bd.BrokerAddrs); ok {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("route of %s names no broker", routeTopic)
	}
	sort.Strings(addrs)
	return addrs, nil
}

func printTopicStatus(out io.Writer, table map[adminbody.MessageQueue]adminbody.TopicOffset) error {
	w := newTable(out)
	fmt.Fprintln(w, "BROKER\tQUEUE\tMIN OFFSET\tMAX OFFSET\tLAST UPDATE")
	for _, q := range sortedQueues(table) {
		o := table[q]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\n", q.BrokerName, q.QueueID, o.MinOffset, o.MaxOffset, formatMillis(o.LastUpdateTimestamp))
	}
	return w.Flush()
}

func consumerProgressCmd(g *globals) *cobra.Command {
	var group, topic, cluster string
	var showClientIP bool
	cmd := &cobra.Command{
		Use:   "consumerProgress",
		Short: "print a consumer group's offsets and lag per queue, from every master of the route or -b (GET_CONSUME_STATS)",
		Long: `consumerProgress prints a consumer group's offsets and lag per queue, asking
-b, or every master of the route of -t (of the group's retry topic without
-t), as mqadmin's examineConsumeStats. Without -g it lists every consumer
group (each %RETRY% topic the name servers know) with its online clients,
their lowest version, consume type and model, its consume TPS and total
diff, as mqadmin consumerProgress without -g.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group = strings.TrimSpace(group); group == "" {
				if topic != "" {
					return fmt.Errorf("-t %s needs -g: without -g every group is listed", topic)
				}
				return g.printAllGroupsProgress(cmd)
			}
			routeTopic := meta.RetryTopic(group)
			h := remoting.Header{"consumerGroup": group}
			if topic != "" {
				h["topic"] = topic
				routeTopic = topic
				if cluster = strings.TrimSpace(cluster); cluster != "" && (strings.HasPrefix(topic, lmqPrefix) || topic == wheelTimerTopic) {
					routeTopic = cluster
				}
			}
			addrs, err := g.statsTargets(cmd, routeTopic)
			if err != nil && topic == "" {
				// A group none of whose consumers ever connected (one
				// created by updateSubGroup, or moved with a store) has
				// no retry topic yet, as with mqadmin.
				return fmt.Errorf("%w (without -t the brokers are those of the group's retry topic %s, which a broker creates when a consumer of the group first connects: give -t TOPIC or -b BROKER)", err, routeTopic)
			}
			if err != nil {
				return err
			}
			all := map[adminbody.MessageQueue]adminbody.OffsetWrapper{}
			for _, addr := range addrs {
				resp, err := g.invoke(cmd.Context(), addr, remoting.GetConsumeStats, h, nil)
				if err != nil {
					return err
				}
				table, _, err := adminbody.DecodeConsumeStats(resp.Body)
				if err != nil {
					return fmt.Errorf("consumer progress of %s on %s: %w", group, addr, err)
				}
				maps.Copy(all, table)
			}
			var clientIPs map[adminbody.MessageQueue]string
			if showClientIP {
				clientIPs = g.queueClients(cmd, group)
			}
			return printConsumerProgress(cmd.OutOrStdout(), all, clientIPs)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group (default: list every group)")
	f.StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic the group consumes)")
	f.StringVarP(&cluster, "cluster", "c", "", "for an LMQ (or the timer wheel's topic) -t: the cluster or parent topic whose route to use, as mqadmin's")
	f.VarP(javaBool{&showClientIP}, "showClientIP", "s", "true: a column of the client (its IP, the client id before '@') each queue is allocated to, from the clients' running info")
	return cmd
}

// queueClients maps each queue a consumer group's online clients pull to
// the client's IP (its client id up to '@'), as mqadmin consumerProgress
// -s finds them: the group's connections, then each client's running
// info, relayed by a broker of the group's retry topic. A client or
// broker that does not answer is reported and left out, as mqadmin's
// leaves its queues "N/A".
func (g *globals) queueClients(cmd *cobra.Command, group string) map[adminbody.MessageQueue]string {
	out := map[adminbody.MessageQueue]string{}
	ctx := cmd.Context()
	addr, err := g.groupBroker(ctx, group)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "consumerProgress -s:", err)
		return out
	}
	cc, err := g.consumerConnections(ctx, addr, group)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "consumerProgress -s:", err)
		return out
	}
	for _, c := range cc.ConnectionSet {
		info, err := g.consumerRunningInfo(ctx, addr, group, c.ClientID, false)
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "consumerProgress -s:", err)
			continue
		}
		ip, _, _ := strings.Cut(c.ClientID, "@")
		for q := range info.MQTable {
			out[q] = ip
		}
	}
	return out
}

// retryTopicGroup returns the consumer group of a %RETRY% topic, as
// RocketMQ's KeyBuilder.parseGroup reads it: a POP retry topic of the
// second format, %RETRY%<group>+<topic>, names its group before the '+'.
func retryTopicGroup(topic string) string {
	rest := strings.TrimPrefix(topic, meta.RetryGroupTopicPrefix)
	if parts := strings.Split(rest, "+"); len(parts) == 2 {
		return parts[0]
	}
	return rest
}

// groupConsumeStats is mqadmin's examineConsumeStats of a group: the
// GET_CONSUME_STATS of every master of the route of its retry topic,
// merged, their consume TPS summed.
func (g *globals) groupConsumeStats(ctx context.Context, group string) (map[adminbody.MessageQueue]adminbody.OffsetWrapper, float64, error) {
	addrs, err := g.masters(ctx, meta.RetryTopic(group))
	if err != nil {
		return nil, 0, err
	}
	all := map[adminbody.MessageQueue]adminbody.OffsetWrapper{}
	var tps float64
	for _, addr := range addrs {
		resp, err := g.invoke(ctx, addr, remoting.GetConsumeStats, remoting.Header{"consumerGroup": group}, nil)
		if err != nil {
			return nil, 0, err
		}
		table, rate, err := adminbody.DecodeConsumeStats(resp.Body)
		if err != nil {
			return nil, 0, fmt.Errorf("consume stats of %s on %s: %w", group, addr, err)
		}
		maps.Copy(all, table)
		tps += rate
	}
	return all, tps, nil
}

// printAllGroupsProgress is mqadmin consumerProgress without -g: a line
// per consumer group of the %RETRY% topics the name servers list, with
// its clients (OFFLINE without any), consume TPS and total diff. A group
// whose stats or clients cannot be read is printed with what could.
func (g *globals) printAllGroupsProgress(cmd *cobra.Command) error {
	ctx := cmd.Context()
	topics, err := g.allTopics(ctx)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s\n", "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
	seen := map[string]bool{}
	for _, t := range topics {
		if !meta.IsRetryTopic(t) {
			continue
		}
		group := retryTopicGroup(t)
		if seen[group] {
			continue
		}
		seen[group] = true
		var tps, diff int64
		if table, rate, err := g.groupConsumeStats(ctx, group); err == nil {
			tps = int64(rate)
			for _, o := range table {
				diff += o.BrokerOffset - o.ConsumerOffset
			}
		}
		count, version, ctype, model := 0, "OFFLINE", "", ""
		if addr, err := g.groupBroker(ctx, group); err == nil {
			if cc, err := g.consumerConnections(ctx, addr, group); err == nil && len(cc.ConnectionSet) > 0 {
				count = len(cc.ConnectionSet)
				minVersion := int32(math.MaxInt32)
				for _, c := range cc.ConnectionSet {
					minVersion = min(minVersion, c.Version)
				}
				version = remoting.VersionName(int(minVersion))
				ctype = "PUSH"
				if cc.ConsumeType == "CONSUME_ACTIVELY" {
					ctype = "PULL"
				}
				if cc.ConsumeType == "CONSUME_PASSIVELY" {
					model = cc.MessageModel
				}
			}
		}
		fmt.Fprintf(w, "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d\n", frontStringAtLeast(group, 64), count, version, ctype, model, tps, diff)
	}
	return nil
}

// frontStringAtLeast is RocketMQ's UtilAll.frontStringAtLeast: the first
// size characters of s, which mqadmin consumerProgress prints of a group's
// name so the columns after it keep their place.
func frontStringAtLeast(s string, size int) string {
	if r := []rune(s); len(r) > size {
		return string(r[:size])
	}
	return s
}

// printConsumerProgress prints a group's queues; with clientIPs (not nil,
// consumerProgress -s) a CLIENT IP column too, "N/A" for a queue no
// online client holds.
func printConsumerProgress(out io.Writer, table map[adminbody.MessageQueue]adminbody.OffsetWrapper, clientIPs map[adminbody.MessageQueue]string) error {
	w := newTable(out)
	if clientIPs != nil {
		fmt.Fprintln(w, "TOPIC\tBROKER\tQUEUE\tBROKER OFFSET\tCONSUMER OFFSET\tCLIENT IP\tDIFF\tLAST TIME")
	} else {
		fmt.Fprintln(w, "TOPIC\tBROKER\tQUEUE\tBROKER OFFSET\tCONSUMER OFFSET\tDIFF\tLAST TIME")
	}
	var total int64
	for _, q := range sortedQueues(table) {
		o := table[q]
		diff := o.BrokerOffset - o.ConsumerOffset
		total += diff
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t", q.Topic, q.BrokerName, q.QueueID, o.BrokerOffset, o.ConsumerOffset)
		if clientIPs != nil {
			fmt.Fprintf(w, "%s\t", cmp.Or(clientIPs[q], "N/A"))
		}
		fmt.Fprintf(w, "%d\t%s\n", diff, formatMillis(o.LastTimestamp))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "total diff: %d\n", total)
	return err
}

func brokerConsumeStatsCmd(g *globals) *cobra.Command {
	var level, timeoutMillis int64
	var order bool
	cmd := &cobra.Command{
		Use:   "brokerConsumeStats",
		Short: "print every consumer group's offsets and lag on a broker (GET_BROKER_CONSUME_STATS)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("timeoutMillis") {
				if timeoutMillis <= 0 {
					return fmt.Errorf("-t %d: want a positive timeout in milliseconds", timeoutMillis)
				}
				g.timeout = time.Duration(timeoutMillis) * time.Millisecond
			}
			h := remoting.Header{"isOrder": strconv.FormatBool(order)}
			resp, err := g.invoke(cmd.Context(), g.broker, remoting.GetBrokerConsumeStats, h, nil)
			if err != nil {
				return err
			}
			_, groups, total, err := adminbody.DecodeConsumeStatsList(resp.Body)
			if err != nil {
				return fmt.Errorf("broker consume stats of %s: %w", g.broker, err)
			}
			return printBrokerConsumeStats(cmd.OutOrStdout(), groups, total, level)
		},
	}
	f := cmd.Flags()
	f.Int64VarP(&level, "level", "l", 0, "only queues whose diff is at least this")
	f.VarP(javaBool{&order}, "order", "o", "only ordered topics (true|false)")
	f.Int64VarP(&timeoutMillis, "timeoutMillis", "t", 50000, "timeout of the request in milliseconds (as mqadmin's; --timeout too)")
	return cmd
}

func printBrokerConsumeStats(out io.Writer, groups []adminbody.GroupConsumeStats, total, level int64) error {
	w := newTable(out)
	fmt.Fprintln(w, "TOPIC\tGROUP\tBROKER\tQUEUE\tBROKER OFFSET\tCONSUMER OFFSET\tDIFF\tLAST TIME")
	sort.Slice(groups, func(i, j int) bool { return groups[i].Group < groups[j].Group })
	for _, gs := range groups {
		for _, table := range gs.Topics {
			for _, q := range sortedQueues(table) {
				o := table[q]
				if diff := o.BrokerOffset - o.ConsumerOffset; diff >= level {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", q.Topic, gs.Group, q.BrokerName, q.QueueID,
						o.BrokerOffset, o.ConsumerOffset, diff, formatMillis(o.LastTimestamp))
				}
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "total diff: %d\n", total)
	return err
}

func consumerConnectionCmd(g *globals) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "consumerConnection",
		Short: "print a consumer group's live clients and subscriptions (GET_CONSUMER_CONNECTION_LIST)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := g.consumerConnections(cmd.Context(), g.broker, group)
			if err != nil {
				return err
			}
			return printConsumerConnection(cmd.OutOrStdout(), &cc)
		},
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func printConsumerConnection(out io.Writer, cc *adminbody.ConsumerConnection) error {
	w := newTable(out)
	sort.Slice(cc.ConnectionSet, func(i, j int) bool { return cc.ConnectionSet[i].ClientID < cc.ConnectionSet[j].ClientID })
	fmt.Fprintln(w, "CLIENT ID\tADDRESS\tLANGUAGE\tVERSION")
	for _, c := range cc.ConnectionSet {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", c.ClientID, c.ClientAddr, c.Language, c.Version)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "consume type:\t%s\nmessage model:\t%s\nconsume from:\t%s\n", cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere)
	fmt.Fprintln(w)
	topics := make([]string, 0, len(cc.SubscriptionTable))
	for t := range cc.SubscriptionTable {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	fmt.Fprintln(w, "TOPIC\tTYPE\tEXPRESSION")
	for _, t := range topics {
		s := cc.SubscriptionTable[t]
		fmt.Fprintf(w, "%s\t%s\t%s\n", t, s.ExpressionType, s.SubString)
	}
	return w.Flush()
}
