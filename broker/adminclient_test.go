package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

func TestGetBrokerConfig(t *testing.T) {
	b := startTestBroker(t, map[string]string{"transactionCheckMax": "7"})
	r := call(t, b.client(nil), remoting.GetBrokerConfig, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	lines := strings.Split(strings.TrimSuffix(string(r.Body), "\n"), "\n")
	if len(lines) != len(configs.Keys()) {
		t.Fatalf("%d settings reported, rocketkv has %d keys", len(lines), len(configs.Keys()))
	}
	got := map[string]string{}
	for i, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok || (i > 0 && lines[i-1] >= l) {
			t.Fatalf("line %d %q: not key=value in key order", i, l)
		}
		got[k] = v
	}
	_, port, _ := net.SplitHostPort(b.Addr())
	for k, v := range map[string]string{
		"transactionCheckMax": "7", "brokerName": "broker-a", "storePathRootDir": b.store,
		"mappedFileSizeCommitLog": "4194304", "flushDiskType": "ASYNC_FLUSH",
		// Derived, as RocketMQ reports them: the port listened on (the
		// configuration's 0 picks one), the address registered.
		"listenPort": port, "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
	} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	if b.repl.server == nil {
		t.Fatal("the test broker runs no HA server")
	}
	if _, ha, _ := net.SplitHostPort(b.repl.server.Addr().String()); got["haListenPort"] != ha {
		t.Errorf("haListenPort=%q, want the HA port listened on, %s", got["haListenPort"], ha)
	}
	var version meta.DataVersion
	if err := json.Unmarshal([]byte(r.ExtFields["version"]), &version); err != nil || version.Timestamp <= 0 {
		t.Fatalf("version %q: %+v %v", r.ExtFields["version"], version, err)
	}
}

func TestQueryTopicsByConsumer(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "TbcA", 0, "a", "")
	mustSend(t, c, "TbcB", 0, "b", "")
	mustSend(t, c, "TbcC", 0, "c", "")
	b.caughtUp()
	commit(t, c, "cg-tbc", "TbcB", 0, 1)
	commit(t, c, "cg-tbc", "TbcA", 0, 1)
	commit(t, c, "cg-other", "TbcC", 0, 0)
	for _, tc := range []struct {
		group string
		want  []string
	}{{"cg-tbc", []string{"TbcA", "TbcB"}}, {"cg-none", []string{}}} {
		r := call(t, c, remoting.QueryTopicsByConsumer, map[string]string{"group": tc.group}, nil)
		var body struct {
			TopicList  []string `json:"topicList"`
			BrokerAddr string   `json:"brokerAddr"`
		}
		if r.Code != remoting.Success || json.Unmarshal(r.Body, &body) != nil {
			t.Fatalf("%s: %d %s %s", tc.group, r.Code, r.Remark, r.Body)
		}
		if strings.Join(body.TopicList, ",") != strings.Join(tc.want, ",") || body.TopicList == nil || body.BrokerAddr != b.Addr() {
			t.Errorf("%s: body %s, want topics %v at %s", tc.group, r.Body, tc.want, b.Addr())
		}
	}
	if r := call(t, c, remoting.QueryTopicsByConsumer, nil, nil); r.Code != remoting.SystemError {
		t.Errorf("without a group: %d %s", r.Code, r.Remark)
	}
}

func TestConsumerRunningInfoRelayed(t *testing.T) {
	b := startTestBroker(t, nil)
	asked := make(chan map[string]string, 1)
	consumerConn := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code != remoting.GetConsumerRunningInfo {
			return nil
		}
		asked <- cmd.ExtFields
		resp := remoting.NewResponse(cmd, remoting.Success, "")
		resp.Body = []byte(`{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}`)
		return resp
	})
	heartbeat(t, consumerConn, heartbeatBody("10.0.0.5@run", "", "cg-run", map[string]string{"RunT": "*"}))
	admin := b.client(nil)
	r := call(t, admin, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "cg-run", "clientId": "10.0.0.5@run", "jstackEnable": "false"}, nil)
	if r.Code != remoting.Success || string(r.Body) != `{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}` {
		t.Fatalf("relayed answer: %d %s %s", r.Code, r.Remark, r.Body)
	}
	if h := <-asked; h["consumerGroup"] != "cg-run" || h["clientId"] != "10.0.0.5@run" || h["jstackEnable"] != "false" {
		t.Fatalf("the client was asked with %v", h)
	}
	r = call(t, admin, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "cg-run", "clientId": "10.0.0.6@gone"}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "not online") {
		t.Fatalf("unknown client: %d %s", r.Code, r.Remark)
	}
}

