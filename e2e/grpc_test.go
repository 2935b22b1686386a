package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// proxyProc is a started bin/proxy.
type proxyProc struct {
	*proc
	addr string
}

// startProxy starts the gRPC proxy on a free loopback port, finding
// brokers through the name server ns.
func startProxy(t testing.TB, ns *namesrv, sets ...string) *proxyProc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"--listen", addr, "-n", ns.addr, "--log-format", "json", "--log-level", "debug"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	p := startProc(t, "proxy", args...)
	waitListening(t, addr)
	return &proxyProc{proc: p, addr: addr}
}

// createTopicWithAttributes creates a topic with topic attributes given as
// mqadmin's -a writes them ("+message.type=FIFO").
func createTopicWithAttributes(t testing.TB, broker, topic string, queues int, attributes string) {
	t.Helper()
	n := strconv.Itoa(queues)
	r, err := rawInvoke(broker, codeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": n, "writeQueueNums": n,
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
		"attributes": attributes,
	}, nil)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if r.Code != respSuccess {
		t.Fatalf("create topic %s: code %d %s", topic, r.Code, r.Remark)
	}
}

// grpcResult is the RESULT line of node/grpc.js.
type grpcResult struct {
	Sent         int    `json:"sent"`
	SentOther    int    `json:"sentOther"`
	SentFifo     int    `json:"sentFifo"`
	PutBack      int    `json:"putBack"`
	CameBack     int    `json:"cameBack"`
	Redelivered  int    `json:"redelivered"`
	SimpleAcked  int    `json:"simpleAcked"`
	Leftover     int    `json:"leftover"`
	PushConsumed int    `json:"pushConsumed"`
	PushRetried  int    `json:"pushRetried"`
	Refused      string `json:"refused"`
	// TxnDelivered are the bodies a consumer of the transaction topic got,
	// TxnChecked those the producer's checker was asked about.
	TxnDelivered []string `json:"txnDelivered"`
	TxnChecked   []string `json:"txnChecked"`
	// DelayDelivered are the bodies a consumer of the delay topic got.
	DelayDelivered []string `json:"delayDelivered"`
	// CompactDelivered are the bodies a new group of the compacted topic
	// got.
	CompactDelivered []string `json:"compactDelivered"`
	Failures         []string `json:"failures"`
}

