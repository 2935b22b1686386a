package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
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
	return g.clusterBrokers(ctx, cluster, true)
}

// clusterBrokers returns the addresses of a cluster's brokers, masters
// only or every one, sorted, as the name server knows them.
func (g *globals) clusterBrokers(ctx context.Context, cluster string, mastersOnly bool) ([]string, error) {
	info, err := g.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, name := range info.ClusterAddrTable[cluster] {
		for id, a := range info.BrokerAddrTable[name].BrokerAddrs {
			if id == 0 || !mastersOnly {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		what := "broker"
		if mastersOnly {
			what = "master broker"
		}
		return nil, fmt.Errorf("cluster %q has no %s the name server %s knows", cluster, what, g.namesrv)
	}
	sort.Strings(addrs)
	return addrs, nil
}

// everyBrokerOf returns the address of every broker, masters and slaves,
// of cluster, or of every cluster the name servers know when cluster is
// "", sorted (mqadmin's ClusterInfo.retrieveAllAddrByCluster).
func (g *globals) everyBrokerOf(ctx context.Context, cluster string) ([]string, error) {
	if cluster != "" {
		return g.clusterBrokers(ctx, cluster, false)
	}
	info, err := g.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, bd := range info.BrokerAddrTable {
		for _, a := range bd.BrokerAddrs {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("the name server %s knows no broker", g.namesrv)
	}
	sort.Strings(addrs)
	return addrs, nil
}

// brokerGroup is a broker group of a cluster: its master's address ("" when
// it has none) and its slaves', sorted.
type brokerGroup struct {
	name, master string
	slaves       []string
}

// clusterGroups returns the broker groups of a cluster, by name, as the
// name server knows them.
func (g *globals) clusterGroups(ctx context.Context, cluster string) ([]brokerGroup, error) {
	info, err := g.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []brokerGroup
	for _, name := range info.ClusterAddrTable[cluster] {
		grp := brokerGroup{name: name}
		for id, a := range info.BrokerAddrTable[name].BrokerAddrs {
			if id == 0 {
				grp.master = a
			} else {
				grp.slaves = append(grp.slaves, a)
			}
		}
		sort.Strings(grp.slaves)
		out = append(out, grp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %q has no broker the name server %s knows", cluster, g.namesrv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// clusterInfo asks the name servers for the clusters and their brokers.
func (g *globals) clusterInfo(ctx context.Context) (namesrv.ClusterInfo, error) {
	var info namesrv.ClusterInfo
	resp, err := g.invokeNamesrv(ctx, remoting.GetBrokerClusterInfo, nil, nil)
	if err != nil {
		return info, fmt.Errorf("cluster info: %w", err)
	}
	// A Java name server writes the broker ids as bare keys ({0:"..."}).
	if err := adminbody.UnmarshalFastjson(resp.Body, &info); err != nil {
		return info, fmt.Errorf("decode cluster info: %w", err)
	}
	return info, nil
}

// javaBool is a flag holding a boolean given as text, as mqadmin reads
// its options with Java's Boolean.parseBoolean: "true" in any case is
// true, anything else false ("-s false", which a Go bool flag would take
// as an argument).
type javaBool struct{ dst *bool }

// Set implements pflag.Value.
func (b javaBool) Set(v string) error {
	*b.dst = strings.EqualFold(strings.TrimSpace(v), "true")
	return nil
}

// String implements pflag.Value.
func (b javaBool) String() string {
	if b.dst == nil {
		return "false"
	}
	return strconv.FormatBool(*b.dst)
}

// Type implements pflag.Value.
func (javaBool) Type() string { return "true|false" }

// retryPolicyFlag is mqadmin's -p: a group's retry policy as JSON.
type retryPolicyFlag struct{ dst **meta.GroupRetryPolicy }

// Set implements pflag.Value.
func (f retryPolicyFlag) Set(v string) error {
	var p meta.GroupRetryPolicy
	if err := json.Unmarshal([]byte(strings.TrimSpace(v)), &p); err != nil {
		return fmt.Errorf("groupRetryPolicy %s is not a retry policy's JSON: %w", v, err)
	}
	if !strings.EqualFold(p.Type, meta.RetryPolicyExponential) && !strings.EqualFold(p.Type, meta.RetryPolicyCustomized) {
		return fmt.Errorf("groupRetryPolicy %s: type %q is neither %s nor %s", v, p.Type, meta.RetryPolicyCustomized, meta.RetryPolicyExponential)
	}
	p.Type = strings.ToUpper(p.Type)
	*f.dst = &p
	return nil
}

// String implements pflag.Value.
func (f retryPolicyFlag) String() string {
	if f.dst == nil || *f.dst == nil {
		return ""
	}
	b, _ := json.Marshal(*f.dst)
	return string(b)
}

// Type implements pflag.Value.
func (retryPolicyFlag) Type() string { return "json" }

func updateSubGroupCmd(g *globals) *cobra.Command {
	var cluster string
	// The settings given replace mqadmin's starting point: RocketMQ's
	// defaults with broadcast and consume-from-min off.
	gc := meta.NewSubscriptionGroupConfig("")
	gc.ConsumeBroadcastEnable, gc.ConsumeFromMinEnable = false, false
	cmd := &cobra.Command{
		Use:   "updateSubGroup",
		Short: "create or update a consumer group's subscription config on a broker or every master of a cluster (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)",
		Long: `updateSubGroup creates or updates a consumer group, as mqadmin updateSubGroup:
the config starts from RocketMQ's defaults with broadcast and consume-from-min
off, whatever the group had, and the settings given replace them. Booleans are
given as text (-s false), as mqadmin takes them. -p sets the group's retry
policy, the pauses gRPC consumers are told to wait before each redelivery,
as JSON: {"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,
"max":7200000,"multiplier":2}} or {"type":"CUSTOMIZED","customizedRetryPolicy":
{"next":[1000,5000,10000]}} (ms). mqadmin's --attributes is not offered:
RocketMQ knows no group attribute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gc.GroupName = strings.TrimSpace(gc.GroupName)
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
	f.StringVarP(&gc.GroupName, "groupName", "g", "", "consumer group name")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	f.VarP(javaBool{&gc.ConsumeEnable}, "consumeEnable", "s", "consume enable")
	f.VarP(javaBool{&gc.ConsumeFromMinEnable}, "consumeFromMinEnable", "m", "a new consumer starts from the minimum offset")
	f.VarP(javaBool{&gc.ConsumeBroadcastEnable}, "consumeBroadcastEnable", "d", "broadcast")
	f.VarP(javaBool{&gc.ConsumeMessageOrderly}, "consumeMessageOrderly", "o", "consume orderly")
	f.VarP(javaBool{&gc.NotifyConsumerIdsChangedEnable}, "notifyConsumerIdsChanged", "a", "notify consumers when the group's members change")
	f.IntVarP(&gc.RetryQueueNums, "retryQueueNums", "q", gc.RetryQueueNums, "retry queues")
	f.IntVarP(&gc.RetryMaxTimes, "retryMaxTimes", "r", gc.RetryMaxTimes, "retry max times")
	f.Int64VarP(&gc.BrokerID, "brokerId", "i", gc.BrokerID, "broker id consumers read from")
	f.Int64VarP(&gc.WhichBrokerWhenConsumeSlowly, "whichBrokerWhenConsumeSlowly", "w", gc.WhichBrokerWhenConsumeSlowly, "broker id consumers read from when consuming slowly")
	f.VarP(retryPolicyFlag{&gc.GroupRetryPolicy}, "groupRetryPolicy", "p", "the group's retry policy as JSON (CUSTOMIZED, RocketMQ's delay levels, when not given)")
	_ = cmd.MarkFlagRequired("groupName")
	return cmd
}

func deleteSubGroupCmd(g *globals) *cobra.Command {
	var group, cluster string
	var removeOffset bool
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
			h.SetBool("cleanOffset", removeOffset)
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
	f.VarP(javaBool{&removeOffset}, "removeOffset", "r", "remove the group's offsets too")
	_ = cmd.MarkFlagRequired("groupName")
	return cmd
}

// deleteTopicEverywhere deletes topic from the brokers and every name
// server.
func (g *globals) deleteTopicEverywhere(ctx context.Context, brokers []string, topic string) error {
	for _, addr := range brokers {
		if _, err := g.invoke(ctx, addr, remoting.DeleteTopicInBroker, remoting.Header{"topic": topic}, nil); err != nil {
			return err
		}
	}
	return g.deleteTopicInNamesrvs(ctx, topic, "")
}

func groupForbiddenCmd(g *globals) *cobra.Command {
	var group, topic, cluster, readable string
	cmd := &cobra.Command{
		Use:   "groupForbidden",
		Short: "show, forbid or allow a consumer group's reads of a topic (UPDATE_AND_GET_GROUP_FORBIDDEN)",
		Long: `groupForbidden forbids a consumer group to read a topic (--readable false),
allows it again (--readable true), or shows whether it may (no --readable),
on the -b broker or every master of a -c cluster, as RocketMQ's
MQAdminExt.updateAndGetGroupReadForbidden (mqadmin has no command for it).
A forbidden group's pulls that do not post their subscription (the Java
and Go push consumers' by default) get NO_PERMISSION, as RocketMQ
answers them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h := remoting.Header{"group": strings.TrimSpace(group), "topic": strings.TrimSpace(topic)}
			if cmd.Flags().Changed("readable") {
				v := strings.TrimSpace(readable)
				if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
					return fmt.Errorf("--readable %q: want true or false", readable)
				}
				h["readable"] = strings.ToLower(v)
			}
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			for _, addr := range targets {
				resp, err := g.invoke(cmd.Context(), addr, remoting.UpdateAndGetGroupForbidden, h, nil)
				if err != nil {
					return err
				}
				var body adminbody.GroupForbidden
				if err := json.Unmarshal(resp.Body, &body); err != nil {
					return fmt.Errorf("answer of %s: %w", addr, err)
				}
				state := "may read"
				if !body.Readable {
					state = "is forbidden to read"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "group [%s] %s topic [%s] on broker [%s]\n", body.Group, state, body.Topic, addr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "groupName", "g", "", "consumer group name")
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&readable, "readable", "r", "", "false forbids the group to read the topic, true allows it again; absent only shows")
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	_ = cmd.MarkFlagRequired("groupName")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}
