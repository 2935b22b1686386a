package main

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
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

// remapPull pulls logic queue 0 of topic ST at addr from logic offset
// from, as a Java consumer of a static topic does (lo unset), and returns
// the answer's code, nextBeginOffset, offsetDelta and messages.
func remapPull(t *testing.T, addr string, from int64) (int32, int64, int64, []commitlog.Message) {
	t.Helper()
	g := &globals{timeout: 10 * time.Second}
	h := remoting.Header{"consumerGroup": "RG", "topic": "ST", "subscription": "*", "expressionType": "TAG",
		"subVersion": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "queueId": "0", "maxMsgNums": "32", "sysFlag": "4"}
	h.SetInt64("queueOffset", from)
	resp, _ := g.invoke(context.Background(), addr, remoting.PullMessage, h, nil)
	if resp == nil {
		t.Fatalf("pull at %d from %s: no answer", from, addr)
	}
	rh := remoting.Header(resp.ExtFields)
	next, _ := rh.Int64("nextBeginOffset")
	delta, _ := rh.Int64("offsetDelta")
	var msgs []commitlog.Message
	if resp.Code == remoting.Success {
		var err error
		if msgs, err = commitlog.DecodeAll(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	return resp.Code, next, delta, msgs
}

// remappingStaticTopic over two broker groups moves logic queue 0 from
// broker-a to broker-b as mqadmin's does: the .before and .after files
// are written, broker-b leads the queue with a new item whose logic
// offset is broker-a's max offset rounded up to a block (10000), the name
// server routes the queue to broker-b, sends land on broker-b (broker-a
// answers NOT_LEADER_FOR_QUEUE), and a consumer pulling the logic queue
// through broker-b reads broker-a's messages (forwarded) and then, at
// their end, broker-b's, their logic offsets going on through the
// offsetDelta. A mapping file applied with -mf is sent as it is.
func TestRemappingStaticTopicMovesAQueue(t *testing.T) {
	ns, a, b := startTwoMasters(t)
	out0(t, "updateStaticTopic", "-n", ns, "-t", "ST", "-b", "broker-a", "--qn", "1")
	for _, addr := range []string{a, b} {
		out0(t, "updateSubGroup", "-b", addr, "-g", "RG")
	}
	g := &globals{timeout: 10 * time.Second}
	send := func(addr, body string) *remoting.Command {
		t.Helper()
		resp, _ := g.invoke(context.Background(), addr, remoting.SendMessage, remoting.Header{
			"producerGroup": "pg", "topic": "ST", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}, []byte(body))
		if resp == nil {
			t.Fatalf("send to %s: no answer", addr)
		}
		return resp
	}
	for _, body := range []string{"a0", "a1", "a2"} {
		if r := send(a, body); r.Code != remoting.Success {
			t.Fatalf("send to broker-a: %d %s", r.Code, r.Remark)
		}
	}
	if r := send(b, "x"); r.Code != remoting.NotLeaderForQueue {
		t.Fatalf("send to broker-b before the move: %d %s", r.Code, r.Remark)
	}
	mapping := func(addr string) meta.TopicQueueMappingDetail { return staticMappingAt(t, addr, "ST") }
	before := mapping(a)

	out := out0(t, "remappingStaticTopic", "-n", ns, "-t", "ST", "-b", "broker-b")
	var files []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "written to file "); i >= 0 {
			files = append(files, strings.TrimSpace(line[i+len("written to file "):]))
		}
	}
	if len(files) != 2 || !strings.HasSuffix(files[0], ".before") || !strings.HasSuffix(files[1], ".after") {
		t.Fatalf("mapping files %v in:\n%s", files, out)
	}
	for _, f := range files {
		t.Cleanup(func() { os.Remove(f) })
	}
	old, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if p, err := decodeRemapWrapper(old); err != nil || p.kind != remapTypeCreateOrUpdate || p.epoch != before.Epoch ||
		len(p.configs["broker-a"].mapping.HostedQueues[0]) != 1 {
		t.Fatalf(".before file: %+v %v", p, err)
	}

	mb, ma := mapping(b), mapping(a)
	items := mb.HostedQueues[0]
	if len(items) != 2 || items[0].Bname != "broker-a" || items[1].Bname != "broker-b" || items[1].Gen != 1 || items[1].LogicOffset != 10000 {
		t.Fatalf("broker-b's items of queue 0: %+v", items)
	}
	if mb.Epoch <= before.Epoch || ma.Epoch != mb.Epoch {
		t.Fatalf("epochs: before %d, a %d, b %d", before.Epoch, ma.Epoch, mb.Epoch)
	}
	if got := ma.LeaderIDMap(); len(got) != 0 {
		t.Fatalf("broker-a still leads %v", got)
	}
	route := out0(t, "topicRoute", "-n", ns, "-t", "ST")
	if !strings.Contains(route, "topicQueueMappingByBroker") {
		t.Fatalf("route without the mapping:\n%s", route)
	}

	if r := send(a, "x"); r.Code != remoting.NotLeaderForQueue {
		t.Fatalf("send to broker-a after the move: %d %s", r.Code, r.Remark)
	}
	r := send(b, "b0")
	if r.Code != remoting.Success || r.ExtFields["queueOffset"] != "10000" || r.ExtFields["queueId"] != "0" {
		t.Fatalf("send to broker-b after the move: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}

	code, next, delta, msgs := remapPull(t, b, 0)
	if code != remoting.Success || len(msgs) != 3 || string(msgs[0].Body) != "a0" || string(msgs[2].Body) != "a2" || next != 3 || delta != 0 {
		t.Fatalf("pull of the old item through broker-b: code %d next %d delta %d %d messages", code, next, delta, len(msgs))
	}
	code, next, _, _ = remapPull(t, b, next)
	if code != remoting.PullRetryImmediately || next != 10000 {
		t.Fatalf("pull at the old item's end: code %d next %d, want PULL_RETRY_IMMEDIATELY and 10000", code, next)
	}
	code, next, delta, msgs = remapPull(t, b, next)
	if code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "b0" || msgs[0].QueueOffset+delta != 10000 || next != 10001 {
		t.Fatalf("pull of the new item: code %d next %d delta %d %+v", code, next, delta, msgs)
	}

	// The .after file holds the new leader before its logic offset was
	// decided: applied with -mf, broker-b refuses it (an item may not
	// change a logic offset it has decided), and with -fr true it is
	// forced in and the logic offset decided again, the same.
	if _, err := run(t, "remappingStaticTopic", "-n", ns, "-t", "ST", "--mf", files[1]); err == nil {
		t.Fatal("the .after file was applied over the decided logic offset without force")
	}
	out0(t, "remappingStaticTopic", "-n", ns, "-t", "ST", "--mf", files[1], "--fr", "true")
	if got := mapping(b).HostedQueues[0]; len(got) != 2 || got[1].Bname != "broker-b" || got[1].LogicOffset != 10000 {
		t.Fatalf("after -mf -fr true: %+v", got)
	}
	if code, _, _, msgs := remapPull(t, b, 10000); code != remoting.Success || len(msgs) != 1 {
		t.Fatalf("pull after -mf: %d, %d messages", code, len(msgs))
	}

	// updateStaticTopic --mf applies a file's mappings to the groups it
	// names and an empty one to the rest of their cluster.
	d := meta.NewTopicQueueMappingDetail("SF", 1, "broker-a", 7000)
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{remapItem("broker-a", 0, 0, 0)}
	data, err := remapPlan{topic: "SF", kind: remapTypeCreateOrUpdate, epoch: 7000,
		configs: map[string]staticConfig{"broker-a": {config: meta.NewTopicConfig("SF", 1), mapping: &d}}}.encode()
	if err != nil {
		t.Fatal(err)
	}
	file := t.TempDir() + "/SF.json"
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out0(t, "updateStaticTopic", "-n", ns, "-t", "SF", "--mf", file)
	for _, c := range []struct {
		addr  string
		leads int
	}{{a, 1}, {b, 0}} {
		resp, err := g.invoke(context.Background(), c.addr, remoting.GetTopicConfig, remoting.Header{"topic": "SF", "lo": "true"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := decodeStaticConfig(resp.Body)
		if err != nil || sc.mapping == nil || sc.mapping.Epoch != 7000 || len(sc.mapping.LeaderIDMap()) != c.leads {
			t.Fatalf("SF on %s after --mf: %+v %v", c.addr, sc.mapping, err)
		}
	}
	if _, err := run(t, "updateStaticTopic", "-n", ns, "-t", "OTHER", "--mf", file); err == nil {
		t.Fatal("a mapping file of another topic was applied")
	}
}

// FuzzDecodeRemapWrapper: a mapping file of any bytes is read or refused
// with an error, never a panic, and what is read encodes again.
func FuzzDecodeRemapWrapper(f *testing.F) {
	current := map[string]staticConfig{
		"A": remapGroup("A", 1, 5000, 1, map[int32][]meta.LogicQueueMappingItem{0: {remapItem("A", 0, 0, 0)}}),
	}
	if plan, err := remapStaticTopic("S", current, []string{"B"}, 100); err == nil {
		if data, err := plan.encode(); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"brokerConfigMap":{"A":{"topicName":"S","mappingDetail":{"hostedQueues":{0:[{"gen":0}]}}}},"epoch":1}`))
	f.Add([]byte(`{"brokerConfigMap":{"A":null}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodeRemapWrapper(data)
		if err != nil {
			return
		}
		if _, err := p.encode(); err != nil {
			t.Fatalf("a decoded wrapper does not encode: %v", err)
		}
		_, _ = buildMappingItems(p.configs)
		_, _ = checkStaticConsistence("S", p.configs)
	})
}
