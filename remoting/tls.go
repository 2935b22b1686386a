package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// TLSMode says whether a Server's connections may or must use TLS. The
// modes and their names are RocketMQ's (tls.server.mode).
type TLSMode uint8

const (
	// TLSDisabled serves plaintext only; a connection that opens with a
	// TLS handshake is closed. It is the zero value.
	TLSDisabled TLSMode = iota
	// TLSPermissive serves TLS and plaintext on the same port: a
	// connection whose first byte is a TLS handshake record (0x16) gets
	// TLS, any other connection is plaintext. RocketMQ's default.
	TLSPermissive
	// TLSEnforcing serves TLS only; a plaintext connection is closed.
	TLSEnforcing
)

// String returns the mode's RocketMQ name.
func (m TLSMode) String() string {
	switch m {
	case TLSDisabled:
		return "disabled"
	case TLSPermissive:
		return "permissive"
	case TLSEnforcing:
		return "enforcing"
	default:
		return fmt.Sprintf("TLSMode(%d)", m)
	}
}

// ParseTLSMode reads a mode by its RocketMQ name (disabled, permissive or
// enforcing), in any case.
func ParseTLSMode(s string) (TLSMode, error) {
	for _, m := range []TLSMode{TLSDisabled, TLSPermissive, TLSEnforcing} {
		if strings.EqualFold(strings.TrimSpace(s), m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("TLS mode %q is not one of disabled, permissive, enforcing", s)
}

// DefaultTLSHandshakeTimeout bounds a TLS handshake (Netty's SslHandler
// default, which RocketMQ keeps).
const DefaultTLSHandshakeTimeout = 10 * time.Second

// tlsRecordHandshake is the content type of a TLS handshake record, the
// first byte a TLS client sends.
const tlsRecordHandshake = 0x16

// tlsStageMax is how many bytes of small frames the TLS writer gathers
// into one record: a TLS record carries at most 16 KiB of plaintext.
const tlsStageMax = 16 << 10

// tlsKeepMax is the largest buffer a TLS connection keeps for reuse once
// it is drained; a burst of large frames must not pin its memory for the
// life of an idle connection.
const tlsKeepMax = 64 << 10

// tlsReadBuffer is the read buffer of the frame reader over a TLS
// connection. crypto/tls buffers a whole record already, and frames
// larger than this are read straight into their own slice.
const tlsReadBuffer = 8 << 10

// tlsPipe is the in-memory net.Conn a crypto/tls server connection runs
// over, for a socket owned by a gnet event loop. The event loop feeds the
// ciphertext it receives (feed) and writes out the ciphertext the TLS
// connection produces (takeOut, recycle); the TLS connection's goroutines
// use the net.Conn side (Read, Write, Close), which blocks them and never
// the event loop.
type tlsPipe struct {
	local, remote net.Addr
	// schedule asks the event loop to call takeOut and write what it
	// returns; it is called with mu held and must not block.
	schedule func() error
	// closeConn asks the event loop to close the socket; it must not
	// block.
	closeConn func()

	// maxPending bounds the ciphertext received and not yet decrypted
	// (0: no bound): feed takes no more, and the rest waits in the event
	// loop's buffer until Read has made room, when roomFn (which must not
	// block) is called.
	maxPending int
	roomFn     func()

	mu       sync.Mutex
	in       []byte // ciphertext received; in[inOff:] is not read yet
	inOff    int
	out      []byte // ciphertext waiting for the event loop
	spare    []byte // the previous out, for reuse
	outSched bool   // schedule was called and takeOut has not run yet
	closed   bool
	wantRoom bool // feed left bytes for want of room: call roomFn

	readable chan struct{} // one token: in has grown
	done     chan struct{} // closed by shutdown
}

func newTLSPipe(local, remote net.Addr, schedule func() error, closeConn func()) *tlsPipe {
	return &tlsPipe{
		local:     local,
		remote:    remote,
		schedule:  schedule,
		closeConn: closeConn,
		readable:  make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
}

// room returns how many bytes feed takes now (math.MaxInt without a
// bound).
func (p *tlsPipe) room() int {
	if p.maxPending <= 0 {
		return math.MaxInt
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.maxPending-(len(p.in)-p.inOff), 0)
}

// feed appends ciphertext received from the socket, as much of b as the
// bytes not yet decrypted leave room for under maxPending, and returns
// how much it took; b is copied. When it takes less than all of b, roomFn
// is called once Read has decrypted half of what is pending. It fails
// once the pipe is shut down.
func (p *tlsPipe) feed(b []byte) (int, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, net.ErrClosed
	}
	if p.maxPending > 0 {
		if room := p.maxPending - (len(p.in) - p.inOff); len(b) > room {
			b = b[:max(room, 0)]
			p.wantRoom = true
		}
	}
	// Move the unread bytes to the front before the buffer would grow, or
	// once most of it is read: the buffer then holds what is unread and
	// no more than about twice maxPending.
	if p.inOff > 0 && (cap(p.in)-len(p.in) < len(b) || p.inOff >= len(p.in)/2) {
		n := copy(p.in, p.in[p.inOff:])
		p.in, p.inOff = p.in[:n], 0
	}
	p.in = append(p.in, b...)
	p.mu.Unlock()
	if len(b) > 0 {
		select {
		case p.readable <- struct{}{}:
		default:
		}
	}
	return len(b), nil
}

// takeOut returns the ciphertext waiting to be written and whether the
// pipe is shut down (the bytes are then to be dropped). The caller gives
// the slice back with recycle once written.
func (p *tlsPipe) takeOut() ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.out
	p.out, p.spare = p.spare, nil
	p.outSched = false
	return out, p.closed
}

// recycle gives back a slice returned by takeOut for reuse; very large
// ones are left to the garbage collector.
func (p *tlsPipe) recycle(b []byte) {
	if cap(b) > tlsKeepMax {
		return
	}
	p.mu.Lock()
	if p.spare == nil {
		p.spare = b[:0]
	}
	p.mu.Unlock()
}

// shutdown ends the pipe: reads return io.EOF and writes fail, so the TLS
// connection's goroutines stop. The event loop calls it when the socket
// has closed; it may be called more than once.
func (p *tlsPipe) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.in, p.out, p.spare = nil, nil, nil
	close(p.done)
}