// TestNodeGRPCThroughProxy runs node/grpc.js: RocketMQ 5's Node.js client
// (rocketmq-client-nodejs, gRPC), unchanged, reaches the broker only
// through bin/proxy. Its producer sends count TagGrpc messages (keys and a
// user property) and count/2 TagOther ones; a message naming a system
// property is refused. A simple consumer receives every TagGrpc message
// and none of the others, puts every fifth back for a second and gets it
// again as its second delivery, acknowledges all, and then receives
// nothing more. A push consumer of a second group gets every message of
// the topic, every seventh TagGrpc message after failing it once. Six
// messages of one message group go to a FIFO topic, whose type also makes
// the client refuse a message without a group. On a transaction topic one
// transaction is committed, one rolled back and one left open, which the
// broker's check puts to the producer's checker through the proxy (it
// commits): a consumer gets the committed two only. On a delay topic one
// of two delay messages is recalled: a consumer gets the other, at its
// time. Then the broker's side: the topic holds what was sent, and the
// message group's messages are all in one queue.
func TestNodeGRPCThroughProxy(t *testing.T) {
	node, dir := nodeClientScript(t, "rocketmq-client-nodejs")
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"transactionTimeOut=1000", "transactionCheckInterval=1000", "recallMessageEnable=true"}})
	const topic, fifoTopic, txnTopic, delayTopic, count = "NodeGrpc", "NodeGrpcFifo", "NodeGrpcTxn", "NodeGrpcDelay", 20
	const compactTopic = "NodeGrpcCompact"
	createTopic(t, b.addr, topic, 4)
	createTopicWithAttributes(t, b.addr, fifoTopic, 4, "+message.type=FIFO")
	createTopicWithAttributes(t, b.addr, txnTopic, 2, "+message.type=TRANSACTION")
	createTopicWithAttributes(t, b.addr, delayTopic, 2, "+message.type=DELAY")
	createTopicWithAttributes(t, b.addr, compactTopic, 1, "+cleanup.policy=COMPACTION")
	for _, tp := range []string{topic, fifoTopic, txnTopic, delayTopic, compactTopic} {
		waitRoute(t, ns.addr, tp, b.name)
	}
	px := startProxy(t, ns)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "grpc.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ENDPOINT="+px.addr, "TOPIC="+topic, "FIFO_TOPIC="+fifoTopic,
		"TXN_TOPIC="+txnTopic, "DELAY_TOPIC="+delayTopic, "COMPACT_TOPIC="+compactTopic,
		"GROUP=node-grpc-cg", "COUNT="+strconv.Itoa(count), "TIMEOUT_MS=90000")
	out, err := cmd.CombinedOutput()
	t.Logf("node grpc.js output:\n%s", out)
	var r grpcResult
	readNodeResult(t, "grpc.js", out, &r)
	for _, f := range r.Failures {
		t.Errorf("grpc.js: %s", f)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) || err != nil {
		t.Fatalf("node grpc.js failed: %v", err)
	}
	if r.Sent != count || r.SentOther != count/2 || r.SentFifo != 6 {
		t.Errorf("sent %d TagGrpc, %d TagOther and %d FIFO messages, want %d, %d and 6", r.Sent, r.SentOther, r.SentFifo, count, count/2)
	}
	if !strings.Contains(r.Refused, "40007") || !strings.Contains(r.Refused, "UNIQ_KEY") {
		t.Errorf("a message with the system property UNIQ_KEY was refused with %q, want ILLEGAL_MESSAGE_PROPERTY_KEY (40007) naming it", r.Refused)
	}
	if r.SimpleAcked != count || r.Redelivered != 0 || r.Leftover != 0 {
		t.Errorf("simple consumer acknowledged %d of %d messages, got %d twice and %d after acknowledging all", r.SimpleAcked, count, r.Redelivered, r.Leftover)
	}
	if want := (count + 4) / 5; r.PutBack != want || r.CameBack != want {
		t.Errorf("simple consumer put %d messages back and got %d again, want %d each", r.PutBack, r.CameBack, want)
	}
	if want := count + count/2; r.PushConsumed != want {
		t.Errorf("push consumer consumed %d distinct messages, want %d", r.PushConsumed, want)
	}
	if want := (count + 6) / 7; r.PushRetried != want {
		t.Errorf("push consumer got %d failed messages again, want %d", r.PushRetried, want)
	}
	if got := strings.Join(r.TxnDelivered, ","); got != "txn-commit,txn-orphan" {
		t.Errorf("transaction consumer got %q, want the committed txn-commit and the checked-and-committed txn-orphan", got)
	}
	if !slices.Contains(r.TxnChecked, "txn-orphan") {
		t.Errorf("the producer's checker was asked about %q, want txn-orphan among them", r.TxnChecked)
	}
	if got := strings.Join(r.DelayDelivered, ","); got != "delay-keep" {
		t.Errorf("delay consumer got %q, want delay-keep only (delay-recall was recalled)", got)
	}
	if got := strings.Join(r.CompactDelivered, ","); got != "k1=v2,k2=v1" {
		t.Errorf("a new group of the compacted topic got %q, want the newest message of each key: k1=v2,k2=v1", got)
	}
	waitDispatched(t, b.addr, topic, 4, int64(count+count/2))
	waitDispatched(t, b.addr, fifoTopic, 4, 6)
	var used []int
	for q := range 4 {
		if n := maxOffset(t, b.addr, fifoTopic, q); n > 0 {
			used = append(used, q)
			if n != 6 {
				t.Errorf("FIFO queue %d holds %d messages of the group, want all 6 in one queue", q, n)
			}
		}
	}
	if len(used) != 1 {
		t.Errorf("the message group's messages are in queues %v, want one", used)
	}
}

