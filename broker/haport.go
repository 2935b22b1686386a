package broker

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
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
// Goroutines: the accept loop, from start to close.
type haPort struct {
	ln   net.Listener
	log  zerolog.Logger
	wait time.Duration // how long a connection waits for a lease

	mu     sync.Mutex
	cur    *haLease
	parked map[net.Conn]*time.Timer // waiting for a lease
	closed bool

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
	if wait <= 0 {
		wait = defaultSwitchWait
	}
	p := &haPort{ln: ln, log: log, wait: wait, parked: map[net.Conn]*time.Timer{}, done: make(chan struct{})}
	go p.accept()
	log.Info().Stringer("addr", ln.Addr()).Msg("HA port listening; each master role serves it")
	return p, nil
}

// Addr is the port's address.
func (p *haPort) Addr() net.Addr { return p.ln.Addr() }

// accept takes every connection until close and hands it on.
func (p *haPort) accept() {
	defer close(p.done)
	var pause time.Duration
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			p.log.Error().Err(err).Dur("retryIn", pause).Msg("HA port: accept failed; accepting again after a pause")
			time.Sleep(pause)
			continue
		}
		pause = 0
		p.hand(conn)
	}
}

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
	t = time.AfterFunc(p.wait, func() {
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
