package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// Defaults, as RocketMQ's MessageStoreConfig.
const (
	DefaultHeartbeatInterval    = 5 * time.Second
	DefaultHousekeepingInterval = 20 * time.Second
	DefaultTransferBatchSize    = 32 << 10
	DefaultMaxGapNotInSync      = 256 << 20
)

// Source is the master's CommitLog as the server reads it.
type Source interface {
	// ReadStream returns the bytes from offset to the readable end of
	// its segment, at most max (commitlog.Log.ReadStream).
	ReadStream(offset int64, max int) (*commitlog.View, error)
	// WaitBeyond blocks until the log's end passes offset or ctx ends.
	WaitBeyond(ctx context.Context, offset int64) error
	// MaxOffset is the log's end.
	MaxOffset() int64
	// MinOffset is the log's first offset.
	MinOffset() int64
	// SegmentSize is the size of the log's segments.
	SegmentSize() int64
}

// ServerConfig configures a Server. Zero durations and sizes take the
// defaults.
type ServerConfig struct {
	// Addr is the listen address (":10912").
	Addr string
	// Log is the CommitLog to replicate.
	Log Source
	// HeartbeatInterval is haSendHeartbeatInterval: an idle connection
	// gets an empty transfer this often.
	HeartbeatInterval time.Duration
	// HousekeepingInterval is haHousekeepingInterval: a slave silent for
	// this long is dropped.
	HousekeepingInterval time.Duration
	// TransferBatchSize is haTransferBatchSize, the most bytes in one
	// transfer (at most MaxTransferBody).
	TransferBatchSize int
	// MaxGapNotInSync is haMaxGapNotInSync: a slave whose acknowledgement
	// is this far behind the log's end is not in sync.
	MaxGapNotInSync int64
	// MaxBytesPerSecond caps what each slave is sent in a second
	// (maxHaTransferByteInSecond under haFlowControlEnable); 0 sends as
	// fast as the slave takes it.
	MaxBytesPerSecond int64
	// Logger receives the server's events.
	Logger zerolog.Logger
	// Listen opens the listener on Addr (nil: net.Listen "tcp"); tests
	// give one whose Accept fails.
	Listen func(addr string) (net.Listener, error)
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HousekeepingInterval <= 0 {
		c.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if c.TransferBatchSize <= 0 {
		c.TransferBatchSize = DefaultTransferBatchSize
	}
	c.TransferBatchSize = min(c.TransferBatchSize, MaxTransferBody)
	if c.MaxGapNotInSync <= 0 {
		c.MaxGapNotInSync = DefaultMaxGapNotInSync
	}
	if c.Listen == nil {
		c.Listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	return c
}

// Server is a master's HA service: it accepts slaves and streams the
// CommitLog to each, and tracks what they acknowledged.
//
// Goroutines: the accept loop, and per slave a reader of its reports and
// a writer of transfers (which end with the slave's connection); Close
// stops them all and waits for them.
type Server struct {
	cfg ServerConfig
	log zerolog.Logger
	ln  net.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	slaves  map[*slaveConn]struct{}
	changed chan struct{} // closed when an acknowledgement moves or a slave leaves
}

// slaveConn is one connected slave.
type slaveConn struct {
	conn    net.Conn
	addr    string
	request atomic.Int64  // first report, -1 until it came
	asked   chan struct{} // closed when the first report came
	ack     atomic.Int64  // last report, -1 until the first
	next    atomic.Int64  // where the next transfer starts; -1 before the first report
	flow    Rate          // bytes sent
	// ahead is set when the first report is past the master's end: the
	// slave holds bytes this master never wrote (it was a master itself,
	// or this one lost its unflushed tail), so its acknowledgements prove
	// nothing and never count. Set before ack is first stored.
	//
	// RocketMQ 5.3.3 neither truncates nor refuses such a slave: its
	// HAConnection takes the first report as the place to transfer from,
	// sends heartbeats there (which the slave accepts, the offset being
	// its own end) until the master's end passes it, then the master's
	// bytes from there, which the slave appends after its own records.
	// Meanwhile its acknowledgement, the slave's end, is at or above
	// every offset the master reaches, so GroupTransferService counts it
	// for every send and isInSyncSlave finds it in sync (a negative
	// gap): a SYNC_MASTER answers SEND_OK at once for records no slave
	// holds. rocketkv transfers the same bytes, so an Apache RocketMQ
	// slave ahead of a rocketkv master ends with the same log; but it
	// does not count the slave, so those sends wait slaveTimeout and are
	// answered FLUSH_SLAVE_TIMEOUT, and GET_BROKER_HA_STATUS shows the
	// slave out of sync. SEND_OK from a SYNC_MASTER promises that a slave
	// can serve the message when the master is lost; this slave cannot
	// (its records before the offset it reported are not the master's,
	// and the first of the master's records it holds is cut at that
	// offset), so counting it would turn that promise into a loss at
	// failover. A rocketkv slave does not get here for long: it compares
	// its tail first and refuses the master's bytes (client.go).
	ahead atomic.Bool
}

// SlaveStatus describes one connected slave.
type SlaveStatus struct {
	// Addr is the slave's address.
	Addr string
	// AckOffset is the CommitLog end it last reported.
	AckOffset int64
	// TransferFrom is where the next transfer to it starts.
	TransferFrom int64
	// BytesPerSecond is what it was sent in the last whole second.
	BytesPerSecond int64
	// InSync is true when AckOffset is within haMaxGapNotInSync of the
	// master's end given to Slaves (never for a slave that came ahead of
	// the master).
	InSync bool
}

// NewServer returns a server that listens once started.
func NewServer(cfg ServerConfig) *Server {
	cfg = cfg.withDefaults()
	return &Server{
		cfg:     cfg,
		log:     cfg.Logger.With().Str("component", "ha").Logger(),
		slaves:  map[*slaveConn]struct{}{},
		changed: make(chan struct{}),
	}
}

// Start listens on the configured address and accepts slaves until Close.
func (s *Server) Start() error {
	ln, err := s.cfg.Listen(s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("ha: listen on %s (haListenPort): %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.accept()
	s.log.Info().Stringer("addr", ln.Addr()).Msg("HA service listening for slaves")
	return nil
}

// Addr returns the bound address (nil before Start).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops accepting, drops every slave and waits for the server's
// goroutines.
func (s *Server) Close() error {
	if s.ln == nil {
		return nil
	}
	s.cancel()
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.slaves {
		_ = c.conn.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	AcceptSlaves(s.ctx, s.ln, s.log, &s.wg, func(conn net.Conn) (read, write func(context.Context)) {
		c := &slaveConn{conn: conn, addr: conn.RemoteAddr().String(), asked: make(chan struct{})}
		c.request.Store(-1)
		c.ack.Store(-1)
		c.next.Store(-1)
		s.mu.Lock()
		s.slaves[c] = struct{}{}
		s.mu.Unlock()
		s.log.Info().Str("slave", c.addr).Msg("slave connected")
		return func(ctx context.Context) { s.readReports(ctx, c) }, func(ctx context.Context) { s.transfer(ctx, c) }
	})
}

// drop forgets a slave whose connection ended.
func (s *Server) drop(c *slaveConn, why error) {
	s.mu.Lock()
	_, ok := s.slaves[c]
	delete(s.slaves, c)
	if ok {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	if ok && s.ctx.Err() == nil {
		s.log.Warn().Err(why).Str("slave", c.addr).Int64("ack", c.ack.Load()).Msg("slave disconnected")
	}
}

// readReports reads the slave's reports until the connection ends or the
// slave stays silent for the housekeeping interval.
func (s *Server) readReports(ctx context.Context, c *slaveConn) {
	buf := make([]byte, 4096)
	var pending []byte
	for ctx.Err() == nil {
		_ = c.conn.SetReadDeadline(time.Now().Add(s.cfg.HousekeepingInterval))
		n, err := c.conn.Read(buf)
		if n > 0 {
			last, ok, rest, perr := decodeReports(pending, buf[:n])
			if perr != nil {
				s.drop(c, perr)
				return
			}
			pending = rest
			if ok {
				s.acknowledge(c, last)
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("silent for %s (haHousekeepingInterval): %w", s.cfg.HousekeepingInterval, err)
			}
			s.drop(c, err)
			return
		}
	}
}

// acknowledge records a slave's report and wakes the senders waiting for
// acknowledgements.
func (s *Server) acknowledge(c *slaveConn, offset int64) {
	if c.request.CompareAndSwap(-1, offset) {
		if end := s.cfg.Log.MaxOffset(); offset > end {
			c.ahead.Store(true)
			s.log.Error().Str("slave", c.addr).Int64("slave", offset).Int64("master", end).
				Msg("the slave's CommitLog is ahead of the master's: its bytes past the master's end are not the master's, and its acknowledgements do not count (rebuild the slave from a copy of the master)")
		} else {
			s.log.Info().Str("slave", c.addr).Int64("offset", offset).Msg("slave asks for the CommitLog from here")
		}
		close(c.asked) // the transfer starts
	}
	if c.ack.Swap(offset) == offset {
		return
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// transfer streams the log to the slave from where its first report asks.
func (s *Server) transfer(ctx context.Context, c *slaveConn) {
	select {
	case <-ctx.Done():
		return
	case <-c.asked:
	}
	next := c.request.Load()
	if next == 0 {
		// A new slave starts at the newest segment, as RocketMQ's master
		// serves one.
		end := s.cfg.Log.MaxOffset()
		next = end - end%s.cfg.Log.SegmentSize()
	} else if first := s.cfg.Log.MinOffset(); next < first {
		// Retention deleted what the slave asked for: send from the
		// first byte held (a segment's start). A rocketkv slave compares
		// from there; any other takes it as a gap and reconnects, as
		// it did when the connection was dropped.
		s.log.Warn().Str("slave", c.addr).Int64("asked", next).Int64("from", first).Msg("the slave asked for CommitLog bytes retention deleted; sending from the first offset held")
		next = first
	}
	s.log.Info().Str("slave", c.addr).Int64("from", next).Msg("transferring the CommitLog to the slave")
	c.next.Store(next)
	header := make([]byte, 0, TransferHeaderSize)
	lastWrite := time.Now()
	for ctx.Err() == nil {
		size := s.cfg.TransferBatchSize
		if limit := s.cfg.MaxBytesPerSecond; limit > 0 {
			left, wait := c.flow.budgetAt(time.Now(), limit)
			if left == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
				continue
			}
			size = int(min(int64(size), left))
		}
		v, err := s.cfg.Log.ReadStream(next, size)
		if err != nil {
			s.drop(c, fmt.Errorf("read the CommitLog at %d for the slave (retention may have deleted it: rebuild the slave from a copy): %w", next, err))
			return
		}
		if len(v.Data) == 0 {
			v.Release()
			if time.Since(lastWrite) >= s.cfg.HeartbeatInterval {
				if err := s.write(c, appendTransferHeader(header[:0], next, 0), nil); err != nil {
					s.drop(c, err)
					return
				}
				lastWrite = time.Now()
			}
			wctx, cancel := context.WithTimeout(ctx, s.cfg.HeartbeatInterval-time.Since(lastWrite))
			_ = s.cfg.Log.WaitBeyond(wctx, next)
			cancel()
			continue
		}
		err = s.write(c, appendTransferHeader(header[:0], next, len(v.Data)), v.Data)
		next += int64(len(v.Data))
		c.next.Store(next)
		c.flow.Add(len(v.Data))
		v.Release()
		if err != nil {
			s.drop(c, err)
			return
		}
		lastWrite = time.Now()
	}
}

// write sends one transfer within the housekeeping interval.
func (s *Server) write(c *slaveConn, header, body []byte) error {
	return WriteToSlave(c.conn, s.cfg.HousekeepingInterval, header, body)
}

// WriteToSlave writes a frame's header and body (none when empty) to a
// slave's connection in one write, which must end within timeout (the
// housekeeping interval of both HA protocols).
func WriteToSlave(conn net.Conn, timeout time.Duration, header, body []byte) error {
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	bufs := net.Buffers{header}
	if len(body) > 0 {
		bufs = append(bufs, body)
	}
	if _, err := bufs.WriteTo(conn); err != nil {
		return fmt.Errorf("send to slave: %w", err)
	}
	return nil
}

// WaitAcked waits until at least n connected slaves have acknowledged
// offset (the end of a send's records); a slave that came ahead of the
// master never counts. It returns false when ctx ends first.
func (s *Server) WaitAcked(ctx context.Context, offset int64, n int) bool {
	for {
		s.mu.Lock()
		got := 0
		for c := range s.slaves {
			if c.ack.Load() >= offset && !c.ahead.Load() {
				got++
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// InSyncSlaves counts the slaves whose acknowledgement is less than
// haMaxGapNotInSync behind masterEnd.
func (s *Server) InSyncSlaves(masterEnd int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.slaves {
		if s.inSync(c, masterEnd) {
			n++
		}
	}
	return n
}

// inSync reports whether a slave's acknowledgement is within
// haMaxGapNotInSync of masterEnd.
func (s *Server) inSync(c *slaveConn, masterEnd int64) bool {
	a := c.ack.Load()
	return a >= 0 && masterEnd-a < s.cfg.MaxGapNotInSync && !c.ahead.Load()
}

// Slaves returns the connected slaves, each in sync or not with
// masterEnd.
func (s *Server) Slaves(masterEnd int64) []SlaveStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SlaveStatus, 0, len(s.slaves))
	for c := range s.slaves {
		out = append(out, SlaveStatus{Addr: c.addr, AckOffset: c.ack.Load(), TransferFrom: c.next.Load(),
			BytesPerSecond: c.flow.PerSecond(), InSync: s.inSync(c, masterEnd)})
	}
	return out
}
