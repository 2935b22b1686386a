package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// addrEcho answers every request with the connection's client and peer
// addresses: "client|peer".
var addrEcho = HandlerFunc(func(_ context.Context, conn *Conn, req *Command) {
	_ = conn.Reply(req, NewResponse(req, Success, conn.RemoteAddr().String()+"|"+conn.PeerAddr().String()))
})

// proxyHeader encodes a header with go-proxyproto's writer, not ours: the
// bytes a load balancer sends.
func proxyHeader(t testing.TB, h *proxyproto.Header) []byte {
	t.Helper()
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tcpHeader is a PROXY command for a TCP connection from src to dst.
func tcpHeader(t testing.TB, version byte, src, dst string) []byte {
	t.Helper()
	return proxyHeader(t, proxyproto.HeaderProxyFromAddrs(version,
		net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), net.TCPAddrFromAddrPort(netip.MustParseAddrPort(dst))))
}

// askAddrs sends one request over w and returns the answer's remark.
func askAddrs(t *testing.T, rw net.Conn) string {
	t.Helper()
	writeCommand(t, rw, NewRequest(SendMessage, nil, nil))
	frame, err := NewFrameReader(rw, 0).ReadFrame()
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Remark
}

// A header of either version names the client the connection reports;
// the socket's peer stays available. Headers without a usable TCP source
// leave the peer as the client.
func TestProxyProtocolHeaders(t *testing.T) {
	s, logs := startServer(t, ServerConfig{}, addrEcho)
	withTLVs := proxyproto.HeaderProxyFromAddrs(2, net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.9:4000")),
		net.TCPAddrFromAddrPort(netip.MustParseAddrPort("198.51.100.1:10911")))
	if err := withTLVs.SetTLVs([]proxyproto.TLV{{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("broker.example")}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		header []byte
		client string // "" = the peer
		split  bool   // written a byte at a time
	}{
		{"v1 TCP4", tcpHeader(t, 1, "192.0.2.7:56324", "198.51.100.1:10911"), "192.0.2.7:56324", false},
		{"v1 TCP6", tcpHeader(t, 1, "[2001:db8::7]:56324", "[2001:db8::1]:10911"), "[2001:db8::7]:56324", false},
		{"v2 TCP4", tcpHeader(t, 2, "192.0.2.8:40000", "198.51.100.1:10911"), "192.0.2.8:40000", false},
		{"v2 TCP6", tcpHeader(t, 2, "[2001:db8::8]:40000", "[2001:db8::1]:10911"), "[2001:db8::8]:40000", false},
		{"v2 with TLVs", proxyHeader(t, withTLVs), "192.0.2.9:4000", false},
		{"v1 split", tcpHeader(t, 1, "192.0.2.10:1", "198.51.100.1:10911"), "192.0.2.10:1", true},
		{"v2 split", tcpHeader(t, 2, "192.0.2.11:2", "198.51.100.1:10911"), "192.0.2.11:2", true},
		{"v2 LOCAL", proxyHeader(t, &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}), "", false},
		{"v1 UNKNOWN", []byte("PROXY UNKNOWN\r\n"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := rawConn(t, s)
			peer := raw.LocalAddr().String()
			if tc.split {
				for _, b := range tc.header {
					if _, err := raw.Write([]byte{b}); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Millisecond) // separate segments, separate reads
				}
			} else if _, err := raw.Write(tc.header); err != nil {
				t.Fatal(err)
			}
			want := tc.client
			if want == "" {
				want = peer
			}
			if got := askAddrs(t, raw); got != want+"|"+peer {
				t.Fatalf("client|peer = %q, want %q", got, want+"|"+peer)
			}
			// Later requests see the same addresses.
			if got := askAddrs(t, raw); got != want+"|"+peer {
				t.Fatalf("second request: %q", got)
			}
		})
	}
	if !strings.Contains(logs.String(), "192.0.2.7:56324 via 127.0.0.1:") {
		t.Errorf("the log names neither the client nor its balancer:\n%s", logs)
	}
}

