package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// forbid sends UPDATE_AND_GET_GROUP_FORBIDDEN; readable "" only asks.
func forbid(t *testing.T, c *remoting.Client, group, topic, readable string) adminbody.GroupForbidden {
	t.Helper()
	ext := map[string]string{"group": group, "topic": topic}
	if readable != "" {
		ext["readable"] = readable
	}
	r := call(t, c, remoting.UpdateAndGetGroupForbidden, ext, nil)
	if r.Code != remoting.Success {
		t.Fatalf("group forbidden %s/%s readable=%q: %d %s", group, topic, readable, r.Code, r.Remark)
	}
	var body adminbody.GroupForbidden
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("group forbidden body %s: %v", r.Body, err)
	}
	return body
}

// forbiddenTableOf reads the forbiddenTable of GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
func forbiddenTableOf(t *testing.T, c *remoting.Client) map[string]map[string]int {
	t.Helper()
	r := call(t, c, remoting.GetAllSubscriptionGroupConfig, nil, nil)
	var body struct {
		ForbiddenTable map[string]map[string]int `json:"forbiddenTable"`
	}
	if err := json.Unmarshal(r.Body, &body); r.Code != remoting.Success || err != nil {
		t.Fatalf("all groups: %d %v %s", r.Code, err, r.Body)
	}
	return body.ForbiddenTable
}