// nodeClientScript returns node and the e2e/node directory, or skips the
// test when Node.js or the named client package is not installed.
func nodeClientScript(t *testing.T, pkg string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Node client tests need Node.js")
	}
	dir, err = filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		t.Skipf("e2e/node/node_modules/%s is missing: run `npm ci` in e2e/node", pkg)
	}
	return node, dir
}

// TestNodeGRPCWithACL runs node/grpc-acl.js through a proxy with ACL 2.0
// on in front of a broker with ACL 2.0 on: the Node client's signed calls
// (sessionCredentials) are accepted for a user allowed to publish to and
// consume the topic as the group, which sends and receives every message;
// a wrong secret is refused as unauthenticated. The proxy reaches the
// broker as its inner account, a Super user.
func TestNodeGRPCWithACL(t *testing.T) {
	node, dir := nodeClientScript(t, "rocketmq-client-nodejs")
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{
		"authenticationEnabled=true", "authorizationEnabled=true",
		`initAuthenticationUser={"username":"e2eRoot","password":"root-secret"}`,
	}})
	const topic, group, count = "NodeGrpcAcl", "node-grpc-acl-cg", 5
	asRoot := func(code int, ext map[string]string, body []byte) {
		t.Helper()
		r, err := rawInvoke(b.addr, code, signedFields(ext, body, "e2eRoot", "root-secret"), body)
		if err != nil || r.Code != respSuccess {
			t.Fatalf("request %d as the super user: %v %+v", code, err, r)
		}
	}
	asRoot(codeUpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "2",
		"writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, nil)
	waitRoute(t, ns.addr, topic, b.name)
	asRoot(codeAuthCreateUser, map[string]string{"username": "grpcApp"}, []byte(`{"password":"app-secret","userType":"Normal"}`))
	acl, err := json.Marshal(map[string]any{"subject": "User:grpcApp", "policies": []any{map[string]any{"policyType": "Custom",
		"entries": []any{
			map[string]any{"resource": "Topic:" + topic, "actions": []string{"Pub", "Sub"}, "decision": "Allow"},
			map[string]any{"resource": "Group:" + group, "actions": []string{"Sub"}, "decision": "Allow"},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	asRoot(codeAuthCreateACL, map[string]string{"subject": "User:grpcApp"}, acl)
	px := startProxy(t, ns, "authenticationEnabled=true", "authorizationEnabled=true",
		"enableAclRpcHookForClusterMode=true", `innerClientAuthenticationCredentials={"accessKey":"e2eRoot","secretKey":"root-secret"}`)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "grpc-acl.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ENDPOINT="+px.addr, "TOPIC="+topic, "GROUP="+group,
		"ACCESS_KEY=grpcApp", "SECRET_KEY=app-secret", "COUNT="+strconv.Itoa(count), "TIMEOUT_MS=60000")
	out, runErr := cmd.CombinedOutput()
	t.Logf("node grpc-acl.js output:\n%s", out)
	var r struct {
		Sent, Received int
		WrongSecret    string
		Failures       []string
	}
	readNodeResult(t, "grpc-acl.js", out, &r)
	for _, f := range r.Failures {
		t.Errorf("grpc-acl.js: %s", f)
	}
	if runErr != nil {
		t.Fatalf("node grpc-acl.js failed: %v", runErr)
	}
	if r.Sent != count || r.Received != count {
		t.Errorf("signed client sent %d and received %d messages, want %d each", r.Sent, r.Received, count)
	}
	if !strings.Contains(r.WrongSecret, "check signature failed") {
		t.Errorf("a wrong secret was refused with %q, want the signature check's refusal", r.WrongSecret)
	}
}
