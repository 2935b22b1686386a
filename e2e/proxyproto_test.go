package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/pires/go-proxyproto"
)

const codeGetConsumerConnectionList = 203

// balancer is a TCP load balancer with proxy protocol on, as HAProxy's
// "send-proxy-v2": for each connection it accepts it dials the target,
// writes a version 2 header (go-proxyproto's writer) naming the client
// and copies the bytes both ways. The header names claim with the
// client's port in place of the client's loopback address, so that the
// broker's view of the client can be told from the balancer's.
type balancer struct {
	ln       net.Listener
	target   string
	claim    netip.Addr
	accepted atomic.Int64
	wg       sync.WaitGroup
}

// startBalancer listens on listen for target until the test ends.
func startBalancer(t testing.TB, listen, target string, claim netip.Addr) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("balancer: %v", err)
	}
	lb := &balancer{ln: ln, target: target, claim: claim}
	lb.wg.Add(1)
	go lb.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		lb.wg.Wait()
	})
	return lb
}

// serve accepts until the listener closes; each connection's copies end
// when either side closes.
func (lb *balancer) serve() {
	defer lb.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	var open sync.Map // net.Conn -> struct{}, closed when the listener is
	defer open.Range(func(k, _ any) bool { _ = k.(net.Conn).Close(); return true })
	for {
		in, err := lb.ln.Accept()
		if err != nil {
			return
		}
		lb.accepted.Add(1)
		out, err := net.Dial("tcp", lb.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		from := in.RemoteAddr().(*net.TCPAddr)
		src := net.TCPAddrFromAddrPort(netip.AddrPortFrom(lb.claim, uint16(from.Port)))
		if _, err := proxyproto.HeaderProxyFromAddrs(2, src, in.LocalAddr()).WriteTo(out); err != nil {
			_, _ = in.Close(), out.Close()
			continue
		}
		open.Store(in, struct{}{})
		open.Store(out, struct{}{})
		conns.Add(2)
		pipe := func(dst, src net.Conn) {
			defer conns.Done()
			_, _ = io.Copy(dst, src)
			_, _ = dst.Close(), src.Close()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// TestThroughAProxyProtocolBalancer: the unchanged Go client reaches the
// name server and the broker only through load balancers that open every
// connection with a PROXY protocol header, as RocketMQ 5 serves them; it
// produces and push-consumes, and the broker lists the consumer under the
// address the header gave. The born host of the stored messages stays the
// connection's peer (the balancer), as RocketMQ stores it.
func TestThroughAProxyProtocolBalancer(t *testing.T) {
	t.Parallel()
	claim := netip.MustParseAddr("192.0.2.77")
	port := func(addr string) string {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Both listen on 127.0.0.1 only; their balancers take the same ports
	// on 127.0.0.2, the address the broker advertises.
	ns := startNamesrv(t)
	nsLB := startBalancer(t, "127.0.0.2:"+port(ns.addr), ns.addr, claim)
	b := startBroker(t, ns, brokerOpts{sets: []string{"bindAddress=127.0.0.1", "brokerIP1=127.0.0.2"}})
	brokerLB := startBalancer(t, "127.0.0.2:"+port(b.addr), b.addr, claim)
	viaLB := nsLB.ln.Addr().String()

	const topic, group, n = "E2EProxyProtocol", "cg-proxy-protocol", 20
	createTopic(t, b.addr, topic, 2)
	waitRoute(t, viaLB, topic, b.name)

	got := newCollector()
	var bornHosts sync.Map
	startPushConsumerFunc(t, viaLB, group, topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got.add(string(m.Body))
				bornHosts.Store(m.BornHost, true)
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	p := newProducer(t, viaLB, "pg-proxy-protocol")
	for i := range n {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, fmt.Appendf(nil, "m%d", i))); err != nil {
			t.Fatalf("send %d through the balancers: %v", i, err)
		}
	}
	got.waitDistinct(t, n, 30*time.Second)

	var clients []string
	waitUntil(t, 30*time.Second, "the consumer listed", func() bool {
		clients = consumerAddrs(t, b.addr, group)
		return len(clients) == 1
	})
	if !strings.HasPrefix(clients[0], claim.String()+":") {
		t.Fatalf("consumer listed at %s, want the address the PROXY header gave (%s)", clients[0], claim)
	}
	bornHosts.Range(func(k, _ any) bool {
		if host, _, _ := net.SplitHostPort(k.(string)); host != "127.0.0.1" {
			t.Errorf("born host %s, want the balancer's address 127.0.0.1", k)
		}
		return true
	})
	if nsLB.accepted.Load() == 0 || brokerLB.accepted.Load() == 0 {
		t.Fatalf("the balancers carried %d (name server) and %d (broker) connections", nsLB.accepted.Load(), brokerLB.accepted.Load())
	}
}

// consumerAddrs lists the client addresses of a group's consumers
// (GET_CONSUMER_CONNECTION_LIST, as mqadmin consumerConnection).
func consumerAddrs(t testing.TB, broker, group string) []string {
	t.Helper()
	var body struct {
		ConnectionSet []struct {
			ClientAddr string `json:"clientAddr"`
		} `json:"connectionSet"`
	}
	invokeJSON(t, broker, codeGetConsumerConnectionList, map[string]string{"consumerGroup": group}, &body)
	var out []string
	for _, c := range body.ConnectionSet {
		out = append(out, c.ClientAddr)
	}
	return out
}