// A group forbidden to read a topic gets NO_PERMISSION with forbiddenType
// 5 on a pull that does not post its subscription, as RocketMQ answers;
// other topics, other groups and, once allowed again, the topic itself
// are served. The table survives a restart, shows in the groups' table
// and goes with the group.
func TestGroupReadForbidden(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	for _, topic := range []string{"FT", "FU"} {
		mustSend(t, c, topic, 0, "m-"+topic, "")
	}
	b.caughtUp()
	hb := []byte(`{"clientID":"10.0.0.1@1","consumerDataSet":[{"groupName":"fg","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"FT","subString":"*"},{"topic":"FU","subString":"*"}]},{"groupName":"og","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"FT","subString":"*"}]}]}`)
	heartbeat(t, c, hb)
	pull := func(group, topic string, postSub bool) *remoting.Command {
		req := pullReq(group, topic, 0, 0, 0, 0, "*")
		if !postSub {
			req["sysFlag"] = "0"
		}
		return call(t, c, remoting.PullMessage, req, nil)
	}
	if r := pull("fg", "FT", false); r.Code != remoting.Success {
		t.Fatalf("pull before any forbid: %d %s", r.Code, r.Remark)
	}
	if got := forbid(t, c, "fg", "FT", ""); got != (adminbody.GroupForbidden{Group: "fg", Readable: true, Topic: "FT"}) {
		t.Errorf("asked before any forbid: %+v", got)
	}

	if got := forbid(t, c, "fg", "FT", "false"); got != (adminbody.GroupForbidden{Group: "fg", Readable: false, Topic: "FT"}) {
		t.Errorf("after forbidding: %+v", got)
	}
	r := pull("fg", "FT", false)
	if r.Code != remoting.NoPermission || r.Remark != "the consumer group[fg] is forbidden for topic[FT]" || header(t, r, "forbiddenType") != 5 {
		t.Errorf("forbidden pull: %d %q forbiddenType %q", r.Code, r.Remark, r.ExtFields["forbiddenType"])
	}
	if r := pull("fg", "FU", false); r.Code != remoting.Success {
		t.Errorf("pull of another topic of the group: %d %s", r.Code, r.Remark)
	}
	if r := pull("og", "FT", false); r.Code != remoting.Success {
		t.Errorf("pull of the topic by another group: %d %s", r.Code, r.Remark)
	}
	// RocketMQ reads the table only for pulls without a posted
	// subscription.
	if r := pull("fg", "FT", true); r.Code != remoting.Success {
		t.Errorf("pull posting its subscription: %d %s", r.Code, r.Remark)
	}
	// A second topic's bit does not disturb the first's.
	forbid(t, c, "fg", "FU", "false")
	if want := map[string]map[string]int{"fg": {"FT": 4, "FU": 4}}; !reflect.DeepEqual(forbiddenTableOf(t, c), want) {
		t.Errorf("forbidden table %v, want %v", forbiddenTableOf(t, c), want)
	}

	b.stop()
	b = startTestBrokerAt(t, store, nil)
	c = b.client(nil)
	heartbeat(t, c, hb)
	if r := pull("fg", "FT", false); r.Code != remoting.NoPermission {
		t.Errorf("forbidden pull after a restart: %d %s", r.Code, r.Remark)
	}
	// Allowing one topic again keeps the other forbidden (RocketMQ would
	// drop the group's whole entry here).
	if got := forbid(t, c, "fg", "FT", "true"); !got.Readable {
		t.Errorf("after allowing: %+v", got)
	}
	if r := pull("fg", "FT", false); r.Code != remoting.Success {
		t.Errorf("pull after allowing: %d %s", r.Code, r.Remark)
	}
	if r := pull("fg", "FU", false); r.Code != remoting.NoPermission {
		t.Errorf("the other topic after allowing one: %d %s", r.Code, r.Remark)
	}
	if want := map[string]map[string]int{"fg": {"FU": 4}}; !reflect.DeepEqual(forbiddenTableOf(t, c), want) {
		t.Errorf("forbidden table %v, want %v", forbiddenTableOf(t, c), want)
	}

	ensureGroup(t, c, "fg")
	if r := call(t, c, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "fg"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	if table := forbiddenTableOf(t, c); len(table) != 0 {
		t.Errorf("forbidden table after deleting the group: %v", table)
	}
	if got := forbid(t, c, "fg", "FU", ""); !got.Readable {
		t.Errorf("a deleted group is still forbidden: %+v", got)
	}
}

func TestGroupForbiddenBadRequests(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for name, ext := range map[string]map[string]string{
		"no group": {"topic": "T"},
		"no topic": {"group": "G"},
		"empty":    {"group": "", "topic": "T", "readable": "false"},
	} {
		r := call(t, c, remoting.UpdateAndGetGroupForbidden, ext, nil)
		if r.Code != remoting.SystemError || r.Remark == "" {
			t.Errorf("%s: %d %q", name, r.Code, r.Remark)
		}
	}
	if table := forbiddenTableOf(t, c); len(table) != 0 {
		t.Errorf("bad requests changed the table: %v", table)
	}
}

// The forbiddenTable of a RocketMQ store's subscriptionGroup.json is
// carried over at the first open.
func TestOpenRocketMQStoreKeepsGroupForbidden(t *testing.T) {
	store := t.TempDir()
	dir := filepath.Join(store, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := `{"dataVersion":{"counter":2,"timestamp":1700000000000},"forbiddenTable":{"fg":{"FT":4}},"subscriptionGroupTable":{"fg":{"groupName":"fg"}}}`
	if err := os.WriteFile(filepath.Join(dir, "subscriptionGroup.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	if got := forbid(t, c, "fg", "FT", ""); got.Readable {
		t.Errorf("imported forbid lost: %+v", got)
	}
	if want := map[string]map[string]int{"fg": {"FT": 4}}; !reflect.DeepEqual(forbiddenTableOf(t, c), want) {
		t.Errorf("forbidden table %v, want %v", forbiddenTableOf(t, c), want)
	}
	// And enforced on pulls from the start.
	mustSend(t, c, "FT", 0, "m", "")
	b.caughtUp()
	heartbeat(t, c, []byte(`{"clientID":"10.0.0.1@1","consumerDataSet":[{"groupName":"fg","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"FT","subString":"*"}]}]}`))
	req := pullReq("fg", "FT", 0, 0, 0, 0, "*")
	req["sysFlag"] = "0"
	if r := call(t, c, remoting.PullMessage, req, nil); r.Code != remoting.NoPermission {
		t.Errorf("pull of an imported forbidden group: %d %s", r.Code, r.Remark)
	}
}

// litePullMessageEnable=false refuses lite pulls (NO_PERMISSION,
// BROKER_FORBIDDEN) and leaves other pulls alone; an update turns them
// back on.
func TestLitePullMessageEnable(t *testing.T) {
	b := startTestBroker(t, map[string]string{"litePullMessageEnable": "false"})
	c := b.client(nil)
	mustSend(t, c, "LP", 0, "x", "")
	b.caughtUp()
	req := pullReq("lp", "LP", 0, 0, 0, 0, "*")
	r := call(t, c, remoting.LitePullMessage, req, nil)
	if r.Code != remoting.NoPermission || header(t, r, "forbiddenType") != 1 || !strings.Contains(r.Remark, "for lite pull consumer is forbidden") {
		t.Fatalf("lite pull: %d %q forbiddenType %q", r.Code, r.Remark, r.ExtFields["forbiddenType"])
	}
	if r := call(t, c, remoting.PullMessage, req, nil); r.Code != remoting.Success {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}
	updateConfig(t, c, "litePullMessageEnable=true")
	if r := call(t, c, remoting.LitePullMessage, req, nil); r.Code != remoting.Success {
		t.Fatalf("lite pull after the update: %d %s", r.Code, r.Remark)
	}
}

// rejectPullConsumerEnable keeps pull consumers out as RocketMQ does: their
// heartbeats register nothing and their pulls are answered
// SUBSCRIPTION_NOT_EXIST; push consumers and RocketMQ's own groups pull
// on, and an update lets pull consumers back in.
func TestRejectPullConsumerEnable(t *testing.T) {
	b := startTestBroker(t, map[string]string{"rejectPullConsumerEnable": "true"})
	c := b.client(nil)
	mustSend(t, c, "RP", 0, "x", "")
	b.caughtUp()
	pullHB := strings.Replace(string(heartbeatBody("puller@1", "", "pc", map[string]string{"RP": "*"})),
		"CONSUME_PASSIVELY", "CONSUME_ACTIVELY", 1)
	heartbeat(t, c, []byte(pullHB))
	if ids := b.clients.consumerIDs("pc"); len(ids) != 0 {
		t.Fatalf("a pull consumer registered: %v", ids)
	}
	r := call(t, c, remoting.PullMessage, pullReq("pc", "RP", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.SubscriptionNotExist || !strings.HasPrefix(r.Remark, "the consumer's group info not exist, or the pull consumer is rejected by server.") {
		t.Fatalf("pull of a pull consumer: %d %q", r.Code, r.Remark)
	}
	heartbeat(t, c, heartbeatBody("pusher@1", "", "push", map[string]string{"RP": "*"}))
	for _, group := range []string{"push", "TOOLS_CONSUMER", "CID_RMQ_SYS_X"} {
		if r := call(t, c, remoting.PullMessage, pullReq(group, "RP", 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
			t.Fatalf("pull of %s: %d %s", group, r.Code, r.Remark)
		}
	}
	updateConfig(t, c, "rejectPullConsumerEnable=false")
	if r := call(t, c, remoting.PullMessage, pullReq("pc", "RP", 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
		t.Fatalf("pull of a pull consumer after the update: %d %s", r.Code, r.Remark)
	}
}
