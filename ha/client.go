package ha

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/periodic"
)

// DefaultVerifyWindow is how many bytes below its end a reconnecting
// slave asks its master for again, to compare them with its own before it
// takes new ones.
const DefaultVerifyWindow = 64 << 10

// divergedRetry is the least wait before a slave whose CommitLog differs
// from its master's dials again once it knows where: only an operator can
// mend it.
const divergedRetry = time.Minute

// headerAgreement is how many bytes from the first record compared must
// agree with the master's for a difference after them to be the point
// where the logs part: a record header up to its store timestamp and
// host, which two different records do not share.
const headerAgreement = 96

// ErrDiverged reports that the master's bytes below the slave's end are not
// the slave's: the slave holds records its master does not have (a demoted
// master that rejoined as a slave, or the slave of a master that lost its
// unflushed tail and took new sends at the same offsets).
var ErrDiverged = errors.New("ha: the slave's CommitLog differs from the master's")

// Replica is a slave's CommitLog as the client writes it
// (commitlog.Log with Config.Replica).
type Replica interface {
	// ReplicaOffset is the end of the bytes the replica holds.
	ReplicaOffset() int64
	// AppendReplica writes bytes the master sent at off.
	AppendReplica(off int64, data []byte) error
	// MinOffset is the first offset the replica holds.
	MinOffset() int64
	// ReadReplica returns the replica's bytes from off up to its end or
	// the end of their segment, at most max (commitlog.Log.ReadReplica).
	ReadReplica(off int64, max int) (*commitlog.View, error)
	// RecordStart returns the start of the record holding off
	// (commitlog.Log.RecordStart).
	RecordStart(off int64) (int64, error)
	// MessageStart is RecordStart that steps back from a segment's blank
	// filler to the message before it (commitlog.Log.MessageStart).
	MessageStart(off int64) (int64, error)
	// SegmentSize is the size of the replica's segments (the master's).
	SegmentSize() int64
}

// ClientConfig configures a Client. Zero durations take the defaults.
type ClientConfig struct {
	// MasterAddr returns the master's HA address ("host:port"), or ""
	// while it is not known (a slave learns it from its name servers).
	MasterAddr func() string
	// Log is the replica to fill.
	Log Replica
	// HeartbeatInterval is haSendHeartbeatInterval: the slave reports at
	// least this often.
	HeartbeatInterval time.Duration
	// HousekeepingInterval is haHousekeepingInterval: a master silent for
	// this long is dropped and dialled again.
	HousekeepingInterval time.Duration
	// RetryInterval is the wait before dialling again after a failure (5 s,
	// as RocketMQ's slave; at least a minute once the logs diverged).
	RetryInterval time.Duration
	// VerifyWindow is how many bytes below its end the slave asks for
	// again at each connection and compares with its own
	// (DefaultVerifyWindow when 0).
	VerifyWindow int64
	// Logger receives the client's events.
	Logger zerolog.Logger
}

// Client is a slave's HA service: it keeps a connection to the master's
// HA port and writes what the master sends into the replica.
//
// Goroutines: Run's caller owns the one goroutine; Run returns when its
// context ends.
type Client struct {
	cfg ClientConfig
	log zerolog.Logger

	mu        sync.Mutex
	master    string
	connected bool
	lastRead  time.Time
	lastWrite time.Time
	flow      Rate        // bytes received
	diverged  *Divergence // what the last comparison found, nil when it agreed
	window    int64       // the next connection's VerifyWindow, widened while no agreement is found
	narrowed  bool        // window was narrowed to the replica's last segment since the last agreement (check)
	openedAt  time.Time   // when the last connection opened
	openedEnd int64       // the replica's end then
}

// Divergence is where a slave found its CommitLog to differ from its
// master's.
type Divergence struct {
	// At is where the slave's log stops being its master's: the start of
	// its first record that differs when Exact, else the record start the
	// comparison began at (the logs differ there or earlier).
	At int64
	// Exact is true when the bytes before At agreed with the master's
	// (a record header at least): cutting the slave's CommitLog at At
	// mends it.
	Exact bool
	// Final is true when no comparison from further back can help: the
	// place is known (Exact), or the logs differ from the first record
	// the slave holds.
	Final bool
}

