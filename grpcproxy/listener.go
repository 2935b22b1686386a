package grpcproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/pires/go-proxyproto"
	"google.golang.org/grpc/credentials"

	"github.com/rocketkv/rocketkv/remoting"
)

// handshakeTimeout bounds reading a connection's PROXY protocol header and
// its first byte or TLS handshake.
const handshakeTimeout = 10 * time.Second

// proxyProtocolListener wraps ln so that connections may open with a
// PROXY protocol header (v1 or v2) from a peer the policy trusts, as
// RocketMQ's proxy accepts on its gRPC port: the header's source becomes
// the connection's remote address (the born host of messages sent
// without one). A header from a peer it does not trust, or any header
// when headers are disabled, fails the connection.
func proxyProtocolListener(ln net.Listener, policy remoting.ProxyProtocol) net.Listener {
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: handshakeTimeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if policy.Disabled || !policy.Trusts(o.Upstream) {
				return proxyproto.REJECT, nil
			}
			return proxyproto.USE, nil
		},
	}
}

// sniffCreds are gRPC transport credentials that serve TLS and plaintext
// on one port as RocketMQ's tls.server.mode says: a connection whose first
// byte is a TLS handshake record (0x16) gets TLS, any other is plaintext,
// which enforcing mode refuses (and disabled mode refuses TLS).
type sniffCreds struct {
	mode remoting.TLSMode
	tls  *tls.Config
}

// plainInfo is the AuthInfo of a plaintext connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

// errPlaintextRefused and errTLSRefused are the handshake errors of a
// connection the TLS mode does not allow.
var (
	errPlaintextRefused = errors.New("grpcproxy: plaintext connection refused: tls.server.mode is enforcing")
	errTLSRefused       = errors.New("grpcproxy: TLS connection refused: tls.server.mode is disabled")
)

// ServerHandshake implements credentials.TransportCredentials.
func (c *sniffCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	_ = raw.SetReadDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(raw, 1)
	first, err := br.Peek(1)
	if err != nil {
		return nil, nil, fmt.Errorf("grpcproxy: first byte of %s: %w", raw.RemoteAddr(), err)
	}
	conn := &peekedConn{Conn: raw, r: br}
	if first[0] != 0x16 {
		_ = raw.SetReadDeadline(time.Time{})
		if c.mode == remoting.TLSEnforcing {
			return nil, nil, errPlaintextRefused
		}
		return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	if c.mode == remoting.TLSDisabled || c.tls == nil {
		return nil, nil, errTLSRefused
	}
	tc := tls.Server(conn, c.tls)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("grpcproxy: TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	_ = raw.SetReadDeadline(time.Time{})
	return tc, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

// ClientHandshake implements credentials.TransportCredentials; the proxy
// only serves.
func (c *sniffCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("grpcproxy: server credentials cannot dial")
}

// Info implements credentials.TransportCredentials.
func (c *sniffCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

// Clone implements credentials.TransportCredentials.
func (c *sniffCreds) Clone() credentials.TransportCredentials {
	cp := *c
	if c.tls != nil {
		cp.tls = c.tls.Clone()
	}
	return &cp
}

// OverrideServerName implements credentials.TransportCredentials
// (deprecated by gRPC, unused by servers).
func (c *sniffCreds) OverrideServerName(string) error { return nil }

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }
