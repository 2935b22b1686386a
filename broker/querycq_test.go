package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

func TestQueryConsumeQueue(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	tags := []string{"TagA", "TagB", "", "TagA", "TagC"}
	for i, tag := range tags {
		props := ""
		if tag != "" {
			props = "TAGS\x01" + tag + "\x02"
		}
		mustSend(t, c, "QcqT", 1, "m"+strings.Repeat("x", i), props)
	}
	b.caughtUp()
	query := func(ext map[string]string) (*remoting.Command, adminbody.QueryConsumeQueue) {
		t.Helper()
		r := call(t, c, remoting.QueryConsumeQueue, ext, nil)
		var body adminbody.QueryConsumeQueue
		if r.Code == remoting.Success && len(r.Body) > 0 {
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatalf("decode %s: %v", r.Body, err)
			}
		}
		return r, body
	}
	r, body := query(map[string]string{"topic": "QcqT", "queueId": "1", "index": "1", "count": "3", "consumerGroup": "cg-qcq"})
	if r.Code != remoting.Success || body.MinQueueIndex != 0 || body.MaxQueueIndex != 5 || len(body.QueueData) != 3 {
		t.Fatalf("query: %d %s %s", r.Code, r.Remark, r.Body)
	}
	if body.FilterData != "cg-qcq@QcqT is not online!" || body.SubscriptionData != nil {
		t.Fatalf("group not online: filterData %q, subscription %+v", body.FilterData, body.SubscriptionData)
	}
	// Each unit points at the record of its queue offset, with its size
	// and tag hash.
	for i, u := range body.QueueData {
		v, err := b.clog.ReadRecord(u.PhysicOffset)
		if err != nil {
			t.Fatal(err)
		}
		m, err := commitlog.Decode(v.Data)
		v.Release()
		if err != nil {
			t.Fatal(err)
		}
		if m.QueueOffset != int64(1+i) || int32(m.StoreSize) != u.PhysicSize || u.TagsCode != commitlog.TagsCode(tags[1+i]) || u.Eval {
			t.Errorf("unit %d %+v: record queue offset %d size %d, tags %q", i, u, m.QueueOffset, m.StoreSize, tags[1+i])
		}
	}
	if !strings.Contains(string(r.Body), `"eval":false`) || strings.Contains(string(r.Body), "subscriptionData") {
		t.Fatalf("body is not RocketMQ's shape: %s", r.Body)
	}
	// With the group online, its subscription of the topic.
	heartbeat(t, c, heartbeatBody("10.0.0.9@qcq", "", "cg-qcq", map[string]string{"QcqT": "TagA || TagC"}))
	_, body = query(map[string]string{"topic": "QcqT", "queueId": "1", "index": "0", "count": "100", "consumerGroup": "cg-qcq"})
	if body.SubscriptionData == nil || body.SubscriptionData.SubString != "TagA || TagC" || body.FilterData != "null" || len(body.QueueData) != 5 {
		t.Fatalf("online group: filterData %q, subscription %+v, %d units", body.FilterData, body.SubscriptionData, len(body.QueueData))
	}
	// Past the end: RocketMQ's remark, no units.
	r, _ = query(map[string]string{"topic": "QcqT", "queueId": "1", "index": "5", "count": "3"})
	if r.Code != remoting.Success || r.Remark != "Index 5 of 1@QcqT is not exist!" || len(r.Body) != 0 {
		t.Fatalf("index past the end: %d %q %s", r.Code, r.Remark, r.Body)
	}
	for _, ext := range []map[string]string{
		{"topic": "NoSuchT", "queueId": "0", "index": "0", "count": "1"},
		{"topic": "QcqT", "queueId": "99", "index": "0", "count": "1"},
	} {
		if r, _ := query(ext); r.Code != remoting.SystemError || !strings.HasSuffix(r.Remark, "is not exist!") {
			t.Errorf("%v: %d %q", ext, r.Code, r.Remark)
		}
	}
	if r, _ := query(map[string]string{"topic": "QcqT", "queueId": "x", "index": "0", "count": "1"}); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "queueId") {
		t.Errorf("bad queueId: %d %q", r.Code, r.Remark)
	}
}
