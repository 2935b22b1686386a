package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The accounts of TestACLWithSignedGoClients, in RocketMQ's plain_acl.yml.
const e2eACLFile = `
accounts:
  - accessKey: e2eProducer
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [AclE2E=PUB]
  - accessKey: e2eConsumer
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclE2E=SUB]
    groupPerms: [cg-acl-e2e=SUB]
  - accessKey: e2eAdmin1
    secretKey: admin-secret
    admin: true
`

// TestACLWithSignedGoClients: with aclEnable the unchanged Go client, given
// an account's credentials, creates a topic (admin), sends and
// push-consumes; without credentials, with a wrong secret or outside its
// permissions it is refused with RocketMQ's AclException.
func TestACLWithSignedGoClients(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(e2eACLFile), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"aclEnable=true", "plainAclFile=" + file}})
	const topic, n = "AclE2E", 20

	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.addr})),
		admin.WithCredentials(primitive.Credentials{AccessKey: "e2eAdmin1", SecretKey: "admin-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	// The Go admin signs only after a call that registers its ACL hook
	// (GetAllSubscriptionGroup does, CreateTopic does not; each such call
	// adds another hook, and two hooks sign over each other's signature).
	if _, err := adm.GetAllSubscriptionGroup(context.Background(), b.addr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTopic(context.Background(), admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.addr)); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns.addr, topic, "broker-a")

	refused := func(name string, creds *primitive.Credentials, want string) {
		t.Helper()
		var opts []producer.Option
		if creds != nil {
			opts = append(opts, producer.WithCredentials(*creds))
		}
		p := newProducer(t, ns.addr, "pg-acl-"+name, opts...)
		_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("refused-"+name)))
		if err == nil || !strings.Contains(err.Error(), "AclException: "+want) {
			t.Fatalf("%s: send answered %v, want the AclException %q", name, err, want)
		}
	}
	refused("anonymous", nil, "No accessKey is configured")
	refused("wrong-secret", &primitive.Credentials{AccessKey: "e2eProducer", SecretKey: "not-the-secret"},
		"Check signature failed for accessKey=e2eProducer")
	refused("consumer-account", &primitive.Credentials{AccessKey: "e2eConsumer", SecretKey: "consumer-secret"},
		"No permission for topic:AclE2E")

	p := newProducer(t, ns.addr, "pg-acl", producer.WithCredentials(primitive.Credentials{AccessKey: "e2eProducer", SecretKey: "producer-secret"}))
	for i := 0; i < n; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("acl-%d", i)))); err != nil {
			t.Fatalf("signed send %d: %v", i, err)
		}
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-acl-e2e", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithCredentials(primitive.Credentials{AccessKey: "e2eConsumer", SecretKey: "consumer-secret"}))
	got.waitDistinct(t, n, 60*time.Second)
	if snap := got.snapshot(); len(snap) != n {
		t.Fatalf("consumed %d distinct messages, want %d (the refused sends stored nothing): %v", len(snap), n, snap)
	}

	// A consumer whose account has no permission on its group is refused
	// at its heartbeat and pulls.
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{ns.addr}), consumer.WithGroupName("cg-not-granted"),
		consumer.WithInstance(uniqueInstance(t)), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithCredentials(primitive.Credentials{AccessKey: "e2eConsumer", SecretKey: "consumer-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	denied := newCollector()
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			denied.add(string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = c.Start()
	defer func() { _ = stopConsumer(c, "cg-not-granted", topic) }()
	b.waitLog(t, "No default permission for group:cg-not-granted", 30*time.Second)
	if snap := denied.snapshot(); len(snap) != 0 {
		t.Fatalf("a consumer without permission on its group received %d messages", len(snap))
	}
}

// signedFields returns ext with AccessKey and the Signature a RocketMQ
// client computes (HmacSHA1 of the values sorted by field name, then the
// body, Base64), written here apart from the broker's acl package.
func signedFields(ext map[string]string, body []byte, accessKey, secretKey string) map[string]string {
	out := map[string]string{"AccessKey": accessKey}
	for k, v := range ext {
		out[k] = v
	}
	names := make([]string, 0, len(out))
	for k := range out {
		names = append(names, k)
	}
	sort.Strings(names)
	mac := hmac.New(sha1.New, []byte(secretKey))
	for _, k := range names {
		mac.Write([]byte(out[k]))
	}
	mac.Write(body)
	out["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return out
}

// TestNodeAliOnsWithACL: ali-ons, the Node client, signs its requests its
// own way (its OnsChannel field, header values through toString); with
// aclEnable the broker accepts them and node/test.js sends, consumes and
// retries as without ACL, while the broker refuses nothing.
func TestNodeAliOnsWithACL(t *testing.T) {
	node, dir := aliOnsScript(t)
	t.Parallel()
	const topic, count = "NodeAliOnsACL", 20
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	acl := `accounts:
  - accessKey: rocketkv-ak
    secretKey: rocketkv-sk
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [` + topic + `=PUB|SUB]
  - accessKey: e2eAdmin1
    secretKey: admin-secret
    admin: true
`
	if err := os.WriteFile(file, []byte(acl), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"aclEnable=true", "plainAclFile=" + file}})
	create := map[string]string{"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
	if r, err := rawInvoke(b.addr, codeUpdateAndCreateTopic, create, nil); err != nil || !strings.Contains(r.Remark, "No accessKey is configured") {
		t.Fatalf("an unsigned topic creation: %v %+v", err, r)
	}
	r, err := rawInvoke(b.addr, codeUpdateAndCreateTopic, signedFields(create, nil, "e2eAdmin1", "admin-secret"), nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("a signed topic creation: %v %+v", err, r)
	}
	waitRoute(t, ns.addr, topic, b.name)

	runAliOns(t, node, dir, ns.addr, topic, count).checkDelivery(t, count)
	if n := b.countLog("request refused by the ACL"); n != 1 {
		t.Errorf("the broker refused %d requests, want only the unsigned topic creation", n)
	}
}