// Read returns ciphertext fed by the event loop, waiting for some.
func (p *tlsPipe) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return 0, io.EOF
		}
		if p.inOff < len(p.in) {
			n := copy(b, p.in[p.inOff:])
			p.inOff += n
			if p.inOff == len(p.in) {
				p.in, p.inOff = p.in[:0], 0
				if cap(p.in) > tlsKeepMax {
					p.in = nil
				}
			}
			room := p.wantRoom && len(p.in)-p.inOff <= p.maxPending/2
			if room {
				p.wantRoom = false
			}
			p.mu.Unlock()
			if room && p.roomFn != nil {
				p.roomFn()
			}
			return n, nil
		}
		p.mu.Unlock()
		select {
		case <-p.readable:
		case <-p.done:
		}
	}
}

// Write queues ciphertext for the event loop to write to the socket. b is
// copied: crypto/tls reuses its buffer.
func (p *tlsPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, net.ErrClosed
	}
	p.out = append(p.out, b...)
	if !p.outSched {
		if err := p.schedule(); err != nil {
			return 0, fmt.Errorf("schedule TLS write: %w", err)
		}
		p.outSched = true
	}
	return len(b), nil
}

// Close closes the socket (crypto/tls calls it when a handshake is
// cancelled) and shuts the pipe down at once, so blocked reads return.
func (p *tlsPipe) Close() error {
	p.closeConn()
	p.shutdown()
	return nil
}

// LocalAddr returns the socket's local address.
func (p *tlsPipe) LocalAddr() net.Addr { return p.local }

// RemoteAddr returns the peer's address.
func (p *tlsPipe) RemoteAddr() net.Addr { return p.remote }

// SetDeadline is not supported: the handshake is bounded by a context and
// the connection by the server's idle timeout. It does nothing.
func (p *tlsPipe) SetDeadline(time.Time) error { return nil }

// SetReadDeadline does nothing; see SetDeadline.
func (p *tlsPipe) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline does nothing; see SetDeadline.
func (p *tlsPipe) SetWriteDeadline(time.Time) error { return nil }

// tlsConn is the TLS state of one Conn. Two goroutines own it: the reader
// runs the handshake, then decrypts and cuts frames and queues them as the
// event loop queues plaintext frames; the writer encrypts what Conn.Send
// queued. Both stop when the pipe is shut down (the socket closed).
type tlsConn struct {
	pipe    *tlsPipe
	tc      *tls.Conn
	kick    chan struct{} // one token: frames are queued for the writer
	flushFn gnet.AsyncCallback
}

