package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// authSettings turn both ACL 2.0 checks on with a Super user "root".
func authSettings(extra map[string]string) map[string]string {
	s := map[string]string{
		"authenticationEnabled":  "true",
		"authorizationEnabled":   "true",
		"initAuthenticationUser": `{"username":"root","password":"root-password"}`,
		"autoCreateTopicEnable":  "true",
	}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// wantNoPermission checks a refusal as RocketMQ 5.3's broker answers it.
func wantNoPermission(t *testing.T, resp *remoting.Command, remark string) {
	t.Helper()
	if resp.Code != remoting.NoPermission || resp.Remark != remark {
		t.Fatalf("answer %d %q, want NO_PERMISSION %q", resp.Code, resp.Remark, remark)
	}
}

// asUser signs requests as one user.
type asUser struct {
	t              *testing.T
	c              *remoting.Client
	name, password string
}

func (u asUser) call(code int32, ext map[string]string, body []byte) *remoting.Command {
	u.t.Helper()
	return invoke(u.t, u.c, signedReq(u.name, u.password, code, ext, body))
}

func (u asUser) must(code int32, ext map[string]string, body []byte) *remoting.Command {
	u.t.Helper()
	resp := u.call(code, ext, body)
	wantSuccess(u.t, resp, fmt.Sprintf("%s's request %d", u.name, code))
	return resp
}

func userBody(t *testing.T, u meta.UserInfo) []byte {
	t.Helper()
	raw, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func aclBody(t *testing.T, subject string, entries ...meta.PolicyEntryInfo) []byte {
	t.Helper()
	raw, err := json.Marshal(meta.AclInfo{Subject: subject, Policies: []meta.PolicyInfo{{PolicyType: "Custom", Entries: entries}}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// setUpAlice creates, as root, the Normal user alice allowed to send to
// and consume AuthT as group ag, and the disabled user carol.
func setUpAlice(t *testing.T, root asUser) {
	t.Helper()
	root.must(remoting.AuthCreateUser, map[string]string{"username": "alice"}, userBody(t, meta.UserInfo{Password: "alice-password"}))
	root.must(remoting.AuthCreateUser, map[string]string{"username": "carol"}, userBody(t, meta.UserInfo{Password: "carol-password"}))
	root.must(remoting.AuthUpdateUser, map[string]string{"username": "carol"}, userBody(t, meta.UserInfo{UserStatus: "disable"}))
	root.must(remoting.AuthCreateACL, map[string]string{"subject": "User:alice"}, aclBody(t, "User:alice",
		meta.PolicyEntryInfo{Resource: "Topic:AuthT", Actions: []string{"Pub", "Sub"}, Decision: "Allow"},
		meta.PolicyEntryInfo{Resource: "Group:ag", Actions: []string{"Sub"}, Decision: "Allow"},
		meta.PolicyEntryInfo{Resource: "Topic:Auth*", Actions: []string{"Get"}, Decision: "Allow"}))
}

func TestAuthChecksRequests(t *testing.T) {
	b := startTestBroker(t, authSettings(map[string]string{
		"authorizationWhitelist":  "30", // GET_MAX_OFFSET
		"authenticationWhitelist": "26", // GET_BROKER_CONFIG
		"brokerClusterName":       "AuthCluster",
	}))
	c := b.client(nil)
	root := asUser{t, c, "root", "root-password"}
	alice := asUser{t, c, "alice", "alice-password"}
	setUpAlice(t, root)

	wantSuccess(t, alice.call(remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("hello")), "alice sends to AuthT")
	wantNoPermission(t, alice.call(remoting.SendMessageV2, sendV2Fields("Other"), []byte("x")),
		"User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
	wantNoPermission(t, alice.call(remoting.SendMessage, map[string]string{"producerGroup": "pg", "topic": "Other", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}, []byte("x")),
		"User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
	wantNoPermission(t, call(t, c, remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("x")), "username cannot be null.")
	wantNoPermission(t, invoke(t, c, signedReq("alice", "guess", remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("x"))), "check signature failed.")
	wantNoPermission(t, invoke(t, c, signedReq("mallory", "x", remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("x"))), "User:mallory is not found.")
	wantNoPermission(t, invoke(t, c, signedReq("carol", "carol-password", remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("x"))), "User:carol is disabled.")
	// A send to a group's retry topic is a send-back: Sub on the group.
	retry := sendV2Fields("%RETRY%ag")
	retry["a"] = "ag"
	if resp := alice.call(remoting.SendMessageV2, retry, []byte("again")); resp.Code == remoting.NoPermission {
		t.Fatalf("retry send refused: %s", resp.Remark)
	}
	retry["a"], retry["b"] = "other", "%RETRY%other"
	wantNoPermission(t, alice.call(remoting.SendMessageV2, retry, []byte("again")),
		"User:alice has no permission to access Group:other from 127.0.0.1, no matched policies.")

	// Pulls: the topic and the group.
	if resp := alice.call(remoting.PullMessage, pullReq("ag", "AuthT", 0, 0, 0, 0, "*"), nil); resp.Code == remoting.NoPermission {
		t.Fatalf("alice's pull refused: %s", resp.Remark)
	}
	wantNoPermission(t, alice.call(remoting.PullMessage, pullReq("other", "AuthT", 0, 0, 0, 0, "*"), nil),
		"User:alice has no permission to access Group:other from 127.0.0.1, no matched policies.")
	wantNoPermission(t, alice.call(remoting.LitePullMessage, pullReq("ag", "Other", 0, 0, 0, 0, "*"), nil),
		"User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
	// A heartbeat names the groups and topics a consumer subscribes.
	hb := []byte(`{"clientID":"c1","consumerDataSet":[{"groupName":"ag","subscriptionDataSet":[{"topic":"Other","subString":"*"}]}]}`)
	wantNoPermission(t, alice.call(remoting.HeartBeat, map[string]string{"k": "v"}, hb),
		"User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
	// Offsets need Sub and Get or Update; Get on Topic:Auth* is enough for
	// the query, nothing allows the update of a topic without Sub.
	if resp := alice.call(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "ag", "topic": "AuthX", "queueId": "0"}, nil); resp.Code == remoting.NoPermission {
		t.Fatalf("offset query refused: %s", resp.Remark)
	}
	wantNoPermission(t, alice.call(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "ag", "topic": "AuthX", "queueId": "0", "commitOffset": "1"}, nil),
		"User:alice has no permission to access Topic:AuthX from 127.0.0.1, no matched policies.")

	// Whitelists: GET_MAX_OFFSET skips authorization, GET_BROKER_CONFIG
	// authentication; GET_MIN_OFFSET is checked.
	wantSuccess(t, alice.call(remoting.GetMaxOffset, map[string]string{"topic": "AuthT", "queueId": "0"}, nil), "whitelisted GET_MAX_OFFSET")
	if resp := alice.call(remoting.GetMaxOffset, map[string]string{"topic": "Other", "queueId": "0"}, nil); resp.Code == remoting.NoPermission {
		t.Fatalf("authorization-whitelisted code refused: %s", resp.Remark)
	}
	wantNoPermission(t, alice.call(remoting.GetMinOffset, map[string]string{"topic": "Other", "queueId": "0"}, nil),
		"User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
	wantSuccess(t, call(t, c, remoting.GetBrokerConfig, nil, nil), "unsigned, authentication-whitelisted GET_BROKER_CONFIG")

	// The super user skips authorization; admin requests need the cluster.
	wantSuccess(t, root.call(remoting.SendMessageV2, sendV2Fields("Other"), []byte("root")), "root sends anywhere")
	wantNoPermission(t, alice.call(remoting.AuthCreateUser, map[string]string{"username": "eve"}, userBody(t, meta.UserInfo{Password: "pw"})),
		"User:alice has no permission to access Cluster:AuthCluster from 127.0.0.1, no matched policies.")
	wantNoPermission(t, alice.call(remoting.UpdateAndCreateTopic, map[string]string{"topic": "New", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, nil),
		"User:alice has no permission to access Topic:New from 127.0.0.1, no matched policies.")
	wantNoPermission(t, alice.call(remoting.UpdateBrokerConfig, map[string]string{"k": "v"}, []byte("brokerPermission=4\n")),
		"User:alice has no permission to access Cluster:AuthCluster from 127.0.0.1, no matched policies.")

	// A Deny entry for the topic wins over the wider Allow.
	root.must(remoting.AuthUpdateACL, map[string]string{"subject": "User:alice"}, aclBody(t, "User:alice",
		meta.PolicyEntryInfo{Resource: "Topic:AuthT", Actions: []string{"Pub"}, Decision: "Deny"},
		meta.PolicyEntryInfo{Resource: "*", Actions: []string{"All"}, Decision: "Allow"}))
	wantNoPermission(t, alice.call(remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("x")),
		"User:alice has no permission to access Topic:AuthT from 127.0.0.1, the decision is deny.")
	wantSuccess(t, alice.call(remoting.SendMessageV2, sendV2Fields("Other"), []byte("x")), "alice, allowed * after the update")
}

func TestAuthAdminRequests(t *testing.T) {
	b := startTestBroker(t, authSettings(nil))
	c := b.client(nil)
	root := asUser{t, c, "root", "root-password"}
	alice := asUser{t, c, "alice", "alice-password"}
	setUpAlice(t, root)

	resp := root.must(remoting.AuthGetUser, map[string]string{"username": "alice"}, nil)
	var u meta.UserInfo
	if err := json.Unmarshal(resp.Body, &u); err != nil || u != (meta.UserInfo{Username: "alice", Password: "alice-password", UserType: "Normal", UserStatus: "enable"}) {
		t.Fatalf("getUser: %s %v", resp.Body, err)
	}
	if resp := root.must(remoting.AuthGetUser, map[string]string{"username": "nobody"}, nil); len(resp.Body) != 0 {
		t.Fatalf("getUser of an unknown user: %s", resp.Body)
	}
	resp = root.must(remoting.AuthListUser, map[string]string{"filter": "a"}, nil)
	var users []meta.UserInfo
	if err := json.Unmarshal(resp.Body, &users); err != nil || len(users) != 2 || users[0].Username != "alice" || users[1].Username != "carol" {
		t.Fatalf("listUser a: %s %v", resp.Body, err)
	}
	if resp := root.call(remoting.AuthCreateUser, map[string]string{"username": "alice"}, userBody(t, meta.UserInfo{Password: "x"})); resp.Code != remoting.NoPermission || resp.Remark != "The user is existed" {
		t.Fatalf("second createUser: %d %s", resp.Code, resp.Remark)
	}
	if resp := root.call(remoting.AuthCreateUser, map[string]string{}, userBody(t, meta.UserInfo{Password: "x"})); resp.Code != remoting.InvalidParameter {
		t.Fatalf("createUser without a username: %d %s", resp.Code, resp.Remark)
	}
	if resp := root.call(remoting.AuthCreateUser, map[string]string{"username": "dave"}, nil); resp.Code != remoting.NoPermission || resp.Remark != "password can not be blank" {
		t.Fatalf("createUser without a password: %d %s", resp.Code, resp.Remark)
	}

	// A Normal user allowed the cluster manages users, but not Super ones.
	root.must(remoting.AuthCreateACL, map[string]string{"subject": "User:alice"}, aclBody(t, "User:alice",
		meta.PolicyEntryInfo{Resource: "Cluster:*", Actions: []string{"Update", "Get"}, Decision: "Allow"}))
	alice.must(remoting.AuthCreateUser, map[string]string{"username": "bob"}, userBody(t, meta.UserInfo{Password: "bob-password"}))
	if resp := alice.call(remoting.AuthCreateUser, map[string]string{"username": "boss"}, userBody(t, meta.UserInfo{Password: "pw", UserType: "Super"})); resp.Code != remoting.SystemError || resp.Remark != "The super user can only be create by super user" {
		t.Fatalf("a Normal user creating a Super one: %d %s", resp.Code, resp.Remark)
	}
	wantNoPermission(t, alice.call(remoting.AuthDeleteUser, map[string]string{"username": "root"}, nil), "The super user can only be update by super user")
	wantNoPermission(t, alice.call(remoting.AuthUpdateUser, map[string]string{"username": "root"}, userBody(t, meta.UserInfo{Password: "mine"})), "The super user can only be update by super user")

	// Access lists: validation, get, list with filters, delete of one entry.
	wantNoPermission(t, root.call(remoting.AuthCreateACL, map[string]string{"subject": "User:ghost"}, aclBody(t, "User:ghost",
		meta.PolicyEntryInfo{Resource: "Topic:t", Actions: []string{"Pub"}, Decision: "Allow"})), "The subject of User:ghost is not exist.")
	if resp := root.call(remoting.AuthCreateACL, map[string]string{"subject": "User:bob"}, aclBody(t, "User:bob",
		meta.PolicyEntryInfo{Resource: "Topic:t", Actions: []string{"Any"}, Decision: "Allow"})); resp.Code != remoting.NoPermission {
		t.Fatalf("an Any action accepted: %d %s", resp.Code, resp.Remark)
	}
	if resp := root.call(remoting.AuthCreateACL, map[string]string{"subject": "User:bob"}, []byte(`{"subject":"User:bob"}`)); resp.Code != remoting.SystemError || resp.Remark != "The body of acl is null" {
		t.Fatalf("an ACL without policies: %d %s", resp.Code, resp.Remark)
	}
	root.must(remoting.AuthCreateACL, map[string]string{"subject": "User:bob"}, aclBody(t, "",
		meta.PolicyEntryInfo{Resource: "Topic:b1", Actions: []string{"Pub"}, SourceIps: []string{"10.0.0.0/8"}, Decision: "Allow"},
		meta.PolicyEntryInfo{Resource: "Group:bg", Actions: []string{"Sub"}, Decision: "Allow"}))
	resp = root.must(remoting.AuthGetACL, map[string]string{"subject": "User:bob"}, nil)
	var got meta.AclInfo
	if err := json.Unmarshal(resp.Body, &got); err != nil || got.Subject != "User:bob" || len(got.Policies) != 1 || len(got.Policies[0].Entries) != 2 ||
		got.Policies[0].Entries[0].SourceIps[0] != "10.0.0.0/8" {
		t.Fatalf("getAcl: %s %v", resp.Body, err)
	}
	resp = root.must(remoting.AuthListACL, map[string]string{"resourceFilter": "Group"}, nil)
	var list []meta.AclInfo
	if err := json.Unmarshal(resp.Body, &list); err != nil || len(list) != 2 || list[1].Subject != "User:bob" || len(list[1].Policies[0].Entries) != 1 {
		t.Fatalf("listAcl resourceFilter=Group: %s %v", resp.Body, err)
	}
	root.must(remoting.AuthDeleteACL, map[string]string{"subject": "User:bob", "resource": "Topic:b1"}, nil)
	resp = root.must(remoting.AuthGetACL, map[string]string{"subject": "User:bob"}, nil)
	if err := json.Unmarshal(resp.Body, &got); err != nil || len(got.Policies[0].Entries) != 1 || got.Policies[0].Entries[0].Resource != "Group:bg" {
		t.Fatalf("after deleting Topic:b1: %s %v", resp.Body, err)
	}
	root.must(remoting.AuthDeleteUser, map[string]string{"username": "bob"}, nil)
	wantNoPermission(t, root.call(remoting.AuthGetACL, map[string]string{"subject": "User:bob"}, nil), "The subject is not exist.")
	if n, _ := b.auth.acls.Count(); n != 1 {
		t.Fatalf("%d access lists after bob's deletion, want alice's only", n)
	}
}

// Users and access lists survive a restart, and the init user is not
// recreated over an edited one.
func TestAuthPersistsAcrossRestart(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, authSettings(nil))
	c := b.client(nil)
	root := asUser{t, c, "root", "root-password"}
	setUpAlice(t, root)
	root.must(remoting.AuthUpdateUser, map[string]string{"username": "root"}, userBody(t, meta.UserInfo{Password: "new-root-password"}))
	b.stop()

	b = startTestBrokerAt(t, store, authSettings(nil))
	c = b.client(nil)
	alice := asUser{t, c, "alice", "alice-password"}
	wantSuccess(t, alice.call(remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("after restart")), "alice after a restart")
	wantNoPermission(t, alice.call(remoting.SendMessageV2, sendV2Fields("Other"), []byte("x")),
		"User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
	wantNoPermission(t, invoke(t, c, signedReq("root", "root-password", remoting.GetBrokerRuntimeInfo, map[string]string{"k": "v"}, nil)), "check signature failed.")
	wantSuccess(t, invoke(t, c, signedReq("root", "new-root-password", remoting.SendMessageV2, sendV2Fields("X"), []byte("x"))), "root with its new password")
}

// migrateAuthFromV1Enabled imports plain_acl.yml: the admin account is a
// Super user, the others keep their topic permissions.
func TestAuthMigratesPlainACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(aclTestFile), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, map[string]string{"authenticationEnabled": "true", "authorizationEnabled": "true",
		"migrateAuthFromV1Enabled": "true", "plainAclFile": file, "autoCreateTopicEnable": "true"})
	c := b.client(nil)
	wantSuccess(t, invoke(t, c, signedReq("adminKey1", "admin-secret", remoting.SendMessageV2, sendV2Fields("AnyTopic"), []byte("x"))), "migrated admin")
	if u, ok, _ := b.auth.users.Get("adminKey1"); !ok || u.UserType != "Super" {
		t.Fatalf("adminKey1 migrated as %+v", u)
	}
	wantSuccess(t, invoke(t, c, signedReq("producer1", "producer-secret", remoting.SendMessageV2, sendV2Fields("AclT"), []byte("x"))), "producer1 to AclT")
	resp := invoke(t, c, signedReq("producer1", "producer-secret", remoting.SendMessageV2, sendV2Fields("topicB"), []byte("x")))
	if resp.Code != remoting.NoPermission || !strings.HasPrefix(resp.Remark, "User:producer1 has no permission to access Topic:topicB") {
		t.Fatalf("producer1 to topicB: %d %s", resp.Code, resp.Remark)
	}
}

func TestAuthConfigErrors(t *testing.T) {
	err := startError(t, map[string]string{"storePathRootDir": t.TempDir(), "listenPort": "0", "aclEnable": "true",
		"authenticationEnabled": "true"})
	if err == nil || !strings.Contains(err.Error(), "aclEnable") || !strings.Contains(err.Error(), "migrateAuthFromV1Enabled") {
		t.Fatalf("both ACLs on: %v", err)
	}
	err = startError(t, map[string]string{"storePathRootDir": t.TempDir(), "listenPort": "0", "authenticationEnabled": "true",
		"migrateAuthFromV1Enabled": "true", "plainAclFile": filepath.Join(t.TempDir(), "missing.yml")})
	if err == nil || !strings.Contains(err.Error(), "migrateAuthFromV1Enabled") {
		t.Fatalf("migration without a file: %v", err)
	}
}

// FuzzAuthNeeds maps arbitrary requests to what they need under ACL 2.0:
// never a panic, and every need names a resource with at least one action.
func FuzzAuthNeeds(f *testing.F) {
	f.Add(int32(remoting.SendMessageV2), "a=pg;b=%RETRY%g", []byte(nil))
	f.Add(int32(remoting.HeartBeat), "k=v", []byte(`{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T"}]}]}`))
	f.Add(int32(remoting.LockBatchMQ), "k=v", []byte(`{"consumerGroup":"g","mqSet":[{"topic":"%RETRY%g"},{"topic":"T"}]}`))
	f.Add(int32(remoting.BatchAckMessage), "k=v", []byte(`{"acks":[{"consumerGroup":"g","topic":"T"}]}`))
	f.Add(int32(remoting.GetConsumeStats), "consumerGroup=g;topicList=a;b;;c", []byte(nil))
	f.Add(int32(remoting.UpdateAndCreateSubscriptionGroupList), "k=v", []byte(`{"groupConfigList":[{"groupName":"g"}]}`))
	f.Add(int32(remoting.AuthCreateUser), "username=u", []byte(nil))
	f.Fuzz(func(t *testing.T, code int32, ext string, body []byte) {
		h := map[string]string{}
		for _, kv := range strings.Split(ext, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				h[k] = v
			}
		}
		for _, n := range authNeeds(remoting.NewRequest(code, h, body), "C") {
			if n.Resource.Type == 0 || len(n.Actions) == 0 {
				t.Fatalf("code %d: need %+v", code, n)
			}
		}
	})
}

// The request-to-resource mapping of RocketMQ 5.3's
// DefaultAuthorizationContextBuilder (and the annotations of its headers),
// with the requests it leaves unchecked that rocketkv checks.
func TestAuthNeedsTable(t *testing.T) {
	for _, c := range []struct {
		code int32
		ext  string
		body string
		want string
	}{
		{remoting.SendMessage, "topic=T&group=pg", "", "Topic:T Pub"},
		{remoting.SendMessage, "topic=%RETRY%g", "", "Group:g Sub"},
		{remoting.SendMessageV2, "b=T&a=pg", "", "Topic:T Pub"},
		{remoting.SendMessageV2, "topic=T", "", "Topic:T Pub"},
		{remoting.SendBatchMessage, "b=%RETRY%g&a=g2", "", "Group:g Sub"},
		{remoting.SendMessage, "topic=%RETRY%victim&group=mine", "", "Group:victim Sub"},
		{remoting.SendReplyMessageV2, "b=R", "", "Topic:R Pub"},
		{remoting.RecallMessage, "topic=T", "", "Topic:T Pub"},
		{remoting.EndTransaction, "topic=T", "", "Topic:T Pub"},
		{remoting.EndTransaction, "producerGroup=pg", "", ""},
		{remoting.ConsumerSendMsgBack, "group=g&originTopic=T", "", "Topic:T Sub|Group:g Sub"},
		{remoting.ConsumerSendMsgBack, "group=g", "", "Group:g Sub"},
		{remoting.ViewMessageByID, "offset=1&topic=T", "", "Topic:T Get"},
		{remoting.ViewMessageByID, "offset=1", "", "Topic: Get"},
		{remoting.PullMessage, "topic=T&consumerGroup=g", "", "Topic:T Sub|Group:g Sub"},
		{remoting.PullMessage, "topic=%RETRY%g&consumerGroup=g", "", "Group:g Sub"},
		{remoting.PullMessage, "topic=%RETRY%victim&consumerGroup=g", "", "Group:victim Sub|Group:g Sub"},
		{remoting.UpdateConsumerOffset, "consumerGroup=g&topic=%RETRY%victim", "", "Group:victim Sub,Update|Group:g Sub,Update"},
		{remoting.LitePullMessage, "topic=T&consumerGroup=g", "", "Topic:T Sub|Group:g Sub"},
		{remoting.PopMessage, "consumerGroup=g&topic=T", "", "Group:g Sub|Topic:T Sub"},
		{remoting.PopMessage, "consumerGroup=g&topic=%RETRY%g", "", "Group:g Sub|Group:g Sub"},
		{remoting.AckMessage, "consumerGroup=g&topic=T", "", "Group:g Sub|Topic:T Sub"},
		{remoting.BatchAckMessage, "k=v", `{"acks":[{"consumerGroup":"g","topic":"T"}]}`, "Group:g Sub|Topic:T Sub"},
		{remoting.QueryMessage, "topic=T&key=k", "", "Topic:T Sub,Get"},
		{remoting.HeartBeat, "k=v", `{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T"},{"topic":"%RETRY%g"}]}]}`, "Group:g Sub|Topic:T Sub"},
		{remoting.HeartBeat, "k=v", `{"producerDataSet":[{"groupName":"pg"}]}`, ""},
		{remoting.UnregisterClient, "producerGroup=pg", "", ""},
		{remoting.UnregisterClient, "consumerGroup=g", "", "Group:g Sub"},
		{remoting.GetConsumerListByGroup, "consumerGroup=g", "", "Group:g Sub,Get"},
		{remoting.QueryConsumerOffset, "consumerGroup=g&topic=T", "", "Topic:T Sub,Get|Group:g Sub,Get"},
		{remoting.UpdateConsumerOffset, "consumerGroup=g&topic=T", "", "Topic:T Sub,Update|Group:g Sub,Update"},
		{remoting.LockBatchMQ, "k=v", `{"consumerGroup":"g","mqSet":[{"topic":"T"}]}`, "Group:g Sub|Topic:T Sub"},
		{remoting.UpdateAndCreateTopic, "topic=T", "", "Topic:T Create"},
		{remoting.UpdateAndCreateTopicList, "k=v", `{"topicConfigList":[{"topicName":"A"},{"topicName":"B"}]}`, "Topic:A Create|Topic:B Create"},
		{remoting.UpdateAndCreateSubscriptionGroup, "k=v", `{"groupName":"g"}`, "Group:g Create"},
		{remoting.DeleteTopicInBroker, "topic=T", "", "Topic:T Delete"},
		{remoting.DeleteSubscriptionGroup, "groupName=g", "", "Group:g Delete"},
		{remoting.GetConsumeStats, "consumerGroup=g&topicList=A;B", "", "Group:g Get|Topic:A Get|Topic:B Get"},
		{remoting.InvokeBrokerToResetOffset, "group=g&topic=T", "", "Group:g Update|Topic:T Update"},
		{remoting.GetMaxOffset, "topic=T&queueId=0", "", "Topic:T Get"},
		{remoting.GetProducerConnectionList, "producerGroup=pg", "", "Cluster:C Get"},
		{remoting.ViewBrokerStatsData, "statsName=x", "", "Cluster:C Get"},
		{remoting.AuthCreateUser, "username=u", "", "Cluster:C Update"},
		{remoting.AuthListACL, "subjectFilter=u", "", "Cluster:C Get"},
		{remoting.UpdateBrokerConfig, "k=v", "", "Cluster:C Update"},
		{remoting.QueryAssignment, "k=v", `{"topic":"T","consumerGroup":"g"}`, "Group:g Sub|Topic:T Sub"},
		{remoting.SetMessageRequestMode, "k=v", `{"topic":"T","consumerGroup":"g","mode":"POP"}`, "Group:g Update|Topic:T Update"},
		{remoting.CheckpointIndex, "dir=x", "", "Cluster:C Get"},
		{remoting.GetAllTopicConfig, "k=v", "", ""},
		{remoting.GetBrokerRuntimeInfo, "k=v", "", ""},
		{remoting.SendMessage, "", "", ""},
	} {
		h := map[string]string{}
		for _, kv := range strings.Split(c.ext, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				h[k] = v
			}
		}
		var got []string
		for _, n := range authNeeds(remoting.NewRequest(c.code, h, []byte(c.body)), "C") {
			got = append(got, n.String())
		}
		if strings.Join(got, "|") != c.want {
			t.Errorf("code %d %s %s: %q, want %q", c.code, c.ext, c.body, strings.Join(got, "|"), c.want)
		}
	}
}

// With innerClientAuthenticationCredentials the broker signs its
// registration with the name servers as that user, as RocketMQ's
// BrokerOuterAPI does, and the user exists as a Super user.
func TestAuthInnerCredentialsSignRegistration(t *testing.T) {
	got := make(chan map[string]string, 4)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.RegisterBroker, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		fields := maps.Clone(req.ExtFields)
		if !acl.SignatureMatches(fields, req.Body, req.Version, "inner-password") {
			fields["signature-check"] = "failed"
		}
		select {
		case got <- fields:
		default:
		}
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.Success, ""))
	})
	nsAddr := startRemotingServer(t, mux)
	b := startTestBroker(t, authSettings(map[string]string{"namesrvAddr": nsAddr,
		"innerClientAuthenticationCredentials": `{"accessKey":"inner","secretKey":"inner-password"}`}))
	select {
	case f := <-got:
		if f[acl.FieldAccessKey] != "inner" || f["signature-check"] == "failed" {
			t.Fatalf("registration fields %v: not signed as inner", f)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no registration")
	}
	if u, ok, err := b.auth.users.Get("inner"); err != nil || !ok || u.UserType != "Super" {
		t.Fatalf("inner user %+v %v %v", u, ok, err)
	}
}

// TestAuthAnswer: a refusal is NO_PERMISSION with RocketMQ's remark; a
// failure of the tables is SYSTEM_ERROR, not a refusal.
func TestAuthAnswer(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   int32
		remark string
	}{
		{&auth.Denied{Reason: "check signature failed."}, remoting.NoPermission, "check signature failed."},
		{fmt.Errorf("read user alice: %w", os.ErrClosed), remoting.SystemError, "access control: read user alice: file already closed"},
	} {
		if code, remark := authAnswer(c.err); code != c.code || remark != c.remark {
			t.Errorf("%v: answer %d %q, want %d %q", c.err, code, remark, c.code, c.remark)
		}
	}
}

// TestAuthUserRequest: AUTH_CREATE_USER and AUTH_UPDATE_USER without a
// username, or with a body that is not a UserInfo, are answered as
// RocketMQ 5.3 answers them.
func TestAuthUserRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		ext    map[string]string
		body   string
		code   int32
		remark string
	}{
		{"no username", nil, `{"password":"pw"}`, remoting.InvalidParameter, "The username is blank"},
		{"bad body", map[string]string{"username": "u"}, `{"password":`, remoting.SystemError, "decode UserInfo: "},
	} {
		_, _, refused := userRequest(remoting.NewRequest(remoting.AuthCreateUser, c.ext, []byte(c.body)))
		if refused == nil || refused.Code != c.code || !strings.HasPrefix(refused.Remark, c.remark) {
			t.Errorf("%s: answer %+v, want %d %q", c.name, refused, c.code, c.remark)
		}
	}
	name, in, refused := userRequest(remoting.NewRequest(remoting.AuthUpdateUser, map[string]string{"username": "u"}, nil))
	if refused != nil || name != "u" || in != (meta.UserInfo{}) {
		t.Errorf("no body: %q %+v %+v, want u and an empty user", name, in, refused)
	}
}

