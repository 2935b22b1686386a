package broker

import (
	"context"
	"encoding/base64"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/remoting"
)

const aclTestFile = `
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [AclT=PUB]
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclT=SUB]
    groupPerms: [cg-acl=SUB]
  - accessKey: adminKey1
    secretKey: admin-secret
    admin: true
`

// signedReq returns a request signed as a RocketMQ client signs it.
func signedReq(key, secret string, code int32, ext map[string]string, body []byte) *remoting.Command {
	f := maps.Clone(ext)
	if f == nil {
		f = map[string]string{}
	}
	f[acl.FieldAccessKey] = key
	f[acl.FieldSignature] = base64.StdEncoding.EncodeToString(acl.Sign(f, body, secret, remoting.CurrentVersion, false))
	return remoting.NewRequest(code, f, body)
}

func invoke(t *testing.T, c *remoting.Client, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, req)
	if err != nil {
		t.Fatalf("invoke %d: %v", req.Code, err)
	}
	return resp
}

func sendV2Fields(topic string) map[string]string {
	return map[string]string{"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": ""}
}

func wantRefused(t *testing.T, resp *remoting.Command, reason string) {
	t.Helper()
	if resp.Code != remoting.SystemError || resp.Remark != "org.apache.rocketmq.acl.common.AclException: "+reason {
		t.Fatalf("answer %d %q, want SYSTEM_ERROR with the AclException %q", resp.Code, resp.Remark, reason)
	}
}

func wantSuccess(t *testing.T, resp *remoting.Command, what string) {
	t.Helper()
	if resp.Code != remoting.Success {
		t.Fatalf("%s: %d %s", what, resp.Code, resp.Remark)
	}
}

// startACLBroker starts a broker checking the accounts of aclTestFile,
// written to the file it returns, and a client of it.
func startACLBroker(t *testing.T) (*testBroker, *remoting.Client, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(aclTestFile), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, map[string]string{"aclEnable": "true", "plainAclFile": file, "autoCreateTopicEnable": "true"})
	return b, b.client(nil), file
}

func TestACLChecksEveryRequest(t *testing.T) {
	b, c, file := startACLBroker(t)
	admin := func(code int32, ext map[string]string) *remoting.Command {
		return invoke(t, c, signedReq("adminKey1", "admin-secret", code, ext, nil))
	}
	producer := func(topic, body string) *remoting.Command {
		return invoke(t, c, signedReq("producer1", "producer-secret", remoting.SendMessageV2, sendV2Fields(topic), []byte(body)))
	}

	wantRefused(t, call(t, c, remoting.SendMessageV2, sendV2Fields("AclT"), []byte("x")), "No accessKey is configured")
	wantRefused(t, call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil), "No accessKey is configured")
	wantRefused(t, invoke(t, c, signedReq("stranger1", "whatever", remoting.HeartBeat, nil, []byte("{}"))), "No acl config for stranger1")

	// Only an admin account creates topics.
	create := map[string]string{"topic": "AclT", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
		"perm": "6", "topicFilterType": "SINGLE_TAG"}
	wantRefused(t, invoke(t, c, signedReq("producer1", "producer-secret", remoting.UpdateAndCreateTopic, create, nil)),
		"Need admin permission for request code=17, but accessKey=producer1 is not")
	wantSuccess(t, admin(remoting.UpdateAndCreateTopic, create), "an admin creates a topic")

	wantSuccess(t, producer("AclT", "m0"), "a send with PUB on the topic")
	wantRefused(t, producer("OtherT", "m1"), "No default permission for topic:OtherT")
	// A body changed after signing fails the signature.
	tampered := signedReq("producer1", "producer-secret", remoting.SendMessageV2, sendV2Fields("AclT"), []byte("signed"))
	tampered.Body = []byte("changed")
	wantRefused(t, invoke(t, c, tampered), "Check signature failed for accessKey=producer1")
	// A refused oneway send is not stored.
	if err := c.InvokeOneway(context.Background(), remoting.NewRequest(remoting.SendMessageV2, sendV2Fields("AclT"), []byte("oneway"))); err != nil {
		t.Fatal(err)
	}

	// The consumer pulls AclT as cg-acl, and no other group.
	pull := func(group string) *remoting.Command {
		return invoke(t, c, signedReq("consumer1", "consumer-secret", remoting.PullMessage,
			pullReq(group, "AclT", 0, 0, 0, 0, "*"), nil))
	}
	b.caughtUp()
	resp := pull("cg-acl")
	wantSuccess(t, resp, "a pull with SUB on topic and group")
	if got := decodeRecords(t, resp.Body); len(got) != 1 || string(got[0].Body) != "m0" {
		t.Fatalf("pulled %d messages, want only m0 (the refused sends stored nothing)", len(got))
	}
	wantRefused(t, pull("cg-other"), "No default permission for group:cg-other")
	// The reads RocketMQ's plain ACL leaves open are checked as pulls.
	lite := pullReq("cg-other", "AclT", 0, 0, 0, 0, "*")
	wantRefused(t, invoke(t, c, signedReq("consumer1", "consumer-secret", remoting.LitePullMessage, lite, nil)),
		"No default permission for group:cg-other")
	popReq := map[string]string{"consumerGroup": "cg-other", "topic": "AclT", "queueId": "-1", "maxMsgNums": "1",
		"invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0"}
	wantRefused(t, invoke(t, c, signedReq("consumer1", "consumer-secret", remoting.PopMessage, popReq, nil)),
		"No default permission for group:cg-other")
	// A V2 send naming its topic by the long name is checked as well.
	long := sendV2Fields("OtherT")
	delete(long, "b")
	long["topic"] = "OtherT"
	wantRefused(t, invoke(t, c, signedReq("producer1", "producer-secret", remoting.SendMessageV2, long, []byte("x"))),
		"No default permission for topic:OtherT")
	// So is the list form of topic creation.
	list := []byte(`{"topicConfigList":[{"topicName":"AclT","readQueueNums":8,"writeQueueNums":8,"perm":6}]}`)
	wantRefused(t, invoke(t, c, signedReq("producer1", "producer-secret", remoting.UpdateAndCreateTopicList, nil, list)),
		"Need admin permission for request code=18, but accessKey=producer1 is not")
	wantRefused(t, invoke(t, c, signedReq("consumer1", "consumer-secret", remoting.SendMessageV2, sendV2Fields("AclT"), nil)),
		"No permission for topic:AclT")
	hb := `{"clientID":"c1","consumerDataSet":[{"groupName":"cg-acl","subscriptionDataSet":[{"topic":"OtherT","subString":"*"}]}]}`
	wantRefused(t, invoke(t, c, signedReq("consumer1", "consumer-secret", remoting.HeartBeat, nil, []byte(hb))),
		"No default permission for topic:OtherT")
	offset := map[string]string{"consumerGroup": "cg-acl", "topic": "AclT", "queueId": "0", "commitOffset": "1"}
	wantSuccess(t, invoke(t, c, signedReq("consumer1", "consumer-secret", remoting.UpdateConsumerOffset, offset, nil)),
		"a consumer commits its offset")

	// An edit of the file takes effect without a restart.
	edited := strings.Replace(aclTestFile, "topicPerms: [AclT=PUB]", "topicPerms: [AclT=PUB, OtherT=PUB]", 1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edited ACL file in force", func() bool { return producer("OtherT", "m2").Code == remoting.Success })
}

