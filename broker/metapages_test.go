package broker

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicPage is the body and total of a GET_ALL_TOPIC_CONFIG answer.
type topicPage struct {
	names   []string
	version string
	total   int
}

// askTopics sends GET_ALL_TOPIC_CONFIG with ext and decodes the answer,
// failing the test unless it succeeded.
func askTopics(t *testing.T, c *remoting.Client, ext map[string]string) topicPage {
	t.Helper()
	r := call(t, c, remoting.GetAllTopicConfig, ext, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_ALL_TOPIC_CONFIG %v: %d %q", ext, r.Code, r.Remark)
	}
	var body struct {
		TopicConfigTable map[string]json.RawMessage `json:"topicConfigTable"`
		DataVersion      json.RawMessage            `json:"dataVersion"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("GET_ALL_TOPIC_CONFIG body: %v", err)
	}
	total, err := strconv.Atoi(r.ExtFields["totalTopicNum"])
	if err != nil {
		t.Fatalf("totalTopicNum %q: %v", r.ExtFields["totalTopicNum"], err)
	}
	return topicPage{slices.Sorted(maps.Keys(body.TopicConfigTable)), string(body.DataVersion), total}
}

// RocketMQ 5.3.4's clients ask for the topic table a page at a time
// (apache/rocketmq#9467): topicSeq from where, maxTopicNum at most, the
// dataVersion of their first page. The pages follow the names' order,
// together they are the whole table, every answer tells the table's
// size, and a client before 5.3.4 still gets everything at once.
func TestAllTopicConfigInPages(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, topic := range []string{"PageE", "PageB", "PageD", "PageA", "PageC"} {
		createTopic(t, c, topic, 1, 1)
	}
	whole := askTopics(t, c, nil)
	if whole.total != len(whole.names) || !slices.Contains(whole.names, "PageA") {
		t.Fatalf("the whole table: %d names, totalTopicNum %d", len(whole.names), whole.total)
	}

	// As MQClientAPIImpl.getAllTopicConfig: from 0 with no version, then
	// on with the first page's version until it has them all.
	var got []string
	version := ""
	for seq := 0; len(got) < whole.total; {
		p := askTopics(t, c, map[string]string{"topicSeq": strconv.Itoa(seq), "maxTopicNum": "2", "dataVersion": version})
		if len(p.names) == 0 || len(p.names) > 2 || p.total != whole.total {
			t.Fatalf("page from %d: %v, total %d; want 1-2 names, total %d", seq, p.names, p.total, whole.total)
		}
		if version == "" {
			version = p.version
		}
		got = append(got, p.names...)
		seq += len(p.names)
	}
	if !slices.Equal(got, whole.names) {
		t.Errorf("the pages hold %v, want the table in order %v", got, whole.names)
	}

	// Another topic changes the version: a page asked with the old one
	// starts again from the first name.
	createTopic(t, c, "Page0", 1, 1)
	p := askTopics(t, c, map[string]string{"topicSeq": "4", "maxTopicNum": "2", "dataVersion": version})
	all := askTopics(t, c, nil)
	if p.version == version || !slices.Equal(p.names, all.names[:2]) || p.total != whole.total+1 {
		t.Errorf("after a change, the page from 4 with the old version: %v (version %s, total %d), want the first two %v, total %d",
			p.names, p.version, p.total, all.names[:2], whole.total+1)
	}
	// A blank version starts from the first name too.
	if p := askTopics(t, c, map[string]string{"topicSeq": "3", "maxTopicNum": "1", "dataVersion": ""}); !slices.Equal(p.names, all.names[:1]) {
		t.Errorf("from 3 with no version: %v, want %v", p.names, all.names[:1])
	}
	// Past the end: an empty page, and the total.
	if p := askTopics(t, c, map[string]string{"topicSeq": strconv.Itoa(all.total), "dataVersion": all.version}); len(p.names) != 0 || p.total != all.total {
		t.Errorf("past the end: %v, total %d", p.names, p.total)
	}

	// splitMetadataSize caps a page, whatever the request's maximum.
	updateConfig(t, c, "splitMetadataSize=3")
	if p := askTopics(t, c, map[string]string{"topicSeq": "0", "maxTopicNum": "100", "dataVersion": ""}); len(p.names) != 3 {
		t.Errorf("splitMetadataSize=3, maxTopicNum=100: %d names", len(p.names))
	}
	if p := askTopics(t, c, map[string]string{"topicSeq": "0"}); len(p.names) != 3 {
		t.Errorf("splitMetadataSize=3, no maxTopicNum: %d names", len(p.names))
	}
	// enableSplitMetadata=false: the whole table whatever is asked.
	updateConfig(t, c, "enableSplitMetadata=false")
	if p := askTopics(t, c, map[string]string{"topicSeq": "0", "maxTopicNum": "1", "dataVersion": ""}); !slices.Equal(p.names, all.names) || p.total != all.total {
		t.Errorf("enableSplitMetadata=false: %d names, total %d; want all %d", len(p.names), p.total, all.total)
	}
}

// A paged request that cannot be served is refused SYSTEM_ERROR with a
// remark saying why, as RocketMQ fails it: no topicSeq, a field that does
// not parse, a negative start with the table's version, a page of no
// config.
func TestATopicPageRequestThatCannotBeServedIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	version := askTopics(t, c, nil).version
	for _, tc := range []struct {
		name   string
		ext    map[string]string
		remark string
	}{
		{"no topicSeq", map[string]string{"maxTopicNum": "2"}, `"topicSeq": missing`},
		{"topicSeq not a number", map[string]string{"topicSeq": "x"}, `"topicSeq": bad value`},
		{"maxTopicNum not a number", map[string]string{"topicSeq": "0", "maxTopicNum": "x"}, `"maxTopicNum": bad value`},
		{"dataVersion not a version", map[string]string{"topicSeq": "0", "dataVersion": "{"}, "is not a data version"},
		{"negative topicSeq", map[string]string{"topicSeq": "-1", "dataVersion": version}, "is below 0"},
		{"a page of none", map[string]string{"topicSeq": "0", "maxTopicNum": "0"}, "a page of 0 configs"},
	} {
		r := call(t, c, remoting.GetAllTopicConfig, tc.ext, nil)
		if r.Code != remoting.SystemError || !strings.Contains(r.Remark, tc.remark) {
			t.Errorf("%s: %d %q, want SYSTEM_ERROR (1) naming %q", tc.name, r.Code, r.Remark, tc.remark)
		}
	}
}

// The subscription group table pages the same way (groupSeq,
// maxGroupNum, totalGroupNum), and a page carries the forbidden topics
// of its own groups only.
func TestAllSubscriptionGroupsInPages(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, g := range []string{"pageGroupB", "pageGroupA"} {
		if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.Success {
			t.Fatalf("create %s: %d %q", g, r.Code, r.Remark)
		}
		if r := call(t, c, remoting.UpdateAndGetGroupForbidden, map[string]string{"group": g, "topic": "T", "readable": "false"}, nil); r.Code != remoting.Success {
			t.Fatalf("forbid %s: %d %q", g, r.Code, r.Remark)
		}
	}
	type answer struct {
		groups, forbidden []string
		version           string
		total             int
	}
	ask := func(ext map[string]string) answer {
		t.Helper()
		r := call(t, c, remoting.GetAllSubscriptionGroupConfig, ext, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_ALL_SUBSCRIPTIONGROUP_CONFIG %v: %d %q", ext, r.Code, r.Remark)
		}
		var body struct {
			SubscriptionGroupTable map[string]json.RawMessage `json:"subscriptionGroupTable"`
			ForbiddenTable         map[string]json.RawMessage `json:"forbiddenTable"`
			DataVersion            meta.DataVersion           `json:"dataVersion"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		total, err := strconv.Atoi(r.ExtFields["totalGroupNum"])
		if err != nil {
			t.Fatalf("totalGroupNum %q: %v", r.ExtFields["totalGroupNum"], err)
		}
		v, _ := json.Marshal(body.DataVersion)
		return answer{slices.Sorted(maps.Keys(body.SubscriptionGroupTable)), slices.Sorted(maps.Keys(body.ForbiddenTable)), string(v), total}
	}
	whole := ask(nil)
	if whole.total != len(whole.groups) || !slices.Equal(whole.forbidden, []string{"pageGroupA", "pageGroupB"}) {
		t.Fatalf("the whole table: %d groups, total %d, forbidden %v", len(whole.groups), whole.total, whole.forbidden)
	}
	i := slices.Index(whole.groups, "pageGroupA")
	if i < 0 || whole.groups[i+1] != "pageGroupB" {
		t.Fatalf("groups %v", whole.groups)
	}
	p := ask(map[string]string{"groupSeq": strconv.Itoa(i), "maxGroupNum": "1", "dataVersion": whole.version})
	if !slices.Equal(p.groups, []string{"pageGroupA"}) || !slices.Equal(p.forbidden, []string{"pageGroupA"}) || p.total != whole.total {
		t.Errorf("the page of pageGroupA: groups %v, forbidden %v, total %d", p.groups, p.forbidden, p.total)
	}
	p = ask(map[string]string{"groupSeq": strconv.Itoa(i + 1), "maxGroupNum": "5", "dataVersion": whole.version})
	if !slices.Equal(p.groups, whole.groups[i+1:]) || !slices.Equal(p.forbidden, []string{"pageGroupB"}) {
		t.Errorf("the pages from pageGroupB: groups %v, forbidden %v", p.groups, p.forbidden)
	}
	if r := call(t, c, remoting.GetAllSubscriptionGroupConfig, map[string]string{"maxGroupNum": "1"}, nil); r.Code != remoting.SystemError || !strings.Contains(r.Remark, `"groupSeq": missing`) {
		t.Errorf("no groupSeq: %d %q, want SYSTEM_ERROR", r.Code, r.Remark)
	}
}
