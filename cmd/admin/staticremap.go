package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Remapping a static topic (mqadmin remappingStaticTopic) moves logic
// queues to other broker groups: each moved queue gets a new leader item
// (the next gen, a new physical queue of its new group, its logic offset
// decided once the old leader stops taking writes) and keeps its older
// items as read-only history, as RocketMQ's
// TopicQueueMappingUtils.remappingStaticTopic and
// MQAdminUtils.remappingStaticTopic do it.

// Wrapper types of a mapping file (RocketMQ's TopicRemappingDetailWrapper).
const (
	remapTypeCreateOrUpdate = "CREATE_OR_UPDATE"
	remapTypeRemapping      = "REMAPPING"
	remapSuffixBefore       = ".before"
	remapSuffixAfter        = ".after"
	// remapBlockSeqSize is what a new leader's logic offset is rounded up
	// to a multiple of (mqadmin passes 10000).
	remapBlockSeqSize = 10000
)

// remapPlan is a remapping's outcome: every group's config and mapping,
// the new epoch, and the groups that take queues in and give them out.
type remapPlan struct {
	topic   string
	kind    string
	epoch   int64
	configs map[string]staticConfig
	mapIn   []string
	mapOut  []string
}

// configAndMapping is RocketMQ's TopicConfigAndQueueMapping as JSON: the
// topic config's fields and mappingDetail.
type configAndMapping struct {
	meta.TopicConfig
	MappingDetail *meta.TopicQueueMappingDetail `json:"mappingDetail"`
}

// remapWrapper is RocketMQ's TopicRemappingDetailWrapper as JSON, fields
// in fastjson's order.
type remapWrapper struct {
	BrokerConfigMap map[string]configAndMapping `json:"brokerConfigMap"`
	BrokerToMapIn   []string                    `json:"brokerToMapIn"`
	BrokerToMapOut  []string                    `json:"brokerToMapOut"`
	Epoch           int64                       `json:"epoch"`
	Topic           string                      `json:"topic"`
	Type            string                      `json:"type"`
}

// encode returns the plan as a TopicRemappingDetailWrapper.
func (p remapPlan) encode() ([]byte, error) {
	w := remapWrapper{BrokerConfigMap: map[string]configAndMapping{}, BrokerToMapIn: nonNil(p.mapIn), BrokerToMapOut: nonNil(p.mapOut),
		Epoch: p.epoch, Topic: p.topic, Type: p.kind}
	for name, sc := range p.configs {
		w.BrokerConfigMap[name] = configAndMapping{TopicConfig: sc.config, MappingDetail: sc.mapping}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode the mapping data of %s: %w", p.topic, err)
	}
	return b, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// decodeRemapWrapper reads a mapping file (a TopicRemappingDetailWrapper
// as mqadmin writes it, fastjson's bare integer keys included).
func decodeRemapWrapper(data []byte) (remapPlan, error) {
	var w struct {
		BrokerConfigMap map[string]json.RawMessage `json:"brokerConfigMap"`
		BrokerToMapIn   []string                   `json:"brokerToMapIn"`
		BrokerToMapOut  []string                   `json:"brokerToMapOut"`
		Epoch           int64                      `json:"epoch"`
		Topic           string                     `json:"topic"`
		Type            string                     `json:"type"`
	}
	if err := adminbody.UnmarshalFastjson(data, &w); err != nil {
		return remapPlan{}, fmt.Errorf("decode the mapping file: %w", err)
	}
	p := remapPlan{topic: w.Topic, kind: w.Type, epoch: w.Epoch, configs: map[string]staticConfig{},
		mapIn: slices.Sorted(slices.Values(w.BrokerToMapIn)), mapOut: slices.Sorted(slices.Values(w.BrokerToMapOut))}
	for name, raw := range w.BrokerConfigMap {
		sc, err := decodeStaticConfig(raw)
		if err != nil {
			return remapPlan{}, fmt.Errorf("the mapping file's config of %s: %w", name, err)
		}
		p.configs[name] = sc
	}
	return p, nil
}

// writeRemapTemp writes the plan to <tmp>/<topic>-<epoch><suffix>, as
// RocketMQ's TopicQueueMappingUtils.writeToTemp, and returns the path.
func writeRemapTemp(p remapPlan, after bool) (string, error) {
	data, err := p.encode()
	if err != nil {
		return "", err
	}
	suffix := remapSuffixBefore
	if after {
		suffix = remapSuffixAfter
	}
	name := filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d%s", p.topic, p.epoch, suffix))
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return "", fmt.Errorf("write file failed %s: %w", name, err)
	}
	return name, nil
}

