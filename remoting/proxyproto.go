package remoting

// A connection that comes through a load balancer (HAProxy, nginx's
// stream proxy, a cloud network load balancer) may open with a PROXY
// protocol header naming the client the balancer accepted. RocketMQ's
// Remoting server reads one, of either version, before it looks for TLS,
// and from then on reports the header's source as the channel's remote
// address (access control, connection lists, logs); the born host it
// stores in messages stays the socket's peer.
//
//	version 1, one text line of at most 107 bytes:
//
//	  "PROXY TCP4 192.0.2.10 198.51.100.1 56324 10911\r\n"
//	  "PROXY TCP6 2001:db8::10 2001:db8::1 56324 10911\r\n"
//	  "PROXY UNKNOWN ...\r\n"                (no usable address)
//
//	version 2, binary, 16 bytes and then len bytes:
//
//	  +-----------------------------------+-----+-----+---------+
//	  | \r\n\r\n\0\r\nQUIT\n  (12 bytes)   | v|c | f|p | len u16 |
//	  +-----------------------------------+-----+-----+---------+
//	  | addresses: IPv4 4+4+2+2, IPv6 16+16+2+2, unix 108+108   |
//	  | then type-length-value extensions up to len              |
//	  +----------------------------------------------------------+
//	  v|c: version 2 in the high nibble, command LOCAL (0) or PROXY (1)
//	  f|p: address family (1 IPv4, 2 IPv6, 3 unix), transport (1 stream, 2 dgram)
//
// No Remoting frame can start like either: a frame's first byte is the
// high byte of its length, and 'P' (0x50) or '\r' (0x0D) there would mean
// a frame of hundreds of megabytes, far over any frame limit. So the first
// byte tells a header apart at no cost to connections without one.
//
// Framing (how many bytes the header takes, whether more must arrive) is
// done here; parsing and validation are go-proxyproto's.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/panjf2000/gnet/v2"
	"github.com/pires/go-proxyproto"
)

// Sizes of PROXY protocol headers (HAProxy's proxy-protocol.txt).
const (
	// proxyV1MaxLen is the longest version 1 line, CRLF included.
	proxyV1MaxLen = 107
	// proxyV2FixedLen is the version 2 signature, version and command,
	// family and transport, and the 16-bit length of what follows.
	proxyV2FixedLen = 16
)

// ErrBadProxyHeader is returned (wrapped, with the cause) for a PROXY
// protocol header that cannot be framed or parsed.
var ErrBadProxyHeader = errors.New("bad PROXY protocol header")

// ProxyProtocol says which connections of a Server may open with a PROXY
// protocol header. The zero value accepts one from any peer, as RocketMQ
// does.
type ProxyProtocol struct {
	// Disabled refuses headers: a connection that opens with one is
	// closed, with a log line that says why.
	Disabled bool
	// Trusted, when not empty, lists the networks of the load balancers
	// allowed to send a header; a header from any other peer closes the
	// connection. Empty trusts every peer, as RocketMQ does, which lets
	// any client claim any address to address-based access control.
	Trusted []netip.Prefix
}

