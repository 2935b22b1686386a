package broker

// Requests that access control let through before these were closed:
// each test failed then.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// ACL 2.0, end to end: alice (Sub on her group ag only) writes into the
// retry topic of group victim, whose consumers will consume it.
func TestACL2ASendToAnotherGroupsRetryTopicIsRefused(t *testing.T) {
	_, _, alice := brokerWithAlice(t)
	f := sendV2Fields("%RETRY%victim")
	f["a"] = "ag"
	resp := alice.call(remoting.SendMessageV2, f, []byte("injected"))
	if resp.Code != remoting.NoPermission {
		t.Fatalf("alice's send to %%RETRY%%victim naming her group ag: %d %q, want NO_PERMISSION on Group:victim", resp.Code, resp.Remark)
	}
}

// ACL 2.0: a pull of another group's retry topic needs Sub on that group
// (the retry topic was dropped instead of being read as its group).
func TestACL2APullOfAnotherGroupsRetryTopicIsRefused(t *testing.T) {
	for _, code := range []int32{remoting.PullMessage, remoting.LitePullMessage, remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset} {
		if got := needsOf(code, map[string]string{"topic": "%RETRY%victim", "consumerGroup": "mine"}); !strings.Contains(got, "Group:victim") {
			t.Errorf("code %d of %%RETRY%%victim as group mine needs %q: nothing on Group:victim", code, got)
		}
	}

	b, root, alice := brokerWithAlice(t)
	// A message of group victim's retry topic (root may write anywhere).
	f := sendV2Fields("%RETRY%victim")
	f["a"] = "victim"
	root.must(remoting.SendMessageV2, f, []byte("victim's retried message"))
	b.caughtUp()
	resp := alice.call(remoting.PullMessage, pullReq("ag", "%RETRY%victim", 0, 0, 0, 0, "*"), nil)
	if resp.Code == remoting.Success {
		got := decodeRecords(t, resp.Body)
		t.Fatalf("alice (Sub on group ag only) pulled %d message(s) of %%RETRY%%victim, first %q", len(got), string(got[0].Body))
	}
	if resp.Code != remoting.NoPermission {
		t.Logf("pull answered %d %q", resp.Code, resp.Remark)
	}
}

// ACL 2.0: VIEW_MESSAGE_BY_ID is checked on its topic field, but the
// processor returns the record at the offset whatever its topic.
func TestACL2AViewByIDOfAnotherTopicsMessageIsRefused(t *testing.T) {
	b, root, alice := brokerWithAlice(t)
	sent := root.must(remoting.SendMessageV2, sendV2Fields("Secret"), []byte("top secret"))
	_, phy, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	b.caughtUp()
	// Alice has Get on Topic:Auth* and nothing on Secret.
	resp := alice.call(remoting.ViewMessageByID, map[string]string{"topic": "AuthT", "offset": strconv.FormatInt(phy, 10)}, nil)
	if resp.Code == remoting.Success {
		got := decodeRecords(t, resp.Body)
		t.Fatalf("alice viewed a message of topic %s by naming AuthT: body %q", got[0].Topic, string(got[0].Body))
	}
}

// ACL 1.0: CONSUMER_SEND_MSG_BACK copies the record at any offset into the
// caller's retry topic. RocketMQ's plain ACL at least needs PUB on
// originTopic; here only SUB on the group is checked, so a consumer that
// is denied a topic reads it through its own retry topic.
func TestACL1ASendBackOfADeniedTopicsMessageIsRefused(t *testing.T) {
	b, c, _ := startACLBroker(t)
	admin := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		return invoke(t, c, signedReq("adminKey1", "admin-secret", code, ext, body))
	}
	consumer := func(code int32, ext map[string]string) *remoting.Command {
		return invoke(t, c, signedReq("consumer1", "consumer-secret", code, ext, nil))
	}
	sent := admin(remoting.SendMessageV2, sendV2Fields("SecretT"), []byte("top secret"))
	wantSuccess(t, sent, "the admin sends to SecretT")
	_, phy, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	b.caughtUp()
	// consumer1 may not read SecretT.
	wantRefused(t, consumer(remoting.PullMessage, pullReq("cg-acl", "SecretT", 0, 0, 0, 0, "*")), "No default permission for topic:SecretT")
	back := consumer(remoting.ConsumerSendMsgBack, map[string]string{"offset": strconv.FormatInt(phy, 10), "group": "cg-acl",
		"delayLevel": "1", "originTopic": "AclT", "originMsgId": sent.ExtFields["msgId"]})
	if back.Code != remoting.Success {
		return // refused: fine
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp := consumer(remoting.PullMessage, pullReq("cg-acl", meta.RetryTopic("cg-acl"), 0, 0, 0, 0, "*"))
		if resp.Code == remoting.Success {
			if got := decodeRecords(t, resp.Body); len(got) > 0 {
				t.Fatalf("consumer1 (DENY on SecretT) read %q of SecretT via send-back into %%RETRY%%cg-acl", string(got[0].Body))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("CONSUMER_SEND_MSG_BACK of a SecretT offset accepted for consumer1 (code %d)", back.Code)
}

// ACL 1.0: the ACL 2.0 user and access-list requests are open to any
// signed non-admin account (the ACL 1.0 edits need an admin): a producer
// lists every user with its password and creates users and access lists
// that survive a later switch to ACL 2.0 (the migration skips accounts
// whose user exists).
func TestACL1OnlyAdminsManageACL2Users(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(aclTestFile), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, map[string]string{"aclEnable": "true", "plainAclFile": file,
		"initAuthenticationUser": `{"username":"root","password":"root-password"}`})
	c := b.client(nil)
	producer := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		return invoke(t, c, signedReq("producer1", "producer-secret", code, ext, body))
	}
	var leaks []string
	if r := producer(remoting.AuthListUser, nil, nil); r.Code == remoting.Success && strings.Contains(string(r.Body), "root-password") {
		leaks = append(leaks, "AUTH_LIST_USER returned "+string(r.Body))
	}
	if r := producer(remoting.AuthCreateUser, map[string]string{"username": "adminKey1"}, userBody(t, meta.UserInfo{Password: "mallory-pw"})); r.Code == remoting.Success {
		leaks = append(leaks, "AUTH_CREATE_USER adminKey1 succeeded")
	}
	if r := producer(remoting.AuthCreateACL, map[string]string{"subject": "User:adminKey1"}, aclBody(t, "User:adminKey1",
		meta.PolicyEntryInfo{Resource: "*", Actions: []string{"All"}, Decision: "Allow"})); r.Code == remoting.Success {
		leaks = append(leaks, "AUTH_CREATE_ACL * All Allow succeeded")
	}
	if len(leaks) > 0 {
		t.Fatalf("non-admin producer1 under aclEnable:\n%s", strings.Join(leaks, "\n"))
	}
}

// brokerWithAlice starts a broker under ACL 2.0 with the users of
// setUpAlice, and returns it with root's and alice's clients.
func brokerWithAlice(t *testing.T) (*testBroker, asUser, asUser) {
	t.Helper()
	b := startTestBroker(t, authSettings(nil))
	c := b.client(nil)
	root := asUser{t, c, "root", "root-password"}
	setUpAlice(t, root)
	return b, root, asUser{t, c, "alice", "alice-password"}
}
