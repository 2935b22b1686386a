package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/brokerstats"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// statsAllCmd is mqadmin statsAll: per topic and consumer group, the
// messages waiting, the in and out rates over the last minute and the
// messages in and out over the last day, summed over the topic's master
// brokers.
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
				rows, err := g.topicStatsRows(ctx, t)
				if err != nil {
					return err
				}
				for _, r := range rows {
					if active && r.inTPS == 0 && r.outTPS == 0 {
						continue
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%.2f\t%.2f\t%d\t%d\n", t, r.group, r.accumulation, r.inTPS, r.outTPS, r.inDay, r.outDay)
				}
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic of the name server)")
	f.BoolVarP(&active, "active", "a", false, "only the rows with traffic in the last minute")
	return cmd
}

// statsRow is one line of statsAll.
type statsRow struct {
	group         string
	accumulation  int64
	inTPS, outTPS float64
	inDay, outDay int64
}

// topicStatsRows gathers a topic's rows: one per consumer group, or one
// without a group when none consumes it.
func (g *globals) topicStatsRows(ctx context.Context, topic string) ([]statsRow, error) {
	masters, err := g.masters(ctx, topic)
	if err != nil {
		return nil, err
	}
	var in statsRow
	groups := map[string]bool{}
	for _, addr := range masters {
		d, err := g.brokerStats(ctx, addr, brokerstats.TopicPutNums, topic)
		if err != nil {
			return nil, err
		}
		in.inTPS += d.Minute.TPS
		in.inDay += d.Day.Sum
		consumers, err := g.topicConsumers(ctx, addr, topic)
		if err != nil {
			return nil, err
		}
		for _, c := range consumers {
			groups[c] = true
		}
	}
	if len(groups) == 0 {
		return []statsRow{in}, nil
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := make([]statsRow, 0, len(names))
	for _, group := range names {
		r := in
		r.group = group
		for _, addr := range masters {
			d, err := g.brokerStats(ctx, addr, brokerstats.GroupGetNums, brokerstats.GroupKey(topic, group))
			if err != nil {
				return nil, err
			}
			r.outTPS += d.Minute.TPS
			r.outDay += d.Day.Sum
			resp, err := g.invoke(ctx, addr, remoting.GetConsumeStats, remoting.Header{"consumerGroup": group, "topic": topic}, nil)
			if err != nil {
				return nil, err
			}
			table, _, err := adminbody.DecodeConsumeStats(resp.Body)
			if err != nil {
				return nil, fmt.Errorf("consume stats of %s on %s: %w", group, addr, err)
			}
			for _, o := range table {
				r.accumulation += o.BrokerOffset - o.ConsumerOffset
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// brokerStats reads one statistic of a broker; one nothing was counted in
// reads as zero, as mqadmin treats it.
func (g *globals) brokerStats(ctx context.Context, addr, name, key string) (adminbody.BrokerStatsData, error) {
	resp, err := g.invoke(ctx, addr, remoting.ViewBrokerStatsData, remoting.Header{"statsName": name, "statsKey": key}, nil)
	if err != nil {
		if resp != nil && resp.Code == remoting.SystemError && strings.HasSuffix(resp.Remark, "not exist") {
			return adminbody.BrokerStatsData{}, nil
		}
		return adminbody.BrokerStatsData{}, err
	}
	return adminbody.DecodeBrokerStatsData(resp.Body)
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