// mappingOne is one logic queue's leader and items (RocketMQ's
// TopicQueueMappingOne).
type mappingOne struct {
	bname string
	items []meta.LogicQueueMappingItem
}

// buildMappingItems checks the groups' mappings and returns each logic
// queue's items as its leader group holds them (RocketMQ's
// checkAndBuildMappingItems without replace, with the consistence check):
// every group's items in order, each logic queue led by one group, the
// leaders covering 0..totalQueues-1, and no physical queue in two logic
// queues (checkIfReusePhysicalQueue).
func buildMappingItems(configs map[string]staticConfig) (map[int32]mappingOne, error) {
	maxNum := int32(0)
	out := map[int32]mappingOne{}
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		d := configs[name].mapping
		if d == nil {
			continue
		}
		maxNum = max(maxNum, d.TotalQueues)
		for _, id := range slices.Sorted(maps.Keys(d.HostedQueues)) {
			items := d.HostedQueues[id]
			if err := meta.CheckItemOffsets(items); err != nil {
				return nil, fmt.Errorf("broker %s logic queue %d: %w", name, id, err)
			}
			if len(items) == 0 || items[len(items)-1].Bname != d.Bname {
				continue
			}
			if other, dup := out[id]; dup {
				return nil, fmt.Errorf("the queue id %d is duplicated in broker %s and %s", id, other.bname, d.Bname)
			}
			out[id] = mappingOne{bname: d.Bname, items: slices.Clone(items)}
		}
	}
	if int(maxNum) != len(out) {
		return nil, fmt.Errorf("the total queue number in config does not match the real hosted queues %d != %d", maxNum, len(out))
	}
	for id := range maxNum {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("the queue number %d is not in globalIdMap", id)
		}
	}
	physical := map[string]int32{}
	for _, id := range slices.Sorted(maps.Keys(out)) {
		for _, it := range out[id].items {
			key := fmt.Sprintf("%s-%d", it.Bname, it.QueueID)
			if other, dup := physical[key]; dup {
				return nil, fmt.Errorf("logic queues %d and %d share the physical queue %s", id, other, key)
			}
			physical[key] = id
		}
	}
	return out, nil
}

// checkPhysicalQueues checks every group's config against the items that
// name it (RocketMQ's checkPhysicalQueueConsistence): read queues not
// fewer than write queues, items starting at offset 0, on a group of the
// map and a physical queue below its write queue count.
func checkPhysicalQueues(configs map[string]staticConfig) error {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		sc := configs[name]
		if sc.config.ReadQueueNums < sc.config.WriteQueueNums {
			return fmt.Errorf("broker %s: read queues is smaller than write queues", name)
		}
		for id, items := range sc.mapping.HostedQueues {
			for _, it := range items {
				if it.StartOffset != 0 {
					return fmt.Errorf("broker %s logic queue %d: the start offset does not begin from 0", name, id)
				}
				owner, ok := configs[it.Bname]
				if !ok {
					return fmt.Errorf("broker %s logic queue %d: the broker %s of an item does not exist", name, id, it.Bname)
				}
				if int(it.QueueID) >= owner.config.WriteQueueNums {
					return fmt.Errorf("broker %s logic queue %d: the physical queue %d of %s is over its write queues", name, id, it.QueueID, it.Bname)
				}
			}
		}
	}
	return nil
}

// checkRemapInput runs the checks RocketMQ runs over a set of mappings
// before and after a remapping (consistence of names, epochs and counts;
// items; physical queues) and returns the epoch and logic queue count.
func checkRemapInput(topic string, configs map[string]staticConfig) (int64, int32, map[int32]mappingOne, error) {
	if len(configs) == 0 {
		return 0, 0, nil, errors.New("no topic route to do the remapping")
	}
	epoch, err := checkStaticConsistence(topic, configs)
	if err != nil {
		return 0, 0, nil, err
	}
	ones, err := buildMappingItems(configs)
	if err != nil {
		return 0, 0, nil, err
	}
	if err := checkPhysicalQueues(configs); err != nil {
		return 0, 0, nil, err
	}
	var total int32
	for _, sc := range configs {
		total = sc.mapping.TotalQueues
	}
	return epoch, total, ones, nil
}