// migrateAuthFromV1Enabled passes over an account whose user
// AUTH_CREATE_USER would refuse (plain_acl.yml takes seven spaces as an
// access key) and imports an account whose access list does not compile
// without the list, as RocketMQ's AuthMigrator; the others are imported.
func TestAuthMigrationPassesOverRefusedAccounts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte("accounts:\n  - {accessKey: '       ', secretKey: '12345678'}\n"+
		"  - {accessKey: retryKey1, secretKey: retry-secret, topicPerms: ['%RETRY%=SUB']}\n"+
		"  - {accessKey: producer1, secretKey: producer-secret, topicPerms: ['AclT=PUB']}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, map[string]string{"authenticationEnabled": "true", "authorizationEnabled": "true",
		"migrateAuthFromV1Enabled": "true", "plainAclFile": file})
	if _, ok, err := b.auth.users.Get("       "); err != nil || ok {
		t.Fatalf("the blank access key was imported as a user: %v %v", ok, err)
	}
	if _, ok, err := b.auth.users.Get("retryKey1"); err != nil || !ok {
		t.Fatalf("retryKey1 not imported: %v %v", ok, err)
	}
	if a, ok, err := b.auth.acls.Get(auth.Subject("retryKey1")); err != nil || ok {
		t.Fatalf("retryKey1's access list, which does not compile, was imported: %+v %v %v", a, ok, err)
	}
	if _, ok, err := b.auth.acls.Get(auth.Subject("producer1")); err != nil || !ok {
		t.Fatalf("producer1's access list not imported: %v %v", ok, err)
	}
}
