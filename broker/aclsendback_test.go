package broker

// Send-backs and views under access control of messages in retry topics:
// each test failed on the first closing of the send-back and view holes
// (e7b9e84), which refused the proxy's send-backs of POP retry messages and
// let a group copy another's retry topic sharing its name's prefix.

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

func needsOf(code int32, f map[string]string) string {
	var needs []string
	for _, n := range authNeeds(remoting.NewRequest(code, f, nil), "C") {
		needs = append(needs, n.String())
	}
	return strings.Join(needs, "|")
}

// ACL 2.0: VIEW_MESSAGE_BY_ID naming a retry topic needs Get on the group
// the retry topic belongs to, as RocketMQ 5.3's annotation path reads a
// TOPIC field (Resource.ofGroup) and as topicField did before the change.
// It now needs Get on Topic:%RETRY%g, which no group policy grants.
func TestAViewByIDOfARetryTopicNeedsItsGroup(t *testing.T) {
	got := needsOf(remoting.ViewMessageByID, map[string]string{"topic": "%RETRY%g", "offset": "0"})
	if !strings.Contains(got, "Group:g") || strings.Contains(got, "Topic:%RETRY%g") {
		t.Fatalf("VIEW_MESSAGE_BY_ID of %%RETRY%%g needs %q, want Get on Group:g", got)
	}
}

// ACL 2.0: a send-back as RocketMQ's proxy sends it for a message popped
// from a POP retry topic (originTopic = handle.getRealTopic: %RETRY%g_T or
// %RETRY%g+T) asks for Sub on a group "g_T" / "g+T" that is nobody's: a
// user with Sub on Group:g and Topic:T is refused.
func TestASendBackOfAPopRetryMessageNeedsItsTopic(t *testing.T) {
	for _, origin := range []string{"%RETRY%g_T", "%RETRY%g+T"} {
		got := needsOf(remoting.ConsumerSendMsgBack, map[string]string{"group": "g", "originTopic": origin, "offset": "0", "delayLevel": "-1"})
		if strings.Contains(got, "Group:g_T") || strings.Contains(got, "Group:g+T") {
			t.Errorf("CONSUMER_SEND_MSG_BACK of group g, originTopic %s, needs %q: Sub on a group that does not exist", origin, got)
		}
	}
}

// ACL 2.0 end to end: alice (Sub on Topic:AuthT and Group:ag) forwards to
// the DLQ a message she popped from ag's POP retry topic of AuthT, as the
// proxy does: refused on Group:ag_AuthT.
func TestACL2ASendBackOfAPopRetryMessageIsTaken(t *testing.T) {
	b, root, alice := brokerWithAlice(t)
	retry := "%RETRY%ag_AuthT"
	f := sendV2Fields(retry)
	f["a"] = "ag"
	sent := root.must(remoting.SendMessageV2, f, []byte("popped retry"))
	_, phy, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	b.caughtUp()
	resp := alice.call(remoting.ConsumerSendMsgBack, map[string]string{"offset": strconv.FormatInt(phy, 10), "group": "ag",
		"delayLevel": "-1", "originTopic": retry, "originMsgId": sent.ExtFields["msgId"], "maxReconsumeTimes": "0"}, nil)
	if resp.Code == remoting.NoPermission && strings.Contains(resp.Remark, "Group:ag_AuthT") {
		t.Fatalf("alice's send-back of a message of %s as group ag: %d %q", retry, resp.Code, resp.Remark)
	}
}

// ACL 1.0: the same send-back by consumer1 (SUB on AclT and on group
// cg-acl) is refused on a group cg-acl_AclT.
func TestACL1ASendBackOfAPopRetryMessageIsTaken(t *testing.T) {
	var names []string
	for _, r := range aclResources(remoting.NewRequest(remoting.ConsumerSendMsgBack,
		map[string]string{"group": "cg-acl", "originTopic": "%RETRY%cg-acl_AclT", "offset": "0"}, nil)) {
		names = append(names, r.Name)
	}
	for _, n := range names {
		if n == acl.RetryGroupTopicPrefix+"cg-acl_AclT" {
			t.Fatalf("CONSUMER_SEND_MSG_BACK of group cg-acl, originTopic %%RETRY%%cg-acl_AclT, checks %v: SUB on group cg-acl_AclT", names)
		}
	}
}

// ACL 1.0: the send-back origin check takes any topic starting with
// %RETRY%<group>_ for the group's own POP retry topic, so group cg-acl
// copies a message of group cg-acl_secret's retry topic (which it may not
// read) into its own retry topic by naming originTopic AclT.
func TestASendBackOfAnotherGroupsRetryByPrefixIsRefused(t *testing.T) {
	b, c, _ := startACLBroker(t)
	admin := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		return invoke(t, c, signedReq("adminKey1", "admin-secret", code, ext, body))
	}
	consumer := func(code int32, ext map[string]string) *remoting.Command {
		return invoke(t, c, signedReq("consumer1", "consumer-secret", code, ext, nil))
	}
	other := "%RETRY%cg-acl_secret" // group cg-acl_secret's retry topic
	f := sendV2Fields(other)
	f["a"] = "cg-acl_secret"
	sent := admin(remoting.SendMessageV2, f, []byte("secret retry"))
	wantSuccess(t, sent, "the admin sends to "+other)
	_, phy, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	b.caughtUp()
	wantRefused(t, consumer(remoting.PullMessage, pullReq("cg-acl", other, 0, 0, 0, 0, "*")), "No default permission for group:cg-acl_secret")
	back := consumer(remoting.ConsumerSendMsgBack, map[string]string{"offset": strconv.FormatInt(phy, 10), "group": "cg-acl",
		"delayLevel": "1", "originTopic": "AclT", "originMsgId": sent.ExtFields["msgId"]})
	if back.Code == remoting.Success {
		t.Fatalf("consumer1 (group cg-acl) sent back a message of %s naming originTopic AclT: %d %q", other, back.Code, back.Remark)
	}
}

// A send-back naming %RETRY%g_T copies a record of that topic only while
// it is group g's POP retry topic of T: when a group named g_T exists, the
// topic is that group's classic retry topic, which the check of T did not
// cover.
func TestASendBackOfAnUnderscoredRetryTopicNeedsNoSuchGroup(t *testing.T) {
	b := startTestBroker(t, nil)
	m := commitlog.Message{Topic: "%RETRY%cg_secret"}
	if !b.sendBackAllowed(m, "%RETRY%cg_secret", "cg") {
		t.Fatal("a POP retry record of group cg refused")
	}
	ensureGroup(t, b.client(nil), "cg_secret")
	if b.sendBackAllowed(m, "%RETRY%cg_secret", "cg") {
		t.Fatal("a record of group cg_secret's retry topic copied by group cg")
	}
	if !b.sendBackAllowed(commitlog.Message{Topic: "%RETRY%cg"}, "T", "cg") || b.sendBackAllowed(commitlog.Message{Topic: "Other"}, "T", "cg") {
		t.Fatal("own retry records or records of another topic misjudged")
	}
}