// Connections without a header are untouched by the detection, and the
// header comes before TLS, as RocketMQ reads them.
func TestProxyProtocolWithTLS(t *testing.T) {
	mux := NewMux()
	mux.Handle(SendMessage, addrEcho)
	s, _ := startTLSServer(t, TLSPermissive, ServerConfig{}, mux)

	raw := rawConn(t, s)
	if _, err := raw.Write(tcpHeader(t, 2, "192.0.2.20:5000", "198.51.100.1:10911")); err != nil {
		t.Fatal(err)
	}
	secure := tls.Client(raw, clientTLS())
	if err := secure.Handshake(); err != nil {
		t.Fatalf("TLS after the header: %v", err)
	}
	if got, want := askAddrs(t, secure), "192.0.2.20:5000|"+raw.LocalAddr().String(); got != want {
		t.Fatalf("over TLS: %q, want %q", got, want)
	}

	plain := dialServer(t, s, ClientOptions{})
	resp, err := plain.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	if err != nil || !strings.HasPrefix(resp.Remark, "127.0.0.1:") {
		t.Fatalf("a plaintext client without a header: %v %v", resp, err)
	}
	tlsClient := dialServer(t, s, ClientOptions{TLS: clientTLS()})
	if resp, err := tlsClient.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil || !strings.HasPrefix(resp.Remark, "127.0.0.1:") {
		t.Fatalf("a TLS client without a header: %v %v", resp, err)
	}
}

// A header that is refused or bad closes the connection with a log line
// that says why; a trusted balancer's header is read.
func TestProxyProtocolRefused(t *testing.T) {
	good := tcpHeader(t, 2, "192.0.2.30:6000", "198.51.100.1:10911")
	for _, tc := range []struct {
		name  string
		cfg   ProxyProtocol
		bytes []byte
		log   string // "" = accepted
	}{
		{"disabled", ProxyProtocol{Disabled: true}, tcpHeader(t, 1, "192.0.2.1:1", "192.0.2.2:2"), "proxyProtocolEnable=false"},
		{"disabled v2", ProxyProtocol{Disabled: true}, good, "proxyProtocolEnable=false"},
		{"untrusted peer", ProxyProtocol{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, good, "outside proxyProtocolTrustedNetworks"},
		{"trusted peer", ProxyProtocol{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8")}}, good, ""},
		{"v1 without an end", ProxyProtocol{}, append([]byte("PROXY TCP4 "), bytes.Repeat([]byte("1"), 120)...), "no end within"},
		{"v1 garbage", ProxyProtocol{}, []byte("PROXY TCP4 300.1.2.3 1.2.3.4 1 2\r\n"), "bad PROXY protocol header"},
		{"v2 bad command", ProxyProtocol{}, append(append([]byte{}, good[:12]...), 0x2f, 0x11, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2), "bad PROXY protocol header"},
		{"second header", ProxyProtocol{}, append(append([]byte{}, good...), good...), "a second PROXY protocol header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := startServer(t, ServerConfig{ProxyProtocol: tc.cfg}, addrEcho)
			raw := rawConn(t, s)
			if _, err := raw.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.log == "" {
				if got := askAddrs(t, raw); !strings.HasPrefix(got, "192.0.2.30:6000|") {
					t.Fatalf("trusted header not read: %q", got)
				}
				return
			}
			writeCommand(t, raw, NewRequest(SendMessage, nil, nil))
			expectClosed(t, raw)
			waitFor(t, "log line "+tc.log, func() bool { return strings.Contains(logs.String(), tc.log) })
		})
	}
}

func TestProxyHeaderSize(t *testing.T) {
	v2 := tcpHeader(t, 2, "192.0.2.1:1", "192.0.2.2:2")
	v1 := tcpHeader(t, 1, "192.0.2.1:1", "192.0.2.2:2")
	frame, err := Encode(NewRequest(SendMessage, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		size int
		more bool
	}{
		{"empty", nil, 0, false},
		{"a frame", frame, 0, false},
		{"TLS", []byte{0x16, 3, 1}, 0, false},
		{"v1 first byte", v1[:1], 0, true},
		{"v1 partial", v1[:len(v1)-1], 0, true},
		{"v1 whole", v1, len(v1), false},
		{"v1 and a frame", append(append([]byte{}, v1...), frame...), len(v1), false},
		{"P then not PROXY", []byte("PR0"), 0, false},
		{"v2 signature", v2[:12], 0, true},
		{"v2 partial", v2[:len(v2)-1], 0, true},
		{"v2 whole", v2, len(v2), false},
		{"v2 and a frame", append(append([]byte{}, v2...), frame...), len(v2), false},
		{"CR then not v2", []byte("\r\n\r\nX"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, more, err := proxyHeaderSize(tc.in)
			if err != nil || size != tc.size || more != tc.more {
				t.Fatalf("proxyHeaderSize = %d, %v, %v; want %d, %v", size, more, err, tc.size, tc.more)
			}
		})
	}
	if _, _, err := proxyHeaderSize(append([]byte("PROXY "), bytes.Repeat([]byte{'x'}, 101)...)); err == nil {
		t.Fatal("a 107-byte line without an end is accepted")
	}
}