// ClientStatus describes the client's connection.
type ClientStatus struct {
	// Master is the HA address in use ("" when none is known).
	Master string
	// Connected is true while a connection to it is open.
	Connected bool
	// LastRead is when the master last sent something.
	LastRead time.Time
	// LastWrite is when the client last reported to the master.
	LastWrite time.Time
	// BytesPerSecond is what it received in the last whole second.
	BytesPerSecond int64
	// Diverged is where the master's bytes were found to differ from the
	// replica's at the last comparison, nil when they did not.
	Diverged *Divergence
	// ConnectedAt is when the current connection (or the last one, once
	// it closed) was opened, zero before the first; ConnectedFrom is the
	// replica's end then.
	ConnectedAt   time.Time
	ConnectedFrom int64
}

// NewClient returns a client; Run starts it.
func NewClient(cfg ClientConfig) *Client {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HousekeepingInterval <= 0 {
		cfg.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	if cfg.VerifyWindow <= 0 {
		cfg.VerifyWindow = DefaultVerifyWindow
	}
	return &Client{cfg: cfg, log: cfg.Logger.With().Str("component", "ha").Logger(), window: cfg.VerifyWindow}
}

// Status returns the client's connection state.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClientStatus{Master: c.master, Connected: c.connected, LastRead: c.lastRead, LastWrite: c.lastWrite,
		BytesPerSecond: c.flow.PerSecond(), Diverged: c.diverged, ConnectedAt: c.openedAt, ConnectedFrom: c.openedEnd}
}

// Run replicates until ctx ends: it dials the master, follows it, and
// dials again after any failure.
func (c *Client) Run(ctx context.Context) {
	for ctx.Err() == nil {
		addr := c.cfg.MasterAddr()
		if addr == "" {
			if !periodic.Sleep(ctx, time.Second) {
				return
			}
			continue
		}
		err := c.follow(ctx, addr)
		c.setState(addr, false, time.Time{})
		if ctx.Err() != nil {
			return
		}
		retry := c.cfg.RetryInterval
		if d := c.Status().Diverged; errors.Is(err, ErrDiverged) && d != nil {
			switch {
			case d.Exact:
				retry = max(retry, divergedRetry)
				c.log.Error().Err(err).Str("master", addr).Int64("cutAt", d.At).Dur("retryIn", retry).
					Msg("replication refused: from cutAt on this slave holds records its master does not have; if the master's history is the one to keep, stop this slave and start it once with --cut-commitlog-at=<cutAt> to remove them (they may be messages a master acknowledged before it failed: read them first, or promote this broker instead)")
			case d.Final:
				retry = max(retry, divergedRetry)
				c.log.Error().Err(err).Str("master", addr).Dur("retryIn", retry).
					Msg("replication refused: this slave's CommitLog differs from its master's from the first record it holds; rebuild its store from a copy of the master (or start it empty)")
			default:
				c.log.Warn().Err(err).Str("master", addr).Int64("window", c.window).
					Msg("the slave's CommitLog differs from its master's where the comparison began; comparing from further back")
			}
		} else {
			c.log.Warn().Err(err).Str("master", addr).Dur("retryIn", retry).Msg("replication from the master stopped")
		}
		if !periodic.Sleep(ctx, retry) {
			return
		}
	}
}

func (c *Client) setState(master string, connected bool, lastRead time.Time) {
	c.mu.Lock()
	c.master, c.connected = master, connected
	if !lastRead.IsZero() {
		c.lastRead = lastRead
	}
	c.mu.Unlock()
}

// follow runs one connection to the master until it fails or ctx ends.
func (c *Client) follow(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial the master's HA port %s: %w", addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	now := time.Now()
	c.setState(addr, true, now)
	chk, err := c.newTailCheck()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.openedAt, c.openedEnd = now, chk.end
	c.mu.Unlock()
	reported := chk.pos
	if err := c.report(conn, reported); err != nil {
		return err
	}
	c.log.Info().Str("master", addr).Int64("offset", chk.end).Int64("verifyFrom", chk.pos).Msg("replicating the master's CommitLog")
	lastReport, lastRead := now, now
	var r transferReader
	buf := make([]byte, 256<<10)
	for {
		if time.Since(lastReport) >= c.cfg.HeartbeatInterval {
			if err := c.report(conn, reported); err != nil {
				return err
			}
			lastReport = time.Now()
		}
		_ = conn.SetReadDeadline(time.Now().Add(min(c.cfg.HeartbeatInterval, time.Second)))
		n, err := conn.Read(buf)
		if n > 0 {
			lastRead = time.Now()
			c.setState(addr, true, lastRead)
			c.flow.Add(n)
			r.feed(buf[:n])
			if err := c.apply(&r, &chk); err != nil {
				return err
			}
			if end := chk.acknowledged(c.cfg.Log.ReplicaOffset()); end > reported {
				reported = end
				if err := c.report(conn, reported); err != nil {
					return err
				}
				lastReport = time.Now()
			}
		}
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return fmt.Errorf("read from the master: %w", err)
			}
			if time.Since(lastRead) > c.cfg.HousekeepingInterval {
				return fmt.Errorf("the master sent nothing for %s (haHousekeepingInterval)", c.cfg.HousekeepingInterval)
			}
		}
	}
}

