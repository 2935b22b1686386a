package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/ha"
)

// haPort is the HA port of a controller-mode broker process, owned by the
// Supervisor from its Start to its Shutdown like the Remoting ports
// (processServers). With a listener of each master Broker's AutoSwitch
// server, the port closed at every switch and was closed while the
// process ran a slave: a slave of the group dialling the new master
// while it switched from slave to master was refused, and its client
// tried again only after its retry pause (5 s). Here one loop accepts
// from Start to Shutdown and hands each connection to the master
// Broker's server (lease); a connection arriving while none runs (a
// switch, a slave's role) waits for the next, up to wait, and is closed
// past it, as the gate keeps a request (handlerGate).
//
// Goroutines: the accept loop (ha.AcceptLoop), from start to close.
type haPort struct {
	ln     net.Listener
	log    zerolog.Logger
	wait   time.Duration      // how long a connection waits for a lease
	cancel context.CancelFunc // ends the accept loop, its pause too

	mu     sync.Mutex
	cur    *haLease
	parked map[net.Conn]*time.Timer // waiting for a lease
	closed bool
	// afterFunc starts a parked connection's timer (time.AfterFunc;
	// tests run the callbacks when they choose).
	afterFunc func(time.Duration, func()) *time.Timer

	done chan struct{} // closed when the accept loop returned
}

// haLeaseQueue bounds the connections handed to a lease and not yet
// taken by its server's accept loop; one past it is closed.
const haLeaseQueue = 64

// haMaxParked bounds the connections waiting for a lease; one past it is
// closed at once.
const haMaxParked = 1024

// listenHA opens the process's HA port on addr and starts accepting.
func listenHA(addr string, wait time.Duration, log zerolog.Logger) (*haPort, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on the HA port %s (haListenPort): %w", addr, err)
	}
	p := serveHA(ln, wait, log, 0)
	log.Info().Stringer("addr", ln.Addr()).Msg("HA port listening; each master role serves it")
	return p, nil
}

// serveHA runs the HA port on ln, which it owns from now on: a
// connection waits up to wait for a lease (defaultSwitchWait when not
// positive), and a failed accept is retried after a pause of up to
// maxPause (ha.AcceptLoop's own bound when zero; tests set one no test
// could sit out, to see that close ends it).
func serveHA(ln net.Listener, wait time.Duration, log zerolog.Logger, maxPause time.Duration) *haPort {
	if wait <= 0 {
		wait = defaultSwitchWait
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &haPort{ln: ln, log: log, wait: wait, cancel: cancel, parked: map[net.Conn]*time.Timer{},
		afterFunc: time.AfterFunc, done: make(chan struct{})}
	loop := ha.AcceptLoop{Listener: ln, Log: log, Handle: p.hand, MaxPause: maxPause}
	go func() {
		defer close(p.done)
		loop.Run(ctx)
	}()
	return p
}

// Addr is the port's address.
func (p *haPort) Addr() net.Addr { return p.ln.Addr() }

// hand gives conn to the lease in force, or parks it until the next one
// (closing it past p.wait).
func (p *haPort) hand(conn net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = conn.Close()
		return
	}
	if l := p.cur; l != nil {
		select {
		case l.conns <- conn:
		default:
			p.log.Warn().Str("peer", conn.RemoteAddr().String()).Msg("HA port: the master's server takes no more connections; closed")
			_ = conn.Close()
		}
		return
	}
	p.parkLocked(conn)
}

// parkLocked keeps conn for the next lease, up to p.wait.
func (p *haPort) parkLocked(conn net.Conn) {
	if len(p.parked) >= haMaxParked {
		_ = conn.Close()
		return
	}
	// The timer acts only on its own parking: a lease may take conn and
	// close before its server accepted it, parking conn again under a
	// new timer while this one's callback waits for p.mu. t is set
	// before the callback can take p.mu, which the caller holds.
	var t *time.Timer
	t = p.afterFunc(p.wait, func() {
		p.mu.Lock()
		ok := p.parked[conn] == t
		if ok {
			delete(p.parked, conn)
		}
		p.mu.Unlock()
		if ok {
			p.log.Info().Str("peer", conn.RemoteAddr().String()).Dur("waited", p.wait).
				Msg("HA port: no master role to serve the connection; closed")
			_ = conn.Close()
		}
	})
	p.parked[conn] = t
}

// lease returns the listener of a master Broker's AutoSwitch server: it
// accepts the port's connections, those waiting first, until its Close,
// which leaves the port open.
func (p *haPort) lease() (net.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("the HA port %s: %w", p.ln.Addr(), net.ErrClosed)
	}
	if p.cur != nil {
		return nil, fmt.Errorf("the HA port %s is leased to another server", p.ln.Addr())
	}
	l := &haLease{port: p, conns: make(chan net.Conn, haLeaseQueue), done: make(chan struct{})}
	for conn, t := range p.parked {
		t.Stop()
		delete(p.parked, conn)
		select {
		case l.conns <- conn:
		default:
			_ = conn.Close()
		}
	}
	p.cur = l
	return l, nil
}

// close stops the port: the listener, the accept loop, and the
// connections waiting.
func (p *haPort) close() error {
	p.mu.Lock()
	p.closed = true
	for conn, t := range p.parked {
		t.Stop()
		_ = conn.Close()
	}
	clear(p.parked)
	p.mu.Unlock()
	p.cancel() // before the listener's close: it ends a pause after a failed accept
	err := p.ln.Close()
	<-p.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// haLease is the net.Listener a master Broker's AutoSwitch server
// accepts from (haPort.lease).
type haLease struct {
	port  *haPort
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Accept returns the next connection of the port, or net.ErrClosed once
// the lease is closed.
func (l *haLease) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case conn := <-l.conns:
		return conn, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends the lease, not the port: the connections handed to it and
// not accepted wait for the next lease.
func (l *haLease) Close() error {
	l.once.Do(func() {
		close(l.done)
		p := l.port
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cur == l {
			p.cur = nil
		}
		for {
			select {
			case conn := <-l.conns:
				if p.closed {
					_ = conn.Close()
				} else {
					p.parkLocked(conn)
				}
			default:
				return
			}
		}
	})
	return nil
}

// Addr is the port's address.
func (l *haLease) Addr() net.Addr { return l.port.Addr() }
