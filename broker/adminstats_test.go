package broker

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// statsFixture is a topic Stats with 4 write and 3 read queues holding 3,
// 1, 0 and 2 messages, a topic Other with one message, and the store time
// of each message.
type statsFixture struct {
	b      *testBroker
	c      *remoting.Client
	stored [][]int64 // store timestamps of Stats by queue, then offset
	other  int64     // store timestamp of Other's message
}

func newStatsFixture(t *testing.T, overrides map[string]string) *statsFixture {
	t.Helper()
	b := startTestBroker(t, overrides)
	c := b.client(nil)
	createTopic(t, c, "Stats", 3, 4)
	createTopic(t, c, "Other", 1, 1)
	f := &statsFixture{b: b, c: c}
	for q, n := range []int{3, 1, 0, 2} {
		var times []int64
		for i := 0; i < n; i++ {
			times = append(times, f.storeTime(t, mustSend(t, c, "Stats", int32(q), "m"+strconv.Itoa(i), "")))
		}
		f.stored = append(f.stored, times)
	}
	f.other = f.storeTime(t, mustSend(t, c, "Other", 0, "o", ""))
	b.caughtUp()
	return f
}

// createTopic creates a topic with its queue numbers.
func createTopic(t *testing.T, c *remoting.Client, topic string, read, write int) {
	t.Helper()
	createTopicWith(t, c, topic, read, write, false)
}

// createOrderTopic creates topic with one read and write queue and the
// order flag (a FIFO topic).
func createOrderTopic(t *testing.T, c *remoting.Client, topic string) {
	t.Helper()
	createTopicWith(t, c, topic, 1, 1, true)
}

func createTopicWith(t *testing.T, c *remoting.Client, topic string, read, write int, order bool) {
	t.Helper()
	r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": strconv.Itoa(read),
		"writeQueueNums": strconv.Itoa(write), "perm": "6", "topicFilterType": "SINGLE_TAG",
		"order": strconv.FormatBool(order),
	}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("create %s: %d %s", topic, r.Code, r.Remark)
	}
}

// storeTime reads the store time of a sent message from its record,
// found by the CommitLog offset its message id carries.
func (f *statsFixture) storeTime(t *testing.T, sent *remoting.Command) int64 {
	t.Helper()
	_, phy, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, f.c, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(phy, 10)}, nil)
	msgs := decodeRecords(t, r.Body)
	if r.Code != remoting.Success || len(msgs) != 1 || msgs[0].StoreTimestamp <= 0 {
		t.Fatalf("view message at %d: code %d, %d messages", phy, r.Code, len(msgs))
	}
	return msgs[0].StoreTimestamp
}

// heartbeatBody is a HEART_BEAT body: one client in a producer group and a
// consumer group subscribed to topics (topic -> expression).
func heartbeatBody(clientID, producerGroup, consumerGroup string, subs map[string]string) []byte {
	var sd []string
	for topic, expr := range subs {
		sd = append(sd, `{"topic":"`+topic+`","subString":"`+expr+`","subVersion":42,"expressionType":"TAG"}`)
	}
	prod := ""
	if producerGroup != "" {
		prod = `{"groupName":"` + producerGroup + `"}`
	}
	cons := ""
	if consumerGroup != "" {
		cons = `{"groupName":"` + consumerGroup + `","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",` +
			`"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[` + strings.Join(sd, ",") + `]}`
	}
	return []byte(`{"clientID":"` + clientID + `","producerDataSet":[` + prod + `],"consumerDataSet":[` + cons + `]}`)
}

func heartbeat(t *testing.T, c *remoting.Client, body []byte) {
	t.Helper()
	if r := call(t, c, remoting.HeartBeat, nil, body); r.Code != remoting.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
}

func mq(b *testBroker, topic string, q int32) adminbody.MessageQueue {
	return adminbody.MessageQueue{BrokerName: b.cfg.BrokerName, QueueID: q, Topic: topic}
}

func TestTopicStatsInfo(t *testing.T) {
	// The file ConsumeQueue keeps no store times: they come from the
	// CommitLog.
	for _, storeType := range []string{"kv", "file"} {
		t.Run(storeType, func(t *testing.T) { testTopicStatsInfo(t, storeType) })
	}
}

func testTopicStatsInfo(t *testing.T, storeType string) {
	f := newStatsFixture(t, map[string]string{"storeType": storeType})
	r := call(t, f.c, remoting.GetTopicStatsInfo, map[string]string{"topic": "Stats"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("topic stats: %d %s", r.Code, r.Remark)
	}
	table, tps, err := adminbody.DecodeTopicStats(r.Body)
	if err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	// max(write 4, read 3) queues.
	want := map[adminbody.MessageQueue]adminbody.TopicOffset{}
	for q, ts := range f.stored {
		off := adminbody.TopicOffset{MaxOffset: int64(len(ts))}
		if len(ts) > 0 {
			off.LastUpdateTimestamp = ts[len(ts)-1]
		}
		want[mq(f.b, "Stats", int32(q))] = off
	}
	if !reflect.DeepEqual(table, want) || tps != 0 {
		t.Fatalf("topic stats %+v tps %v, want %+v", table, tps, want)
	}
}

func TestTopicStatsInfoRawBody(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	createTopic(t, c, "One", 1, 1)
	r := call(t, c, remoting.GetTopicStatsInfo, map[string]string{"topic": "One"}, nil)
	want := `{"offsetTable":{{"brokerName":"` + b.cfg.BrokerName + `","queueId":0,"topic":"One"}:` +
		`{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}},"topicPutTps":0.0}`
	if r.Code != remoting.Success || string(r.Body) != want {
		t.Fatalf("body %d %s\nwant %s", r.Code, r.Body, want)
	}
	r = call(t, c, remoting.GetTopicStatsInfo, map[string]string{"topic": "Nope"}, nil)
	if r.Code != remoting.TopicNotExist || r.Remark != "topic[Nope] not exist" {
		t.Fatalf("unknown topic: %d %q", r.Code, r.Remark)
	}
}

// consumeStats asks GET_CONSUME_STATS and decodes the answer.
func consumeStats(t *testing.T, c *remoting.Client, ext map[string]string) map[adminbody.MessageQueue]adminbody.OffsetWrapper {
	t.Helper()
	r := call(t, c, remoting.GetConsumeStats, ext, nil)
	if r.Code != remoting.Success {
		t.Fatalf("consume stats %v: %d %s", ext, r.Code, r.Remark)
	}
	table, tps, err := adminbody.DecodeConsumeStats(r.Body)
	if err != nil || tps != 0 {
		t.Fatalf("decode %s: tps %v, %v", r.Body, tps, err)
	}
	return table
}

// topicsOf returns the sorted distinct topics of a table.
func topicsOf(table map[adminbody.MessageQueue]adminbody.OffsetWrapper) string {
	seen := map[string]bool{}
	var out []string
	for q := range table {
		if !seen[q.Topic] {
			seen[q.Topic] = true
			out = append(out, q.Topic)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestConsumeStats(t *testing.T) {
	f := newStatsFixture(t, nil)
	commit(t, f.c, "cg", "Stats", 0, 2)
	commit(t, f.c, "cg", "Stats", 1, 1)
	commit(t, f.c, "cg", "Other", 0, 1)
	table := consumeStats(t, f.c, map[string]string{"consumerGroup": "cg", "topic": "Stats"})
	// Read queues only (3 of 4); queue 2 has neither messages nor an
	// offset.
	want := map[adminbody.MessageQueue]adminbody.OffsetWrapper{
		mq(f.b, "Stats", 0): {BrokerOffset: 3, ConsumerOffset: 2, PullOffset: 2, LastTimestamp: f.stored[0][1]},
		mq(f.b, "Stats", 1): {BrokerOffset: 1, ConsumerOffset: 1, PullOffset: 1, LastTimestamp: f.stored[1][0]},
		mq(f.b, "Stats", 2): {},
	}
	if !reflect.DeepEqual(table, want) {
		t.Fatalf("consume stats %+v\nwant %+v", table, want)
	}
	other := consumeStats(t, f.c, map[string]string{"consumerGroup": "cg", "topic": "Other"})
	wantOther := map[adminbody.MessageQueue]adminbody.OffsetWrapper{
		mq(f.b, "Other", 0): {BrokerOffset: 1, ConsumerOffset: 1, PullOffset: 1, LastTimestamp: f.other},
	}
	if !reflect.DeepEqual(other, wantOther) {
		t.Fatalf("Other: %+v\nwant %+v", other, wantOther)
	}
}

func TestConsumeStatsTopicSelection(t *testing.T) {
	f := newStatsFixture(t, nil)
	commit(t, f.c, "cg", "Stats", 0, 2)
	commit(t, f.c, "cg", "Other", 0, 1)
	for _, tc := range []struct {
		ext  map[string]string
		want string
	}{
		{map[string]string{"consumerGroup": "cg"}, "Other,Stats"}, // topics with offsets
		{map[string]string{"consumerGroup": "cg", "topic": "Other"}, "Other"},
		{map[string]string{"consumerGroup": "cg", "topicList": "Stats"}, "Stats"},
		// As the Java client writes it (updateTopicList): "a;b;".
		{map[string]string{"consumerGroup": "cg", "topicList": "Stats;Nope;Other;", "topic": "Other"}, "Other,Stats"},
		// A comma is part of a name, as in RocketMQ and the permission
		// check, which reads the list the same way: no such topic.
		{map[string]string{"consumerGroup": "cg", "topicList": "Stats,Other"}, ""},
		{map[string]string{"consumerGroup": "cg", "topicList": "", "topic": "Stats"}, "Stats"},
		{map[string]string{"consumerGroup": "cg", "topic": "Nope"}, ""},
		{map[string]string{"consumerGroup": "nobody"}, ""},
	} {
		if got := topicsOf(consumeStats(t, f.c, tc.ext)); got != tc.want {
			t.Errorf("%v: topics %q, want %q", tc.ext, got, tc.want)
		}
	}
	// A group with live subscriptions keeps the topics it subscribes to,
	// unless the request names a topic list.
	heartbeat(t, f.b.client(nil), heartbeatBody("10.0.0.1@1", "", "cg", map[string]string{"Other": "*"}))
	for _, tc := range []struct {
		ext  map[string]string
		want string
	}{
		{map[string]string{"consumerGroup": "cg"}, "Other"},
		{map[string]string{"consumerGroup": "cg", "topic": "Stats"}, ""},
		{map[string]string{"consumerGroup": "cg", "topicList": "Stats"}, "Stats"},
	} {
		if got := topicsOf(consumeStats(t, f.c, tc.ext)); got != tc.want {
			t.Errorf("subscribed to Other, %v: topics %q, want %q", tc.ext, got, tc.want)
		}
	}
}

func TestConsumerConnectionList(t *testing.T) {
	b := startTestBroker(t, nil)
	admin := b.client(nil)
	consumer := b.client(nil)
	heartbeat(t, consumer, heartbeatBody("10.0.0.1@7", "", "cg", map[string]string{"HB": "b || a", "All": "*"}))
	r := call(t, admin, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "cg"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("consumer connection: %d %s", r.Code, r.Remark)
	}
	var cc adminbody.ConsumerConnection
	if err := json.Unmarshal(r.Body, &cc); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	if len(cc.ConnectionSet) != 1 {
		t.Fatalf("connections %s", r.Body)
	}
	conn := cc.ConnectionSet[0]
	if conn.ClientID != "10.0.0.1@7" || conn.ClientAddr != consumer.LocalAddr().String() ||
		conn.Language != remoting.DefaultLanguage || conn.Version != remoting.CurrentVersion {
		t.Errorf("connection %+v", conn)
	}
	if cc.ConsumeType != "CONSUME_PASSIVELY" || cc.MessageModel != "CLUSTERING" || cc.ConsumeFromWhere != "CONSUME_FROM_FIRST_OFFSET" {
		t.Errorf("group fields %s", r.Body)
	}
	hb, all := cc.SubscriptionTable["HB"], cc.SubscriptionTable["All"]
	if len(cc.SubscriptionTable) != 2 || hb.Topic != "HB" || hb.SubString != "b || a" || hb.SubVersion != 42 ||
		hb.ExpressionType != "TAG" || !reflect.DeepEqual(hb.TagsSet, []string{"a", "b"}) || !reflect.DeepEqual(hb.CodeSet, []int64{97, 98}) {
		t.Errorf("HB subscription %s", r.Body)
	}
	if all.SubString != "*" || len(all.TagsSet) != 0 || all.CodeSet == nil {
		t.Errorf("All subscription %s", r.Body)
	}
	if !strings.Contains(string(r.Body), `"All":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":42,"tagsSet":[],"topic":"All"}`) {
		t.Errorf("SubscriptionData not in fastjson's form: %s", r.Body)
	}
	r = call(t, admin, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "nobody"}, nil)
	if r.Code != remoting.ConsumerNotOnline || r.Remark != "the consumer group[nobody] not online" {
		t.Fatalf("offline group: %d %q", r.Code, r.Remark)
	}
	// The group goes offline with its last connection.
	_ = consumer.Close()
	waitFor(t, "group offline", func() bool {
		return call(t, admin, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "cg"}, nil).Code == remoting.ConsumerNotOnline
	})
}

func TestProducerConnectionList(t *testing.T) {
	b := startTestBroker(t, nil)
	admin := b.client(nil)
	p1, p2 := b.client(nil), b.client(nil)
	heartbeat(t, p2, heartbeatBody("10.0.0.2@2", "pg", "", nil))
	heartbeat(t, p1, heartbeatBody("10.0.0.1@1", "pg", "", nil))
	r := call(t, admin, remoting.GetProducerConnectionList, map[string]string{"producerGroup": "pg"}, nil)
	want := `{"connectionSet":[` +
		`{"clientAddr":"` + p1.LocalAddr().String() + `","clientId":"10.0.0.1@1","language":"GO","version":` + strconv.Itoa(int(remoting.CurrentVersion)) + `},` +
		`{"clientAddr":"` + p2.LocalAddr().String() + `","clientId":"10.0.0.2@2","language":"GO","version":` + strconv.Itoa(int(remoting.CurrentVersion)) + `}]}`
	if r.Code != remoting.Success || string(r.Body) != want {
		t.Fatalf("producer connection %d %s\nwant %s", r.Code, r.Body, want)
	}
	r = call(t, admin, remoting.GetProducerConnectionList, map[string]string{"producerGroup": "np"}, nil)
	if r.Code != remoting.SystemError || r.Remark != "the producer group[np] not exist" {
		t.Fatalf("unknown producer group: %d %q", r.Code, r.Remark)
	}
}

func TestAllProducerInfo(t *testing.T) {
	b := startTestBroker(t, nil)
	admin := b.client(nil)
	r := call(t, admin, remoting.GetAllProducerInfo, nil, nil)
	if r.Code != remoting.Success || string(r.Body) != `{"data":{}}` {
		t.Fatalf("no producers: %d %q %s", r.Code, r.Remark, r.Body)
	}

	before := time.Now().UnixMilli()
	p1, p2, p3 := b.client(nil), b.client(nil), b.client(nil)
	heartbeat(t, p2, heartbeatBody("10.0.0.2@2", "pa", "", nil))
	heartbeat(t, p1, heartbeatBody("10.0.0.1@1", "pa", "", nil))
	// A Java client: language and version come from the request header.
	hb := remoting.NewRequest(remoting.HeartBeat, nil, heartbeatBody("10.0.0.3@3", "pb", "", nil))
	hb.Language, hb.Version = "JAVA", 475
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := p3.Invoke(ctx, hb); err != nil || resp.Code != remoting.Success {
		t.Fatalf("java heartbeat: %v %v", resp, err)
	}
	after := time.Now().UnixMilli()

	r = call(t, admin, remoting.GetAllProducerInfo, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("producer info: %d %q", r.Code, r.Remark)
	}
	var got adminbody.ProducerTableInfo
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	// The heartbeat times are only known to a range: take them from the
	// answer once they are plausible, then compare the body byte for byte.
	stamp := func(group string, i int) string {
		if len(got.Data[group]) <= i {
			t.Fatalf("group %s has no client %d: %s", group, i, r.Body)
		}
		ts := got.Data[group][i].LastUpdateTimestamp
		if ts < before || ts > after {
			t.Errorf("%s client %d: lastUpdateTimestamp %d not within [%d, %d]", group, i, ts, before, after)
		}
		return strconv.FormatInt(ts, 10)
	}
	goVersion := strconv.Itoa(int(remoting.CurrentVersion))
	want := `{"data":{` +
		`"pa":[` +
		`{"clientId":"10.0.0.1@1","language":"GO","lastUpdateTimestamp":` + stamp("pa", 0) + `,"remoteIP":"/` + p1.LocalAddr().String() + `","version":` + goVersion + `},` +
		`{"clientId":"10.0.0.2@2","language":"GO","lastUpdateTimestamp":` + stamp("pa", 1) + `,"remoteIP":"/` + p2.LocalAddr().String() + `","version":` + goVersion + `}],` +
		`"pb":[` +
		`{"clientId":"10.0.0.3@3","language":"JAVA","lastUpdateTimestamp":` + stamp("pb", 0) + `,"remoteIP":"/` + p3.LocalAddr().String() + `","version":475}]}}`
	if string(r.Body) != want {
		t.Fatalf("producer info\n got %s\nwant %s", r.Body, want)
	}

	// A group leaves with its last connection.
	_ = p3.Close()
	waitFor(t, "group pb gone", func() bool {
		r := call(t, admin, remoting.GetAllProducerInfo, nil, nil)
		return r.Code == remoting.Success && !strings.Contains(string(r.Body), `"pb"`) && strings.Contains(string(r.Body), `"pa"`)
	})
}

func TestQueryTopicConsumeByWho(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	createTopic(t, c, "W", 2, 2)
	createTopic(t, c, "X", 1, 1)
	heartbeat(t, b.client(nil), heartbeatBody("10.0.0.1@1", "", "live", map[string]string{"W": "*"}))
	commit(t, c, "committed", "W", 1, 5)
	commit(t, c, "elsewhere", "X", 0, 1)
	commit(t, c, "live", "W", 0, 1) // both live and committed: listed once
	r := call(t, c, remoting.QueryTopicConsumeByWho, map[string]string{"topic": "W"}, nil)
	if want := `{"groupList":["committed","live"]}`; r.Code != remoting.Success || string(r.Body) != want {
		t.Fatalf("consume by who: %d %s, want %s", r.Code, r.Body, want)
	}
	r = call(t, c, remoting.QueryTopicConsumeByWho, map[string]string{"topic": "Z"}, nil)
	if r.Code != remoting.Success || string(r.Body) != `{"groupList":[]}` {
		t.Fatalf("nobody: %d %s", r.Code, r.Body)
	}
}

func TestAdminStatsBadRequests(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, tc := range []struct {
		code  int32
		ext   map[string]string
		field string
	}{
		{remoting.GetTopicStatsInfo, nil, "topic"},
		{remoting.GetTopicStatsInfo, map[string]string{"topic": ""}, "topic"},
		{remoting.GetConsumeStats, map[string]string{"topic": "T"}, "consumerGroup"},
		{remoting.GetConsumeStats, map[string]string{"consumerGroup": ""}, "consumerGroup"},
		{remoting.GetConsumerConnectionList, nil, "consumerGroup"},
		{remoting.GetProducerConnectionList, map[string]string{"consumerGroup": "g"}, "producerGroup"},
		{remoting.QueryTopicConsumeByWho, nil, "topic"},
	} {
		r := call(t, c, tc.code, tc.ext, nil)
		if r.Code != remoting.SystemError || !strings.Contains(r.Remark, `"`+tc.field+`"`) {
			t.Errorf("code %d %v: %d %q, want SYSTEM_ERROR naming %s", tc.code, tc.ext, r.Code, r.Remark, tc.field)
		}
	}
	// The broker still answers.
	if r := call(t, c, remoting.GetTopicStatsInfo, map[string]string{"topic": b.cfg.BrokerName}, nil); r.Code != remoting.Success {
		t.Fatalf("after bad requests: %d %s", r.Code, r.Remark)
	}
}

// GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): every
// subscription group with the stats of the topics it consumes, write
// queues all, and the total lag; isOrder keeps ordered topics only.
func TestBrokerConsumeStats(t *testing.T) {
	f := newStatsFixture(t, nil)
	for _, g := range []string{"cg", "idle"} {
		body := []byte(`{"groupName":"` + g + `","consumeEnable":true,"retryQueueNums":1,"retryMaxTimes":16}`)
		if r := call(t, f.c, remoting.UpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.Success {
			t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
		}
	}
	commit(t, f.c, "cg", "Stats", 0, 2)
	commit(t, f.c, "cg", "Stats", 1, 1)
	commit(t, f.c, "cg", "Other", 0, 1)
	r := call(t, f.c, remoting.UpdateAndCreateTopic, map[string]string{
		"topic": "Other", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "order": "true",
	}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("make Other ordered: %d %s", r.Code, r.Remark)
	}

	stats := func(isOrder string) (map[string][]map[adminbody.MessageQueue]adminbody.OffsetWrapper, int64) {
		t.Helper()
		r := call(t, f.c, remoting.GetBrokerConsumeStats, map[string]string{"isOrder": isOrder}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_BROKER_CONSUME_STATS: %d %s", r.Code, r.Remark)
		}
		addr, groups, total, err := adminbody.DecodeConsumeStatsList(r.Body)
		if err != nil || addr != f.b.Addr() {
			t.Fatalf("ConsumeStatsList (broker %q): %v\n%s", addr, err, r.Body)
		}
		byGroup := map[string][]map[adminbody.MessageQueue]adminbody.OffsetWrapper{}
		for _, g := range groups {
			byGroup[g.Group] = g.Topics
		}
		return byGroup, total
	}
	all, total := stats("false")
	// Other sorts first (topics come in name order); Stats has 4 write
	// queues: 3+1+0+2 messages, offsets 2 and 1 committed.
	want := []map[adminbody.MessageQueue]adminbody.OffsetWrapper{
		{mq(f.b, "Other", 0): {BrokerOffset: 1, ConsumerOffset: 1, PullOffset: 1, LastTimestamp: f.other}},
		{
			mq(f.b, "Stats", 0): {BrokerOffset: 3, ConsumerOffset: 2, PullOffset: 2, LastTimestamp: f.stored[0][1]},
			mq(f.b, "Stats", 1): {BrokerOffset: 1, ConsumerOffset: 1, PullOffset: 1, LastTimestamp: f.stored[1][0]},
			mq(f.b, "Stats", 2): {},
			mq(f.b, "Stats", 3): {BrokerOffset: 2},
		},
	}
	if !reflect.DeepEqual(all["cg"], want) || total != 3 {
		t.Fatalf("cg: %+v, total diff %d\nwant %+v, 3", all["cg"], total, want)
	}
	if idle, ok := all["idle"]; !ok || len(idle) != 0 {
		t.Errorf("a group without offsets is listed with no topics, as RocketMQ lists every group: %v", all)
	}
	ordered, total := stats("true")
	if len(ordered["cg"]) != 1 || !reflect.DeepEqual(ordered["cg"][0], want[0]) || total != 0 {
		t.Fatalf("isOrder: cg %+v, total diff %d", ordered["cg"], total)
	}
}

// GET_TOPIC_STATS_INFO's topicPutTps is the topic's TOPIC_PUT_NUMS rate
// over the last minute, RocketMQ 5.3's brokerStatsManager.tpsTopicPutNums
// (mqadmin topicStatus prints it).
func TestTopicStatsReportsThePutRate(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.statsClock = clk.Now })
	c := b.client(nil)
	createTopic(t, c, "PutRateT", 1, 1)
	createTopic(t, c, "OtherT", 1, 1)
	for i := 0; i < 4; i++ {
		mustSend(t, c, "PutRateT", 0, "m"+strconv.Itoa(i), "")
	}
	mustSend(t, c, "OtherT", 0, "o", "")
	clk.Advance(10 * time.Second)
	b.stats.Tick()
	if d := viewStats(t, c, "TOPIC_PUT_NUMS", "PutRateT"); d.Minute.TPS != 0.4 {
		t.Fatalf("TOPIC_PUT_NUMS minute %+v, want 0.4/s", d.Minute)
	}
	r := call(t, c, remoting.GetTopicStatsInfo, map[string]string{"topic": "PutRateT"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("topic stats: %d %s", r.Code, r.Remark)
	}
	_, tps, err := adminbody.DecodeTopicStats(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if tps != 0.4 {
		t.Errorf("GET_TOPIC_STATS_INFO topicPutTps %v, want the topic's TOPIC_PUT_NUMS minute rate 0.4", tps)
	}
}

// GET_BROKER_RUNTIME_INFO has every key apache/rocketmq-exporter's
// BrokerRuntimeStats(KVTable) parses without a default (one missing key
// and the exporter reports none of the broker's rocketmq_brokeruntime_*
// metrics), in the formats of RocketMQ's StoreStatsService and
// AdminBrokerProcessor that it parses.
func TestRuntimeInfoHasEveryKeyTheExporterParses(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "RtKeysT", 0, "a", "")
	info := runtimeInfo(t, c)
	var missing []string
	for _, k := range []string{
		"msgPutTotalTodayNow", "putMessageDistributeTime", "putTps", "getMissTps", "getTransferedTps", "getTotalTps",
		"getFoundTps", "commitLogDirCapacity", "sendThreadPoolQueueHeadWaitTimeMills",
		"queryThreadPoolQueueHeadWaitTimeMills", "remainHowManyDataToFlush", "msgGetTotalTodayNow",
		"queryThreadPoolQueueSize", "bootTimestamp", "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning",
		"pullThreadPoolQueueSize", "commitLogMinOffset", "pullThreadPoolQueueHeadWaitTimeMills", "runtime",
		"dispatchMaxBuffer", "brokerVersion", "consumeQueueDiskRatio", "pageCacheLockTimeMills", "commitLogDiskRatio",
		"commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal",
		"msgGetTotalTodayMorning", "brokerVersionDesc", "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp",
		"putMessageEntireTimeMax", "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
		"queryThreadPoolQueueCapacity", "putMessageAverageSize", "dispatchBehindBytes", "putMessageSizeTotal",
		"sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
	} {
		if _, ok := info[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("GET_BROKER_RUNTIME_INFO lacks %d keys rocketmq-exporter parses unconditionally: %v", len(missing), missing)
	}
	for k, re := range map[string]string{
		// StoreStatsService.getFormatRuntime.
		"runtime": `^\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]$`,
		// MixAll.humanReadableByteCount(bytes, false) of the store root's
		// file system.
		"commitLogDirCapacity": `^Total : \d+( B|\.\d [KMGTPE]iB), Free : \d+( B|\.\d [KMGTPE]iB)\.$`,
		// The exporter parses the number before the first space.
		"remainHowManyDataToFlush": `^\d+( B|\.\d [KMGTPE]iB)$`,
		// StoreStatsService.putMessageDistributeTimeToString.
		"putMessageDistributeTime": `^\[<=0ms\]:\d+ \[0~10ms\]:\d+ \[10~50ms\]:\d+ \[50~100ms\]:\d+ \[100~200ms\]:\d+ ` +
			`\[200~500ms\]:\d+ \[500ms~1s\]:\d+ \[1~2s\]:\d+ \[2~3s\]:\d+ \[3~4s\]:\d+ \[4~5s\]:\d+ \[5~10s\]:\d+ \[10s~\]:\d+ $`,
		"putMessageAverageSize":           `^\d+\.\d+$`,
		"consumeQueueDiskRatio":           `^(0(\.\d+)?|1|-1)$`,
		"remainTransientStoreBufferNumbs": `^2147483647$`,
		// MQVersion.getVersionDesc of the broker's version (481).
		"brokerVersionDesc": `^V5_3_4$`,
	} {
		if !regexp.MustCompile(re).MatchString(info[k]) {
			t.Errorf("%s %q is not in RocketMQ's format %s", k, info[k], re)
		}
	}
	for _, k := range []string{"pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity", "pullThreadPoolQueueHeadWaitTimeMills",
		"queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity", "queryThreadPoolQueueHeadWaitTimeMills",
		"sendThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "pageCacheLockTimeMills",
		"getMessageEntireTimeMax", "putMessageEntireTimeMax"} {
		if _, err := strconv.ParseInt(info[k], 10, 64); err != nil {
			t.Errorf("%s %q is not the integer the exporter parses", k, info[k])
		}
	}
}

// The helpers format as RocketMQ does: MixAll.humanReadableByteCount(n,
// false) and StoreStatsService.getFormatRuntime.
func TestRuntimeInfoFormats(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB",
		105_151_127_552: "97.9 GiB", 3 << 40: "3.0 TiB",
	} {
		if got := humanReadableByteCount(n); got != want {
			t.Errorf("humanReadableByteCount(%d) = %q, want %q", n, got, want)
		}
	}
	d := 26*time.Hour + 3*time.Minute + 4*time.Second + 900*time.Millisecond
	if got, want := formatRuntime(d), "[ 1 days, 2 hours, 3 minutes, 4 seconds ]"; got != want {
		t.Errorf("formatRuntime(%v) = %q, want %q", d, got, want)
	}
	if got, want := javaDouble(12), "12.0"; got != want {
		t.Errorf("javaDouble(12) = %q, want %q", got, want)
	}
	if got, want := javaDouble(2.5), "2.5"; got != want {
		t.Errorf("javaDouble(2.5) = %q, want %q", got, want)
	}
}

// GET_BROKER_RUNTIME_INFO's put latencies count every put of the last
// whole minute, a send whose answer waits for the group commit
// (SYNC_FLUSH) as one that does not, a batch as one put, and a put the
// store refused as a failure too (StoreStatsService, as
// DefaultMessageStore.asyncPutMessage(s) counts them).
func TestRuntimeInfoCountsPutLatencies(t *testing.T) {
	for _, flush := range []string{"ASYNC_FLUSH", "SYNC_FLUSH"} {
		t.Run(flush, func(t *testing.T) {
			clk := testutil.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.Local))
			var refuse atomic.Bool
			b := startTestBrokerWith(t, t.TempDir(), map[string]string{"flushDiskType": flush}, func(b *Broker) {
				b.statsClock = clk.Now
				b.beforePut = func([]*commitlog.Message) error {
					if refuse.Load() {
						return errors.New("refused by the test")
					}
					return nil
				}
			})
			c := b.client(nil)
			createTopic(t, c, "PutTimesT", 1, 1)
			for i := range 5 {
				mustSend(t, c, "PutTimesT", 0, "m"+strconv.Itoa(i), "")
			}
			mustSendBatch(t, c, "PutTimesT", []batchItem{{"b1", ""}, {"b2", ""}, {"b3", ""}})
			refuse.Store(true)
			if r := sendV2(t, c, "PutTimesT", 0, "refused", ""); r.Code == remoting.Success {
				t.Fatal("a send the store refused succeeded")
			}
			refuse.Store(false)

			info := runtimeInfo(t, c)
			if info["putMessageFailedTimes"] != "1" {
				t.Errorf("putMessageFailedTimes %q, want 1", info["putMessageFailedTimes"])
			}
			clk.Advance(time.Minute)
			b.stats.Tick()
			info = runtimeInfo(t, c)
			var puts int
			for _, field := range strings.Fields(info["putMessageDistributeTime"]) {
				_, n, ok := strings.Cut(field, ":")
				v, err := strconv.Atoi(n)
				if !ok || err != nil {
					t.Fatalf("putMessageDistributeTime %q: %q is not bucket:count", info["putMessageDistributeTime"], field)
				}
				puts += v
			}
			if puts != 7 {
				t.Errorf("putMessageDistributeTime %q counts %d puts, want 7 (5 sends, a batch, a refused send)",
					info["putMessageDistributeTime"], puts)
			}
			if _, err := strconv.ParseFloat(info["putLatency99"], 64); err != nil {
				t.Errorf("putLatency99 %q: %v", info["putLatency99"], err)
			}
		})
	}
}

