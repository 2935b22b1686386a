package broker

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rs/zerolog"
)

// A brokerIP1 host name is what the broker registers with the name
// servers and names itself by, as RocketMQ's getBrokerAddr, while the
// messages it stores carry the address the name resolves to.
func TestBrokerIP1HostName(t *testing.T) {
	ns := startTestNameServer(t)
	b := startTestBroker(t, map[string]string{"brokerIP1": "localhost", "namesrvAddr": ns.Addr().String()})
	port := strconv.Itoa(int(b.hostAddr().Port()))
	want := net.JoinHostPort("localhost", port)
	if got := b.Addr(); got != want {
		t.Fatalf("Addr %q, want %q", got, want)
	}
	if got, wantHA := b.haServerAddr(), "localhost:"; !strings.HasPrefix(got, wantHA) {
		t.Fatalf("HA address %q, want the host name", got)
	}
	c := b.client(nil)
	sent := mustSend(t, c, "HostNameT", 0, "m", "")
	b.caughtUp()
	waitForRoute(t, ns, "HostNameT", "the broker named "+want, func(r *namesrv.TopicRouteData) bool {
		return len(r.BrokerDatas) == 1 && r.BrokerDatas[0].BrokerAddrs[namesrv.MasterID] == want
	})
	got := pullAll(t, b, c, "HostNameT", 0)
	if len(got) != 1 {
		t.Fatalf("pulled %d messages, want 1", len(got))
	}
	// (The port is listenPort's, 0 in tests: the log opens before the
	// server binds.)
	if host := got[0].StoreHost; host.Addr().String() != "127.0.0.1" {
		t.Fatalf("store host %v, want 127.0.0.1 (localhost resolved)", host)
	}
	host, _, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil || host.Addr().String() != "127.0.0.1" {
		t.Fatalf("the send's message id %q: %v, %v; want the resolved address", sent.ExtFields["msgId"], host, err)
	}
}

// A brokerIP1 that is neither an address nor a name that resolves stops
// New with an error that names the key.
func TestBrokerIP1Unresolvable(t *testing.T) {
	loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "brokerIP1": "no-such-host.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(loaded.Broker, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), `brokerIP1 "no-such-host.invalid"`) {
		t.Fatalf("New with an unresolvable brokerIP1: %v", err)
	}
}

// A reply pushed to its requester names the store host by the address
// brokerIP1 resolved to, as RocketMQ's getHostAddress(), not by the host
// name the broker registers: the client reads it as an address.
func TestBrokerIP1HostNameReplyStoreHost(t *testing.T) {
	b := startTestBroker(t, map[string]string{"brokerIP1": "localhost"})
	pushed := make(chan *remoting.Command, 1)
	requester := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code != remoting.PushReplyMessageToClient {
			return nil
		}
		pushed <- cmd
		return remoting.NewResponse(cmd, remoting.Success, "")
	})
	heartbeat(t, requester, heartbeatBody("10.0.0.7@req", "pg-req", "", nil))
	r := sendReply(t, b.client(nil), "CORRELATION_ID\x01c-1\x02REPLY_TO_CLIENT\x0110.0.0.7@req\x02MSG_TYPE\x01reply\x02", "pong")
	if r.Code != remoting.Success {
		t.Fatalf("reply: %d %s", r.Code, r.Remark)
	}
	p := <-pushed // the reply is pushed before the send is answered
	want := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(b.hostAddr().Port())))
	if got := p.ExtFields["storeHost"]; got != want {
		t.Fatalf("pushed storeHost %q, want %q (the resolved address, not %q)", got, want, b.Addr())
	}
}