// Trusts reports whether peer may send a header (the gRPC proxy's
// listener asks it too).
func (p ProxyProtocol) Trusts(peer net.Addr) bool {
	if len(p.Trusted) == 0 {
		return true
	}
	ip, ok := addrIP(peer)
	if !ok {
		return false
	}
	for _, n := range p.Trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// addrIP returns the IP of a TCP address, IPv4-mapped addresses unmapped.
func addrIP(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ip.Unmap(), ok
}

// mayOpenProxyHeader reports whether b, the first bytes of a connection,
// could be the start of a PROXY protocol header of either version.
func mayOpenProxyHeader(b []byte) bool {
	return isPrefixOf(b, proxyproto.SIGV1) || isPrefixOf(b, proxyproto.SIGV2)
}

// isPrefixOf reports whether the first min(len(b), len(sig)) bytes of b
// are sig's.
func isPrefixOf(b, sig []byte) bool {
	n := min(len(b), len(sig))
	return n > 0 && bytes.Equal(b[:n], sig[:n])
}

// proxyHeaderSize frames a PROXY protocol header at the start of b, the
// bytes of a connection received so far. It returns the header's length
// once all of it is in b; 0 and more=true while b is a prefix of a header
// still arriving; 0 and more=false when b does not open with one. A
// version 1 line with no end within its 107 bytes is an error.
func proxyHeaderSize(b []byte) (size int, more bool, err error) {
	switch {
	case isPrefixOf(b, proxyproto.SIGV2):
		if len(b) < proxyV2FixedLen {
			return 0, true, nil
		}
		size = proxyV2FixedLen + int(binary.BigEndian.Uint16(b[14:16]))
		if len(b) < size {
			return 0, true, nil
		}
		return size, false, nil
	case isPrefixOf(b, proxyproto.SIGV1):
		line := b[:min(len(b), proxyV1MaxLen)]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			return i + 1, false, nil
		}
		if len(line) == proxyV1MaxLen {
			return 0, false, fmt.Errorf("%w: a version 1 line has no end within its %d bytes", ErrBadProxyHeader, proxyV1MaxLen)
		}
		return 0, true, nil
	}
	return 0, false, nil
}

// parseProxyHeader parses a whole header (as framed by proxyHeaderSize)
// and returns the client address it gives: nil for a LOCAL command
// (the balancer's own connection, a health check), a version 1 UNKNOWN
// line, or a family other than TCP over IPv4 or IPv6, where the socket's
// peer stays the client, as RocketMQ keeps it without a source port.
func parseProxyHeader(h []byte) (*net.TCPAddr, error) {
	r := bufio.NewReaderSize(bytes.NewReader(h), max(len(h), 16))
	hdr, err := proxyproto.Read(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadProxyHeader, err)
	}
	if r.Buffered() != 0 {
		return nil, fmt.Errorf("%w: %d bytes of it left unread", ErrBadProxyHeader, r.Buffered())
	}
	if !hdr.Command.IsProxy() {
		return nil, nil
	}
	src, _, ok := hdr.TCPAddrs()
	if !ok || src == nil || src.Port == 0 {
		return nil, nil
	}
	return src, nil
}

// readProxyHeader reads the PROXY protocol header that may open c, on the
// event loop. It reports done once the question is settled (a header
// read, or the first bytes are not one) and closeConn, after a log line,
// for a header that is refused or bad; while a header is still arriving
// it reports neither.
func (e *eventHandler) readProxyHeader(gc gnet.Conn, c *Conn) (done, closeConn bool) {
	s := e.s
	// No header is longer than a version 2 one of the largest length.
	buf, err := gc.Peek(min(gc.InboundBuffered(), proxyV2FixedLen+math.MaxUint16))
	if err != nil || len(buf) == 0 {
		return false, false
	}
	size, more, err := proxyHeaderSize(buf)
	switch {
	case err != nil:
		s.log.Warn().Err(err).Stringer("conn", c).Msg("closing connection: bad PROXY protocol header")
		return false, true
	case more:
		return false, false
	case size == 0:
		c.proxyPending = false
		return true, false
	}
	if !s.cfg.ProxyProtocol.Trusts(c.remote) {
		s.log.Warn().Stringer("conn", c).Msg("closing connection: PROXY protocol header from a peer outside proxyProtocolTrustedNetworks")
		return false, true
	}
	client, err := parseProxyHeader(buf[:size])
	if err != nil {
		s.log.Warn().Err(err).Stringer("conn", c).Msg("closing connection: bad PROXY protocol header")
		return false, true
	}
	if _, err := gc.Discard(size); err != nil {
		s.log.Error().Err(err).Stringer("conn", c).Msg("closing connection: cannot drop its PROXY protocol header")
		return false, true
	}
	c.proxyPending, c.proxyRead = false, true
	if client != nil {
		c.client.Store(client)
	}
	s.log.Debug().Stringer("conn", c).Msg("PROXY protocol header read")
	return true, false
}