// TestConsumeStatsPullOffsetIsTheLastPull checks GET_CONSUME_STATS's
// pullOffset against RocketMQ's: the nextBeginOffset of the group's last
// pull of the queue when past its committed offset (what mqadmin
// consumerProgress prints as #Inflight, pullOffset - consumerOffset),
// tracked whether or not the consumer gauges are on.
func TestConsumeStatsPullOffsetIsTheLastPull(t *testing.T) {
	f := newStatsFixture(t, nil)
	commit(t, f.c, "cg", "Stats", 0, 1)
	// Queue 0 pulled to its end (3), queue 1 pulled with no offset
	// committed, queue 2 not pulled.
	for _, p := range []struct {
		q    int32
		from int64
		want int
	}{{0, 1, 2}, {1, 0, 1}} {
		r := call(t, f.c, remoting.PullMessage, pullReq("cg", "Stats", p.q, p.from, 0, 0, "*"), nil)
		if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != p.want {
			t.Fatalf("pull of Stats/%d from %d: %d %s", p.q, p.from, r.Code, r.Remark)
		}
	}
	r := call(t, f.c, remoting.GetConsumeStats, map[string]string{"consumerGroup": "cg", "topic": "Stats"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("consume stats: %d %s", r.Code, r.Remark)
	}
	table, _, err := adminbody.DecodeConsumeStats(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[int32][2]int64{0: {1, 3}, 1: {0, 1}, 2: {0, 0}} { // consumer, pull
		w := table[mq(f.b, "Stats", q)]
		if w.ConsumerOffset != want[0] || w.PullOffset != want[1] {
			t.Errorf("Stats/%d: consumerOffset %d pullOffset %d, want %d and %d", q, w.ConsumerOffset, w.PullOffset, want[0], want[1])
		}
	}
	// GET_BROKER_CONSUME_STATS sums what is in flight: 2 + 1.
	if body := call(t, f.c, remoting.GetBrokerConsumeStats, map[string]string{"isOrder": "false"}, nil).Body; !strings.Contains(string(body), `"totalInflightDiff":3}`) {
		t.Errorf("GET_BROKER_CONSUME_STATS: %s, want totalInflightDiff 3", body)
	}
	// A commit past the last pull: pullOffset is never behind it.
	commit(t, f.c, "cg", "Stats", 1, 1)
	commit(t, f.c, "cg", "Stats", 0, 3)
	table, _, err = adminbody.DecodeConsumeStats(call(t, f.c, remoting.GetConsumeStats, map[string]string{"consumerGroup": "cg", "topic": "Stats"}, nil).Body)
	if err != nil {
		t.Fatal(err)
	}
	if w := table[mq(f.b, "Stats", 0)]; w.ConsumerOffset != 3 || w.PullOffset != 3 {
		t.Errorf("Stats/0 after the commit of 3: %+v", w)
	}
}