// apply writes the whole transfers buffered in r into the replica,
// comparing what falls below the end the replica had when the connection
// opened with the replica's own bytes.
func (c *Client) apply(r *transferReader, chk *tailCheck) error {
	for {
		off, body, ok, err := r.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if !chk.done() {
			if off, body, err = c.check(chk, off, body); err != nil {
				return err
			}
			if len(body) == 0 {
				continue
			}
		}
		if end := c.cfg.Log.ReplicaOffset(); end != 0 && off != end {
			return fmt.Errorf("the master sent bytes at %d, the replica ends at %d: %w", off, end, ErrProtocol)
		}
		if len(body) == 0 {
			continue
		}
		if err := c.cfg.Log.AppendReplica(off, body); err != nil {
			return fmt.Errorf("write the master's bytes at %d: %w", off, err)
		}
	}
}

// check compares the part of a transfer at off below the check's end with
// the replica's bytes and returns the rest, to append.
func (c *Client) check(chk *tailCheck, off int64, body []byte) (int64, []byte, error) {
	if len(body) == 0 {
		if off != chk.pos {
			return off, nil, nil
		}
		// A heartbeat: the master has nothing from chk.pos on, and the
		// slave holds bytes up to chk.end. Before any byte was compared
		// it may also be an Apache RocketMQ master whose retention
		// deleted the segment the comparison starts in (it sends
		// heartbeats there and does not skip to its first offset): it
		// holds the segment of the slave's end if it holds that end, so
		// the next connection compares from that segment, once.
		last := chk.end - chk.end%c.cfg.Log.SegmentSize()
		if chk.pos == chk.start && !chk.masterStart && chk.start < last && !c.narrowed {
			c.narrowed = true
			c.window = chk.end - last
			return 0, nil, fmt.Errorf("the master sent nothing from %d, where the slave began comparing its bytes: comparing from its last segment at %d next", chk.pos, last)
		}
		return 0, nil, c.diverge(*chk, chk.pos)
	}
	if off != chk.pos {
		if chk.pos == chk.start && off > chk.end && !chk.masterStart {
			return 0, nil, fmt.Errorf("the master's CommitLog starts at %d, past this slave's end %d: its retention deleted what the slave lacks; rebuild the slave's store from a copy of the master's", off, chk.end)
		}
		if chk.pos != chk.start || off < chk.pos || off > chk.end || chk.masterStart {
			return 0, nil, fmt.Errorf("the master sent bytes at %d, the slave asked for them from %d: %w", off, chk.pos, ErrProtocol)
		}
		// The master's log starts at off (retention deleted what the
		// slave asked for): compare from there, a segment's first record.
		*chk = tailCheck{start: off, agreeAt: min(off+headerAgreement, chk.end), pos: off, end: chk.end, masterStart: true}
		c.log.Info().Int64("verifyFrom", off).Msg("the master's CommitLog starts above where the slave asked to compare from; comparing from its start")
	}
	n := int(min(int64(len(body)), chk.end-chk.pos))
	if err := c.compare(*chk, off, body[:n]); err != nil {
		return 0, nil, err
	}
	chk.pos += int64(n)
	if chk.done() {
		c.window, c.narrowed = c.cfg.VerifyWindow, false
		c.setDiverged(nil)
	}
	return off + int64(n), body[n:], nil
}

// tailCheck is the part of a replica below its end that the slave asked
// its master for again when the connection opened: [pos, end) is still to
// be compared; the master's bytes from start, a record start, must agree
// up to agreeAt for a later difference to say where the logs part.
type tailCheck struct {
	start, agreeAt int64
	pos, end       int64
	// masterStart is true when start is the master's first offset: the
	// master holds nothing further back to compare.
	masterStart bool
}

