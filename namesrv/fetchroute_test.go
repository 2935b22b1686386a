package namesrv

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// FetchRoute moves past a name server it cannot reach, returns the first
// route it is given, and says when the topic is unknown.
func TestFetchRoute(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer pool.Close()
	// Two topics: a first registration of one topic is refused.
	body := &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1, Timestamp: 1}, TopicConfigTable: map[string]TopicConfig{
		"T":      {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 2, Perm: 6, TopicFilterType: SingleTag},
		"TBW102": {TopicName: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7, TopicFilterType: SingleTag},
	}}
	if _, err := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop()).Register(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), body); err != nil {
		t.Fatal(err)
	}
	// A closed port: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	addrs := []string{dead, ns.Addr().String()}

	route, err := FetchRoute(testCtx(t), pool, addrs, "T", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(route.QueueDatas) != 1 || route.QueueDatas[0].BrokerName != "broker-a" || route.QueueDatas[0].ReadQueueNums != 4 ||
		len(route.BrokerDatas) != 1 || route.BrokerDatas[0].BrokerAddrs[MasterID] != "10.0.0.1:10911" {
		t.Fatalf("route %+v", route)
	}
	if _, err := FetchRoute(testCtx(t), pool, addrs, "nobody", 2*time.Second); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := FetchRoute(testCtx(t), pool, []string{dead}, "T", 2*time.Second); err == nil || errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("no name server reachable: %v", err)
	}
	if _, err := FetchRoute(testCtx(t), pool, nil, "T", 2*time.Second); !errors.Is(err, ErrNoNameServer) {
		t.Fatalf("no name server: %v", err)
	}

	// A name server that fails, or answers a body that is not a route, is
	// passed over for the next one.
	failing := startAnswering(t, func(req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.SystemError, "busy")
	})
	garbled := startAnswering(t, func(req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(`{"queueDatas":`)
		return resp
	})
	if route, err := FetchRoute(testCtx(t), pool, []string{failing, garbled, ns.Addr().String()}, "T", 2*time.Second); err != nil || len(route.QueueDatas) != 1 {
		t.Fatalf("route past a failing and a garbled name server: %+v, %v", route, err)
	}
	if _, err := FetchRoute(testCtx(t), pool, []string{failing, garbled}, "T", 2*time.Second); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("only a failing and a garbled name server: %v, want the last one's decode error", err)
	}
	if _, err := FetchRoute(testCtx(t), pool, []string{failing}, "T", 2*time.Second); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a failing name server: %v, want its remark", err)
	}

	// A route of more queues than any broker can have would have the
	// reader (the gRPC proxy, a broker's assignment) list them all: its
	// name server is passed over too.
	huge := startAnswering(t, func(req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(`{"queueDatas":[{"brokerName":"broker-a","readQueueNums":2147483647,"writeQueueNums":4,"perm":6}],` +
			`"brokerDatas":[{"brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911"}}]}`)
		return resp
	})
	if _, err := FetchRoute(testCtx(t), pool, []string{huge}, "T", 2*time.Second); err == nil || !strings.Contains(err.Error(), "2147483647") {
		t.Fatalf("a route of 2^31-1 queues: %v, want it refused", err)
	}
	if route, err := FetchRoute(testCtx(t), pool, []string{huge, ns.Addr().String()}, "T", 2*time.Second); err != nil || route.QueueDatas[0].ReadQueueNums != 4 {
		t.Fatalf("route past a name server of 2^31-1 queues: %+v, %v", route, err)
	}
}

// startAnswering starts a Remoting server answering every request with
// answer and returns its address.
func startAnswering(t *testing.T, answer func(*remoting.Command) *remoting.Command) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"},
		remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command { return answer(req) }),
		zerolog.Nop())
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String()
}
