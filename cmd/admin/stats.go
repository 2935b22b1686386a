package main

import (
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
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

func topicStatusCmd(g *globals) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "topicStatus",
		Short: "print the offset range and last store time of every queue of a topic, from every master of its route or -b (GET_TOPIC_STATS_INFO)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := g.statsTargets(cmd, topic)
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
	_ = cmd.MarkFlagRequired("topic")
	return cmd
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
	var group, topic string
	cmd := &cobra.Command{
		Use:   "consumerProgress",
		Short: "print a consumer group's offsets and lag per queue, from every master of the route or -b (GET_CONSUME_STATS)",
		Long: `consumerProgress prints a consumer group's offsets and lag per queue, asking
-b, or every master of the route of -t (of the group's retry topic without
-t), as mqadmin's examineConsumeStats.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			routeTopic := meta.RetryTopic(group)
			h := remoting.Header{"consumerGroup": group}
			if topic != "" {
				h["topic"] = topic
				routeTopic = topic
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
			return printConsumerProgress(cmd.OutOrStdout(), all)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "group", "g", "", "consumer group")
	f.StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic the group consumes)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func printConsumerProgress(out io.Writer, table map[adminbody.MessageQueue]adminbody.OffsetWrapper) error {
	w := newTable(out)
	fmt.Fprintln(w, "TOPIC\tBROKER\tQUEUE\tBROKER OFFSET\tCONSUMER OFFSET\tDIFF\tLAST TIME")
	var total int64
	for _, q := range sortedQueues(table) {
		o := table[q]
		diff := o.BrokerOffset - o.ConsumerOffset
		total += diff
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", q.Topic, q.BrokerName, q.QueueID,
			o.BrokerOffset, o.ConsumerOffset, diff, formatMillis(o.LastTimestamp))
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
