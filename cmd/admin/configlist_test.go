package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicOf reads a topic's config from the broker; ok is false when the
// broker does not have the topic.
func topicOf(t *testing.T, c *remoting.Client, topic string) (meta.TopicConfig, bool) {
	t.Helper()
	return configOf[meta.TopicConfig](t, c, remoting.GetTopicConfig, map[string]string{"topic": topic}, remoting.TopicNotExist)
}

// configOf asks the broker for a config with code and decodes the answer;
// ok is false when the broker answers missing.
func configOf[T any](t *testing.T, c *remoting.Client, code int32, ext map[string]string, missing int32) (v T, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code == missing {
		return v, false
	}
	if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &v) != nil {
		t.Fatalf("request %d %v: %d %s", code, ext, resp.Code, resp.Remark)
	}
	return v, true
}

// updateTopicList creates every topic of a file of TopicConfig objects as
// RocketMQ's fastjson writes them, on the -b broker or every master of a
// -c cluster, what an object leaves out being TopicConfig's default; a
// second file updates them.
func TestUpdateTopicList(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	file := testutil.WriteFile(t, "topics.json", `[
	{"attributes":{"+message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"L1","topicSysFlag":0,"writeQueueNums":4},
	{"topicName":"L2","readQueueNums":2,"writeQueueNums":3,"perm":4,"order":true},
	{"topicName":"L3"}
]`)
	out, err := run(t, "updateTopicList", "-b", b.Addr(), "-f", file)
	if want := "submit batch of topic config to " + b.Addr() + " success, please check the result later.\n"; err != nil || out != want {
		t.Fatalf("updateTopicList -b: %v\n%q\nwant %q", err, out, want)
	}
	for _, want := range []meta.TopicConfig{
		{TopicName: "L1", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, Attributes: map[string]string{"message.type": "FIFO"}},
		{TopicName: "L2", ReadQueueNums: 2, WriteQueueNums: 3, Perm: 4, Order: true},
		{TopicName: "L3", ReadQueueNums: 16, WriteQueueNums: 16, Perm: 6},
	} {
		got, ok := topicOf(t, c, want.TopicName)
		if !ok || got.ReadQueueNums != want.ReadQueueNums || got.WriteQueueNums != want.WriteQueueNums || got.Perm != want.Perm ||
			got.Order != want.Order || got.TopicFilterType != meta.SingleTag || got.Attributes["message.type"] != want.Attributes["message.type"] {
			t.Errorf("topic %s: %+v (found %v), want %+v", want.TopicName, got, ok, want)
		}
	}
	// Through the cluster, an update of L2.
	update := testutil.WriteFile(t, "update.json", `[{"topicName":"L2","readQueueNums":8,"writeQueueNums":8,"perm":6}]`)
	out, err = run(t, "updateTopicList", "-n", ns, "-c", "DefaultCluster", "-f", update)
	if err != nil || !strings.Contains(out, "submit batch of topic config to "+b.Addr()+" success") {
		t.Fatalf("updateTopicList -c: %v\n%s", err, out)
	}
	if got, _ := topicOf(t, c, "L2"); got.ReadQueueNums != 8 || got.WriteQueueNums != 8 || got.Perm != 6 || got.Order {
		t.Fatalf("L2 after the update: %+v", got)
	}

	// The errors: no file, a file that is not a list of topics, a topic the
	// broker refuses (a name it takes for invalid), -b with -c.
	bad := testutil.WriteFile(t, "bad.json", `[{"topicName":"L4","readQueueNums":"many"}]`)
	refused := testutil.WriteFile(t, "refused.json", `[{"topicName":"L5"},{"topicName":"bad topic"}]`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-b", b.Addr()}, `required flag(s) "filename" not set`},
		{[]string{"-b", b.Addr(), "-f", filepath.Join(t.TempDir(), "none.json")}, "none.json does not exists"},
		{[]string{"-b", b.Addr(), "-f", testutil.WriteFile(t, "object.json", `{"topicName":"L4"}`)}, "is not a JSON array of TopicConfig"},
		{[]string{"-b", b.Addr(), "-f", bad}, "TopicConfig 0 of the list"},
		{[]string{"-b", b.Addr(), "-f", refused}, "code 29: The specified topic: bad topic"},
		{[]string{"-b", b.Addr(), "-f", t.TempDir()}, "read the TopicConfig list"},
		// Attributes as topics.json holds them, not as modifications.
		{[]string{"-b", b.Addr(), "-f", testutil.WriteFile(t, "plain.json", `[{"topicName":"L6","attributes":{"message.type":"FIFO"}}]`)}, "only add attribute is supported while creating topic"},
		{[]string{"-b", b.Addr(), "-n", ns, "-c", "DefaultCluster", "-f", update}, "not both"},
	} {
		if out, err := run(t, append([]string{"updateTopicList"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("updateTopicList %v: %v (%q), want %q", tc.args, err, out, tc.want)
		}
	}
	for _, topic := range []string{"L4", "L5", "L6"} {
		if _, ok := topicOf(t, c, topic); ok {
			t.Errorf("a refused updateTopicList created %s", topic)
		}
	}
	// An empty list sends nothing, as mqadmin's.
	if out, err := run(t, "updateTopicList", "-b", deadAddr(t), "-f", testutil.WriteFile(t, "empty.json", "[]")); err != nil || out != "" {
		t.Errorf("updateTopicList of an empty list: %v %q", err, out)
	}
}

// updateSubGroupList creates every group of a file of
// SubscriptionGroupConfig objects, over the class's defaults.
func TestUpdateSubGroupList(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	file := testutil.WriteFile(t, "groups.json", `[
	{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":false,"consumeFromMinEnable":true,"consumeMessageOrderly":true,
	 "consumeTimeoutMinute":15,"groupName":"LG1","groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":30000,"multiplier":2}},
	 "groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1},
	{"groupName":"LG2","retryMaxTimes":3}
]`)
	out, err := run(t, "updateSubGroupList", "-b", b.Addr(), "-f", file)
	if want := "submit batch of group config to " + b.Addr() + " success, please check the result later.\n"; err != nil || out != want {
		t.Fatalf("updateSubGroupList -b: %v\n%q\nwant %q", err, out, want)
	}
	g1, ok := groupOf(t, c, "LG1")
	if !ok || g1.ConsumeEnable || g1.ConsumeBroadcastEnable || !g1.ConsumeMessageOrderly || g1.RetryMaxTimes != 5 ||
		g1.GroupRetryPolicy == nil || g1.GroupRetryPolicy.Type != "EXPONENTIAL" || g1.GroupRetryPolicy.Exponential == nil || g1.GroupRetryPolicy.Exponential.Max != 30000 {
		t.Fatalf("LG1: %+v (found %v)", g1, ok)
	}
	// What LG2 leaves out is SubscriptionGroupConfig's default.
	if g2, ok := groupOf(t, c, "LG2"); !ok || g2.RetryMaxTimes != 3 || !g2.ConsumeEnable || !g2.ConsumeBroadcastEnable || g2.RetryQueueNums != 1 || g2.ConsumeTimeoutMinute != 15 {
		t.Fatalf("LG2: %+v (found %v)", g2, ok)
	}
	out, err = run(t, "updateSubGroupList", "-n", ns, "-c", "DefaultCluster", "-f", testutil.WriteFile(t, "g3.json", `[{"groupName":"LG1","retryMaxTimes":7}]`))
	if err != nil || out != "submit batch of subscription group config to "+b.Addr()+" success, please check the result later.\n" {
		t.Fatalf("updateSubGroupList -c: %v\n%q", err, out)
	}
	if g1, _ := groupOf(t, c, "LG1"); g1.RetryMaxTimes != 7 || !g1.ConsumeEnable {
		t.Fatalf("LG1 after its update: %+v", g1)
	}

	for _, tc := range []struct {
		file, want string
	}{
		{filepath.Join(t.TempDir(), "none.json"), "does not exists"},
		{testutil.WriteFile(t, "bad.json", `[{"groupName":"LG4","retryMaxTimes":[]}]`), "SubscriptionGroupConfig 0 of the list"},
		// A group the broker refuses: its name is not a valid one.
		{testutil.WriteFile(t, "refused.json", `[{"groupName":"LG5"},{"groupName":"bad group"}]`), "code 29: The specified group: bad group"},
	} {
		if out, err := run(t, "updateSubGroupList", "-b", b.Addr(), "-f", tc.file); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("updateSubGroupList -f %s: %v (%q), want %q", tc.file, err, out, tc.want)
		}
	}
	for _, group := range []string{"LG4", "LG5"} {
		if _, ok := groupOf(t, c, group); ok {
			t.Errorf("a refused updateSubGroupList created %s", group)
		}
	}
}