// remapStaticTopic computes the remapping of topic's logic queues onto
// the target groups from every group's current config and mapping, as
// RocketMQ's TopicQueueMappingUtils.remappingStaticTopic: the targets
// are filled up to the queue count, the ones that led the most queues
// picked first, so a queue stays where it is while its group keeps room;
// a queue that has to move gets an item of the next gen on a new physical
// queue of its new group (logic offset undecided, start offset 0), after
// the items it had, on both the group it leaves and the one it joins; all
// mappings take the epoch max(old + 1000, now). now is in milliseconds.
func remapStaticTopic(topic string, current map[string]staticConfig, targets []string, now int64) (remapPlan, error) {
	configs := map[string]staticConfig{}
	for name, sc := range current {
		c := sc
		if sc.mapping != nil {
			m := sc.mapping.Clone()
			c.mapping = &m
		}
		configs[name] = c
	}
	oldEpoch, total, ones, err := checkRemapInput(topic, configs)
	if err != nil {
		return remapPlan{}, err
	}
	before := map[string]int{}
	for _, one := range ones {
		before[one.bname]++
	}
	expected := allocateRemap(targets, before, int(total))
	expectedID := map[int32]string{}
	var waiting []int32
	for _, id := range slices.Sorted(maps.Keys(ones)) {
		leader := ones[id].bname
		room, ok := expected[leader]
		switch {
		case ok && room > 0:
			expectedID[id] = leader
			expected[leader] = room - 1
		case ok:
			waiting = append(waiting, id)
			delete(expected, leader)
		default:
			waiting = append(waiting, id)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(expected)) {
		for range expected[name] {
			if len(waiting) == 0 {
				return remapPlan{}, fmt.Errorf("no logic queue left for broker %s", name)
			}
			expectedID[waiting[0]] = name
			waiting = waiting[1:]
		}
	}
	epoch := max(oldEpoch+1000, now)
	in, out := map[string]bool{}, map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(expectedID)) {
		to, one := expectedID[id], ones[id]
		if one.bname == to {
			continue
		}
		in[to], out[one.bname] = true, true
		inCfg, ok := configs[to]
		if !ok {
			d := meta.NewTopicQueueMappingDetail(topic, total, to, epoch)
			inCfg = staticConfig{config: meta.NewTopicConfig(topic, 0), mapping: &d}
		}
		inCfg.config.WriteQueueNums++
		inCfg.config.ReadQueueNums++
		last := one.items[len(one.items)-1]
		item := meta.NewLogicQueueMappingItem()
		item.Gen, item.QueueID, item.Bname, item.LogicOffset, item.StartOffset = last.Gen+1, int32(inCfg.config.WriteQueueNums-1), to, -1, 0
		items := append(slices.Clone(one.items), item)
		inCfg.mapping.HostedQueues[id] = slices.Clone(items)
		configs[to] = inCfg
		configs[one.bname].mapping.HostedQueues[id] = slices.Clone(items)
	}
	for _, sc := range configs {
		sc.mapping.Epoch, sc.mapping.TotalQueues = epoch, total
	}
	if _, _, ones, err = checkRemapInput(topic, configs); err != nil {
		return remapPlan{}, fmt.Errorf("the remapping does not check out: %w", err)
	}
	tset := map[string]bool{}
	for _, t := range targets {
		tset[t] = true
	}
	for id, one := range ones {
		if !tset[one.bname] {
			return remapPlan{}, fmt.Errorf("the leader broker %s of logic queue %d is not in the target brokers", one.bname, id)
		}
	}
	return remapPlan{topic: topic, kind: remapTypeRemapping, epoch: epoch, configs: configs,
		mapIn: slices.Sorted(maps.Keys(in)), mapOut: slices.Sorted(maps.Keys(out))}, nil
}

// allocateRemap returns how many logic queues each target group should
// lead, as RocketMQ's MappingAllocator.upToNum with the counts before the
// remapping: the total is dealt in rounds over the least loaded targets,
// each round ordered by the queues a group led before (fewest first) and
// dealt from the position of its last member, so the groups that led the
// most are served first. Ties in a round are ordered by name (RocketMQ's
// follow its hash map's order).
func allocateRemap(targets []string, before map[string]int, total int) map[string]int {
	num := map[string]int{}
	for _, t := range targets {
		num[t] = 0
	}
	var least []string
	idx := 0
	for range total {
		if len(least) == 0 {
			minNum := -1
			for _, name := range slices.Sorted(maps.Keys(num)) {
				switch {
				case minNum == -1 || num[name] < minNum:
					least, minNum = []string{name}, num[name]
				case num[name] == minNum:
					least = append(least, name)
				}
			}
			slices.SortStableFunc(least, func(a, b string) int { return before[a] - before[b] })
			idx = len(least) - 1
		}
		i := idx % len(least)
		name := least[i]
		least = slices.Delete(least, i, i+1)
		num[name]++
	}
	return num
}

