package remoting

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrPlaintextRefused and ErrTLSRefused are SniffTLS's refusals of a
// connection the port's TLS mode does not allow.
var (
	ErrPlaintextRefused = errors.New("plaintext connection refused: tls.server.mode is enforcing")
	ErrTLSRefused       = errors.New("TLS connection refused: tls.server.mode is disabled")
)

// SniffTLS serves raw, a connection accepted on a net.Listener port that
// takes TLS and plaintext as mode says (RocketMQ's tls.server.mode), as
// the Remoting server does on its own port: it reads the first byte, and
// a TLS handshake record (0x16) gets a TLS server connection over raw with
// cfg (the handshake done), any other byte raw itself with that byte still
// to be read. Enforcing mode refuses plaintext (ErrPlaintextRefused),
// disabled mode or a nil cfg refuses TLS (ErrTLSRefused). The first byte
// and the handshake must come within timeout. Callers close raw on an
// error.
func SniffTLS(raw net.Conn, mode TLSMode, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	_ = raw.SetReadDeadline(time.Now().Add(timeout))
	br := bufio.NewReaderSize(raw, 16)
	first, err := br.Peek(1)
	if err != nil {
		return nil, fmt.Errorf("first byte of %s: %w", raw.RemoteAddr(), err)
	}
	conn := &peekedConn{Conn: raw, r: br}
	if first[0] != tlsRecordHandshake {
		if mode == TLSEnforcing {
			return nil, ErrPlaintextRefused
		}
		_ = raw.SetReadDeadline(time.Time{})
		return conn, nil
	}
	if mode == TLSDisabled || cfg == nil {
		return nil, ErrTLSRefused
	}
	tc := tls.Server(conn, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	_ = raw.SetReadDeadline(time.Time{})
	return tc, nil
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read implements net.Conn from the buffer first.
func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }
