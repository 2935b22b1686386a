package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
)

// remapItem is an item with RocketMQ's defaults.
func remapItem(bname string, gen, queue int32, logic int64) meta.LogicQueueMappingItem {
	it := meta.NewLogicQueueMappingItem()
	it.Bname, it.Gen, it.QueueID, it.LogicOffset = bname, gen, queue, logic
	return it
}

// remapGroup is a group's config of `queues` physical queues and its
// mapping of the given logic queues' items.
func remapGroup(name string, queues int, epoch int64, total int32, hosted map[int32][]meta.LogicQueueMappingItem) staticConfig {
	d := meta.NewTopicQueueMappingDetail("S", total, name, epoch)
	for id, items := range hosted {
		d.HostedQueues[id] = items
	}
	return staticConfig{config: meta.NewTopicConfig("S", queues), mapping: &d}
}

// RocketMQ's blockSeqRoundUp: the next block, or the one after when the
// offset is in a block's second half.
func TestBlockSeqRoundUp(t *testing.T) {
	for _, c := range []struct{ in, want int64 }{{0, 10000}, {4999, 10000}, {5000, 20000}, {12000, 20000}, {19999, 30000}} {
		if got := blockSeqRoundUp(c.in, 10000); got != c.want {
			t.Errorf("blockSeqRoundUp(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// The allocator deals the queues in rounds over the least loaded
// targets, the group that led the most queues before first: with C
// having led 2 and A 1, three queues give one each and a fourth goes to
// C (RocketMQ's MappingAllocator: the round sorted by the count before,
// dealt from its last position, index kept while the round shrinks).
func TestAllocateRemap(t *testing.T) {
	before := map[string]int{"A": 1, "C": 2}
	if got := allocateRemap([]string{"A", "B", "C"}, before, 3); !reflect.DeepEqual(got, map[string]int{"A": 1, "B": 1, "C": 1}) {
		t.Fatalf("3 queues: %v", got)
	}
	if got := allocateRemap([]string{"A", "B", "C"}, before, 4); !reflect.DeepEqual(got, map[string]int{"A": 1, "B": 1, "C": 2}) {
		t.Fatalf("4 queues: %v", got)
	}
	// Two targets, A having led all three: A keeps two, B takes one.
	if got := allocateRemap([]string{"A", "B"}, map[string]int{"A": 3}, 3); !reflect.DeepEqual(got, map[string]int{"A": 2, "B": 1}) {
		t.Fatalf("A led 3: %v", got)
	}
}

// Moving every queue to B: logic queue 0, led by A, gets a new leader
// item on B (gen 1, B's next physical queue, logic offset undecided,
// start 0) after A's item, on both A and B; B's own queue stays; the
// epoch is the old one + 1000 when that is later than now; B takes
// queues in, A gives them out.
func TestRemapStaticTopicMovesAQueue(t *testing.T) {
	current := map[string]staticConfig{
		"A": remapGroup("A", 1, 5000, 2, map[int32][]meta.LogicQueueMappingItem{0: {remapItem("A", 0, 0, 0)}}),
		"B": remapGroup("B", 1, 5000, 2, map[int32][]meta.LogicQueueMappingItem{1: {remapItem("B", 0, 0, 0)}}),
	}
	plan, err := remapStaticTopic("S", current, []string{"B"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if plan.epoch != 6000 || plan.kind != remapTypeRemapping {
		t.Fatalf("epoch %d kind %s", plan.epoch, plan.kind)
	}
	if !reflect.DeepEqual(plan.mapIn, []string{"B"}) || !reflect.DeepEqual(plan.mapOut, []string{"A"}) {
		t.Fatalf("in %v out %v", plan.mapIn, plan.mapOut)
	}
	want := []meta.LogicQueueMappingItem{remapItem("A", 0, 0, 0), remapItem("B", 1, 1, -1)}
	for _, name := range []string{"A", "B"} {
		sc := plan.configs[name]
		if got := sc.mapping.HostedQueues[0]; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s's items of queue 0: %+v, want %+v", name, got, want)
		}
		if sc.mapping.Epoch != 6000 || sc.mapping.TotalQueues != 2 {
			t.Fatalf("%s: epoch %d total %d", name, sc.mapping.Epoch, sc.mapping.TotalQueues)
		}
	}
	if b := plan.configs["B"]; b.config.WriteQueueNums != 2 || b.config.ReadQueueNums != 2 || len(b.mapping.HostedQueues[1]) != 1 {
		t.Fatalf("B after: %+v %+v", b.config, b.mapping.HostedQueues)
	}
	if a := plan.configs["A"]; a.config.WriteQueueNums != 1 {
		t.Fatalf("A's queues changed: %d", a.config.WriteQueueNums)
	}
	// current is left as it was (the .before file is written from it).
	if len(current["A"].mapping.HostedQueues[0]) != 1 || current["B"].config.WriteQueueNums != 1 {
		t.Fatal("remapStaticTopic changed its input")
	}
	// A later now wins over old epoch + 1000.
	if p, err := remapStaticTopic("S", current, []string{"B"}, 9999); err != nil || p.epoch != 9999 {
		t.Fatalf("epoch with a later now: %d %v", p.epoch, err)
	}
}

// Spreading over a group that has none: A keeps two of its three queues
// and the last one moves to B's physical queue 0 (B had the topic with
// no queues); nothing moves when the targets already hold what the
// allocation gives them.
func TestRemapStaticTopicSpreadsAndKeeps(t *testing.T) {
	current := map[string]staticConfig{
		"A": remapGroup("A", 3, 5000, 3, map[int32][]meta.LogicQueueMappingItem{
			0: {remapItem("A", 0, 0, 0)}, 1: {remapItem("A", 0, 1, 0)}, 2: {remapItem("A", 0, 2, 0)}}),
		"B": remapGroup("B", 0, 5000, 3, nil),
	}
	plan, err := remapStaticTopic("S", current, []string{"A", "B"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.configs["B"].mapping.LeaderIDMap(); !reflect.DeepEqual(got, map[int32]int32{2: 0}) {
		t.Fatalf("B leads %v, want logic queue 2 on physical 0", got)
	}
	if got := plan.configs["A"].mapping.LeaderIDMap(); !reflect.DeepEqual(got, map[int32]int32{0: 0, 1: 1}) {
		t.Fatalf("A leads %v", got)
	}
	if items := plan.configs["A"].mapping.HostedQueues[2]; len(items) != 2 || items[1].Bname != "B" || items[1].Gen != 1 {
		t.Fatalf("A's history of queue 2: %+v", items)
	}
	again, err := remapStaticTopic("S", plan.configs, []string{"A", "B"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.mapIn)+len(again.mapOut) != 0 {
		t.Fatalf("a balanced topic moved queues: in %v out %v", again.mapIn, again.mapOut)
	}
}

// A queue moved back to a group it left gets a new physical queue there
// (never its old one: checkIfReusePhysicalQueue) and the next gen after
// the whole history.
func TestRemapStaticTopicMovesBack(t *testing.T) {
	history := []meta.LogicQueueMappingItem{remapItem("A", 0, 0, 0), remapItem("B", 1, 0, 10000)}
	current := map[string]staticConfig{
		"A": remapGroup("A", 1, 5000, 1, map[int32][]meta.LogicQueueMappingItem{0: history}),
		"B": remapGroup("B", 1, 5000, 1, map[int32][]meta.LogicQueueMappingItem{0: history}),
	}
	plan, err := remapStaticTopic("S", current, []string{"A"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]meta.LogicQueueMappingItem{}, history...), remapItem("A", 2, 1, -1))
	if got := plan.configs["A"].mapping.HostedQueues[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("items %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(plan.mapIn, []string{"A"}) || !reflect.DeepEqual(plan.mapOut, []string{"B"}) {
		t.Fatalf("in %v out %v", plan.mapIn, plan.mapOut)
	}
}

// RocketMQ's checks refuse a remapping of mappings that disagree or do
// not add up.
func TestRemapStaticTopicRefuses(t *testing.T) {
	ok := func() map[string]staticConfig {
		return map[string]staticConfig{
			"A": remapGroup("A", 1, 5000, 2, map[int32][]meta.LogicQueueMappingItem{0: {remapItem("A", 0, 0, 0)}}),
			"B": remapGroup("B", 1, 5000, 2, map[int32][]meta.LogicQueueMappingItem{1: {remapItem("B", 0, 0, 0)}}),
		}
	}
	for _, c := range []struct {
		name, want string
		edit       func(map[string]staticConfig)
	}{
		{"epochs differ", "epoch does not match", func(m map[string]staticConfig) { m["B"].mapping.Epoch = 4000 }},
		{"a queue led by none", "does not match the real hosted queues", func(m map[string]staticConfig) { delete(m["B"].mapping.HostedQueues, 1) }},
		{"two leaders", "duplicated", func(m map[string]staticConfig) {
			m["B"].mapping.HostedQueues[0] = []meta.LogicQueueMappingItem{remapItem("B", 0, 0, 0)}
		}},
		{"a physical queue over the write queues", "over its write queues", func(m map[string]staticConfig) {
			m["A"].mapping.HostedQueues[0] = []meta.LogicQueueMappingItem{remapItem("A", 0, 3, 0)}
		}},
		{"no mapping", "should not be null", func(m map[string]staticConfig) { m["A"] = staticConfig{config: m["A"].config} }},
		{"nothing", "no topic route", func(m map[string]staticConfig) { clear(m) }},
	} {
		m := ok()
		c.edit(m)
		if _, err := remapStaticTopic("S", m, []string{"A", "B"}, 100); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A plan written as a TopicRemappingDetailWrapper reads back the same,
// and fastjson's bare integer keys read too.
func TestRemapWrapperRoundTrip(t *testing.T) {
	current := map[string]staticConfig{
		"A": remapGroup("A", 1, 5000, 1, map[int32][]meta.LogicQueueMappingItem{0: {remapItem("A", 0, 0, 0)}}),
	}
	plan, err := remapStaticTopic("S", current, []string{"B"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	data, err := plan.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeRemapWrapper(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.topic != "S" || back.epoch != plan.epoch || back.kind != remapTypeRemapping ||
		!reflect.DeepEqual(back.mapIn, plan.mapIn) || !reflect.DeepEqual(back.mapOut, plan.mapOut) {
		t.Fatalf("wrapper %+v", back)
	}
	for name, sc := range plan.configs {
		if !reflect.DeepEqual(back.configs[name].mapping.HostedQueues, sc.mapping.HostedQueues) ||
			back.configs[name].config.WriteQueueNums != sc.config.WriteQueueNums {
			t.Fatalf("%s read back as %+v", name, back.configs[name])
		}
	}
	bare := strings.ReplaceAll(string(data), `"hostedQueues":{"0"`, `"hostedQueues":{0`)
	if bare == string(data) {
		t.Fatal("no hostedQueues key to make bare")
	}
	if b2, err := decodeRemapWrapper([]byte(bare)); err != nil || len(b2.configs["B"].mapping.HostedQueues[0]) != 2 {
		t.Fatalf("bare keys: %v", err)
	}
	if _, err := decodeRemapWrapper([]byte(`{"brokerConfigMap":`)); err == nil {
		t.Fatal("a truncated file was read")
	}
}