func TestACLFileFromRocketMQHome(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "conf", "plain_acl.yml"), []byte(aclTestFile), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROCKETMQ_HOME", home)
	b := startTestBroker(t, map[string]string{"aclEnable": "true"})
	c := b.client(nil)
	wantRefused(t, call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil), "No accessKey is configured")
	wantSuccess(t, invoke(t, c, signedReq("producer1", "producer-secret", remoting.GetBrokerRuntimeInfo, nil, nil)),
		"an authenticated request without resources")
}

func TestACLRefusesToStartWithoutItsFile(t *testing.T) {
	t.Setenv("ROCKETMQ_HOME", "")
	dir := t.TempDir()
	for name, settings := range map[string]map[string]string{
		"no file named": {"aclEnable": "true"},
		"missing file":  {"aclEnable": "true", "plainAclFile": filepath.Join(dir, "missing.yml")},
	} {
		settings["storePathRootDir"] = t.TempDir()
		if err := startError(t, settings); err == nil || !strings.Contains(err.Error(), "aclEnable") {
			t.Errorf("%s: %v, want an error naming aclEnable", name, err)
		}
	}
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("accounts:\n  - {accessKey: short, secretKey: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := startError(t, map[string]string{"aclEnable": "true", "plainAclFile": bad, "storePathRootDir": t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "longer than 6") {
		t.Errorf("a bad file: %v, want the parse error", err)
	}
}

