package grpcproxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// startBareProxy starts a proxy whose name server does not answer (a
// closed port): calls still get an answer, which is all a transport test
// needs.
func startBareProxy(t testing.TB, mode string) string {
	t.Helper()
	m, tc, err := remoting.ServerTLS(mode, remoting.TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	cfg := DefaultConfig()
	cfg.Addr, cfg.NamesrvAddrs, cfg.RequestTimeout = "127.0.0.1:0", []string{deadAddr}, time.Second
	cfg.TLSMode, cfg.TLS = m, tc
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s.Addr().String()
}

// queryOnce sends one QueryRoute over a new connection with the given
// transport credentials and reports whether an answer came back.
func queryOnce(t testing.TB, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = rmqpb.NewMessagingServiceClient(conn).QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "T"}})
	return err
}

// The gRPC port follows tls.server.mode as RocketMQ's ports do: permissive
// serves TLS and plaintext clients on one port, enforcing only TLS ones,
// disabled only plaintext ones.
func TestGRPCPortTLSModes(t *testing.T) {
	tlsCreds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's self-signed certificate
	plain := insecure.NewCredentials()
	for _, tc := range []struct {
		mode           string
		tlsOK, plainOK bool
	}{
		{"permissive", true, true},
		{"enforcing", true, false},
		{"disabled", false, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			addr := startBareProxy(t, tc.mode)
			if err := queryOnce(t, addr, tlsCreds); (err == nil) != tc.tlsOK {
				t.Errorf("TLS client: %v, want served %v", err, tc.tlsOK)
			}
			if err := queryOnce(t, addr, plain); (err == nil) != tc.plainOK {
				t.Errorf("plaintext client: %v, want served %v", err, tc.plainOK)
			}
		})
	}
}

// A PROXY protocol header from a trusted peer names the connection's
// remote address; one from an untrusted peer, or any when headers are
// disabled, fails the connection; a connection without a header is served
// as it is.
func TestGRPCPortProxyProtocol(t *testing.T) {
	client := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 40000}
	for _, tc := range []struct {
		name     string
		disabled bool
		trusted  []netip.Prefix
		header   bool
		wantAddr string // "" when the connection must fail
	}{
		{"trusted by default", false, nil, true, "203.0.113.7:40000"},
		{"trusted network", false, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, true, "203.0.113.7:40000"},
		{"untrusted peer", false, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, true, ""},
		{"disabled", true, nil, true, ""},
		{"no header", false, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, false, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := proxyProtocolListener(raw, remoting.ProxyProtocol{Disabled: tc.disabled, Trusted: tc.trusted})
			defer ln.Close()
			c, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.header {
				h := proxyproto.HeaderProxyFromAddrs(2, client, raw.Addr())
				if _, err := h.WriteTo(c); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			sc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			_ = sc.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 1)
			_, rerr := sc.Read(buf)
			switch {
			case tc.wantAddr == "" && rerr == nil:
				t.Fatalf("connection with a refused header was served, remote %s", sc.RemoteAddr())
			case tc.wantAddr == "":
			case rerr != nil:
				t.Fatalf("read: %v", rerr)
			case buf[0] != 'x':
				t.Fatalf("first byte after the header is %q, want 'x'", buf[0])
			default:
				got := sc.RemoteAddr().String()
				if tc.header && got != tc.wantAddr || !tc.header && (sc.RemoteAddr().(*net.TCPAddr).IP.String() != tc.wantAddr) {
					t.Fatalf("remote address %s, want %s", got, tc.wantAddr)
				}
			}
		})
	}
}
