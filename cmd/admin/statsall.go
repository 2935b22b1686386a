package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/brokerstats"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// statsAllCmd is mqadmin statsAll: per topic and consumer group, the
// messages waiting, the in and out rates over the last minute and the
// messages in and out over the last day, summed over the topic's master
// brokers. As mqadmin, a broker that cannot answer counts as zero and a
// topic without a route is skipped (with a line on stderr), so one dead
// broker does not hide the table.
func statsAllCmd(g *globals) *cobra.Command {
	var topic string
	var active bool
	cmd := &cobra.Command{
		Use:   "statsAll",
		Short: "print every topic's in/out rates (last minute) and messages (last day) per consumer group (VIEW_BROKER_STATS_DATA)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			topics := []string{topic}
			if topic == "" {
				var err error
				if topics, err = g.allTopics(ctx); err != nil {
					return err
				}
			}
			w := newTable(cmd.OutOrStdout())
			fmt.Fprintln(w, "#Topic\t#Consumer Group\t#Accumulation\t#InTPS\t#OutTPS\t#InMsg24Hour\t#OutMsg24Hour")
			for _, t := range topics {
				if meta.IsRetryTopic(t) || meta.IsDLQTopic(t) {
					continue
				}
				s, err := g.topicStats(ctx, t)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "statsAll: %s skipped: %v\n", t, err)
					continue
				}
				if len(s.groups) == 0 {
					if !active || s.inDay > 0 {
						fmt.Fprintf(w, "%s\t\t0\t%.2f\t\t%d\tNO_CONSUMER\n", t, s.inTPS, s.inDay)
					}
					continue
				}
				for _, r := range s.groups {
					if active && s.inDay == 0 && r.outDay == 0 {
						continue
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%.2f\t%.2f\t%d\t%d\n", t, r.group, r.accumulation, s.inTPS, r.outTPS, s.inDay, r.outDay)
				}
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic of the name server)")
	f.BoolVarP(&active, "active", "a", false, "only the rows with messages in or out over the last day")
	return cmd
}

// topicStatsAll is one topic's part of statsAll.
type topicStatsAll struct {
	inTPS  float64
	inDay  int64
	groups []groupStatsAll
}

// groupStatsAll is one consumer group's row of a topic.
type groupStatsAll struct {
	group        string
	accumulation int64
	outTPS       float64
	outDay       int64
}

// topicStats gathers a topic's statistics over its master brokers. Only a
// topic without a route is an error.
func (g *globals) topicStats(ctx context.Context, topic string) (topicStatsAll, error) {
	var out topicStatsAll
	masters, err := g.masters(ctx, topic)
	if err != nil {
		return out, err
	}
	groups := map[string]bool{}
	for _, addr := range masters {
		d := g.brokerStats(ctx, addr, brokerstats.TopicPutNums, topic)
		out.inTPS += d.Minute.TPS
		out.inDay += dayTotal(d)
		consumers, _ := g.topicConsumers(ctx, addr, topic)
		for _, c := range consumers {
			groups[c] = true
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, group := range names {
		r := groupStatsAll{group: group}
		for _, addr := range masters {
			d := g.brokerStats(ctx, addr, brokerstats.GroupGetNums, brokerstats.GroupKey(topic, group))
			r.outTPS += d.Minute.TPS
			r.outDay += dayTotal(d)
			r.accumulation += g.lag(ctx, addr, group, topic)
		}
		out.groups = append(out.groups, r)
	}
	return out, nil
}

// dayTotal is mqadmin's compute24HourSum: the day window's sum, or the
// hour's when that is 0 (a key younger than the hourly sampling), or the
// minute's.
func dayTotal(d adminbody.BrokerStatsData) int64 {
	switch {
	case d.Day.Sum != 0:
		return d.Day.Sum
	case d.Hour.Sum != 0:
		return d.Hour.Sum
	default:
		return d.Minute.Sum
	}
}

// brokerStats reads one statistic of a broker; one it cannot answer (none
// counted yet, or the broker unreachable) reads as zero, as in mqadmin.
func (g *globals) brokerStats(ctx context.Context, addr, name, key string) adminbody.BrokerStatsData {
	resp, err := g.invoke(ctx, addr, remoting.ViewBrokerStatsData, remoting.Header{"statsName": name, "statsKey": key}, nil)
	if err != nil {
		return adminbody.BrokerStatsData{}
	}
	d, err := adminbody.DecodeBrokerStatsData(resp.Body)
	if err != nil {
		return adminbody.BrokerStatsData{}
	}
	return d
}

// lag is the messages of topic group has not consumed on a broker (never
// below 0; 0 when the broker cannot tell).
func (g *globals) lag(ctx context.Context, addr, group, topic string) int64 {
	resp, err := g.invoke(ctx, addr, remoting.GetConsumeStats, remoting.Header{"consumerGroup": group, "topic": topic}, nil)
	if err != nil {
		return 0
	}
	table, _, err := adminbody.DecodeConsumeStats(resp.Body)
	if err != nil {
		return 0
	}
	var diff int64
	for _, o := range table {
		diff += o.BrokerOffset - o.ConsumerOffset
	}
	return max(diff, 0)
}

// topicConsumers lists the groups consuming a topic on a broker
// (QUERY_TOPIC_CONSUME_BY_WHO).
func (g *globals) topicConsumers(ctx context.Context, addr, topic string) ([]string, error) {
	resp, err := g.invoke(ctx, addr, remoting.QueryTopicConsumeByWho, remoting.Header{"topic": topic}, nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		GroupList []string `json:"groupList"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("decode the consumers of %s on %s: %w", topic, addr, err)
	}
	return body.GroupList, nil
}