// newTailCheck starts a connection's check at the message start at or
// below the window's bytes under the replica's end, or at its first
// record. It never starts at a segment's blank filler: any two logs with a
// record ending at the same offset have the same filler there, so its
// bytes agreeing would say nothing. An empty replica checks nothing (and
// reports 0: the master starts it at its newest segment), and the check
// never starts at 0, which a master would read as an empty slave.
func (c *Client) newTailCheck() (tailCheck, error) {
	end := c.cfg.Log.ReplicaOffset()
	if end == 0 {
		return tailCheck{}, nil
	}
	start, err := c.cfg.Log.MessageStart(max(end-c.window, c.cfg.Log.MinOffset()))
	if err != nil {
		return tailCheck{}, fmt.Errorf("find where to compare the slave's CommitLog with the master's: %w", err)
	}
	start = max(start, 1) // the first record of a log starting at 0 is compared from its second byte
	start = min(start, end)
	return tailCheck{start: start, agreeAt: min(start+headerAgreement, end), pos: start, end: end}, nil
}

// done reports whether the check is over.
func (t *tailCheck) done() bool { return t.pos >= t.end }

// acknowledged is what the slave may report holding: the replica's end
// once the check is over, the bytes compared so far before (bytes not
// yet compared may not be the master's).
func (t *tailCheck) acknowledged(replicaEnd int64) int64 {
	if t.done() {
		return replicaEnd
	}
	return t.pos
}

// compare checks the master's bytes at off against the replica's and, at
// the first that differs, records where the logs part.
func (c *Client) compare(chk tailCheck, off int64, master []byte) error {
	for len(master) > 0 {
		v, err := c.cfg.Log.ReadReplica(off, len(master))
		if err != nil {
			return fmt.Errorf("read the slave's own bytes at %d to compare them with the master's: %w", off, err)
		}
		own := v.Data
		if len(own) == 0 {
			v.Release()
			return fmt.Errorf("the slave's bytes at %d are gone while it compared them with the master's", off)
		}
		i := mismatch(own, master)
		v.Release()
		if i >= 0 {
			return c.diverge(chk, off+int64(i))
		}
		off, master = off+int64(len(own)), master[len(own):]
	}
	return nil
}

// mismatch returns the index of the first byte where own and the same
// bytes of master differ, -1 when none does.
func mismatch(own, master []byte) int {
	if bytes.Equal(own, master[:len(own)]) {
		return -1
	}
	for i := range own {
		if own[i] != master[i] {
			return i
		}
	}
	return -1
}

// diverge records that the logs differ at byte at and returns ErrDiverged.
// With the first compared record's header in agreement the slave's log
// stops being the master's at the record holding at; otherwise the next
// connection compares from four times as far back.
func (c *Client) diverge(chk tailCheck, at int64) error {
	d := &Divergence{At: chk.start}
	var cut int64
	var err error
	if at >= chk.agreeAt {
		cut, err = c.cfg.Log.RecordStart(at)
	}
	switch {
	case err != nil:
		c.setDiverged(d)
		return fmt.Errorf("%w at %d; finding the record that holds it: %v", ErrDiverged, at, err)
	case at >= chk.agreeAt && cut > 0:
		d.At, d.Exact, d.Final = cut, true, true
		c.window = c.cfg.VerifyWindow
	case at >= chk.agreeAt:
		// The first record differs after its header: a log that is not
		// its master's from its first record is rebuilt, not cut.
		d.At, d.Final = 0, true
	case chk.masterStart || chk.start <= max(c.cfg.Log.MinOffset(), 1):
		d.Final = true // nothing further back to compare
	default:
		c.window = max(c.window, c.cfg.VerifyWindow) * 4
	}
	c.setDiverged(d)
	if d.Exact {
		return fmt.Errorf("%w: the bytes at %d differ, those from %d agree; the slave's records from %d (to %d) are not the master's",
			ErrDiverged, at, chk.start, d.At, chk.end)
	}
	return fmt.Errorf("%w: the bytes at %d differ, the comparison began at %d (the slave holds up to %d)", ErrDiverged, at, chk.start, chk.end)
}

func (c *Client) setDiverged(d *Divergence) {
	c.mu.Lock()
	c.diverged = d
	c.mu.Unlock()
}

// report sends the replica's end to the master.
func (c *Client) report(conn net.Conn, offset int64) error {
	_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.HousekeepingInterval))
	if _, err := conn.Write(appendReport(make([]byte, 0, ReportSize), offset)); err != nil {
		return fmt.Errorf("report offset %d to the master: %w", offset, err)
	}
	c.mu.Lock()
	c.lastWrite = time.Now()
	c.mu.Unlock()
	return nil
}