// blockSeqRoundUp rounds a logic offset up to the next block, skipping
// one more when it is in the block's second half (RocketMQ's
// TopicQueueMappingUtils.blockSeqRoundUp).
func blockSeqRoundUp(offset, block int64) int64 {
	num, left := offset/block, offset%block
	if left < block/2 {
		return (num + 1) * block
	}
	return (num + 2) * block
}

// remappingStaticTopicCmd is mqadmin remappingStaticTopic.
func remappingStaticTopicCmd(g *globals) *cobra.Command {
	var topic, brokers, clusters, mapFile string
	var forceReplace bool
	cmd := &cobra.Command{
		Use:   "remappingStaticTopic",
		Short: "move a static topic's logic queues onto other broker groups (UPDATE_AND_CREATE_STATIC_TOPIC)",
		Long: `remappingStaticTopic moves a static topic's logic queues onto the broker groups
named by -b (comma-separated broker names) or every group of the clusters of
-c, as mqadmin remappingStaticTopic: it reads every group's mapping, spreads
the queues evenly over the targets keeping those already in place, writes
the mappings before and after to <tmp>/<topic>-<epoch>.before and .after,
then updates the groups that take queues in, those that give them out, fixes
each moved queue's logic offset from its old leader's max offset (rounded up
to a block of 10000) and updates the new leaders again, then the others.
With -mf it applies a mapping file (an .after file, perhaps edited) instead,
-fr true sending it with force (mqadmin 5.3.4 reads -mf under a name it
never parses and so always computes the remapping).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mapFile != "" {
				return g.remapFromFile(cmd, topic, mapFile, forceReplace)
			}
			if (brokers == "") == (clusters == "") {
				return errors.New("give exactly one of -b (broker names) and -c (clusters)")
			}
			return g.remappingStaticTopic(cmd, topic, brokers, clusters)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&brokers, "brokers", "b", "", "broker names to remap the topic's queues to, comma-separated")
	f.StringVarP(&clusters, "clusters", "c", "", "clusters whose broker groups take the topic's queues, comma-separated")
	f.StringVar(&mapFile, "mf", "", "a mapping file (TopicRemappingDetailWrapper) to apply")
	f.Var(javaBool{&forceReplace}, "fr", "force replace the old mapping (true|false), with -mf")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// remappingStaticTopic computes and applies a remapping.
func (g *globals) remappingStaticTopic(cmd *cobra.Command, topic, brokers, clusters string) error {
	ctx := cmd.Context()
	info, targets, err := g.staticTargets(ctx, brokers, clusters)
	if err != nil {
		return err
	}
	for name := range targets {
		if masterAddr(info, name) == "" {
			return fmt.Errorf("can't find addr for broker %s", name)
		}
	}
	current, err := g.staticConfigs(ctx, info, topic)
	if err != nil {
		return err
	}
	epoch, _, _, err := checkRemapInput(topic, current)
	if err != nil {
		return err
	}
	oldFile, err := writeRemapTemp(remapPlan{topic: topic, kind: remapTypeCreateOrUpdate, epoch: epoch, configs: current}, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "The old mapping data is written to file %s\n", oldFile)
	plan, err := remapStaticTopic(topic, current, slices.Sorted(maps.Keys(targets)), time.Now().UnixMilli())
	if err != nil {
		return err
	}
	newFile, err := writeRemapTemp(plan, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "The new mapping data is written to file %s\n", newFile)
	completeStaticBrokers(plan.configs, info, topic)
	return g.applyRemapping(cmd, info, plan, false)
}

// remapFromFile applies a mapping file as a remapping, after RocketMQ's
// checks of it.
func (g *globals) remapFromFile(cmd *cobra.Command, topic, file string, force bool) error {
	plan, err := readMappingFile(topic, file)
	if err != nil {
		return err
	}
	info, err := g.clusterInfo(cmd.Context())
	if err != nil {
		return err
	}
	plan.topic = topic
	return g.applyRemapping(cmd, info, plan, force)
}

// readMappingFile reads a mapping file (TopicRemappingDetailWrapper) of
// topic and runs RocketMQ's checks of it: the groups' mappings agree and
// their items build.
func readMappingFile(topic, file string) (remapPlan, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return remapPlan{}, fmt.Errorf("read the mapping file: %w", err)
	}
	plan, err := decodeRemapWrapper(data)
	if err != nil {
		return remapPlan{}, err
	}
	if _, err := checkStaticConsistence(topic, plan.configs); err != nil {
		return remapPlan{}, err
	}
	if _, err := buildMappingItems(plan.configs); err != nil {
		return remapPlan{}, err
	}
	return plan, nil
}

// masterAddr is a broker group's master address in info, "" if none.
func masterAddr(info namesrv.ClusterInfo, name string) string {
	return info.BrokerAddrTable[name].BrokerAddrs[0]
}

// applyRemapping sends the plan's mappings in RocketMQ's order
// (MQAdminUtils.remappingStaticTopic): the groups taking queues in (their
// new leaders writable before a logic offset is known), the groups giving
// them out (which stop taking writes of them), then each moved queue's
// new leader gets its logic offset, the old leader's max offset in logic
// terms rounded up to a block, and the groups taking queues in are
// updated again; the other groups last.
func (g *globals) applyRemapping(cmd *cobra.Command, info namesrv.ClusterInfo, plan remapPlan, force bool) error {
	ctx := cmd.Context()
	for _, name := range slices.Sorted(maps.Keys(plan.configs)) {
		if masterAddr(info, name) == "" {
			return fmt.Errorf("can't find addr for broker %s", name)
		}
	}
	send := func(name string) error {
		sc, ok := plan.configs[name]
		if !ok || sc.mapping == nil {
			return fmt.Errorf("broker %s has no mapping in the remapping", name)
		}
		return g.createStaticTopic(ctx, cmd, masterAddr(info, name), name, plan.topic, sc, force)
	}
	for _, name := range plan.mapIn {
		if err := send(name); err != nil {
			return err
		}
	}
	for _, name := range plan.mapOut {
		if err := send(name); err != nil {
			return err
		}
	}
	for _, name := range plan.mapOut {
		if err := g.decideLogicOffsets(ctx, info, plan, name); err != nil {
			return err
		}
	}
	for _, name := range plan.mapIn {
		if err := send(name); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(plan.configs)) {
		if slices.Contains(plan.mapIn, name) || slices.Contains(plan.mapOut, name) {
			continue
		}
		if err := send(name); err != nil {
			return err
		}
	}
	return nil
}

// decideLogicOffsets sets, for every logic queue the group of name gave
// out, its new leader's logic offset from the group's max offset of the
// old leader's physical queue (GET_TOPIC_STATS_INFO), in the new
// leader's group's mapping of the plan.
func (g *globals) decideLogicOffsets(ctx context.Context, info namesrv.ClusterInfo, plan remapPlan, name string) error {
	resp, err := g.invoke(ctx, masterAddr(info, name), remoting.GetTopicStatsInfo, remoting.Header{"topic": plan.topic}, nil)
	if err != nil {
		return fmt.Errorf("topic stats of %s on %s: %w", plan.topic, name, err)
	}
	stats, _, err := adminbody.DecodeTopicStats(resp.Body)
	if err != nil {
		return fmt.Errorf("topic stats of %s on %s: %w", plan.topic, name, err)
	}
	out := plan.configs[name].mapping
	for _, id := range slices.Sorted(maps.Keys(out.HostedQueues)) {
		items := out.HostedQueues[id]
		if len(items) < 2 {
			continue
		}
		newLeader, oldLeader := items[len(items)-1], items[len(items)-2]
		if newLeader.LogicOffset > 0 {
			continue
		}
		off, ok := stats[adminbody.MessageQueue{Topic: plan.topic, BrokerName: oldLeader.Bname, QueueID: oldLeader.QueueID}]
		if !ok {
			return fmt.Errorf("cannot get the max offset for old leader %s-%d of logic queue %d", oldLeader.Bname, oldLeader.QueueID, id)
		}
		if off.MaxOffset < oldLeader.StartOffset {
			return fmt.Errorf("the max offset %d is smaller than the start offset of old leader %s-%d", off.MaxOffset, oldLeader.Bname, oldLeader.QueueID)
		}
		items = slices.Clone(items)
		items[len(items)-1].LogicOffset = blockSeqRoundUp(oldLeader.StaticOffsetStrictly(off.MaxOffset), remapBlockSeqSize)
		out.HostedQueues[id] = items
		if in, ok := plan.configs[newLeader.Bname]; ok {
			in.mapping.HostedQueues[id] = slices.Clone(items)
		}
	}
	return nil
}