func TestConsumeMessageDirectlyRelayed(t *testing.T) {
	b := startTestBroker(t, nil)
	consumed := make(chan *remoting.Command, 1)
	consumerConn := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code != remoting.ConsumeMessageDirectly {
			return nil
		}
		consumed <- cmd
		resp := remoting.NewResponse(cmd, remoting.Success, "")
		resp.Body = []byte(`{"consumeResult":"CR_SUCCESS","order":false,"autoCommit":true}`)
		return resp
	})
	heartbeat(t, consumerConn, heartbeatBody("10.0.0.5@direct", "", "cg-direct", map[string]string{"DirT": "*"}))
	admin := b.client(nil)
	sent := mustSend(t, admin, "DirT", 0, "direct body", "")
	msgID := sent.ExtFields["msgId"]
	r := call(t, admin, remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "cg-direct", "clientId": "10.0.0.5@direct",
		"msgId": msgID, "topic": "DirT"}, nil)
	if r.Code != remoting.Success || !strings.Contains(string(r.Body), "CR_SUCCESS") {
		t.Fatalf("relayed answer: %d %s %s", r.Code, r.Remark, r.Body)
	}
	cmd := <-consumed
	m, err := commitlog.Decode(cmd.Body)
	if err != nil || string(m.Body) != "direct body" || commitlog.MessageID(m.StoreHost, m.PhyOffset) != msgID ||
		cmd.ExtFields["brokerName"] != "broker-a" || cmd.ExtFields["msgId"] != msgID {
		t.Fatalf("the client got header %v and message %+v (%v)", cmd.ExtFields, m, err)
	}
	// A record a POP revive put in a DLQ is relayed without the revive's
	// own property, which stays in the CommitLog.
	const from = "RKV_REVIVED_FROM\x010/0/9/cg-directDirT\x02"
	res, err := b.putMessages(t.Context(), []*commitlog.Message{{Topic: "%DLQ%cg-direct", Body: []byte("dead"),
		Properties: "UNIQ_KEY\x01U1\x02" + from}}, false)
	if err != nil {
		t.Fatal(err)
	}
	deadID := commitlog.MessageID(b.storeHost, res.PhyOffset)
	r = call(t, admin, remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "cg-direct", "clientId": "10.0.0.5@direct",
		"msgId": deadID, "topic": "%DLQ%cg-direct"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("relayed answer for the DLQ record: %d %s", r.Code, r.Remark)
	}
	cmd = <-consumed
	if m, err := commitlog.Decode(cmd.Body); err != nil || string(m.Body) != "dead" || m.Properties != "UNIQ_KEY\x01U1\x02" {
		t.Fatalf("the client got the DLQ record %+v (%v), want it without RKV_REVIVED_FROM", m, err)
	}
	for _, id := range []string{"not-an-id", commitlog.MessageID(b.storeHost, 1<<40)} {
		r := call(t, admin, remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "cg-direct", "clientId": "10.0.0.5@direct", "msgId": id}, nil)
		if r.Code != remoting.SystemError {
			t.Errorf("msgId %s: answered %d %s", id, r.Code, r.Remark)
		}
	}
}