// kickWriter tells the writer that frames are queued. It never blocks.
func (t *tlsConn) kickWriter() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// startTLS turns c into a TLS connection. It runs on c's event loop,
// before any byte of c has been consumed, and starts c's two TLS
// goroutines.
func (s *Server) startTLS(gc gnet.Conn, c *Conn) {
	t := &tlsConn{kick: make(chan struct{}, 1)}
	t.flushFn = func(gc gnet.Conn, _ error) error {
		out, closed := t.pipe.takeOut()
		if !closed && len(out) > 0 {
			// gnet writes what the socket takes and copies the rest into
			// its outbound buffer, so out can be reused at once.
			_, _ = gc.Write(out)
		}
		t.pipe.recycle(out)
		if !closed {
			s.pauseIfBehind(gc, c)
		}
		return nil
	}
	t.pipe = newTLSPipe(c.local, c.RemoteAddr(),
		func() error { return gc.Wake(t.flushFn) },
		func() { _ = c.Close() })
	// Two frames of the largest size (and their records' overhead) may
	// wait for decryption; the rest waits in the event loop's buffer.
	t.pipe.maxPending = 2*s.cfg.MaxFrameSize + 1<<20
	t.pipe.roomFn = func() { _ = gc.Wake(c.feedFn) } // fails only once c is closed
	t.tc = tls.Server(t.pipe, s.cfg.TLS)

	c.mu.Lock()
	c.tls = t
	c.undetected = false
	queued := c.flushing
	c.mu.Unlock()
	s.tlsWG.Add(2)
	go s.tlsReader(c, t)
	go s.tlsWriter(c, t)
	if queued {
		t.kickWriter()
	}
}

// tlsReader runs the handshake, then reads decrypted frames until the
// connection closes. A handshake failure or a bad frame closes it.
func (s *Server) tlsReader(c *Conn, t *tlsConn) {
	defer s.tlsWG.Done()
	err := serveTLSFrames(c.ctx, t.tc, s.cfg.TLSHandshakeTimeout, s.cfg.MaxFrameSize, func(frame []byte) { s.enqueue(c, frame, s.clock()) })
	var he *tlsHandshakeError
	switch {
	case s.ctx.Err() != nil:
		s.log.Debug().Err(err).Stringer("conn", c).Msg("TLS connection ended by the shutdown")
	case errors.As(err, &he):
		s.log.Warn().Err(he.err).Stringer("conn", c).Msg("closing connection: TLS handshake failed")
	case c.Closed() || errors.Is(err, io.EOF):
		s.log.Debug().Err(err).Stringer("conn", c).Msg("TLS connection ended")
	default:
		s.log.Warn().Err(err).Stringer("conn", c).Msg("closing TLS connection: bad input")
	}
	_ = c.Close()
}

// tlsHandshakeError marks an error of the handshake, for the log.
type tlsHandshakeError struct{ err error }

func (e *tlsHandshakeError) Error() string { return "TLS handshake: " + e.err.Error() }
func (e *tlsHandshakeError) Unwrap() error { return e.err }

// serveTLSFrames runs the server handshake of tc, bounded by timeout and
// ctx, then hands every frame read from the decrypted stream to deliver,
// under the same size rule as plaintext frames. It returns why it stopped:
// a *tlsHandshakeError, io.EOF at a clean end between frames, or the read
// or framing error.
func serveTLSFrames(ctx context.Context, tc *tls.Conn, timeout time.Duration, maxFrameSize int, deliver func([]byte)) error {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return &tlsHandshakeError{err: err}
	}
	fr := newFrameReaderSize(tc, maxFrameSize, tlsReadBuffer)
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		deliver(frame)
	}
}

// tlsWriter encrypts the frames Conn.Send queued, gathering small ones
// into one record, until the connection closes.
func (s *Server) tlsWriter(c *Conn, t *tlsConn) {
	defer s.tlsWG.Done()
	var stage []byte
	var failed bool
	for {
		select {
		case <-t.kick:
		case <-t.pipe.done:
			// The connection is closed, so no Send queues any more: give
			// back what is still queued.
			q, bufs, bodies, _ := c.takeQueue()
			c.releaseQueue(q, bufs, bodies)
			return
		}
		q, bufs, bodies, closed := c.takeQueue()
		if !closed && !failed {
			var err error
			stage, err = writeTLSFrames(t.tc, q, stage)
			if err != nil {
				// Only a closed pipe or a failed handshake make a write
				// fail; the reader closes the connection for both.
				failed = true
			}
		}
		c.releaseQueue(q, bufs, bodies)
		if cap(stage) > tlsKeepMax {
			stage = nil
		}
	}
}

// writeTLSFrames writes the buffers q to tc in order, copying runs of
// small ones into stage so that they share records. It returns stage for
// reuse.
func writeTLSFrames(tc io.Writer, q [][]byte, stage []byte) ([]byte, error) {
	stage = stage[:0]
	for _, b := range q {
		if len(stage)+len(b) <= tlsStageMax {
			stage = append(stage, b...)
			continue
		}
		if len(stage) > 0 {
			if _, err := tc.Write(stage); err != nil {
				return stage[:0], err
			}
			stage = stage[:0]
		}
		if len(b) >= tlsStageMax {
			if _, err := tc.Write(b); err != nil {
				return stage, err
			}
			continue
		}
		stage = append(stage, b...)
	}
	if len(stage) > 0 {
		if _, err := tc.Write(stage); err != nil {
			return stage[:0], err
		}
	}
	return stage[:0], nil
}
