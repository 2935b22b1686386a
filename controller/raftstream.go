package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// raftHandshakeTimeout bounds reading an accepted raft connection's first
// byte and its TLS handshake, and a dialled connection's handshake.
const raftHandshakeTimeout = 10 * time.Second

// Errors of an accepted raft connection the TLS mode does not allow.
var (
	// errRaftPlaintextRefused is a plaintext connection to a peer whose
	// tls.server.mode is enforcing.
	errRaftPlaintextRefused = errors.New("raft connection in plaintext refused: tls.server.mode is enforcing")
	// errRaftTLSRefused is a TLS connection to a peer whose
	// tls.server.mode is disabled.
	errRaftTLSRefused = errors.New("raft connection over TLS refused: tls.server.mode is disabled")
)

// raftStream is the raft.StreamLayer between controllers: TCP whose TLS
// follows RocketMQ's settings as its DLedger controller's peer channels
// do (they are its Remoting server and client, with the controller's
// tls.server.mode and the NettyClientConfig useTLS of its notices). The
// listener serves as mode says: permissive tells a TLS connection from a
// plaintext one by its first byte, enforcing closes plaintext ones,
// disabled TLS ones. Dial uses TLS when client is set.
type raftStream struct {
	ln     net.Listener
	adv    net.Addr
	mode   remoting.TLSMode
	server *tls.Config
	client *tls.Config
	log    zerolog.Logger
}

// listenRaft listens on bind for raft connections, advertising adv (which
// must be a concrete address: peers dial it).
func listenRaft(bind string, adv *net.TCPAddr, mode remoting.TLSMode, server, client *tls.Config, log zerolog.Logger) (*raftStream, error) {
	if adv == nil || adv.IP == nil || adv.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft address %v is not one peers can dial", adv)
	}
	if mode != remoting.TLSDisabled && server == nil {
		return nil, fmt.Errorf("raft listener in TLS mode %s without a certificate", mode)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &raftStream{ln: ln, adv: adv, mode: mode, server: server, client: client, log: log}, nil
}

// Accept implements net.Listener: the connection decides between TLS and
// plaintext on its first read, off the accept loop.
func (s *raftStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffedConn{Conn: c, s: s}, nil
}

// Close implements net.Listener.
func (s *raftStream) Close() error { return s.ln.Close() }

// Addr implements net.Listener: the advertised address.
func (s *raftStream) Addr() net.Addr { return s.adv }

// Dial implements raft.StreamLayer: TCP, then a TLS handshake when the
// controller dials with TLS, both within timeout.
func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if s.client == nil {
		return c, nil
	}
	tc := tls.Client(c, s.client)
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, raftHandshakeTimeout))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft peer %s: TLS handshake: %w", address, err)
	}
	return tc, nil
}

// sniffedConn is an accepted raft connection that reads its first byte
// before anything else and then goes on as TLS or plaintext (or fails,
// when the mode refuses what came). Deadlines and Close apply to the
// TCP connection under either.
type sniffedConn struct {
	net.Conn
	s     *raftStream
	once  sync.Once
	inner net.Conn
	err   error
}

// Read implements net.Conn.
func (c *sniffedConn) Read(b []byte) (int, error) {
	if err := c.open(); err != nil {
		return 0, err
	}
	return c.inner.Read(b)
}

// Write implements net.Conn.
func (c *sniffedConn) Write(b []byte) (int, error) {
	if err := c.open(); err != nil {
		return 0, err
	}
	return c.inner.Write(b)
}

// open decides, once, how the connection goes on.
func (c *sniffedConn) open() error {
	c.once.Do(func() {
		c.inner, c.err = c.s.serve(c.Conn)
		if c.err != nil {
			c.s.log.Warn().Err(c.err).Str("peer", c.RemoteAddr().String()).Msg("closing raft connection")
			_ = c.Conn.Close()
		}
	})
	return c.err
}

// serve reads raw's first byte and returns the connection to go on with
// (remoting.SniffTLS), with the raft peer's refusals.
func (s *raftStream) serve(raw net.Conn) (net.Conn, error) {
	conn, err := remoting.SniffTLS(raw, s.mode, s.server, raftHandshakeTimeout)
	switch {
	case errors.Is(err, remoting.ErrPlaintextRefused):
		return nil, errRaftPlaintextRefused
	case errors.Is(err, remoting.ErrTLSRefused):
		return nil, errRaftTLSRefused
	}
	return conn, err
}
