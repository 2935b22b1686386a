package grpcproxy

import (
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

// ServerHandshake implements credentials.TransportCredentials.
func (c *sniffCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, err := remoting.SniffTLS(raw, c.mode, c.tls, handshakeTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("grpcproxy: %w", err)
	}
	if tc, ok := conn.(*tls.Conn); ok {
		return tc, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
	}
	return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
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
