package broker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/rocketkv/rocketkv/remoting"
)

// dialViaBalancer dials addr as a load balancer with proxy protocol on
// forwards a client: a PROXY protocol version 2 header (go-proxyproto's
// writer) naming client, then the client's own bytes.
func dialViaBalancer(t *testing.T, addr, client string) (*remoting.Client, error) {
	t.Helper()
	src := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(client))
	c, err := remoting.Dial(context.Background(), addr, remoting.ClientOptions{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if _, err := proxyproto.HeaderProxyFromAddrs(2, src, conn.RemoteAddr()).WriteTo(conn); err != nil {
				_ = conn.Close()
				return nil, err
			}
			return conn, nil
		},
	})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// The client a PROXY protocol header names is the one access control and
// the connection lists see, as RocketMQ sees it; the born host stored in
// messages stays the connection's peer, as RocketMQ stores it; the index
// checkpoint, for local clients only, is refused to a header that names a
// remote one.
func TestProxyProtocolClientAddress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	acl := aclTestFile + "globalWhiteRemoteAddresses: ['192.0.2.*']\n"
	if err := os.WriteFile(file, []byte(acl), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBroker(t, map[string]string{"aclEnable": "true", "plainAclFile": file, "autoCreateTopicEnable": "true"})
	admin := b.client(nil)

	const client = "192.0.2.5:41000"
	white, err := dialViaBalancer(t, b.Addr(), client)
	if err != nil {
		t.Fatal(err)
	}
	// Whitelisted by the header's address, so unsigned requests pass.
	wantSuccess(t, call(t, white, remoting.HeartBeat, nil, []byte(`{"clientID":"proxied@1","producerDataSet":[{"groupName":"pg-proxied"}],"consumerDataSet":[]}`)), "heartbeat")
	sent := call(t, white, remoting.SendMessageV2, sendV2Fields("ProxiedT"), []byte("through a balancer"))
	wantSuccess(t, sent, "an unsigned send from a whitelisted client")

	conns := invoke(t, admin, signedReq("adminKey1", "admin-secret", remoting.GetProducerConnectionList,
		map[string]string{"producerGroup": "pg-proxied"}, nil))
	wantSuccess(t, conns, "producer connection list")
	var list struct {
		ConnectionSet []struct {
			ClientAddr string `json:"clientAddr"`
			ClientID   string `json:"clientId"`
		} `json:"connectionSet"`
	}
	if err := json.Unmarshal(conns.Body, &list); err != nil {
		t.Fatalf("connection list %s: %v", conns.Body, err)
	}
	if len(list.ConnectionSet) != 1 || list.ConnectionSet[0].ClientAddr != client {
		t.Fatalf("producer connections %+v, want one from %s", list.ConnectionSet, client)
	}

	// The send is acknowledged once stored; its ConsumeQueue entry, which
	// a pull reads, follows asynchronously.
	var pulled *remoting.Command
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pulled = call(t, white, remoting.PullMessage, pullReq("cg-proxied", "ProxiedT", 0, 0, 0, 0, "*"), nil)
		if pulled.Code != remoting.PullNotFound || time.Now().After(deadline) {
			break
		}
	}
	wantSuccess(t, pulled, "pull")
	msgs := decodeRecords(t, pulled.Body)
	if len(msgs) != 1 {
		t.Fatalf("pulled %d messages", len(msgs))
	}
	if born := msgs[0].BornHost; !born.Addr().IsLoopback() {
		t.Fatalf("born host %v, want the balancer's (loopback) address", born)
	}

	r := call(t, white, remoting.CheckpointIndex, map[string]string{remoting.CheckpointFieldDir: "x"}, nil)
	if r.Code != remoting.NoPermission {
		t.Fatalf("checkpoint for a remote client behind a local balancer: %d %s", r.Code, r.Remark)
	}

	// Outside the whitelist, the same unsigned send is refused.
	other, err := dialViaBalancer(t, b.Addr(), "198.51.100.5:41000")
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, call(t, other, remoting.SendMessageV2, sendV2Fields("ProxiedT"), []byte("x")), "No accessKey is configured")
}

// proxyProtocolEnable and proxyProtocolTrustedNetworks reach both
// listeners.
func TestProxyProtocolSettings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		accepted bool
	}{
		{"disabled", map[string]string{"proxyProtocolEnable": "false"}, false},
		{"untrusted balancer", map[string]string{"proxyProtocolTrustedNetworks": "10.0.0.0/8"}, false},
		{"trusted balancer", map[string]string{"proxyProtocolTrustedNetworks": "10.0.0.0/8,127.0.0.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.settings["fastListenPort"] = "0"
			b := startTestBroker(t, tc.settings)
			fast := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.FastAddr().(*net.TCPAddr).Port))
			for _, addr := range []string{b.Addr(), fast} {
				c, err := dialViaBalancer(t, addr, "192.0.2.9:1")
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
				cancel()
				_ = c.Close()
				if tc.accepted != (err == nil) {
					t.Fatalf("%s: %v %v, accepted=%v wanted", addr, resp, err, tc.accepted)
				}
				// Closed by the broker: EOF, or a reset when the
				// request was still unread in its socket.
				if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, remoting.ErrConnClosed) && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("%s: %v, want the connection closed", addr, err)
				}
			}
		})
	}
}
