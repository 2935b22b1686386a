package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicClusterListCmd is mqadmin topicClusterList: the clusters whose
// broker groups hold a topic, from the route and the cluster info.
func topicClusterListCmd(g *globals) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "topicClusterList",
		Short: "print the clusters whose brokers serve a topic (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO)",
		Long: `topicClusterList prints, one a line, the clusters a broker group of the topic's
route belongs to, as mqadmin topicClusterList (which looks at the route's
first broker group only; here every group counts).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topic = strings.TrimSpace(topic)
			route, err := g.route(cmd.Context(), topic)
			if err != nil {
				return err
			}
			info, err := g.clusterInfo(cmd.Context())
			if err != nil {
				return err
			}
			var clusters []string
			for cluster, names := range info.ClusterAddrTable {
				for _, bd := range route.BrokerDatas {
					if slices.Contains(names, bd.BrokerName) {
						clusters = append(clusters, cluster)
						break
					}
				}
			}
			sort.Strings(clusters)
			for _, c := range clusters {
				fmt.Fprintln(cmd.OutOrStdout(), c)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// getConsumerConfigCmd is mqadmin getConsumerConfig: a consumer group's
// subscription config on every broker group of every cluster, read from
// each group's full table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) as mqadmin's
// examineSubscriptionGroupConfig reads it; broker groups without it are
// left out, and those that fail to answer are named in the error returned
// after the others are printed.
func getConsumerConfigCmd(g *globals) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "getConsumerConfig",
		Short: "print a consumer group's subscription config on every broker of every cluster (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group = strings.TrimSpace(group)
			info, err := g.clusterInfo(cmd.Context())
			if err != nil {
				return err
			}
			names := make([]string, 0, len(info.BrokerAddrTable))
			for name := range info.BrokerAddrTable {
				names = append(names, name)
			}
			sort.Strings(names)
			// A broker group that cannot be read is reported after the
			// others are printed (mqadmin stops at it, printing none).
			var errs []error
			for _, name := range names {
				addr, ok := selectBrokerAddr(info.BrokerAddrTable[name].BrokerAddrs)
				if !ok {
					continue
				}
				resp, err := g.invoke(cmd.Context(), addr, remoting.GetAllSubscriptionGroupConfig, nil, nil)
				if err != nil {
					errs = append(errs, fmt.Errorf("subscription groups of %s (%s): %w", name, addr, err))
					continue
				}
				var body struct {
					SubscriptionGroupTable map[string]meta.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
				}
				if err := adminbody.UnmarshalFastjson(resp.Body, &body); err != nil {
					errs = append(errs, fmt.Errorf("decode the subscription groups of %s (%s): %w", name, addr, err))
					continue
				}
				gc, ok := body.SubscriptionGroupTable[group]
				if !ok {
					continue
				}
				cluster := ""
				for c, members := range info.ClusterAddrTable {
					if slices.Contains(members, name) {
						cluster = c
						break
					}
				}
				printGroupConfig(cmd.OutOrStdout(), cluster, name, &gc)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&group, "groupName", "g", "", "subscription group name")
	_ = cmd.MarkFlagRequired("groupName")
	return cmd
}

// selectBrokerAddr picks the address of a broker group as RocketMQ's
// BrokerData.selectBrokerAddr: the master's, else a slave's (the
// lowest-numbered one here; RocketMQ picks one at random).
func selectBrokerAddr(addrs map[int64]string) (string, bool) {
	if a, ok := addrs[0]; ok {
		return a, true
	}
	ids := make([]int64, 0, len(addrs))
	for id := range addrs {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "", false
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return addrs[ids[0]], true
}

// printGroupConfig writes a group config as mqadmin getConsumerConfig: a
// banner naming the cluster and broker group, then every field of
// SubscriptionGroupConfig in its declaration order, values as Java's
// toString writes them.
func printGroupConfig(w io.Writer, cluster, brokerName string, gc *meta.SubscriptionGroupConfig) {
	fmt.Fprintf(w, "=============================%s:%s=============================\n", cluster, brokerName)
	b := strconv.FormatBool
	rows := [][2]string{
		{"groupName", gc.GroupName},
		{"consumeEnable", b(gc.ConsumeEnable)},
		{"consumeFromMinEnable", b(gc.ConsumeFromMinEnable)},
		{"consumeBroadcastEnable", b(gc.ConsumeBroadcastEnable)},
		{"consumeMessageOrderly", b(gc.ConsumeMessageOrderly)},
		{"retryQueueNums", strconv.Itoa(gc.RetryQueueNums)},
		{"retryMaxTimes", strconv.Itoa(gc.RetryMaxTimes)},
		{"groupRetryPolicy", retryPolicyString(gc.GroupRetryPolicy)},
		{"brokerId", strconv.FormatInt(gc.BrokerID, 10)},
		{"whichBrokerWhenConsumeSlowly", strconv.FormatInt(gc.WhichBrokerWhenConsumeSlowly, 10)},
		{"notifyConsumerIdsChangedEnable", b(gc.NotifyConsumerIdsChangedEnable)},
		{"groupSysFlag", strconv.Itoa(gc.GroupSysFlag)},
		{"consumeTimeoutMinute", strconv.Itoa(gc.ConsumeTimeoutMinute)},
		{"subscriptionDataSet", subscriptionSetString(gc.SubscriptionDataSet)},
		{"attributes", javaMapString(gc.Attributes)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-40s=  %s\n", r[0], r[1])
	}
}

// retryPolicyString writes a group retry policy as Java's toString
// (Guava's toStringHelper); a policy the broker left out is RocketMQ's
// default, CUSTOMIZED without a list.
func retryPolicyString(p *meta.GroupRetryPolicy) string {
	if p == nil {
		p = &meta.GroupRetryPolicy{Type: meta.RetryPolicyCustomized}
	}
	exp, cust := "null", "null"
	if e := p.Exponential; e != nil {
		exp = fmt.Sprintf("ExponentialRetryPolicy{initial=%d, max=%d, multiplier=%d}", e.Initial, e.Max, e.Multiplier)
	}
	if c := p.Customized; c != nil {
		next := make([]string, len(c.Next))
		for i, n := range c.Next {
			next[i] = strconv.FormatInt(n, 10)
		}
		cust = "CustomizedRetryPolicy{next=[" + strings.Join(next, ", ") + "]}"
	}
	return fmt.Sprintf("GroupRetryPolicy{type=%s, exponentialRetryPolicy=%s, customizedRetryPolicy=%s}", p.Type, exp, cust)
}

// subscriptionSetString writes a group's static subscriptions as Java's
// Set.toString of SimpleSubscriptionData ("" when there are none, as
// mqadmin prints a null field).
func subscriptionSetString(set []meta.SimpleSubscriptionData) string {
	if set == nil {
		return ""
	}
	items := make([]string, len(set))
	for i, s := range set {
		items[i] = fmt.Sprintf("SimpleSubscriptionData{topic=%s, expressionType=%s, expression=%s, version=%d}", s.Topic, s.ExpressionType, s.Expression, s.Version)
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// javaMapString writes a map as Java's Map.toString, keys in order.
func javaMapString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(pairs, ", ") + "}"
}