func TestACLAdminRequestsEditTheFile(t *testing.T) {
	b, c, file := startACLBroker(t)
	admin := func(code int32, ext map[string]string) *remoting.Command {
		return invoke(t, c, signedReq("adminKey1", "admin-secret", code, ext, nil))
	}
	info := func() map[string]string {
		resp := admin(remoting.GetBrokerClusterACLInfo, nil)
		wantSuccess(t, resp, "GET_BROKER_CLUSTER_ACL_INFO")
		return resp.ExtFields
	}
	if got := info(); got["brokerName"] != b.cfg.BrokerName || got["clusterName"] != b.cfg.BrokerClusterName ||
		got["brokerAddr"] != b.Addr() || !strings.Contains(got["version"], `"counter":0`) ||
		!strings.Contains(got["allAclFileVersion"], file) {
		t.Fatalf("ACL info %v", got)
	}

	// An account may not edit the ACL, even its own entry.
	grant := map[string]string{"accessKey": "producer1", "secretKey": "producer-secret", "admin": "false",
		"defaultTopicPerm": "DENY", "topicPerms": "AclT=PUB,OtherT=PUB"}
	wantRefused(t, invoke(t, c, signedReq("producer1", "producer-secret", remoting.UpdateAndCreateACLConfig, grant, nil)),
		"Need admin permission for request code=50, but accessKey=producer1 is not")
	send := func() *remoting.Command {
		return invoke(t, c, signedReq("producer1", "producer-secret", remoting.SendMessageV2, sendV2Fields("OtherT"), []byte("x")))
	}
	wantRefused(t, send(), "No default permission for topic:OtherT")
	// The admin grants it; the grant is in force at once and in the file.
	wantSuccess(t, admin(remoting.UpdateAndCreateACLConfig, grant), "UPDATE_AND_CREATE_ACL_CONFIG")
	wantSuccess(t, send(), "a send the admin just granted")
	if text, err := os.ReadFile(file); err != nil || !strings.Contains(string(text), "OtherT=PUB") {
		t.Fatalf("the grant is not in the file: %v\n%s", err, text)
	}
	if got := info(); !strings.Contains(got["version"], `"counter":1`) {
		t.Fatalf("version after an edit: %s", got["version"])
	}
	bad := map[string]string{"accessKey": "producer1", "secretKey": "producer-secret", "topicPerms": "AclT=pub"}
	if resp := admin(remoting.UpdateAndCreateACLConfig, bad); resp.Code != remoting.UpdateAndCreateACLConfigFailed ||
		!strings.Contains(resp.Remark, `"pub"`) {
		t.Fatalf("a bad permission: %d %s", resp.Code, resp.Remark)
	}

	// The global white list admits an unsigned client from loopback.
	wantRefused(t, call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil), "No accessKey is configured")
	wantSuccess(t, admin(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "127.0.0.1,::1", "aclFileFullPath": file}),
		"UPDATE_GLOBAL_WHITE_ADDRS_CONFIG")
	wantSuccess(t, call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil), "an unsigned request from a white-listed address")
	if resp := admin(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "", "aclFileFullPath": "/etc/other.yml"}); resp.Code != remoting.UpdateGlobalWhiteAddrsConfigFailed {
		t.Fatalf("another file named: %d %s", resp.Code, resp.Remark)
	}
	// The white list admits unsigned requests, but not edits of the ACL.
	wantRefused(t, call(t, c, remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "*"}, nil),
		"No accessKey is configured")
	wantSuccess(t, admin(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": ""}), "emptying the white list")
	wantRefused(t, call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil), "No accessKey is configured")

	// Deleting the account locks it out.
	wantSuccess(t, admin(remoting.DeleteACLConfig, map[string]string{"accessKey": "producer1"}), "DELETE_ACL_CONFIG")
	wantRefused(t, send(), "No acl config for producer1")
	if resp := admin(remoting.DeleteACLConfig, map[string]string{"accessKey": "producer1"}); resp.Code != remoting.DeleteACLConfigFailed {
		t.Fatalf("deleting it again: %d %s", resp.Code, resp.Remark)
	}
}

func TestACLAdminRequestsWithoutACL(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for code, want := range map[int32]int32{
		remoting.UpdateAndCreateACLConfig:     remoting.UpdateAndCreateACLConfigFailed,
		remoting.DeleteACLConfig:              remoting.DeleteACLConfigFailed,
		remoting.UpdateGlobalWhiteAddrsConfig: remoting.UpdateGlobalWhiteAddrsConfigFailed,
		remoting.GetBrokerClusterACLInfo:      remoting.SystemError,
	} {
		resp := call(t, c, code, map[string]string{"accessKey": "someone1", "secretKey": "secret123", "globalWhiteAddrs": "*"}, nil)
		if resp.Code != want || !strings.Contains(resp.Remark, "aclEnable=false") {
			t.Errorf("code %d without ACL: %d %s", code, resp.Code, resp.Remark)
		}
	}
}

// A POP consumer acks, and changes the invisible time of, a retried
// message under the group's POP retry topic (%RETRY%group_T or
// %RETRY%group+T, as the Java client sends it): the check reads it as T,
// not as a group "group_T" no account has, so the consumer's ack is taken
// and the message is not redelivered until it is dead. Another topic
// inside the retry topic's name still needs its own permission.
func TestACLReadsAPopRetryTopicAsItsTopic(t *testing.T) {
	_, c, _ := startACLBroker(t)
	settle := func(code int32, topic string) *remoting.Command {
		ext := map[string]string{"consumerGroup": "cg-acl", "topic": topic, "queueId": "0",
			"extraInfo": "0 1 2 3 4 5 6", "offset": "0", "invisibleTime": "10000"}
		return invoke(t, c, signedReq("consumer1", "consumer-secret", code, ext, nil))
	}
	for _, code := range []int32{remoting.AckMessage, remoting.ChangeMessageInvisibleTime} {
		for _, topic := range []string{"%RETRY%cg-acl_AclT", "%RETRY%cg-acl+AclT"} {
			if r := settle(code, topic); r.Code == remoting.SystemError && strings.Contains(r.Remark, "permission") {
				t.Errorf("code %d on %s by consumer1 (SUB on AclT and cg-acl): refused %q", code, topic, r.Remark)
			}
		}
		wantRefused(t, settle(code, "%RETRY%cg-acl_SecretT"), "No default permission for topic:SecretT")
	}
}
