package grpcproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// ConfigFrom carries RocketMQ proxy's keys into the proxy's Config: each
// at a value other than its default arrives as that value.
func TestConfigFromProxyKeys(t *testing.T) {
	loaded, err := configs.LoadProxy("", map[string]string{
		"grpcShutdownTimeSeconds": "7", "enableMessageBodyEmptyCheck": "false", "maxTransactionRecoverySecond": "0",
		"enableTopicMessageTypeCheck": "false", "useEndpointPortFromRequest": "true",
		"metricCollectorMode": "on", "metricCollectorAddress": "10.0.0.9:4317", "invisibleTimeMillisWhenClear": "2500",
		"userCacheRefreshSeconds": "3", "aclCacheRefreshSeconds": "4", "userCacheMaxNum": "5", "aclCacheMaxNum": "6",
		"subscriptionGroupConfigCacheRefreshSeconds": "8", "subscriptionGroupConfigCacheMaxNum": "9",
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ConfigFrom(loaded.Proxy, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if c.ShutdownTimeout != 7*time.Second || c.CheckEmptyBody || c.MaxTransactionRecovery != 0 || c.CheckMessageType ||
		!c.EndpointPortFromRequest || c.MetricCollector != "10.0.0.9:4317" || c.ClearInvisible != 2500*time.Millisecond ||
		c.UserCacheTTL != 3*time.Second || c.AuthCacheTTL != 4*time.Second || c.UserCacheSize != 5 || c.ACLCacheSize != 6 ||
		c.GroupPolicyTTL != 8*time.Second || c.GroupPolicySize != 9 {
		t.Errorf("config %+v", c)
	}
	d, err := ConfigFrom(configs.DefaultProxy(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	if d.ShutdownTimeout != def.ShutdownTimeout || !d.CheckEmptyBody || d.MaxTransactionRecovery != time.Hour || !d.CheckMessageType ||
		d.EndpointPortFromRequest || d.MetricCollector != "" || d.ClearInvisible != time.Second ||
		d.UserCacheTTL != 20*time.Second || d.UserCacheSize != 20_000 || d.ACLCacheSize != 20_000 ||
		d.GroupPolicyTTL != 20*time.Second || d.GroupPolicySize != 20_000 {
		t.Errorf("from the default keys %+v", d)
	}
}

// writeCertificate writes a self-signed certificate for cn and its key as
// PEM files in dir and returns their paths.
func writeCertificate(t *testing.T, dir, cn string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// leafName is the common name of the certificate a TLS config serves.
func leafName(t *testing.T, c Config) string {
	t.Helper()
	if c.TLS == nil || len(c.TLS.Certificates) == 0 {
		t.Fatal("no TLS certificate")
	}
	leaf := c.TLS.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.TLS.Certificates[0].Certificate[0]); err != nil {
			t.Fatal(err)
		}
	}
	return leaf.Subject.CommonName
}

// RocketMQ proxy's certificate keys: with tlsTestModeEnable=false the gRPC
// port serves tlsCertPath and tlsKeyPath, tls.server.certPath winning
// when given; with it true (the default) the self-signed certificate,
// whatever tlsCertPath says; and with it false and no certificate, the
// start is refused with an error naming the keys.
func TestConfigFromProxyTLSKeys(t *testing.T) {
	dir := t.TempDir()
	ownCert, ownKey := writeCertificate(t, dir, "proxy-own.example")
	serverCert, serverKey := writeCertificate(t, dir, "tls-server.example")
	load := func(o map[string]string) (Config, error) {
		t.Helper()
		o["tls.config.file"] = "" // no /etc/rocketmq/tls.properties of the machine's
		loaded, err := configs.LoadProxy("", o)
		if err != nil {
			t.Fatal(err)
		}
		return ConfigFrom(loaded.Proxy, zerolog.Nop())
	}
	c, err := load(map[string]string{"tlsTestModeEnable": "false", "tlsCertPath": ownCert, "tlsKeyPath": ownKey})
	if err != nil || leafName(t, c) != "proxy-own.example" {
		t.Fatalf("tlsCertPath: %v", err)
	}
	c, err = load(map[string]string{"tlsTestModeEnable": "false", "tlsCertPath": ownCert, "tlsKeyPath": ownKey,
		"tls.server.certPath": serverCert, "tls.server.keyPath": serverKey})
	if err != nil || leafName(t, c) != "tls-server.example" {
		t.Fatalf("tls.server.certPath with tlsCertPath: %v", err)
	}
	c, err = load(map[string]string{"tlsCertPath": ownCert, "tlsKeyPath": ownKey})
	if err != nil || leafName(t, c) == "proxy-own.example" {
		t.Fatalf("tlsTestModeEnable=true serves tlsCertPath (%v); want the self-signed certificate", err)
	}
	_, err = load(map[string]string{"tlsTestModeEnable": "false"})
	if err == nil || !strings.Contains(err.Error(), "tlsCertPath") {
		t.Fatalf("tlsTestModeEnable=false without a certificate: %v, want an error naming tlsCertPath", err)
	}
	_, err = load(map[string]string{"tlsTestModeEnable": "false", "tlsCertPath": filepath.Join(dir, "missing.crt"), "tlsKeyPath": ownKey})
	if err == nil || !strings.Contains(err.Error(), "tlsCertPath") {
		t.Fatalf("a tlsCertPath that is not there: %v, want an error naming tlsCertPath", err)
	}
	if c, err = load(map[string]string{"tlsTestModeEnable": "false", "tls.server.mode": "disabled"}); err != nil || c.TLS != nil {
		t.Fatalf("TLS disabled: %v, %v; want plaintext without a certificate", c.TLS, err)
	}
}

// maxTransactionRecoverySecond bounds the recovery time a transaction
// message asks for; 0 or less sets no bound.
func TestBuildOutgoingTransactionRecoveryBound(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		limit, asked time.Duration
		ok           bool
	}{
		{2 * time.Hour, 90 * time.Minute, true},
		{2 * time.Hour, 3 * time.Hour, false},
		{30 * time.Minute, 45 * time.Minute, false},
		{0, 100 * time.Hour, true},
		{-time.Second, 100 * time.Hour, true},
	} {
		s := configOnlyServer(func(c *Config) { c.MaxTransactionRecovery = tc.limit })
		m := validMessage()
		m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
		m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(tc.asked)
		_, err := s.buildOutgoing(m, "TopicA", "10.0.0.1:5555", now)
		if (err == nil) != tc.ok || err != nil && codeOf(err) != rmqpb.Code_BAD_REQUEST {
			t.Errorf("bound %v, asked %v: %v; want accepted %v (else BAD_REQUEST)", tc.limit, tc.asked, err, tc.ok)
		}
	}
}

// enableMessageBodyEmptyCheck=false lets an empty body through.
func TestBuildOutgoingEmptyBodyCheckOff(t *testing.T) {
	s := configOnlyServer(func(c *Config) { c.CheckEmptyBody = false })
	m := validMessage()
	m.Body = nil
	o, err := s.buildOutgoing(m, "TopicA", "10.0.0.1:5555", time.Now())
	if err != nil || len(o.body) != 0 {
		t.Fatalf("empty body with the check off: %v", err)
	}
}

// With useEndpointPortFromRequest a route keeps the port the client named;
// without it the proxy's port replaces it (TestQueryRoute).
func TestEndpointPortFromRequest(t *testing.T) {
	asked := &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_DOMAIN_NAME, Addresses: []*rmqpb.Address{{Host: "mq.example.com", Port: 443}}}
	p := startProxyWithoutCluster(t, func(c *Config) { c.EndpointPortFromRequest = true })
	if got := p.endpointsFor(context.Background(), asked); !proto.Equal(got, asked) {
		t.Errorf("with the request's port: %v, want %v", got, asked)
	}
}

// Shutdown waits for calls in progress at most grpcShutdownTimeSeconds,
// then cuts them: an open telemetry stream, which only its client ends,
// does not hold a shutdown whose context has no deadline.
func TestShutdownTimeoutCutsOpenStreams(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NamesrvAddrs = []string{deadAddr(t)}
	cfg.ShutdownTimeout = 200 * time.Millisecond
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(p.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	rpc := rmqpb.NewMessagingServiceClient(conn)
	stream, err := rpc.Telemetry(callCtx(t, "lingering", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: rmqpb.ClientType_PRODUCER.Enum(), PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("settings' answer: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown still waits for an open telemetry stream")
	}
}

// Users are kept for userCacheRefreshSeconds, apart from access lists'
// aclCacheRefreshSeconds, and at most userCacheMaxNum of them.
func TestUserCacheKeys(t *testing.T) {
	body, err := json.Marshal(meta.UserInfo{Username: "alice", Password: "secret", UserType: "Normal"})
	if err != nil {
		t.Fatal(err)
	}
	addr, asked := answeringServer(t, remoting.AuthGetUser, body, 0)
	p := startProxyWithoutCluster(t, nil)
	for _, tc := range []struct {
		userTTL time.Duration
		reads   int32
	}{{time.Hour, 1}, {0, 3}} {
		asked.Store(0)
		r := newRemoteAuthStoreSized(p, tc.userTTL, time.Hour-tc.userTTL, 1, 5)
		r.masters, r.mastersAt = []string{addr}, time.Now().Add(time.Hour)
		for range 3 {
			if _, ok, err := r.User("alice"); err != nil || !ok {
				t.Fatalf("user: %v %v", ok, err)
			}
		}
		if got := asked.Load(); got != tc.reads {
			t.Errorf("user TTL %v: %d reads of a user asked 3 times, want %d", tc.userTTL, got, tc.reads)
		}
		if _, _, err := r.User("bob"); err != nil {
			t.Fatal(err)
		}
		if n := r.users.Len(); n != 1 {
			t.Errorf("%d users kept, want userCacheMaxNum's 1", n)
		}
	}
}

// The keys a client's settings carry: with enableTopicMessageTypeCheck off
// producers are told not to check types and a message of another type
// than its topic's is stored; with metricCollectorMode on they are told
// the collector; with enableMessageBodyEmptyCheck off an empty body is
// stored; and a push consumer's messages, once it is gone, come back
// after invisibleTimeMillisWhenClear, not a second later.
func TestProxyKeysThroughTheProxy(t *testing.T) {
	c := startTestCluster(t, func(cfg *Config) {
		cfg.CheckMessageType = false
		cfg.CheckEmptyBody = false
		cfg.MetricCollector = "otel.example.com:4317"
		cfg.DefaultInvisible, cfg.RenewAhead = 30*time.Second, 10*time.Second
		cfg.ClearInvisible = 20 * time.Second
	})
	c.createTopic(t, "KeysFifo", 1, "+message.type=FIFO")
	c.createTopic(t, "KeysClear", 1, "")
	c.waitRoute(t, "KeysFifo")
	c.send(t, "keys-producer", newMessage("KeysFifo", "normal into FIFO"))
	empty := newMessage("KeysFifo", "")
	empty.Body = nil
	c.send(t, "keys-producer", empty)

	answer := c.telemetryOnce(t, "keys-producer", &rmqpb.Settings{ClientType: rmqpb.ClientType_PRODUCER.Enum(),
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: "KeysFifo"}}}}})
	s := answer.GetSettings()
	if s.GetPublishing().GetValidateMessageType() {
		t.Errorf("producers told to validate message types")
	}
	wantMetric := &rmqpb.Metric{On: true, Endpoints: &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_DOMAIN_NAME,
		Addresses: []*rmqpb.Address{{Host: "otel.example.com", Port: 4317}}}}
	if !proto.Equal(s.GetMetric(), wantMetric) {
		t.Errorf("metric %v, want %v", s.GetMetric(), wantMetric)
	}

	const group = "GroupKeysClear"
	c.send(t, "keys-producer", newMessage("KeysClear", "held"))
	req := receiveRequest(group, "KeysClear", 0, time.Second)
	req.AutoRenew = true
	// The consumer's settings, as a push consumer sends them first (a
	// termination without them is UNRECOGNIZED_CLIENT_TYPE).
	c.telemetryOnce(t, "leaving", &rmqpb.Settings{ClientType: rmqpb.ClientType_PUSH_CONSUMER.Enum(),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "KeysClear"}}}}}})
	c.receiveN(t, "leaving", req, 1)
	resp, err := c.rpc.NotifyClientTermination(callCtx(t, "leaving", 5*time.Second), &rmqpb.NotifyClientTerminationRequest{Group: &rmqpb.Resource{Name: group}})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("NotifyClientTermination: %v %v", resp.GetStatus(), err)
	}
	c.expectNothing(t, "staying", receiveRequest(group, "KeysClear", 10*time.Second, time.Second), 4*time.Second)
}

// maxMessageGroupSize and maxDelayTimeMills of 0 or less set no bound,
// as RocketMQ's proxy reads them; a blank group is still refused.
func TestBuildOutgoingNoBounds(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := configOnlyServer(func(c *Config) { c.MaxMessageGroupSize, c.MaxDelay = 0, -time.Millisecond })
	m := validMessage()
	m.SystemProperties.MessageGroup = proto.String(strings.Repeat("g", 1000))
	m.SystemProperties.DeliveryTimestamp = timestamppb.New(now.Add(365 * 24 * time.Hour))
	if _, err := s.buildOutgoing(m, "TopicA", "10.0.0.1:5555", now); err != nil {
		t.Fatalf("a long group delivered in a year without bounds: %v", err)
	}
	m.SystemProperties.MessageGroup = proto.String("  ")
	if _, err := s.buildOutgoing(m, "TopicA", "10.0.0.1:5555", now); codeOf(err) != rmqpb.Code_ILLEGAL_MESSAGE_GROUP {
		t.Fatalf("a blank group without bounds: %v, want ILLEGAL_MESSAGE_GROUP", err)
	}
}
