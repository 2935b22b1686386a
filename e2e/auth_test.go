package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The ACL 2.0 admin request codes (RocketMQ's RequestCode).
const (
	codeAuthCreateUser = 3001
	codeAuthCreateACL  = 3006
	respNoPermission   = 16
)

// TestACL2WithSignedGoClients: with authenticationEnabled and
// authorizationEnabled, a Super user (initAuthenticationUser) creates a
// Normal user and its Allow policies through the admin requests; the
// unchanged Go client, signing as that user, sends and push-consumes its
// topic, and is refused a topic its policies do not name, with RocketMQ
// 5.3's NO_PERMISSION remark.
func TestACL2WithSignedGoClients(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{
		"authenticationEnabled=true", "authorizationEnabled=true",
		`initAuthenticationUser={"username":"e2eRoot","password":"root-secret"}`,
		`innerClientAuthenticationCredentials={"accessKey":"e2eInner","secretKey":"inner-secret"}`,
	}})
	const topic, other, group, n = "Acl2E2E", "Acl2Other", "cg-acl2-e2e", 20
	asRoot := func(code int, ext map[string]string, body []byte) {
		t.Helper()
		r, err := rawInvoke(b.addr, code, signedFields(ext, body, "e2eRoot", "root-secret"), body)
		if err != nil || r.Code != respSuccess {
			t.Fatalf("request %d as the super user: %v %+v", code, err, r)
		}
	}
	for _, tp := range []string{topic, other} {
		asRoot(codeUpdateAndCreateTopic, map[string]string{"topic": tp, "defaultTopic": "TBW102", "readQueueNums": "4",
			"writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, nil)
		waitRoute(t, ns.addr, tp, b.name)
	}
	asRoot(codeAuthCreateUser, map[string]string{"username": "e2eApp"}, []byte(`{"password":"app-secret","userType":"Normal"}`))
	acl, err := json.Marshal(map[string]any{"subject": "User:e2eApp", "policies": []any{map[string]any{"policyType": "Custom",
		"entries": []any{
			map[string]any{"resource": "Topic:" + topic, "actions": []string{"Pub", "Sub"}, "decision": "Allow"},
			map[string]any{"resource": "Group:" + group, "actions": []string{"Sub"}, "decision": "Allow"},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	asRoot(codeAuthCreateACL, map[string]string{"subject": "User:e2eApp"}, acl)

	creds := primitive.Credentials{AccessKey: "e2eApp", SecretKey: "app-secret"}
	p := newProducer(t, ns.addr, "pg-acl2", producer.WithCredentials(creds))
	for i := 0; i < n; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("acl2-%d", i)))); err != nil {
			t.Fatalf("signed send %d: %v", i, err)
		}
	}
	_, err = p.SendSync(context.Background(), primitive.NewMessage(other, []byte("refused")))
	if want := "User:e2eApp has no permission to access Topic:" + other + " from 127.0.0.1, no matched policies."; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("send to %s answered %v, want the refusal %q", other, err, want)
	}
	unsigned := newProducer(t, ns.addr, "pg-acl2-anonymous")
	if _, err := unsigned.SendSync(context.Background(), primitive.NewMessage(topic, []byte("anonymous"))); err == nil || !strings.Contains(err.Error(), "username cannot be null.") {
		t.Fatalf("unsigned send answered %v", err)
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithCredentials(creds))
	got.waitDistinct(t, n, 60*time.Second)
	if snap := got.snapshot(); len(snap) != n {
		t.Fatalf("consumed %d distinct messages, want %d (the refused sends stored nothing): %v", len(snap), n, snap)
	}
	if r, err := rawInvoke(b.addr, codeGetMaxOffset, signedFields(map[string]string{"topic": other, "queueId": "0"}, nil, "e2eApp", "app-secret"), nil); err != nil || r.Code != respNoPermission {
		t.Fatalf("GET_MAX_OFFSET of %s as e2eApp: %v %+v", other, err, r)
	}
}
