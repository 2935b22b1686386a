package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Replica is a slave's CommitLog as the client writes it
// (commitlog.Log with Config.Replica).
type Replica interface {
	// ReplicaOffset is the end of the bytes the replica holds.
	ReplicaOffset() int64
	// AppendReplica writes bytes the master sent at off.
	AppendReplica(off int64, data []byte) error
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
	// as RocketMQ's slave).
	RetryInterval time.Duration
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
	flow      rate // bytes received
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
	return &Client{cfg: cfg, log: cfg.Logger.With().Str("component", "ha").Logger()}
}

// Status returns the client's connection state.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClientStatus{Master: c.master, Connected: c.connected, LastRead: c.lastRead, LastWrite: c.lastWrite,
		BytesPerSecond: c.flow.perSecond()}
}

// Run replicates until ctx ends: it dials the master, follows it, and
// dials again after any failure.
func (c *Client) Run(ctx context.Context) {
	for ctx.Err() == nil {
		addr := c.cfg.MasterAddr()
		if addr == "" {
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		err := c.follow(ctx, addr)
		c.setState(addr, false, time.Time{})
		if ctx.Err() != nil {
			return
		}
		c.log.Warn().Err(err).Str("master", addr).Dur("retryIn", c.cfg.RetryInterval).Msg("replication from the master stopped")
		if !sleep(ctx, c.cfg.RetryInterval) {
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
	reported := c.cfg.Log.ReplicaOffset()
	if err := c.report(conn, reported); err != nil {
		return err
	}
	c.log.Info().Str("master", addr).Int64("offset", reported).Msg("replicating the master's CommitLog")
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
			c.flow.add(n)
			r.feed(buf[:n])
			if err := c.apply(&r); err != nil {
				return err
			}
			if end := c.cfg.Log.ReplicaOffset(); end > reported {
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

// apply writes the whole transfers buffered in r into the replica.
func (c *Client) apply(r *transferReader) error {
	for {
		off, body, ok, err := r.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
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

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
