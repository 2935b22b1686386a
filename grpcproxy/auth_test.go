package grpcproxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// signedCtx returns a call context signed as the clients sign: an
// HMAC-SHA1 of the date-time under password, in hex, in the
// authorization header.
func signedCtx(t *testing.T, user, password string) context.Context {
	t.Helper()
	dateTime := time.Now().UTC().Format("20060102T150405Z")
	mac := hmac.New(sha1.New, []byte(password))
	mac.Write([]byte(dateTime))
	sig := strings.ToUpper(hex.EncodeToString(mac.Sum(nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, mdClientID, "auth-"+user, mdDateTime, dateTime,
		mdAuthorization, fmt.Sprintf("MQv2-HMAC-SHA1 Credential=%s, SignedHeaders=x-mq-date-time, Signature=%s", user, sig))
}

// With ACL 2.0 on at the proxy and the brokers, a gRPC call must be
// signed by a user the brokers have and allowed by the user's access
// list; the proxy reaches the brokers as its inner account. alice may
// publish to AuthOK only.
func TestProxyACL(t *testing.T) {
	const root, rootPW = "root", "root-password"
	c := startTestClusterWith(t, map[string]string{
		"authenticationEnabled":  "true",
		"authorizationEnabled":   "true",
		"initAuthenticationUser": fmt.Sprintf(`{"username":%q,"password":%q}`, root, rootPW),
	}, func(cfg *Config) {
		cfg.Authentication, cfg.Authorization = true, true
		cfg.InnerAccessKey, cfg.InnerSecretKey = root, rootPW
		cfg.AuthCacheTTL = 0 // every call reads the brokers' current users and lists
	})
	asRoot := func(code int32, ext map[string]string, body any) {
		t.Helper()
		rootRequest(t, c, root, rootPW, code, ext, body)
	}
	for _, topic := range []string{"AuthOK", "AuthNo"} {
		asRoot(remoting.UpdateAndCreateTopic, topicFields(topic), nil)
	}
	asRoot(remoting.AuthCreateUser, map[string]string{"username": "alice"}, meta.UserInfo{Username: "alice", Password: "alice-pw", UserType: "Normal"})
	asRoot(remoting.AuthCreateACL, map[string]string{"subject": "User:alice"}, meta.AclInfo{Subject: "User:alice", Policies: []meta.PolicyInfo{{
		PolicyType: "Custom", Entries: []meta.PolicyEntryInfo{{Resource: "Topic:AuthOK", Actions: []string{"Pub"}, Decision: "Allow"}}}}})

	// send answers the send's status code (INTERNAL_ERROR for a gRPC
	// failure).
	send := func(ctx context.Context, topic string) rmqpb.Code {
		m := newMessage(topic, "acl")
		resp, err := c.rpc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
		if err != nil {
			t.Logf("send to %s: %v", topic, err)
			return rmqpb.Code_INTERNAL_ERROR
		}
		return resp.GetStatus().GetCode()
	}
	// alice's allowed send: waits for the route of the new topic.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code := send(signedCtx(t, "alice", "alice-pw"), "AuthOK")
		if code == rmqpb.Code_OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's send to AuthOK: %v", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		topic string
		want  rmqpb.Code
	}{
		{"unsigned", callCtx(t, "anonymous", 5*time.Second), "AuthOK", rmqpb.Code_UNAUTHORIZED},
		{"wrong password", signedCtx(t, "alice", "guess"), "AuthOK", rmqpb.Code_UNAUTHORIZED},
		{"unknown user", signedCtx(t, "mallory", "x"), "AuthOK", rmqpb.Code_UNAUTHORIZED},
		{"C++ credential of an unknown user", signedCtx(t, "mallory/cn-hangzhou/rmq", "x"), "AuthOK", rmqpb.Code_UNAUTHORIZED},
		// RocketMQ's proxy answers an AuthorizationException as it answers
		// an AuthenticationException.
		{"not allowed", signedCtx(t, "alice", "alice-pw"), "AuthNo", rmqpb.Code_UNAUTHORIZED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := send(tc.ctx, tc.topic); got != tc.want {
				t.Fatalf("send to %s answered %v, want %v", tc.topic, got, tc.want)
			}
		})
	}
	// The C++ client writes its credential as AK/region/service.
	if got := send(signedCtx(t, "alice/cn-hangzhou/rmq", "alice-pw"), "AuthOK"); got != rmqpb.Code_OK {
		t.Fatalf("alice's send with a C++-style credential answered %v, want OK", got)
	}
	// A stream is checked too: alice may not receive.
	stream, err := c.rpc.ReceiveMessage(signedCtx(t, "alice", "alice-pw"), receiveRequest("ag", "AuthOK", 10*time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetStatus().GetCode() != rmqpb.Code_UNAUTHORIZED {
		t.Fatalf("alice's receive answered %v %v, want an UNAUTHORIZED status", first, err)
	}
	if last, err := stream.Recv(); err != nil || last.GetDeliveryTimestamp() == nil {
		t.Fatalf("after the refusal: %v %v, want the delivery time", last, err)
	}
	// root, a Super user, may do anything.
	if got := send(signedCtx(t, root, rootPW), "AuthNo"); got != rmqpb.Code_OK {
		t.Fatalf("root's send to AuthNo answered %v", got)
	}
}

// Without its inner account the proxy's own requests to a broker that
// checks ACL are refused: a signed, allowed client still cannot send. The
// broker's NO_PERMISSION is INTERNAL_SERVER_ERROR to the client, as
// RocketMQ's proxy answers an MQBrokerException of that code.
func TestProxyACLNeedsInnerAccount(t *testing.T) {
	c := startTestClusterWith(t, map[string]string{
		"authenticationEnabled":  "true",
		"authorizationEnabled":   "true",
		"initAuthenticationUser": `{"username":"root","password":"root-password"}`,
		"autoCreateTopicEnable":  "true",
	}, nil)
	rootRequest(t, c, "root", "root-password", remoting.UpdateAndCreateTopic, topicFields("NoInner"), nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.rpc.SendMessage(callCtx(t, "x", 5*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage("NoInner", "x")}})
		if err != nil {
			t.Fatal(err)
		}
		code := resp.GetStatus().GetCode()
		if code == rmqpb.Code_OK {
			t.Fatal("an unsigned proxy's send was stored by a broker that checks ACL")
		}
		if code == rmqpb.Code_INTERNAL_SERVER_ERROR && strings.Contains(resp.GetStatus().GetMessage(), fmt.Sprintf("code %d:", remoting.NoPermission)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("send answered %v, want the broker's NO_PERMISSION as INTERNAL_SERVER_ERROR", resp.GetStatus())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rootRequest sends one request to the broker signed as user and fails
// the test unless it succeeds; body, when not nil, is sent as JSON.
func rootRequest(t *testing.T, c *testCluster, user, password string, code int32, ext map[string]string, body any) {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	pool := remoting.NewClientPool(remoting.ClientOptions{BeforeRequest: acl.RequestSigner(user, password)})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pool.Invoke(ctx, c.brokerAddr, remoting.NewRequest(code, ext, raw))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("request %d as %s: %v %v", code, user, resp, err)
	}
}

// topicFields are UPDATE_AND_CREATE_TOPIC's fields for a 2-queue topic.
func topicFields(topic string) map[string]string {
	return map[string]string{"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "2",
		"writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
}

// A cached user past the auth cache TTL is answered at once while it is
// read again in the background, as RocketMQ's proxy caches
// (refreshAfterWrite): no signed call waits for a broker that hangs (each
// may take a request timeout). Shutdown cancels the read, and a read that
// failed keeps the user.
func TestStaleUserAnsweredWhileItIsReadAgain(t *testing.T) {
	body, err := json.Marshal(meta.UserInfo{Username: "alice", Password: "secret", UserType: "Normal"})
	if err != nil {
		t.Fatal(err)
	}
	addr, asked := stallingServer(t, remoting.AuthGetUser, body)
	p := startProxyWithoutCluster(t, func(cfg *Config) {
		cfg.RequestTimeout = time.Minute // a read outlasts the test
	})
	r := newRemoteAuthStore(p, time.Millisecond)
	r.masters, r.mastersAt = []string{addr}, time.Now().Add(time.Hour)
	user := func() (meta.UserInfo, bool, error) {
		type answer struct {
			u   meta.UserInfo
			ok  bool
			err error
		}
		ch := make(chan answer, 1)
		go func() {
			u, ok, err := r.User("alice")
			ch <- answer{u, ok, err}
		}()
		select {
		case a := <-ch:
			return a.u, a.ok, a.err
		case <-time.After(10 * time.Second):
			t.Fatal("User waited for a broker that does not answer")
			return meta.UserInfo{}, false, nil
		}
	}
	if u, ok, err := user(); err != nil || !ok || u.Password != "secret" {
		t.Fatalf("first read: %+v %v %v", u, ok, err)
	}
	time.Sleep(5 * time.Millisecond)
	for range 3 {
		if u, ok, err := user(); err != nil || !ok || u.Password != "secret" {
			t.Fatalf("read of a user past its TTL: %+v %v %v; want the cached user at once", u, ok, err)
		}
	}
	waitFor(t, "the user read again in the background", func() bool { return asked.Load() >= 2 })
	stopWithin(t, p.bg, "a user read held up by a broker that does not answer")
	if u, ok, err := user(); err != nil || !ok || u.Password != "secret" {
		t.Fatalf("after a failed read: %+v %v %v; want the user kept", u, ok, err)
	}
}
