package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// staticConfig is a broker group's answer to GET_TOPIC_CONFIG with lo=true
// (RocketMQ's TopicConfigAndQueueMapping): the topic's config there and
// its static mapping, nil for an ordinary topic.
type staticConfig struct {
	config  meta.TopicConfig
	mapping *meta.TopicQueueMappingDetail
}

// updateStaticTopicCmd is mqadmin updateStaticTopic: creates a static
// topic of -qn logic queues over the broker groups of -b (names) or -c
// (clusters), or widens one, as RocketMQ's
// TopicQueueMappingUtils.createTopicConfigMapping allocates them.
func updateStaticTopicCmd(g *globals) *cobra.Command {
	var topic, brokers, clusters, mapFile string
	var total int
	var forceReplace bool
	cmd := &cobra.Command{
		Use:   "updateStaticTopic",
		Short: "create or widen a static topic over broker groups (UPDATE_AND_CREATE_STATIC_TOPIC)",
		Long: `updateStaticTopic creates a static topic (RocketMQ 5's logic queues) of -qn
queues over the broker groups named by -b (comma-separated broker names) or
over every group of the clusters of -c, or raises the queue count of one,
as mqadmin updateStaticTopic: the new logic queues go to the least loaded
groups in turn, each on a new physical queue of its group, and every group
of the clusters involved gets the mapping with the new epoch. A queue count
below the topic's is refused. With -mf it applies a mapping file (a
TopicRemappingDetailWrapper, as remappingStaticTopic writes) to every group
it names and the other groups of their clusters, after RocketMQ's checks;
mqadmin 5.3.4 reads -mf under a name it never parses, so its own never does.
Moving queues between groups is remappingStaticTopic.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mapFile != "" {
				return g.updateStaticFromFile(cmd, topic, mapFile)
			}
			if (brokers == "") == (clusters == "") {
				return errors.New("give exactly one of -b (broker names) and -c (clusters)")
			}
			if total <= 0 || !cmd.Flags().Changed("qn") {
				return fmt.Errorf("-qn %d: the total queue number must be positive", total)
			}
			return g.updateStaticTopic(cmd, topic, brokers, clusters, int32(total), forceReplace)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&brokers, "brokers", "b", "", "broker names to place the topic's queues on, comma-separated")
	f.StringVarP(&clusters, "clusters", "c", "", "clusters whose broker groups take the topic's queues, comma-separated")
	f.IntVar(&total, "qn", 0, "total number of logic queues (mqadmin's -qn)")
	f.StringVar(&mapFile, "mf", "", "a mapping file (TopicRemappingDetailWrapper) to apply")
	f.Var(javaBool{&forceReplace}, "fr", "force replace the old mapping (true|false); mqadmin ignores it here too")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// updateStaticFromFile applies a mapping file as mqadmin's
// executeFromFile of updateStaticTopic would: the groups' mappings must
// agree and check out, every other group of their clusters gets an empty
// one, and every group is sent its config and mapping without force.
func (g *globals) updateStaticFromFile(cmd *cobra.Command, topic, file string) error {
	plan, err := readMappingFile(topic, file)
	if err != nil {
		return err
	}
	if len(plan.configs) == 0 {
		return errors.New("the mapping file names no broker")
	}
	info, err := g.clusterInfo(cmd.Context())
	if err != nil {
		return err
	}
	completeStaticBrokers(plan.configs, info, topic)
	for _, name := range slices.Sorted(maps.Keys(plan.configs)) {
		if masterAddr(info, name) == "" {
			return fmt.Errorf("can't find addr for broker %s", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(plan.configs)) {
		if err := g.createStaticTopic(cmd.Context(), cmd, masterAddr(info, name), name, topic, plan.configs[name], false); err != nil {
			return err
		}
	}
	return nil
}

// updateStaticTopic runs updateStaticTopic: it reads the topic's config
// and mapping from every group's master, checks them, allocates the new
// queues and sends every group its config and mapping.
func (g *globals) updateStaticTopic(cmd *cobra.Command, topic, brokers, clusters string, total int32, _ bool) error {
	ctx := cmd.Context()
	info, targets, err := g.staticTargets(ctx, brokers, clusters)
	if err != nil {
		return err
	}
	current, err := g.staticConfigs(ctx, info, topic)
	if err != nil {
		return err
	}
	for b := range current {
		targets[b] = true
	}
	plan, err := planStaticTopic(topic, total, targets, current, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	completeStaticBrokers(plan, info, topic)
	for _, name := range slices.Sorted(maps.Keys(plan)) {
		addr := info.BrokerAddrTable[name].BrokerAddrs[0]
		if addr == "" {
			return fmt.Errorf("broker %s has no master the name server knows", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(plan)) {
		if err := g.createStaticTopic(ctx, cmd, info.BrokerAddrTable[name].BrokerAddrs[0], name, topic, plan[name], false); err != nil {
			return err
		}
	}
	return nil
}

// staticTargets reads the cluster info and the broker groups a static
// topic command names: -b's groups, else every group of -c's clusters
// (mqadmin's "find none brokers, do nothing" when there is none).
func (g *globals) staticTargets(ctx context.Context, brokers, clusters string) (namesrv.ClusterInfo, map[string]bool, error) {
	info, err := g.clusterInfo(ctx)
	if err != nil {
		return info, nil, err
	}
	if len(info.ClusterAddrTable) == 0 {
		return info, nil, errors.New("the cluster info is empty")
	}
	targets := map[string]bool{}
	if brokers != "" {
		for _, b := range strings.Split(brokers, ",") {
			targets[strings.TrimSpace(b)] = true
		}
	} else {
		for _, c := range strings.Split(clusters, ",") {
			for _, b := range info.ClusterAddrTable[strings.TrimSpace(c)] {
				targets[b] = true
			}
		}
	}
	if len(targets) == 0 {
		return info, nil, errors.New("find none brokers, do nothing")
	}
	return info, targets, nil
}

// createStaticTopic sends one broker group's master the topic's config
// and mapping (UPDATE_AND_CREATE_STATIC_TOPIC, as RocketMQ's
// DefaultMQAdminExt.createStaticTopic with the create key TBW102) and
// says so on cmd's output.
func (g *globals) createStaticTopic(ctx context.Context, cmd *cobra.Command, addr, name, topic string, sc staticConfig, force bool) error {
	h := remoting.Header{"topic": topic, "defaultTopic": "TBW102", "topicFilterType": sc.config.TopicFilterType}
	if h["topicFilterType"] == "" {
		h["topicFilterType"] = meta.SingleTag
	}
	h.SetInt32("readQueueNums", int32(sc.config.ReadQueueNums))
	h.SetInt32("writeQueueNums", int32(sc.config.WriteQueueNums))
	h.SetInt32("perm", int32(sc.config.Perm))
	h.SetInt32("topicSysFlag", int32(sc.config.TopicSysFlag))
	h.SetBool("order", sc.config.Order)
	h.SetBool("force", force)
	body, err := json.Marshal(sc.mapping)
	if err != nil {
		return fmt.Errorf("encode the mapping of %s: %w", name, err)
	}
	if _, err := g.invoke(ctx, addr, remoting.UpdateAndCreateStaticTopic, h, body); err != nil {
		return fmt.Errorf("update static topic %s on broker %s (%s): %w", topic, name, addr, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "update static topic %s on broker %s (%s): %d queues, %d logic queues led, epoch %d\n",
		topic, name, addr, sc.config.WriteQueueNums, len(sc.mapping.LeaderIDMap()), sc.mapping.Epoch)
	return nil
}

// staticConfigs asks every broker group's master for the topic's config
// and mapping (GET_TOPIC_CONFIG with lo=true); groups without the topic
// are left out (RocketMQ's MQAdminUtils.examineTopicConfigAll).
func (g *globals) staticConfigs(ctx context.Context, info namesrv.ClusterInfo, topic string) (map[string]staticConfig, error) {
	out := map[string]staticConfig{}
	for _, name := range slices.Sorted(maps.Keys(info.BrokerAddrTable)) {
		addr := info.BrokerAddrTable[name].BrokerAddrs[0]
		if addr == "" {
			continue
		}
		resp, err := g.invoke(ctx, addr, remoting.GetTopicConfig, remoting.Header{"topic": topic, "lo": "true"}, nil)
		if resp != nil && resp.Code == remoting.TopicNotExist {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc, err := decodeStaticConfig(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("the topic config of %s from %s: %w", topic, name, err)
		}
		out[name] = sc
	}
	return out, nil
}

// decodeStaticConfig reads a TopicConfigAndQueueMapping.
func decodeStaticConfig(body []byte) (staticConfig, error) {
	var v struct {
		meta.TopicConfig
		MappingDetail json.RawMessage `json:"mappingDetail"`
	}
	if err := adminbody.UnmarshalFastjson(body, &v); err != nil {
		return staticConfig{}, fmt.Errorf("decode TopicConfigAndQueueMapping: %w", err)
	}
	sc := staticConfig{config: v.TopicConfig}
	if len(v.MappingDetail) > 0 && string(v.MappingDetail) != "null" {
		d, err := meta.DecodeTopicQueueMappingDetail(v.MappingDetail)
		if err != nil {
			return staticConfig{}, err
		}
		sc.mapping = &d
	}
	return sc, nil
}

// planStaticTopic returns each broker group's config and mapping after
// raising topic to total logic queues over targets, from current (every
// group holding the topic), as RocketMQ's createTopicConfigMapping: the
// current mappings must agree (checkNameEpochNumConsistence) and lead
// logic queues 0..n-1 once each on distinct physical queues; each new
// logic queue goes to a least loaded target group in turn, on a new
// physical queue of its own; every mapping takes the epoch
// max(old epoch + 1000, now).
func planStaticTopic(topic string, total int32, targets map[string]bool, current map[string]staticConfig, now int64) (map[string]staticConfig, error) {
	plan := map[string]staticConfig{}
	for name, sc := range current {
		c := sc
		if sc.mapping != nil {
			m := sc.mapping.Clone()
			c.mapping = &m
		}
		plan[name] = c
	}
	maxEpoch := now
	leaders := map[int32]string{}
	if len(plan) > 0 {
		epoch, err := checkStaticConsistence(topic, plan)
		if err != nil {
			return nil, err
		}
		maxEpoch = epoch
		for _, name := range slices.Sorted(maps.Keys(plan)) {
			sc := plan[name]
			if len(sc.mapping.HostedQueues) > 0 && !targets[name] {
				return nil, fmt.Errorf("the existed broker %s does not in target brokers", name)
			}
			if sc.config.ReadQueueNums < sc.config.WriteQueueNums {
				return nil, fmt.Errorf("broker %s: read queues is smaller than write queues", name)
			}
			for id, items := range sc.mapping.HostedQueues {
				if err := meta.CheckItemOffsets(items); err != nil {
					return nil, fmt.Errorf("broker %s logic queue %d: %w", name, id, err)
				}
				if len(items) == 0 || items[len(items)-1].Bname != name {
					continue
				}
				if other, dup := leaders[id]; dup {
					return nil, fmt.Errorf("the queue id %d is duplicated in broker %s and %s", id, other, name)
				}
				leaders[id] = name
			}
		}
		physical := map[string]int32{}
		for id, name := range leaders {
			for _, it := range plan[name].mapping.HostedQueues[id] {
				key := fmt.Sprintf("%s-%d", it.Bname, it.QueueID)
				if other, dup := physical[key]; dup {
					return nil, fmt.Errorf("topic %s logic queues %d and %d share the physical queue %s", topic, id, other, key)
				}
				physical[key] = id
				if it.StartOffset != 0 {
					return nil, fmt.Errorf("the start offset of logic queue %d does not begin from 0", id)
				}
			}
		}
		n := int32(0)
		for _, sc := range plan {
			n = max(n, sc.mapping.TotalQueues)
		}
		if int(n) != len(leaders) {
			return nil, fmt.Errorf("the total queue number in config does not match the real hosted queues %d != %d", n, len(leaders))
		}
	}
	have := int32(len(leaders))
	if total < have {
		return nil, fmt.Errorf("cannot decrease the queue num for static topic %d < %d", total, have)
	}
	if total == have {
		return nil, errors.New("the topic queue num is equal the existed queue num, do nothing")
	}
	load := map[string]int{}
	for name := range targets {
		load[name] = 0
	}
	for _, name := range leaders {
		load[name]++
	}
	newEpoch := max(maxEpoch+1000, now)
	var round []string
	for id := have; id < total; id++ {
		if len(round) == 0 {
			least := slices.Min(slices.Collect(maps.Values(load)))
			for _, name := range slices.Sorted(maps.Keys(load)) {
				if load[name] == least {
					round = append(round, name)
				}
			}
		}
		name := round[0]
		round = round[1:]
		load[name]++
		sc, ok := plan[name]
		if !ok {
			tc := meta.NewTopicConfig(topic, 0)
			d := meta.NewTopicQueueMappingDetail(topic, 0, name, now)
			sc = staticConfig{config: tc, mapping: &d}
		}
		sc.config.ReadQueueNums++
		sc.config.WriteQueueNums++
		item := meta.NewLogicQueueMappingItem()
		item.Bname, item.QueueID = name, int32(sc.config.WriteQueueNums-1)
		sc.mapping.HostedQueues[id] = []meta.LogicQueueMappingItem{item}
		plan[name] = sc
	}
	for _, sc := range plan {
		sc.mapping.Epoch, sc.mapping.TotalQueues = newEpoch, total
	}
	return plan, nil
}

// checkStaticConsistence checks that every group's mapping of the topic
// is there and agrees with the others (RocketMQ's
// checkNameEpochNumConsistence) and returns their epoch.
func checkStaticConsistence(topic string, plan map[string]staticConfig) (int64, error) {
	epoch, total, scope := int64(-1), int32(-1), ""
	for _, name := range slices.Sorted(maps.Keys(plan)) {
		sc := plan[name]
		d := sc.mapping
		switch {
		case d == nil:
			return 0, fmt.Errorf("mapping info should not be null in broker %s", name)
		case d.Bname != name:
			return 0, fmt.Errorf("the broker name is not equal %s != %s", name, d.Bname)
		case d.Dirty:
			return 0, fmt.Errorf("the mapping info is dirty in broker %s", name)
		case d.Topic != sc.config.TopicName || d.Topic != topic:
			return 0, fmt.Errorf("the topic name is inconsistent in broker %s", name)
		case scope != "" && d.Scope != scope:
			return 0, fmt.Errorf("scope does not match %s != %s in %s", d.Scope, scope, name)
		case epoch != -1 && d.Epoch != epoch:
			return 0, fmt.Errorf("epoch does not match %d != %d in %s", epoch, d.Epoch, name)
		case total != -1 && d.TotalQueues != total:
			return 0, fmt.Errorf("total queue number does not match %d != %d in %s", total, d.TotalQueues, name)
		}
		epoch, total, scope = d.Epoch, d.TotalQueues, d.Scope
	}
	return epoch, nil
}

// completeStaticBrokers gives every group of the clusters of the plan's
// groups that has none an empty config and mapping of the topic with the
// plan's epoch (RocketMQ's MQAdminUtils.completeNoTargetBrokers).
func completeStaticBrokers(plan map[string]staticConfig, info namesrv.ClusterInfo, topic string) {
	var epoch int64
	var total int32
	for _, sc := range plan {
		epoch, total = sc.mapping.Epoch, sc.mapping.TotalQueues
		break
	}
	clusters := map[string]bool{}
	for name := range plan {
		clusters[info.BrokerAddrTable[name].Cluster] = true
	}
	for cluster := range clusters {
		for _, name := range info.ClusterAddrTable[cluster] {
			if _, ok := plan[name]; ok {
				continue
			}
			d := meta.NewTopicQueueMappingDetail(topic, total, name, epoch)
			plan[name] = staticConfig{config: meta.NewTopicConfig(topic, 0), mapping: &d}
		}
	}
}
