package broker

import (
	"context"
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicTable reads a broker's topics by name.
func topicTable(t *testing.T, b *testBroker) map[string]meta.TopicConfig {
	t.Helper()
	out := map[string]meta.TopicConfig{}
	if err := b.topics.table.Each(func(tc meta.TopicConfig) bool { out[tc.TopicName] = tc; return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// groupTable reads a broker's subscription groups by name.
func groupTable(t *testing.T, b *testBroker) map[string]meta.SubscriptionGroupConfig {
	t.Helper()
	out := map[string]meta.SubscriptionGroupConfig{}
	if err := b.groups.Each(func(g meta.SubscriptionGroupConfig) bool { out[g.GroupName] = g; return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// offsetTable reads a broker's committed offsets, the scheduler's
// included, keyed "group topic queue".
func offsetTable(t *testing.T, b *testBroker) map[kvindex.OffsetUpdate]bool {
	t.Helper()
	out := map[kvindex.OffsetUpdate]bool{}
	if err := b.offsets.Each("", func(u kvindex.OffsetUpdate) bool { out[u] = true; return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// requestModes reads a broker's request modes.
func requestModes(t *testing.T, b *testBroker) map[groupTopic]requestModeBody {
	t.Helper()
	out := map[groupTopic]requestModeBody{}
	if err := b.db.Pop().EachRequestMode(func(m kvindex.RequestMode) bool {
		var body requestModeBody
		if err := json.Unmarshal(m.JSON, &body); err != nil {
			t.Fatalf("request mode %s %s: %v", m.Topic, m.Group, err)
		}
		out[groupTopic{m.Group, m.Topic}] = body
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func setMode(t *testing.T, c *remoting.Client, topic, group, mode string, share int) {
	t.Helper()
	body, _ := json.Marshal(requestModeBody{Topic: topic, ConsumerGroup: group, Mode: mode, PopShareQueueNum: share})
	if r := call(t, c, remoting.SetMessageRequestMode, nil, body); r.Code != remoting.Success {
		t.Fatalf("set the request mode of %s on %s: %d %s", group, topic, r.Code, r.Remark)
	}
}

func syncSlave(t *testing.T, slave, master *testBroker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := slave.syncFromMaster(ctx, master.Addr()); err != nil {
		t.Fatalf("sync from master: %v", err)
	}
}

func TestSlaveSyncCopiesTheMasterAsRocketMQ(t *testing.T) {
	master := startTestBroker(t, nil)
	slave := startTestBroker(t, nil)
	mc, sc := master.client(nil), slave.client(nil)

	createTopic(t, mc, "SyncA", 4, 4)
	createTopic(t, mc, "SyncB", 2, 2)
	createTopic(t, mc, "Gone", 1, 1)
	if r := call(t, mc, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"gA","retryMaxTimes":3,"consumeBroadcastEnable":false}`)); r.Code != remoting.Success {
		t.Fatalf("create gA: %d %s", r.Code, r.Remark)
	}
	commit(t, mc, "gA", "SyncA", 0, 5)
	commit(t, mc, "gA", "SyncA", 1, 6)
	commit(t, mc, "gB", "SyncB", 1, 9)
	if err := master.offsets.Set(scheduleOffsetGroup, meta.ScheduleTopic, 2, 7); err != nil { // level 3
		t.Fatal(err)
	}
	setMode(t, mc, "SyncA", "gA", "POP", 2)

	// What the slave had before: some of it goes, some stays, as in RocketMQ.
	createTopic(t, sc, "SlaveOnly", 1, 1)
	createTopic(t, sc, "SyncA", 8, 8)
	ensureGroup(t, sc, "slaveGroup")
	commit(t, sc, "gA", "SyncA", 3, 40)                                                       // the master's gA@SyncA has no queue 3: dropped
	commit(t, sc, "gKeep", "SlaveOnly", 0, 8)                                                 // a pair the master lacks: kept
	if err := slave.offsets.Set(scheduleOffsetGroup, meta.ScheduleTopic, 4, 11); err != nil { // level 5: kept
		t.Fatal(err)
	}
	if err := slave.offsets.Set(scheduleOffsetGroup, meta.ScheduleTopic, 2, 1); err != nil { // level 3: the master's
		t.Fatal(err)
	}
	setMode(t, sc, "SlaveOnly", "gKeep", "POP", 1) // the master has none: gone

	syncSlave(t, slave, master)

	// Topics and groups: the master's tables and versions, whole.
	if got, want := topicTable(t, slave), topicTable(t, master); !reflect.DeepEqual(got, want) {
		t.Errorf("slave topics\n%v\nwant the master's\n%v", got, want)
	}
	if got, want := slave.topics.table.Version(), master.topics.table.Version(); got != want {
		t.Errorf("slave topic version %+v, master's %+v", got, want)
	}
	if got, want := groupTable(t, slave), groupTable(t, master); !reflect.DeepEqual(got, want) {
		t.Errorf("slave groups\n%v\nwant the master's\n%v", got, want)
	}
	if g := groupTable(t, slave)["gA"]; g.RetryMaxTimes != 3 || g.ConsumeBroadcastEnable {
		t.Errorf("gA on the slave: %+v", g)
	}
	if got, want := slave.groups.Version(), master.groups.Version(); got != want {
		t.Errorf("slave group version %+v, master's %+v", got, want)
	}

	// Offsets: per topic@group the master's queues; other pairs kept.
	want := map[kvindex.OffsetUpdate]bool{
		{Group: "gA", Topic: "SyncA", QueueID: 0, Offset: 5}:                            true,
		{Group: "gA", Topic: "SyncA", QueueID: 1, Offset: 6}:                            true,
		{Group: "gB", Topic: "SyncB", QueueID: 1, Offset: 9}:                            true,
		{Group: "gKeep", Topic: "SlaveOnly", QueueID: 0, Offset: 8}:                     true,
		{Group: scheduleOffsetGroup, Topic: meta.ScheduleTopic, QueueID: 2, Offset: 7}:  true,
		{Group: scheduleOffsetGroup, Topic: meta.ScheduleTopic, QueueID: 4, Offset: 11}: true,
	}
	if got := offsetTable(t, slave); !reflect.DeepEqual(got, want) {
		t.Errorf("slave offsets\n%v\nwant\n%v", got, want)
	}
	// The next sync writes only what moved: one offset of a pair whose
	// other offsets stay.
	commit(t, mc, "gA", "SyncA", 0, 50)
	syncSlave(t, slave, master)
	delete(want, kvindex.OffsetUpdate{Group: "gA", Topic: "SyncA", QueueID: 0, Offset: 5})
	want[kvindex.OffsetUpdate{Group: "gA", Topic: "SyncA", QueueID: 0, Offset: 50}] = true
	if got := offsetTable(t, slave); !reflect.DeepEqual(got, want) {
		t.Errorf("slave offsets after a second sync\n%v\nwant\n%v", got, want)
	}
	if got, want := requestModes(t, slave), requestModes(t, master); !reflect.DeepEqual(got, want) || len(got) != 1 {
		t.Errorf("slave request modes %v, want the master's %v", got, want)
	}

	// A topic deleted on the master moves its version on: the slave
	// deletes it too (the config only, as RocketMQ's slave).
	if r := call(t, mc, remoting.DeleteTopicInBroker, map[string]string{"topic": "Gone"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete Gone: %d %s", r.Code, r.Remark)
	}
	if _, ok := topicTable(t, slave)["Gone"]; !ok {
		t.Fatal("the slave lost Gone before it synced")
	}
	syncSlave(t, slave, master)
	if got := topicTable(t, slave); !reflect.DeepEqual(got, topicTable(t, master)) {
		t.Errorf("after the delete the slave has %v", got)
	} else if _, ok := got["Gone"]; ok {
		t.Error("the slave kept the topic the master deleted")
	}

	// Same version on both sides: the slave's table is left as it is, as
	// RocketMQ compares dataVersions before it copies.
	local := topicTable(t, slave)["SyncB"]
	local.Perm = meta.PermRead
	var tables []meta.TopicConfig
	for _, tc := range topicTable(t, slave) {
		if tc.TopicName == "SyncB" {
			tc = local
		}
		tables = append(tables, tc)
	}
	if _, err := slave.topics.table.Replace(tables, master.topics.table.Version()); err != nil {
		t.Fatal(err)
	}
	syncSlave(t, slave, master)
	if got := topicTable(t, slave)["SyncB"]; got.Perm != meta.PermRead {
		t.Errorf("a sync with the master's version unchanged rewrote SyncB: %+v", got)
	}
	// A change on the master moves its version on, and the slave follows.
	createTopic(t, mc, "SyncC", 1, 1)
	syncSlave(t, slave, master)
	if got := topicTable(t, slave); !reflect.DeepEqual(got, topicTable(t, master)) {
		t.Errorf("after SyncC the slave has %v", got)
	}
}

// A broker named as its own master, or no master, asks nobody for
// anything (RocketMQ's SlaveSynchronize.syncAll skips its own address):
// copying its own tables back would leave them as they are, so the test
// reads the requests the broker answered, not its tables.
func TestSlaveSyncWithItselfDoesNothing(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	before := b.topics.table.Version()
	if err := b.syncFromMaster(context.Background(), b.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := b.syncFromMaster(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if b.topics.table.Version() != before {
		t.Fatal("a broker synced from itself")
	}
	// One request of the test's own: the scrape counts what the broker
	// answered.
	if r := call(t, b.client(nil), remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success {
		t.Fatalf("GET_BROKER_RUNTIME_INFO: %d %s", r.Code, r.Remark)
	}
	// The answer is counted once it is queued for the connection, which
	// can come after the client has it: wait for the count.
	var text string
	waitFor(t, "the scrape to count the test's own request (else it cannot tell whether the broker asked itself)", func() bool {
		text = scrapeMetrics(t, b)
		return strings.Contains(text, `request_code="get_broker_runtime_info"`)
	})
	for _, code := range []string{"get_all_topic_config", "get_all_consumer_offset", "get_all_delay_offset",
		"get_all_subscriptiongroup_config", "get_all_message_request_mode"} {
		if strings.Contains(text, `request_code="`+code+`"`) {
			t.Errorf("the broker answered itself %s: a sync from its own address asked it", code)
		}
	}
}

func TestSlaveSyncFromAnUnreachableMasterFails(t *testing.T) {
	b := startTestBroker(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	before := b.topics.table.Version()
	if err := b.syncFromMaster(context.Background(), addr); err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("sync from nobody at %s: %v", addr, err)
	}
	if b.topics.table.Version() != before {
		t.Fatal("a failed sync changed the topics")
	}
}

func TestSlaveSyncLoopWaitsForAMaster(t *testing.T) {
	master := startTestBroker(t, nil)
	slave := startTestBroker(t, map[string]string{"slaveSyncIntervalMillis": "20"})
	createTopic(t, master.client(nil), "LoopT", 2, 2)

	var addr atomic.Value
	addr.Store("")
	asked := make(chan struct{}, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		slave.slaveSyncLoop(ctx, func() string {
			select {
			case asked <- struct{}{}:
			default:
			}
			return addr.Load().(string)
		})
	}()
	defer func() { cancel(); wg.Wait() }()
	for i := 0; i < 3; i++ {
		select {
		case <-asked:
		case <-time.After(20 * time.Second):
			t.Fatal("the loop never asked for the master's address")
		}
	}
	if _, ok := topicTable(t, slave)["LoopT"]; ok {
		t.Fatal("the loop synced without a master")
	}
	addr.Store(master.Addr())
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := topicTable(t, slave)["LoopT"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop never copied the master's topics")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
}

// FuzzApplyMasterBodies: whatever a master answers, applying it never
// panics the slave (bad bodies are refused with an error); a topic or
// group table of a new version that the slave takes leaves it holding
// exactly the master's table, under the master's version.
func FuzzApplyMasterBodies(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{"T@G":{0:5,1:6}},"dataVersion":{"counter":1,"timestamp":2}}`))
	f.Add([]byte(`{"offsetTable":{1:1,18:4},"dataVersion":{"counter":1}}`))
	f.Add([]byte(`{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6}},"dataVersion":{"counter":3,"timestamp":4}}`))
	f.Add([]byte(`{"subscriptionGroupTable":{"G":{"groupName":"G"}},"forbiddenTable":{},"dataVersion":{"counter":5}}`))
	f.Add([]byte(`{"cursorMs":1733000000000,"cursorPhy":12,"belowPhy":4096,"copiesEnd":8192}`))
	f.Add([]byte(`{"messageRequestModeMap":{"T":{"G":{"topic":"T","consumerGroup":"G","mode":"POP","popShareQueueNum":1}}}}`))
	f.Add([]byte(`{"dataVersion":{"counter":7,"timestamp":8},"timingCount":{"T":{"count":2,"timeStamp":8}}}`))
	b := startTestBroker(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.topics.table.Version()
		if b.applyMasterTopics(body, masterSeen{}) == nil {
			topics, version, err := rmqconfig.ParseTopics(body)
			if err != nil {
				t.Fatalf("%q applied, but does not parse: %v", body, err)
			}
			if !sameVersion(before, version) {
				held := map[string]meta.TopicConfig{}
				if err := b.topics.table.Each(func(tc meta.TopicConfig) bool { held[tc.TopicName] = tc; return true }); err != nil {
					t.Fatal(err)
				}
				want := map[string]meta.TopicConfig{}
				for _, tc := range topics {
					want[tc.TopicName] = tc
				}
				if !reflect.DeepEqual(held, want) || !sameVersion(b.topics.table.Version(), version) {
					t.Fatalf("%q applied: the slave holds %v topics at %+v, the master %v at %+v", body, len(held), b.topics.table.Version(), len(want), version)
				}
			}
		}
		_ = b.applyMasterOffsets(body)
		_ = b.applyMasterDelayOffsets(body)
		before = b.groups.Version()
		if b.applyMasterGroups(body) == nil {
			groups, version, err := rmqconfig.ParseGroups(body)
			if err != nil {
				t.Fatalf("%q applied, but does not parse: %v", body, err)
			}
			if !sameVersion(before, version) {
				held := map[string]meta.SubscriptionGroupConfig{}
				if err := b.groups.Each(func(g meta.SubscriptionGroupConfig) bool { held[g.GroupName] = g; return true }); err != nil {
					t.Fatal(err)
				}
				want := map[string]meta.SubscriptionGroupConfig{}
				for _, g := range groups {
					want[g.GroupName] = g
				}
				if !reflect.DeepEqual(held, want) || !sameVersion(b.groups.Version(), version) {
					t.Fatalf("%q applied: the slave holds %v groups at %+v, the master %v at %+v", body, len(held), b.groups.Version(), len(want), version)
				}
			}
		}
		_ = b.applyMasterRequestModes(body)
		_ = b.applyMasterTimerMetrics(body)
		_, _ = parseTimerWatermark(body) // applying waits for the slave to reach the master's end
	})
}

// A master that answers nothing (REQUEST_CODE_NOT_SUPPORTED to every
// code): each RocketMQ table fails with its name (the timer metrics
// among them, asked under timerWheelEnable as RocketMQ's slave asks
// them), but rocketkv's own timer and POP requests, which an Apache
// RocketMQ master never answers, are skipped without an error.
func TestSyncSkipsTheTimerRequestAMasterDoesNotKnow(t *testing.T) {
	master := startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return remoting.NotSupportedResponse(req)
	}))
	slave := startTestBroker(t, nil)
	err := slave.syncFromMaster(t.Context(), master)
	if err == nil {
		t.Fatal("a master that answers nothing synced")
	}
	for _, table := range []string{"topics", "consumer offsets", "delay offsets", "subscription groups", "request modes", "timer metrics"} {
		if !strings.Contains(err.Error(), "copy the "+table+" of master") {
			t.Errorf("no error for the %s: %v", table, err)
		}
	}
	if strings.Contains(err.Error(), "delivered timer messages") || strings.Contains(err.Error(), "POP") {
		t.Errorf("the timer or POP state request a RocketMQ master does not know is an error: %v", err)
	}
}

// The slave's frequent timer copy asks a master that does not know
// GetTimerWatermark (Apache RocketMQ's, which logs an error for every
// request it does not know) once, not every few seconds; a master at
// another address is asked again.
func TestSlaveTimerSyncAsksAMasterThatDoesNotKnowItOnce(t *testing.T) {
	var asked atomic.Int32
	handler := remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.GetTimerWatermark {
			asked.Add(1)
		}
		return remoting.NotSupportedResponse(req)
	})
	first, second := startRemotingServer(t, handler), startRemotingServer(t, handler)
	slave := startTestBroker(t, nil)
	var addr atomic.Value
	addr.Store(first)
	ticks := make(chan struct{}, 1024)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		slave.slaveTimerSyncLoop(ctx, 10*time.Millisecond, func() string {
			ticks <- struct{}{}
			return addr.Load().(string)
		})
	}()
	defer func() { cancel(); wg.Wait() }()
	waitTicks := func(n int) {
		for range n {
			select {
			case <-ticks:
			case <-time.After(20 * time.Second):
				t.Fatal("the loop stopped asking for the master's address")
			}
		}
	}
	waitTicks(10)
	if n := asked.Load(); n != 1 {
		t.Fatalf("a master that does not know GetTimerWatermark was asked %d times in 10 rounds, want once", n)
	}
	addr.Store(second)
	waitTicks(10)
	if n := asked.Load(); n != 2 {
		t.Fatalf("after the master changed: asked %d times in all, want 2", n)
	}
}

// The slave's timer copy, every 3 s, goes over one kept connection to
// its master, as RocketMQ's slave sends it through its BrokerOuterAPI's
// remoting client, which keeps its channel: the master sees one
// connection across many copies, and a second only once it closed the
// first, after which the copies go on over the new one.
func TestSlaveTimerSyncKeepsItsConnection(t *testing.T) {
	var mu sync.Mutex
	conns := map[uint64]bool{}
	var answered atomic.Int32
	var closeAt atomic.Int32 // the copy after which the master closes the connection
	closeAt.Store(-1)
	master := startRemotingServer(t, remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		mu.Lock()
		conns[conn.ID()] = true
		mu.Unlock()
		if req.Code != remoting.GetTimerCheckPoint {
			_ = conn.Reply(req, remoting.NotSupportedResponse(req))
			return
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = rmqconfig.TimerCheckpoint{ReadMs: time.Now().UnixMilli()}.Encode()
		_ = conn.Reply(req, resp)
		if answered.Add(1) == closeAt.Load() {
			_ = conn.Close()
		}
	}))
	connections := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
	slave := startTestBroker(t, map[string]string{"brokerRole": "SLAVE", "brokerId": "1"})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { slave.slaveTimerSyncLoop(ctx, 10*time.Millisecond, func() string { return master }) })
	defer func() { cancel(); wg.Wait() }()
	waitAnswered := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for answered.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the master answered %d timer checkpoint copies, want %d", answered.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAnswered(10)
	if n := connections(); n != 1 {
		t.Fatalf("the master saw %d connections from the slave over 10 timer copies, want 1", n)
	}
	closeAt.Store(answered.Load() + 1)
	waitAnswered(closeAt.Load() + 10)
	if n := connections(); n != 2 {
		t.Fatalf("the master saw %d connections from the slave after it closed the first, want 2", n)
	}
}

// Topics and groups with attributes reach the slave as the master keeps
// them, on the first sync and on a later one that changes them: the slave
// takes the stored configs, it does not apply them as attribute updates
// ("+key" changes), which RocketMQ 5.3.3's slave did and failed on
// (apache/rocketmq#9403 and #9547).
func TestSlaveSyncCopiesAttributes(t *testing.T) {
	master := startTestBroker(t, nil)
	slave := startTestBroker(t, nil)
	mc := master.client(nil)
	if r := call(t, mc, remoting.UpdateAndCreateTopic, map[string]string{
		"topic": "AttrT", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
		"topicFilterType": "SINGLE_TAG", "attributes": "+message.type=FIFO",
	}, nil); r.Code != remoting.Success {
		t.Fatalf("create AttrT: %d %s", r.Code, r.Remark)
	}
	group := meta.NewSubscriptionGroupConfig("AttrG")
	group.Attributes = map[string]string{"priority": "3"} // a later RocketMQ's, kept as stored
	if err := master.groups.Put(group); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		syncSlave(t, slave, master)
		if got, want := topicTable(t, slave)["AttrT"], topicTable(t, master)["AttrT"]; !reflect.DeepEqual(got, want) || got.Attributes["message.type"] != "FIFO" {
			t.Fatalf("round %d: the slave's AttrT %+v, the master's %+v", round, got, want)
		}
		if got := groupTable(t, slave)["AttrG"]; !reflect.DeepEqual(got.Attributes, group.Attributes) {
			t.Fatalf("round %d: the slave's AttrG attributes %v, want %v", round, got.Attributes, group.Attributes)
		}
		// The master changes both; the next sync takes the changes.
		if r := call(t, mc, remoting.UpdateAndCreateTopic, map[string]string{
			"topic": "AttrT", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
			"topicFilterType": "SINGLE_TAG",
		}, nil); r.Code != remoting.Success {
			t.Fatalf("update AttrT: %d %s", r.Code, r.Remark)
		}
		group.Attributes = map[string]string{"priority": "5"}
		if err := master.groups.Put(group); err != nil {
			t.Fatal(err)
		}
	}
}

// A consumer's heartbeat on a slave creates its group's retry topic in
// the slave's topic table when the table has none, as RocketMQ's slave
// does (ClientManageProcessor.heartBeat, createTopicInSendMessageBackMethod
// with the group's retryQueueNums): a group whose consumers first come
// while the master is down has it on the slave, where clients find it in
// the route. The master's next sync puts its own table over it.
func TestSlaveHeartbeatCreatesTheRetryTopicWhileItsMasterIsDown(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	if r := call(t, master.client(nil), remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"hbGroup","retryQueueNums":3}`)); r.Code != remoting.Success {
		t.Fatalf("create hbGroup: %d %s", r.Code, r.Remark)
	}
	syncSlave(t, slave, master)
	retry := meta.RetryTopic("hbGroup")
	if _, ok, err := slave.topics.get(retry); err != nil || ok {
		t.Fatalf("%s on the slave before any heartbeat: %v %v", retry, ok, err)
	}
	master.stop()

	sc := slave.client(nil)
	heartbeat(t, sc, consumerHeartbeat("hb-client", "hbGroup"))
	if code, ids := consumerIDList(t, sc, "hbGroup"); code != remoting.Success || len(ids) != 1 || ids[0] != "hb-client" {
		t.Fatalf("consumers of hbGroup on the slave: %d %v, want [hb-client]", code, ids)
	}
	tc, ok, err := slave.topics.get(retry)
	if err != nil || !ok {
		t.Fatalf("the slave's heartbeat did not create %s: %v", retry, err)
	}
	if tc.ReadQueueNums != 3 || tc.WriteQueueNums != 3 || tc.Perm != meta.PermRead|meta.PermWrite {
		t.Fatalf("%s on the slave: %+v, want 3 queues (the group's retryQueueNums), read and write", retry, tc)
	}
}