// RocketMQ 5.3 knows no subscription group attribute: a group config
// that carries attribute modifications is refused with its remarks, and
// nothing of it is stored.
func TestCreateGroupRefusesAttributes(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"ga","retryMaxTimes":3,"attributes":{}}`)); r.Code != remoting.Success {
		t.Fatalf("group without attributes: %d %s", r.Code, r.Remark)
	}
	for _, tc := range []struct{ body, remark string }{
		{`{"groupName":"ga","retryMaxTimes":7,"attributes":{"+priority":"1"}}`, "unsupported key: priority"},
		{`{"groupName":"ga","attributes":{"-priority":""}}`, "attempt to delete a nonexistent key: priority"},
		{`{"groupName":"ga","attributes":{"xpriority":"1"}}`, "wrong format key: priority"},
		{`{"groupName":"ga","attributes":{"+":"1"}}`, "kv string format wrong."},
		{`{"groupName":"ga","attributes":{"":"1"}}`, "kv string format wrong."},
		{`{"groupName":"g-new","attributes":{"-priority":""}}`, "only add attribute is supported while creating topic. key: priority"},
		{`{"groupName":"g-new","attributes":{"+b":"1","+a":"2"}}`, "unsupported key: a"},
	} {
		if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(tc.body)); r.Code != remoting.SystemError || r.Remark != tc.remark {
			t.Errorf("%s: %d %q, want SYSTEM_ERROR %q", tc.body, r.Code, r.Remark, tc.remark)
		}
	}
	list := `{"groupConfigList":[{"groupName":"gl-ok"},{"groupName":"gl-attr","attributes":{"+a":"1"}}]}`
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroupList, nil, []byte(list)); r.Code != remoting.SystemError || r.Remark != "unsupported key: a" {
		t.Errorf("list with an attribute: %d %q", r.Code, r.Remark)
	}
	if g, err := b.groupConfig("ga", false); err != nil || g.RetryMaxTimes != 3 || len(g.Attributes) != 0 {
		t.Errorf("group ga after refused updates: %+v %v", g, err)
	}
	for _, name := range []string{"g-new", "gl-ok", "gl-attr"} {
		if _, ok, err := b.groups.Get(name); err != nil || ok {
			t.Errorf("group %s stored from a refused request (%v)", name, err)
		}
	}
}

// Topic attributes are modifications applied to the topic's current
// ones with RocketMQ 5.3's rules and remarks; the values rocketkv cannot
// honour (BatchCQ queues) are refused rather than stored.
func TestTopicAttributes(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	create := func(topic, attrs string) *remoting.Command {
		return call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": "4",
			"writeQueueNums": "4", "perm": "6", "attributes": attrs}, nil)
	}
	attrsOf := func(topic string) map[string]string {
		tc, ok, err := b.topics.get(topic)
		if err != nil || !ok {
			t.Fatalf("topic %s: %v %v", topic, ok, err)
		}
		return tc.Attributes
	}
	if r := create("TA", "+message.type=FIFO,+queue.type=SimpleCQ,+reserve.time=60"); r.Code != remoting.Success {
		t.Fatalf("create with attributes: %d %s", r.Code, r.Remark)
	}
	if got := attrsOf("TA"); fmt.Sprint(got) != "map[message.type:FIFO queue.type:SimpleCQ reserve.time:60]" {
		t.Fatalf("stored attributes %v", got)
	}
	// An update changes what it names and keeps the rest; "-" removes.
	if r := create("TA", "+message.type=NORMAL"); r.Code != remoting.Success {
		t.Fatalf("update: %d %s", r.Code, r.Remark)
	}
	if r := create("TA", "-reserve.time"); r.Code != remoting.Success {
		t.Fatalf("remove: %d %s", r.Code, r.Remark)
	}
	if got := attrsOf("TA"); fmt.Sprint(got) != "map[message.type:NORMAL queue.type:SimpleCQ]" {
		t.Fatalf("attributes after the update and the removal: %v", got)
	}
	for _, tc := range []struct {
		topic, attrs string
		code         int32
		remark       string
	}{
		{"TA", "+priority=1", remoting.SystemError, "unsupported key: priority"},
		{"TA", "+queue.type=SimpleCQ", remoting.SystemError, "attempt to update an unchangeable attribute. key: queue.type"},
		{"TA", "-queue.type", remoting.SystemError, "attempt to update an unchangeable attribute. key: queue.type"},
		{"TA", "-reserve.time", remoting.SystemError, "attempt to delete a nonexistent key: reserve.time"},
		{"TA", "message.type=FIFO", remoting.SystemError, "add/alter attribute format is wrong: message.type"},
		{"TA", "+message.type=MIXED", remoting.InvalidParameter, "MIXED message type is not supported."},
		{"TB", "-message.type", remoting.SystemError, "only add attribute is supported while creating topic. key: message.type"},
		{"TB", "+queue.type=BatchCQ", remoting.SystemError, "queue.type=BatchCQ is not supported by rocketkv: its ConsumeQueue holds one entry per message (SimpleCQ)"},
	} {
		if r := create(tc.topic, tc.attrs); r.Code != tc.code || r.Remark != tc.remark {
			t.Errorf("%s %s: %d %q, want %d %q", tc.topic, tc.attrs, r.Code, r.Remark, tc.code, tc.remark)
		}
	}
	if got := attrsOf("TA"); fmt.Sprint(got) != "map[message.type:NORMAL queue.type:SimpleCQ]" {
		t.Fatalf("attributes after refused updates: %v", got)
	}
	// A list carries each topic's modifications in its attributes map.
	list := `{"topicConfigList":[{"topicName":"TL1","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+message.type":"DELAY"}},
		{"topicName":"TA","readQueueNums":4,"writeQueueNums":4,"perm":6,"attributes":{"-message.type":""}}]}`
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, []byte(list)); r.Code != remoting.Success {
		t.Fatalf("topic list: %d %s", r.Code, r.Remark)
	}
	if got := fmt.Sprint(attrsOf("TL1"), attrsOf("TA")); got != "map[message.type:DELAY] map[queue.type:SimpleCQ]" {
		t.Fatalf("attributes after the list: %s", got)
	}
	// A topic named twice in one list: its configs apply one after the
	// other, as RocketMQ's updateTopicConfigList applies them (the second
	// alters the attributes the first created).
	twice := `{"topicConfigList":[{"topicName":"TT","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+queue.type":"SimpleCQ"}},
		{"topicName":"TT","readQueueNums":3,"writeQueueNums":3,"perm":6,"attributes":{"+message.type":"FIFO"}}]}`
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, []byte(twice)); r.Code != remoting.Success {
		t.Fatalf("topic list naming a topic twice: %d %s", r.Code, r.Remark)
	}
	if tc, _, err := b.topics.get("TT"); err != nil || fmt.Sprint(tc.Attributes) != "map[message.type:FIFO queue.type:SimpleCQ]" || tc.ReadQueueNums != 3 {
		t.Fatalf("topic named twice in a list: %+v (%v), want the second config over the first's attributes", tc, err)
	}
	refused := `{"topicConfigList":[{"topicName":"TL2","readQueueNums":2,"writeQueueNums":2,"perm":6},
		{"topicName":"TL3","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+queue.type":"BatchCQ"}}]}`
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, []byte(refused)); r.Code != remoting.SystemError || !strings.HasPrefix(r.Remark, "queue.type=BatchCQ") {
		t.Fatalf("topic list with a BatchCQ topic: %d %q", r.Code, r.Remark)
	}
	for _, topic := range []string{"TB", "TL2", "TL3"} {
		if _, ok, err := b.topics.get(topic); err != nil || ok {
			t.Errorf("topic %s stored from a refused request (%v)", topic, err)
		}
	}
	// A list long enough to read its topics in one pass applies the same
	// rules to the topics that exist.
	bulk := func(taAttrs string) []byte {
		var items []string
		for i := range bulkReadMin + 5 {
			items = append(items, fmt.Sprintf(`{"topicName":"BL%d","readQueueNums":1,"writeQueueNums":1,"perm":6}`, i))
		}
		items = append(items, `{"topicName":"TA","readQueueNums":4,"writeQueueNums":4,"perm":6,"attributes":{`+taAttrs+`}}`)
		return []byte(`{"topicConfigList":[` + strings.Join(items, ",") + `]}`)
	}
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, bulk(`"+queue.type":"SimpleCQ"`)); r.Code != remoting.SystemError ||
		r.Remark != "attempt to update an unchangeable attribute. key: queue.type" {
		t.Fatalf("bulk list changing an existing topic's queue.type: %d %q", r.Code, r.Remark)
	}
	if _, ok, err := b.topics.get("BL0"); err != nil || ok {
		t.Fatalf("a refused bulk list stored its topics (%v)", err)
	}
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, bulk(`"+message.type":"FIFO"`)); r.Code != remoting.Success {
		t.Fatalf("bulk list: %d %s", r.Code, r.Remark)
	}
	if got := fmt.Sprint(attrsOf("TA"), attrsOf("BL3")); got != "map[message.type:FIFO queue.type:SimpleCQ] map[]" {
		t.Fatalf("attributes after the bulk list: %s", got)
	}
}

func TestCreateGroupListAndSystemTopics(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body := `{"groupConfigList":[{"groupName":"gl-1","retryMaxTimes":5},{"groupName":"gl-2","consumeBroadcastEnable":false}]}`
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroupList, nil, []byte(body)); r.Code != remoting.Success {
		t.Fatalf("create group list: %d %s", r.Code, r.Remark)
	}
	for name, check := range map[string]func(meta.SubscriptionGroupConfig) bool{
		"gl-1": func(g meta.SubscriptionGroupConfig) bool { return g.RetryMaxTimes == 5 && g.ConsumeBroadcastEnable },
		"gl-2": func(g meta.SubscriptionGroupConfig) bool { return g.RetryMaxTimes == 16 && !g.ConsumeBroadcastEnable },
	} {
		if g, err := b.groupConfig(name, false); err != nil || g.GroupName != name || !check(g) {
			t.Errorf("group %s: %+v %v", name, g, err)
		}
	}
	for _, bad := range []string{`{"groupConfigList":[{"retryMaxTimes":5}]}`, `{"groupConfigList":`} {
		if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroupList, nil, []byte(bad)); r.Code != remoting.SystemError {
			t.Errorf("body %s: %d %s", bad, r.Code, r.Remark)
		}
	}

	mustSend(t, c, "UserTopic", 0, "x", "")
	r := call(t, c, remoting.GetSystemTopicListFromBroker, nil, nil)
	var list struct {
		TopicList []string `json:"topicList"`
	}
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &list) != nil {
		t.Fatalf("system topics: %d %s", r.Code, r.Body)
	}
	got := map[string]bool{}
	for _, n := range list.TopicList {
		got[n] = true
	}
	for _, want := range []string{"TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster_REPLY_TOPIC", "DefaultCluster", "broker-a", "SELF_TEST_TOPIC"} {
		if !got[want] {
			t.Errorf("system topic %s missing from %v", want, list.TopicList)
		}
	}
	if got["UserTopic"] {
		t.Errorf("a user topic listed as a system topic: %v", list.TopicList)
	}
}

func TestSubscriptionByConsumerAndConsumeTimeSpan(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	heartbeat(t, c, heartbeatBody("10.0.0.6@s", "", "cg-span", map[string]string{"SpanT": "b || a"}))
	r := call(t, c, remoting.QuerySubscriptionByConsumer, map[string]string{"group": "cg-span", "topic": "SpanT"}, nil)
	var sub struct {
		Group, Topic     string
		SubscriptionData *struct {
			SubString string   `json:"subString"`
			TagsSet   []string `json:"tagsSet"`
		} `json:"subscriptionData"`
	}
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &sub) != nil || sub.SubscriptionData == nil ||
		sub.SubscriptionData.SubString != "b || a" || strings.Join(sub.SubscriptionData.TagsSet, ",") != "a,b" || sub.Group != "cg-span" {
		t.Fatalf("subscription: %d %s", r.Code, r.Body)
	}
	r = call(t, c, remoting.QuerySubscriptionByConsumer, map[string]string{"group": "cg-span", "topic": "Other"}, nil)
	if r.Code != remoting.Success || strings.Contains(string(r.Body), "subscriptionData") {
		t.Fatalf("no subscription: %d %s", r.Code, r.Body)
	}

	for i := 0; i < 3; i++ {
		mustSend(t, c, "SpanT", 0, "m"+strconv.Itoa(i), "")
	}
	stored := pullAll(t, b, c, "SpanT", 0)
	commit(t, c, "cg-span", "SpanT", 0, 1)
	// The delay is whole milliseconds since the next message's store
	// time: let some pass, or a quick machine sees 0.
	time.Sleep(5 * time.Millisecond)
	asked := time.Now()
	r = call(t, c, remoting.QueryConsumeTimeSpan, map[string]string{"topic": "SpanT", "group": "cg-span"}, nil)
	var spans struct {
		ConsumeTimeSpanSet []queueTimeSpan `json:"consumeTimeSpanSet"`
	}
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &spans) != nil {
		t.Fatalf("time span: %d %s", r.Code, r.Body)
	}
	tc, _, _ := b.topicConfig("SpanT")
	if len(spans.ConsumeTimeSpanSet) != tc.WriteQueueNums {
		t.Fatalf("%d spans for %d write queues", len(spans.ConsumeTimeSpanSet), tc.WriteQueueNums)
	}
	q0 := spans.ConsumeTimeSpanSet[0]
	if q0.MessageQueue.QueueID != 0 || q0.MinTimeStamp != stored[0].StoreTimestamp || q0.MaxTimeStamp != stored[2].StoreTimestamp ||
		q0.ConsumeTimeStamp != stored[0].StoreTimestamp || q0.DelayTime < asked.UnixMilli()-stored[1].StoreTimestamp || q0.DelayTime <= 0 {
		t.Errorf("queue 0: %+v, messages stored at %d %d %d", q0, stored[0].StoreTimestamp, stored[1].StoreTimestamp, stored[2].StoreTimestamp)
	}
	if q1 := spans.ConsumeTimeSpanSet[1]; q1.MinTimeStamp != -1 || q1.MaxTimeStamp != -1 || q1.DelayTime != 0 {
		t.Errorf("empty queue 1: %+v", q1)
	}
	if r := call(t, c, remoting.QueryConsumeTimeSpan, map[string]string{"topic": "Nope", "group": "cg-span"}, nil); r.Code != remoting.TopicNotExist {
		t.Errorf("unknown topic: %d %s", r.Code, r.Remark)
	}
}

func TestConsumerStatusAskedOfEveryClient(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.statusAskTimeout = 500 * time.Millisecond })
	answer := func(offset int) func(context.Context, *remoting.Command) *remoting.Command {
		return func(_ context.Context, cmd *remoting.Command) *remoting.Command {
			if cmd.Code != remoting.GetConsumerStatusFromClient || cmd.ExtFields["topic"] != "StT" || cmd.ExtFields["group"] != "cg-st" {
				return remoting.NewResponse(cmd, remoting.SystemError, "unexpected request")
			}
			resp := remoting.NewResponse(cmd, remoting.Success, "")
			resp.Body = []byte(`{"messageQueueTable":{{"topic":"StT","brokerName":"broker-a","queueId":0}:` + strconv.Itoa(offset) + `}}`)
			return resp
		}
	}
	for i, id := range []string{"10.0.0.1@a", "10.0.0.2@b"} {
		heartbeat(t, b.client(answer(10+i)), heartbeatBody(id, "", "cg-st", map[string]string{"StT": "*"}))
	}
	// A client that refuses is left out of the table; the others are not.
	refuser := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		return remoting.NewResponse(cmd, remoting.SystemError, "no status")
	})
	heartbeat(t, refuser, heartbeatBody("10.0.0.3@refuses", "", "cg-st", map[string]string{"StT": "*"}))
	// Nor is one that never answers: the others' answers come back
	// after its wait.
	silent := make(chan struct{})
	defer close(silent)
	mute := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		<-silent
		return remoting.NewResponse(cmd, remoting.SystemError, "too late")
	})
	heartbeat(t, mute, heartbeatBody("10.0.0.4@mute", "", "cg-st", map[string]string{"StT": "*"}))
	admin := b.client(nil)
	status := func(ext map[string]string) map[string]map[adminbody.MessageQueue]int64 {
		t.Helper()
		r := call(t, admin, remoting.InvokeBrokerToGetConsumerStatus, ext, nil)
		if r.Code != remoting.Success {
			t.Fatalf("consumer status %v: %d %s", ext, r.Code, r.Remark)
		}
		table, err := adminbody.DecodeConsumerStatusTable(r.Body)
		if err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
		return table
	}
	q0 := adminbody.MessageQueue{BrokerName: "broker-a", QueueID: 0, Topic: "StT"}
	all := status(map[string]string{"topic": "StT", "group": "cg-st"})
	if len(all) != 2 || all["10.0.0.1@a"][q0] != 10 || all["10.0.0.2@b"][q0] != 11 {
		t.Fatalf("status of the group: %v", all)
	}
	one := status(map[string]string{"topic": "StT", "group": "cg-st", "clientAddr": "10.0.0.2@b"})
	if len(one) != 1 || one["10.0.0.2@b"][q0] != 11 {
		t.Fatalf("status of one client: %v", one)
	}
	if r := call(t, admin, remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": "StT", "group": "nobody"}, nil); r.Code != remoting.SystemError {
		t.Fatalf("group without clients: %d %s", r.Code, r.Remark)
	}
}

// traceTopicEnable creates msgTraceTopicName (one queue, read-write) at
// start, listed as a system topic, as RocketMQ's TopicConfigManager does;
// a name that is no topic name stops the broker from starting.
func TestTraceTopicEnable(t *testing.T) {
	b := startTestBroker(t, map[string]string{"traceTopicEnable": "true", "msgTraceTopicName": "MyTraceTopic"})
	tc, ok, err := b.topics.table.Get("MyTraceTopic")
	if err != nil || !ok || tc.ReadQueueNums != 1 || tc.WriteQueueNums != 1 || tc.Perm != meta.PermRead|meta.PermWrite {
		t.Fatalf("trace topic %+v (found %v, %v), want one read-write queue", tc, ok, err)
	}
	r := call(t, b.client(nil), remoting.GetSystemTopicListFromBroker, nil, nil)
	if r.Code != remoting.Success || !strings.Contains(string(r.Body), `"MyTraceTopic"`) {
		t.Fatalf("system topics %d %s, want MyTraceTopic among them", r.Code, r.Body)
	}

	off := startTestBroker(t, nil)
	if _, ok, err := off.topics.table.Get("RMQ_SYS_TRACE_TOPIC"); err != nil || ok {
		t.Fatalf("the trace topic was created with traceTopicEnable off (%v)", err)
	}

	loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "listenPort": "0",
		"traceTopicEnable": "true", "msgTraceTopicName": "bad topic"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := New(loaded.Broker, zerolog.Nop())
	if err == nil {
		err = bad.Start(context.Background())
		_ = bad.Shutdown(context.Background())
	}
	if err == nil || !strings.Contains(err.Error(), "msgTraceTopicName") {
		t.Fatalf("start with msgTraceTopicName %q: %v, want an error naming the key", "bad topic", err)
	}
}

// clusterTopicEnable and brokerTopicEnable decide, at each start as in
// RocketMQ, whether the topics named after the cluster and the broker are
// readable and writable; they stay inheritable either way.
func TestClusterAndBrokerTopicPermissions(t *testing.T) {
	store := t.TempDir()
	perm := func(b *testBroker, topic string) int {
		t.Helper()
		tc, ok, err := b.topics.get(topic)
		if err != nil || !ok {
			t.Fatalf("topic %s: %v %v", topic, ok, err)
		}
		return tc.Perm
	}
	b := startTestBrokerAt(t, store, map[string]string{"clusterTopicEnable": "false"})
	if p := perm(b, "DefaultCluster"); p != meta.PermInherit {
		t.Fatalf("cluster topic perm %d with clusterTopicEnable=false, want %d (inherit only)", p, meta.PermInherit)
	}
	if p := perm(b, "broker-a"); p != meta.PermInherit|meta.PermRead|meta.PermWrite {
		t.Fatalf("broker topic perm %d", p)
	}
	b.stop()

	b = startTestBrokerAt(t, store, map[string]string{"brokerTopicEnable": "false"})
	if p := perm(b, "DefaultCluster"); p != meta.PermInherit|meta.PermRead|meta.PermWrite {
		t.Fatalf("cluster topic perm %d after a restart with clusterTopicEnable=true", p)
	}
	if p := perm(b, "broker-a"); p != meta.PermInherit {
		t.Fatalf("broker topic perm %d with brokerTopicEnable=false", p)
	}
}

// hungConsumer connects consumer 10.0.0.9@1 of group G, which calls
// reached for each GET_CONSUMER_RUNNING_INFO relayed to it and answers
// none until the test ends.
func hungConsumer(t *testing.T, tb *testBroker, reached func()) {
	t.Helper()
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	cons := tb.client(func(ctx context.Context, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetConsumerRunningInfo {
			return nil // NOTIFY_CONSUMER_IDS_CHANGED
		}
		reached()
		select {
		case <-hung:
		case <-ctx.Done():
		}
		return nil
	})
	if r := call(t, cons, remoting.HeartBeat, nil, consumerHeartbeat("10.0.0.9@1", "G")); r.Code != remoting.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
}

// Relays to a consumer that does not answer wait off the workers: a
// dashboard polling a hung consumer's running info (each relay waits up
// to 10 s) took every worker, and every other client's sends, pulls and
// heartbeats waited behind it. RocketMQ runs them on its admin pool.
func TestRelaysToAHungConsumerDoNotHoldTheWorkers(t *testing.T) {
	tb := startTestBroker(t, nil)
	var reached atomic.Int32 // relays the consumer holds
	hungConsumer(t, tb, func() { reached.Add(1) })
	admin := tb.client(nil)
	var answered atomic.Int32 // by the client at once, past its own handlers
	workers := max(16, 4*runtime.GOMAXPROCS(0))
	relays := 4 * workers
	for range relays {
		req := remoting.NewRequest(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "G", "clientId": "10.0.0.9@1"}, nil)
		if err := admin.InvokeAsync(req, func(*remoting.Command, error) { answered.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the relays to reach the consumer", func() bool { return int(reached.Load()+answered.Load()) >= workers })
	// Each relay waits 10 s for the consumer: a send queued behind them
	// on the workers is not answered within the producer's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := tb.client(nil).Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
	}, []byte("while relays wait")))
	if err != nil || r.Code != remoting.Success {
		t.Fatalf("send while %d relays wait on a hung consumer: %v, %v", reached.Load(), r, err)
	}
}

// Past the requests that may wait on clients at once, a relay is answered
// SYSTEM_BUSY at once rather than queued.
func TestRelaysPastTheWaitLimitAreBusy(t *testing.T) {
	tb := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.clientWaits = make(chan struct{}, 1) })
	reached := make(chan struct{}, 1)
	hungConsumer(t, tb, func() { reached <- struct{}{} })
	admin := tb.client(nil)
	relay := func() *remoting.Command {
		return remoting.NewRequest(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "G", "clientId": "10.0.0.9@1"}, nil)
	}
	if err := admin.InvokeAsync(relay(), func(*remoting.Command, error) {}); err != nil {
		t.Fatal(err)
	}
	<-reached // the one slot is taken, waiting on the hung consumer
	if r := call(t, admin, remoting.GetConsumerRunningInfo, relay().ExtFields, nil); r.Code != remoting.SystemBusy || !strings.Contains(r.Remark, "[OVERLOAD]") {
		t.Fatalf("a relay past the limit: %d %q, want SYSTEM_BUSY [OVERLOAD]", r.Code, r.Remark)
	}
}
