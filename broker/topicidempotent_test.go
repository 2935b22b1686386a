package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicChangeProbe observes what a topic admin request did to a broker:
// the topic table's data version (as GET_ALL_TOPIC_CONFIG answers it) and
// the registrations a stand-in name server received.
type topicChangeProbe struct {
	t  *testing.T
	c  *remoting.Client
	ns *hangingNameServer
}

// topicTable reads GET_ALL_TOPIC_CONFIG: the configs and the data version.
func (p topicChangeProbe) topicTable() (map[string]meta.TopicConfig, meta.DataVersion) {
	p.t.Helper()
	r := call(p.t, p.c, remoting.GetAllTopicConfig, nil, nil)
	if r.Code != remoting.Success {
		p.t.Fatalf("GET_ALL_TOPIC_CONFIG: %d %s", r.Code, r.Remark)
	}
	var body struct {
		TopicConfigTable map[string]meta.TopicConfig `json:"topicConfigTable"`
		DataVersion      meta.DataVersion            `json:"dataVersion"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		p.t.Fatalf("GET_ALL_TOPIC_CONFIG body: %v", err)
	}
	return body.TopicConfigTable, body.DataVersion
}

// settledRegistrations waits until no registration came for a while
// (a triggered one follows its trigger within milliseconds) and returns
// how many the name server received.
func (p topicChangeProbe) settledRegistrations() int32 {
	n := p.ns.registers.Load()
	for {
		time.Sleep(150 * time.Millisecond)
		m := p.ns.registers.Load()
		if m == n {
			return n
		}
		n = m
	}
}

// send sends one topic admin request and fails the test unless it is
// answered SUCCESS.
func (p topicChangeProbe) send(code int32, ext map[string]string, body string) {
	p.t.Helper()
	var raw []byte
	if body != "" {
		raw = []byte(body)
	}
	if r := call(p.t, p.c, code, ext, raw); r.Code != remoting.Success {
		p.t.Fatalf("request %d %v %s: %d %s", code, ext, body, r.Code, r.Remark)
	}
}

// RocketMQ's AdminBrokerProcessor.updateAndCreateTopic answers a topic
// config equal to the one the broker holds (TopicConfig.equals: every
// field, and the request's attribute modifications as a map against the
// stored attributes) SUCCESS without a change: no data version step, no
// persist, no registration. Any field that differs takes the update path,
// which moves the data version and registers before answering; so does a
// request that carries attribute modifications, even ones that change
// nothing, as RocketMQ compares "+key" with the stored "key".
func TestUpdateAndCreateTopicLeavesAnUnchangedConfigAlone(t *testing.T) {
	ns := startHangingNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.addr, "registerNameServerPeriod": "60000"})
	waitFor(t, "the broker registered", func() bool { return ns.registers.Load() > 0 })
	p := topicChangeProbe{t: t, c: tb.client(nil), ns: ns}
	header := func(topic string, kv ...string) map[string]string {
		h := map[string]string{"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	for i, tc := range []struct {
		name          string
		first, second []string // header fields over 4/4 queues, perm 6
		changes       bool
	}{
		{"identical", nil, nil, false},
		{"defaults spelt out", nil, []string{"topicFilterType", "SINGLE_TAG", "topicSysFlag", "0", "order", "false"}, false},
		{"read queues", nil, []string{"readQueueNums", "2"}, true},
		{"write queues", nil, []string{"writeQueueNums", "8"}, true},
		{"perm", nil, []string{"perm", "4"}, true},
		{"order", nil, []string{"order", "true"}, true},
		{"topicSysFlag", nil, []string{"topicSysFlag", "1"}, true},
		{"topicFilterType", nil, []string{"topicFilterType", "MULTI_TAG"}, true},
		{"message type added", nil, []string{"attributes", "+message.type=NORMAL"}, true},
		{"same message type again", []string{"attributes", "+message.type=FIFO"}, []string{"attributes", "+message.type=FIFO"}, true},
		{"no modification of a topic with attributes", []string{"attributes", "+message.type=FIFO"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.t = t
			topic := fmt.Sprintf("Idem%02d", i)
			p.send(remoting.UpdateAndCreateTopic, header(topic, tc.first...), "")
			regs := p.settledRegistrations()
			_, version := p.topicTable()
			p.send(remoting.UpdateAndCreateTopic, header(topic, tc.second...), "")
			checkTopicChange(t, p, regs, version, tc.changes)
		})
	}
}

// checkTopicChange checks that the request sent after regs registrations
// and at data version before moved the data version and registered when
// it changed the topics, and did neither when it did not.
func checkTopicChange(t *testing.T, p topicChangeProbe, regs int32, before meta.DataVersion, changes bool) {
	t.Helper()
	after := p.settledRegistrations()
	_, version := p.topicTable()
	switch {
	case changes && (version == before || after == regs):
		t.Errorf("a changed topic config: data version %+v -> %+v, registrations %d -> %d; want both to move", before, version, regs, after)
	case !changes && (version != before || after != regs):
		t.Errorf("an unchanged topic config: data version %+v -> %+v, registrations %d -> %d; want neither to move (RocketMQ answers it as idempotent)",
			before, version, regs, after)
	}
}

// RocketMQ's updateAndCreateTopicList answers a list whose topics all
// equal the broker's SUCCESS without a change. A list with changed topics
// takes the update path; rocketkv stores its changed topics, where
// RocketMQ returns at the first unchanged one it meets and drops the
// changes of the others (the defect its review of apache/rocketmq#8267
// pointed out).
func TestUpdateAndCreateTopicListLeavesUnchangedConfigsAlone(t *testing.T) {
	ns := startHangingNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.addr, "registerNameServerPeriod": "60000"})
	waitFor(t, "the broker registered", func() bool { return ns.registers.Load() > 0 })
	p := topicChangeProbe{t: t, c: tb.client(nil), ns: ns}
	list := func(cfgs ...string) string { return `{"topicConfigList":[` + strings.Join(cfgs, ",") + `]}` }
	entry := func(topic string, queues int) string {
		return fmt.Sprintf(`{"topicName":%q,"readQueueNums":%d,"writeQueueNums":%d,"perm":6}`, topic, queues, queues)
	}
	for i, tc := range []struct {
		name    string
		second  func(a, b string) string
		changes bool
	}{
		{"all identical", func(a, b string) string { return list(entry(a, 4), entry(b, 4)) }, false},
		{"a subset, identical", func(a, _ string) string { return list(entry(a, 4)) }, false},
		{"unchanged first, changed second", func(a, b string) string { return list(entry(a, 4), entry(b, 2)) }, true},
		{"changed first, unchanged second", func(a, b string) string { return list(entry(b, 2), entry(a, 4)) }, true},
		{"a changed topic changed back", func(a, b string) string { return list(entry(a, 2), entry(a, 4)) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.t = t
			a, b := fmt.Sprintf("IdemListA%02d", i), fmt.Sprintf("IdemListB%02d", i)
			p.send(remoting.UpdateAndCreateTopicList, nil, list(entry(a, 4), entry(b, 4)))
			regs := p.settledRegistrations()
			_, version := p.topicTable()
			second := tc.second(a, b)
			p.send(remoting.UpdateAndCreateTopicList, nil, second)
			checkTopicChange(t, p, regs, version, tc.changes)
			checkListInForce(t, p, second)
		})
	}
}

// checkListInForce checks that every topic of an
// UPDATE_AND_CREATE_TOPIC_LIST body has the queue counts of its last
// config in the list: no change of the list was dropped.
func checkListInForce(t *testing.T, p topicChangeProbe, body string) {
	t.Helper()
	var list struct{ TopicConfigList []meta.TopicConfig }
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]meta.TopicConfig{}
	for _, tc := range list.TopicConfigList {
		want[tc.TopicName] = tc
	}
	table, _ := p.topicTable()
	for name, w := range want {
		if got := table[name]; got.ReadQueueNums != w.ReadQueueNums || got.WriteQueueNums != w.WriteQueueNums {
			t.Errorf("topic %s after %s: %d/%d queues, want %d/%d (a change of the list was dropped)", name, body,
				got.ReadQueueNums, got.WriteQueueNums, w.ReadQueueNums, w.WriteQueueNums)
		}
	}
}
