package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// groupTargets returns the brokers a group command goes to: every master
// of cluster when it is set (mqadmin's -c), else the -b broker.
func (g *globals) groupTargets(ctx context.Context, cluster string) ([]string, error) {
	if cluster == "" {
		return []string{g.broker}, nil
	}
	return g.clusterMasters(ctx, cluster)
}

// clusterMasters returns the master address of every broker group of a
// cluster, as the name server knows them.
func (g *globals) clusterMasters(ctx context.Context, cluster string) ([]string, error) {
	resp, err := g.invoke(ctx, g.namesrv, remoting.GetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	var info namesrv.ClusterInfo
	if err := json.Unmarshal(resp.Body, &info); err != nil {
		return nil, fmt.Errorf("decode cluster info: %w", err)
	}
	var addrs []string
	for _, name := range info.ClusterAddrTable[cluster] {
		if a, ok := info.BrokerAddrTable[name].BrokerAddrs[0]; ok {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("cluster %q has no master broker the name server %s knows", cluster, g.namesrv)
	}
	sort.Strings(addrs)
	return addrs, nil
}

// groupSettings are updateSubGroup's optional settings, as mqadmin takes
// them: booleans and numbers as text, applied only when given.
type groupSettings struct {
	consumeEnable, fromMin, broadcast, orderly, notify string
	retryQueues, retryMax                              string
	brokerID, slowBrokerID                             string
}

// apply sets on gc the settings given (changed names the flags set).
func (s groupSettings) apply(gc *meta.SubscriptionGroupConfig, changed func(string) bool) error {
	// Java's Boolean.parseBoolean: "true" in any case, anything else false.
	boolOf := func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }
	for _, b := range []struct {
		flag string
		v    string
		dst  *bool
	}{{"consumeEnable", s.consumeEnable, &gc.ConsumeEnable}, {"consumeFromMinEnable", s.fromMin, &gc.ConsumeFromMinEnable},
		{"consumeBroadcastEnable", s.broadcast, &gc.ConsumeBroadcastEnable}, {"consumeMessageOrderly", s.orderly, &gc.ConsumeMessageOrderly},
		{"notifyConsumerIdsChanged", s.notify, &gc.NotifyConsumerIdsChangedEnable}} {
		if changed(b.flag) {
			*b.dst = boolOf(b.v)
		}
	}
	for _, n := range []struct {
		flag string
		v    string
		dst  *int
	}{{"retryQueueNums", s.retryQueues, &gc.RetryQueueNums}, {"retryMaxTimes", s.retryMax, &gc.RetryMaxTimes}} {
		if !changed(n.flag) {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(n.v))
		if err != nil {
			return fmt.Errorf("--%s %q: want an integer", n.flag, n.v)
		}
		*n.dst = v
	}
	for _, n := range []struct {
		flag string
		v    string
		dst  *int64
	}{{"brokerId", s.brokerID, &gc.BrokerID}, {"whichBrokerWhenConsumeSlowly", s.slowBrokerID, &gc.WhichBrokerWhenConsumeSlowly}} {
		if !changed(n.flag) {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(n.v), 10, 64)
		if err != nil {
			return fmt.Errorf("--%s %q: want an integer", n.flag, n.v)
		}
		*n.dst = v
	}
	return nil
}

func updateSubGroupCmd(g *globals) *cobra.Command {
	var group, cluster string
	var s groupSettings
	cmd := &cobra.Command{
		Use:   "updateSubGroup",
		Short: "create or update a consumer group's subscription config on a broker or every master of a cluster (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)",
		Long: `updateSubGroup creates or updates a consumer group, as mqadmin updateSubGroup:
the config starts from RocketMQ's defaults with broadcast and consume-from-min
off, whatever the group had, and the settings given replace them. Booleans are
given as text (-s false), as mqadmin takes them. mqadmin's -p (groupRetryPolicy)
and --attributes are not offered: retries follow the delay levels
(messageDelayLevel), and RocketMQ knows no group attribute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gc := meta.NewSubscriptionGroupConfig(strings.TrimSpace(group))
			gc.ConsumeBroadcastEnable, gc.ConsumeFromMinEnable = false, false
			if err := s.apply(&gc, cmd.Flags().Changed); err != nil {
				return err
			}
			body, err := json.Marshal(gc)
			if err != nil {
				return err
			}
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, addr := range targets {
				if _, err := g.invoke(cmd.Context(), addr, remoting.UpdateAndCreateSubscriptionGroup, nil, body); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "create subscription group to %s success.\n", addr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", body)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "groupName", "g", "", "consumer group name")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	f.StringVarP(&s.consumeEnable, "consumeEnable", "s", "", "consume enable (true or false)")
	f.StringVarP(&s.fromMin, "consumeFromMinEnable", "m", "", "a new consumer starts from the minimum offset (true or false)")
	f.StringVarP(&s.broadcast, "consumeBroadcastEnable", "d", "", "broadcast (true or false)")
	f.StringVarP(&s.orderly, "consumeMessageOrderly", "o", "", "consume orderly (true or false)")
	f.StringVarP(&s.retryQueues, "retryQueueNums", "q", "", "retry queues")
	f.StringVarP(&s.retryMax, "retryMaxTimes", "r", "", "retry max times")
	f.StringVarP(&s.brokerID, "brokerId", "i", "", "broker id consumers read from")
	f.StringVarP(&s.slowBrokerID, "whichBrokerWhenConsumeSlowly", "w", "", "broker id consumers read from when consuming slowly")
	f.StringVarP(&s.notify, "notifyConsumerIdsChanged", "a", "", "notify consumers when the group's members change (true or false)")
	_ = cmd.MarkFlagRequired("groupName")
	return cmd
}

func deleteSubGroupCmd(g *globals) *cobra.Command {
	var group, cluster, removeOffset string
	cmd := &cobra.Command{
		Use:   "deleteSubGroup",
		Short: "delete a consumer group from a broker or every master of a cluster (DELETE_SUBSCRIPTIONGROUP), with its offsets when -r true",
		Long: `deleteSubGroup deletes a consumer group, as mqadmin deleteSubGroup; with -c it
also deletes the group's %RETRY% and %DLQ% topics from the cluster's masters
and the name server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group = strings.TrimSpace(group)
			h := remoting.Header{"groupName": group}
			h.SetBool("cleanOffset", strings.EqualFold(strings.TrimSpace(removeOffset), "true"))
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, addr := range targets {
				if _, err := g.invoke(cmd.Context(), addr, remoting.DeleteSubscriptionGroup, h, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "delete subscription group [%s] from broker [%s] success.\n", group, addr)
			}
			if cluster == "" {
				return nil
			}
			for _, topic := range []string{meta.RetryTopic(group), meta.DLQTopic(group)} {
				if err := g.deleteTopicEverywhere(cmd.Context(), targets, topic); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "groupName", "g", "", "consumer group name")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	f.StringVarP(&removeOffset, "removeOffset", "r", "", "remove the group's offsets too (true or false)")
	_ = cmd.MarkFlagRequired("groupName")
	return cmd
}

// deleteTopicEverywhere deletes topic from the brokers and the name server.
func (g *globals) deleteTopicEverywhere(ctx context.Context, brokers []string, topic string) error {
	for _, addr := range brokers {
		if _, err := g.invoke(ctx, addr, remoting.DeleteTopicInBroker, remoting.Header{"topic": topic}, nil); err != nil {
			return err
		}
	}
	if _, err := g.invoke(ctx, g.namesrv, remoting.DeleteTopicInNamesrv, remoting.Header{"topic": topic}, nil); err != nil {
		return err
	}
	return nil
}
