package autoswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
)

// Replica is a slave's CommitLog as the client writes it
// (commitlog.Log opened with Config.Replica).
type Replica interface {
	// MaxOffset is the end of the whole records the replica holds.
	MaxOffset() int64
	// ReplicaOffset is the end of every byte it holds.
	ReplicaOffset() int64
	// AppendReplica writes bytes the master sent at off.
	AppendReplica(off int64, data []byte) error
	// DiscardUnfinished drops the bytes past MaxOffset.
	DiscardUnfinished()
}

// ErrNoConsistentPoint is returned when the slave's epochs and its
// master's share no epoch start: nothing of the slave's log is known to
// be the master's. RocketMQ's slave logs it and tries again; so does
// Client.Run.
var ErrNoConsistentPoint = errors.New("autoswitch: no epoch shared with the master")

// CutError is returned by Client.Run when the slave holds records past
// the consistent point with its master: records of an epoch the master
// does not share (written by this broker as a master that lost the
// election, or received from one). RocketMQ's slave truncates its
// CommitLog there at once; rocketkv cuts it at the next start
// (commitlog.Config.CutAt, the broker's --cut-commitlog-at), where the
// index drops what it dispatched from the removed records, which a live
// truncate could not do safely under running readers and dispatch. The
// epoch file is truncated already.
type CutError struct {
	// At is the consistent point: the records from At on are not the
	// master's. It is the start of a record (the master's epoch began
	// there).
	At int64
	// End is the slave's CommitLog end when it was found.
	End int64
}

func (e *CutError) Error() string {
	return fmt.Sprintf("autoswitch: this slave's CommitLog holds records from %d to %d that are not its master's: cut it at %d (restart with the CommitLog cut there)", e.At, e.End, e.At)
}

// ClientConfig configures a slave's Client. Zero durations take the
// defaults.
type ClientConfig struct {
	// MasterAddr returns the master's HA address ("host:port"), or ""
	// while it is not known.
	MasterAddr func() string
	// BrokerID is this slave's broker id, sent in the handshake.
	BrokerID int64
	// Log is the replica to fill.
	Log Replica
	// Epochs is this broker's epoch file.
	Epochs *EpochCache
	// SyncFromLastFile is syncFromLastFile: an empty slave asks for the
	// master's newest segment rather than all it holds.
	SyncFromLastFile bool
	// AsyncLearner is asyncLearner: the master never puts this slave in
	// the SyncStateSet.
	AsyncLearner bool
	// HeartbeatInterval is haSendHeartbeatInterval: the slave reports at
	// least this often.
	HeartbeatInterval time.Duration
	// HousekeepingInterval is haHousekeepingInterval: a master silent
	// this long is dropped and dialled again.
	HousekeepingInterval time.Duration
	// RetryInterval is the wait before dialling again after a failure.
	RetryInterval time.Duration
	// StoredConfirmOffset is the confirm offset the store last recorded
	// (the checkpoint's confirmPhyOffset): ConfirmOffset until the first
	// transfer, as RocketMQ's slave reports its stored one. Negative:
	// none (-1).
	StoredConfirmOffset int64
	// ConfirmLimit, when set, is told the confirm offset of every
	// transfer (the master's, at most this replica's end), where
	// consumers' reads on this slave must stop (RocketMQ's slave
	// dispatches up to it). Called from Run's goroutine; it must not
	// block (the broker hands it to commitlog.Log.SetConfirmLimit).
	ConfirmLimit func(limit int64)
	// Logger receives the client's events.
	Logger zerolog.Logger
}

// Client is a slave's AutoSwitch HA service: it connects to the master,
// handshakes, finds the consistent point of both epoch files and follows
// the master's transfers from there.
//
// Goroutines: Run's caller owns the one goroutine; Run returns when its
// context ends or the log must be cut (*CutError).
type Client struct {
	cfg ClientConfig
	log zerolog.Logger

	mu        sync.Mutex
	master    string
	state     State
	lastRead  time.Time
	lastWrite time.Time
	confirm   int64
	flow      ha.Rate
	// transferAt, transferFrom and masterEnd are when the last connection
	// finished its handshake, the replica's end then and the master's end
	// its handshake told (ClientStatus).
	transferAt   time.Time
	transferFrom int64
	masterEnd    int64
	// noPoint is set while the last handshake found no consistent point
	// (ErrNoConsistentPoint), cleared by one that found it.
	noPoint bool
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
		cfg.RetryInterval = DefaultRetryInterval
	}
	return &Client{cfg: cfg, log: cfg.Logger.With().Str("component", "autoswitch-ha").Logger(), state: StateReady,
		confirm: max(cfg.StoredConfirmOffset, -1)}
}

// BecomeSlave checks that this broker may follow a master of
// masterEpoch (RocketMQ's changeToSlave refuses an epoch below the last
// one in the epoch file).
func BecomeSlave(epochs *EpochCache, masterEpoch int32) error {
	if last := epochs.LastEpoch(); masterEpoch < last {
		return fmt.Errorf("become the slave of a master of epoch %d: the epoch file holds epoch %d already", masterEpoch, last)
	}
	return nil
}

// Run keeps a connection to the master until ctx ends (it returns
// ctx.Err()) or the slave's CommitLog must be cut first (*CutError).
func (c *Client) Run(ctx context.Context) error {
	if c.cfg.Log == nil || c.cfg.Epochs == nil || c.cfg.MasterAddr == nil {
		return errors.New("autoswitch: ClientConfig needs MasterAddr, Log and Epochs")
	}
	// A slave waits for its master's HA address as long as its master
	// and its name servers do not give it: one line, then one per
	// repeatlog.DefaultInterval, not one per retry.
	unknown := repeatlog.New(c.log, 0, nil)
	for {
		addr := c.cfg.MasterAddr()
		if addr == "" {
			unknown.Failed().Dur("retryIn", c.cfg.RetryInterval).Msg("the master's HA address is not known yet: replication waits for it")
		} else {
			unknown.Recovered().Str("master", addr).Msg("the master's HA address is known: replication starts")
			err := c.session(ctx, addr)
			c.setState(StateReady)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var cut *CutError
			if errors.As(err, &cut) {
				c.log.Error().Err(err).Str("master", addr).Int64("cutAt", cut.At).Msg("replication stopped: the CommitLog must be cut at the consistent point with the master")
				return err
			}
			c.log.Warn().Err(err).Str("master", addr).Dur("retryIn", c.cfg.RetryInterval).Msg("replication from the master interrupted")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.cfg.RetryInterval):
		}
	}
}

func (c *Client) setState(s State) {
	c.mu.Lock()
	c.state = s
	c.mu.Unlock()
}

// session is one connection to the master.
func (c *Client) session(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial the master's HA port %s: %w", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer conn.Close()
	c.mu.Lock()
	c.master, c.state, c.lastRead = addr, StateHandshake, time.Now()
	c.mu.Unlock()
	c.log.Info().Str("master", addr).Int64("brokerId", c.cfg.BrokerID).Msg("connected to the master; handshaking")

	// Whole records only: a record the last master cut short may be of an
	// epoch the new one does not share.
	c.cfg.Log.DiscardUnfinished()
	var wbuf []byte
	send := func(b []byte) error {
		_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.HousekeepingInterval))
		if _, err := conn.Write(b); err != nil {
			return fmt.Errorf("send to the master: %w", err)
		}
		c.mu.Lock()
		c.lastWrite = time.Now()
		c.mu.Unlock()
		return nil
	}
	if err := send(AppendSlaveHandshake(wbuf[:0], SlaveHandshake{SyncFromLastFile: c.cfg.SyncFromLastFile,
		AsyncLearner: c.cfg.AsyncLearner, BrokerID: c.cfg.BrokerID})); err != nil {
		return err
	}

	var (
		r        MasterReader
		buf      = make([]byte, 256<<10)
		state    = StateHandshake
		reported = int64(-1)
		epoch    = int32(-1) // the epoch of the last transfer
		lastRead = time.Now()
	)
	report := func(force bool) error {
		end := c.cfg.Log.ReplicaOffset()
		if !force && end <= reported {
			return nil
		}
		reported = end
		wbuf = AppendSlaveReport(wbuf[:0], end)
		return send(wbuf)
	}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(min(c.cfg.HeartbeatInterval, c.cfg.HousekeepingInterval)))
		n, rerr := conn.Read(buf)
		now := time.Now()
		if n > 0 {
			lastRead = now
			c.mu.Lock()
			c.lastRead = now
			c.mu.Unlock()
			c.flow.Add(n)
			r.Feed(buf[:n])
		}
		for {
			f, ok, err := r.Next()
			if err != nil && f.State == StateReady {
				err = fmt.Errorf("%w (a classic HA master, brokerRole ASYNC_MASTER or SYNC_MASTER without controller mode, speaks another protocol)", err)
			}
			if err != nil {
				c.log.Error().Err(err).Str("master", addr).Msg("closing the connection of a master that broke the AutoSwitch HA protocol")
				return err
			}
			if !ok {
				break
			}
			if f.State != state {
				return fmt.Errorf("%w: master frame in state %s while the slave is in state %s", ErrProtocol, f.State, state)
			}
			switch f.State {
			case StateHandshake:
				if err := c.truncate(f.Handshake); err != nil {
					return err
				}
				state = StateTransfer
				from := c.cfg.Log.ReplicaOffset()
				c.mu.Lock()
				c.state, c.transferAt, c.transferFrom, c.masterEnd = StateTransfer, time.Now(), from, f.Handshake.MaxOffset
				c.mu.Unlock()
				if err := report(true); err != nil {
					return err
				}
			case StateTransfer:
				if err := c.apply(f, &epoch); err != nil {
					return err
				}
				if err := report(false); err != nil {
					return err
				}
			}
		}
		if rerr != nil {
			var ne net.Error
			if !errors.As(rerr, &ne) || !ne.Timeout() {
				return fmt.Errorf("read from the master: %w", rerr)
			}
		}
		if time.Since(lastRead) > c.cfg.HousekeepingInterval {
			return fmt.Errorf("the master was silent for %s (haHousekeepingInterval)", c.cfg.HousekeepingInterval)
		}
		if state == StateTransfer {
			c.mu.Lock()
			due := time.Since(c.lastWrite) >= c.cfg.HeartbeatInterval
			c.mu.Unlock()
			if due {
				if err := report(true); err != nil {
					return err
				}
			}
		}
	}
}

// truncate finds where the slave's log and the master's agree, from the
// master's handshake (RocketMQ's doTruncate).
func (c *Client) truncate(h MasterHandshake) error {
	end := c.cfg.Log.MaxOffset()
	// Epochs that begin at or past this log's end hold none of its
	// records (one this broker was master of and wrote nothing in, or
	// one its master began after the last record it sent): they go, as
	// the truncation below drops them anyway, and the master's transfers
	// record the epochs of what follows. Kept, such an epoch, unknown to
	// a master elected before any record or transfer of it, left the two
	// sharing no epoch start, and this slave never followed (RocketMQ's
	// slave stays so).
	if err := c.cfg.Epochs.TruncateSuffixByOffset(end); err != nil {
		return fmt.Errorf("drop the epochs past the CommitLog's end %d: %w", end, err)
	}
	if c.cfg.Epochs.Len() == 0 {
		// A new replica: nothing to compare.
		c.log.Info().Int64("end", end).Msg("no epoch file entry: a new replica, nothing to truncate")
		return nil
	}
	master := NewEpochCache(h.Entries)
	master.SetLastEndOffset(h.MaxOffset)
	local := NewEpochCache(c.cfg.Epochs.Entries())
	local.SetLastEndOffset(end)
	at := local.ConsistentPoint(master)
	c.log.Info().Any("masterEpochs", h.Entries).Int64("masterEnd", h.MaxOffset).Any("localEpochs", c.cfg.Epochs.Entries()).
		Int64("localEnd", end).Int64("consistentPoint", at).Msg("master's handshake")
	c.mu.Lock()
	c.noPoint = at < 0
	c.mu.Unlock()
	if at < 0 {
		return fmt.Errorf("%w: master epochs %v, this slave's %v", ErrNoConsistentPoint, h.Entries, c.cfg.Epochs.Entries())
	}
	if err := c.cfg.Epochs.TruncateSuffixByOffset(at); err != nil {
		return fmt.Errorf("truncate the epoch file at %d: %w", at, err)
	}
	if at < end {
		return &CutError{At: at, End: end}
	}
	return nil
}

// apply takes one transfer: its epoch into the epoch file, its bytes
// into the replica, its confirm offset.
func (c *Client) apply(f MasterFrame, epoch *int32) error {
	h := f.Transfer
	end := c.cfg.Log.ReplicaOffset()
	if len(f.Body) > 0 && end != 0 && end != h.Offset {
		return fmt.Errorf("%w: the master sent %d bytes at %d, this slave's CommitLog ends at %d", ErrProtocol, len(f.Body), h.Offset, end)
	}
	if h.Epoch != *epoch && h.Epoch >= 0 {
		*epoch = h.Epoch
		e := EpochEntry{Epoch: h.Epoch, StartOffset: h.EpochStartOffset}
		if last, ok := c.cfg.Epochs.LastEntry(); !ok || last.Epoch < e.Epoch {
			if err := c.cfg.Epochs.Append(e); err != nil {
				if !errors.Is(err, ErrEpochOrder) {
					return fmt.Errorf("record the master's epoch %s: %w", e, err)
				}
				c.log.Warn().Err(err).Msg("the master's epoch not recorded")
			} else {
				c.log.Info().Int32("epoch", e.Epoch).Int64("startOffset", e.StartOffset).Msg("the master's epoch recorded")
			}
		}
	}
	if len(f.Body) > 0 {
		if err := c.cfg.Log.AppendReplica(h.Offset, f.Body); err != nil {
			return fmt.Errorf("append %d bytes the master sent at %d: %w", len(f.Body), h.Offset, err)
		}
	}
	confirm := min(h.ConfirmOffset, c.cfg.Log.MaxOffset())
	c.mu.Lock()
	changed := c.confirm != confirm
	c.confirm = confirm
	c.mu.Unlock()
	if changed && c.cfg.ConfirmLimit != nil {
		// A negative confirm offset (none a master should send) shows
		// nothing new, as RocketMQ's slave's reput would.
		c.cfg.ConfirmLimit(max(confirm, 0))
	}
	return nil
}

// ConfirmOffset is the master's confirm offset from the last transfer, at
// most this replica's end (-1 before the first).
func (c *Client) ConfirmOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.confirm
}

// ClientStatus describes the slave's connection.
type ClientStatus struct {
	// Master is the master's HA address of the last connection.
	Master string
	// State is READY (not connected), HANDSHAKE or TRANSFER.
	State State
	// LastRead and LastWrite are the last exchanges with the master.
	LastRead, LastWrite time.Time
	// BytesPerSecond is what came in the last whole second.
	BytesPerSecond int64
	// ConfirmOffset is ConfirmOffset.
	ConfirmOffset int64
	// TransferAt is when the current connection (or the last one, once
	// it closed) finished its handshake, zero before the first;
	// TransferFrom is the replica's end then, where the master's
	// transfers began, and MasterEnd the end of the master's CommitLog its
	// handshake told.
	TransferAt   time.Time
	TransferFrom int64
	MasterEnd    int64
	// NoConsistentPoint is set while the last handshake found that this
	// slave's epochs and the master's share no epoch start
	// (ErrNoConsistentPoint): nothing of its log is known to be the
	// master's, and it takes nothing until it is rebuilt from an empty
	// store.
	NoConsistentPoint bool
}

// Status returns the slave's connection state.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClientStatus{Master: c.master, State: c.state, LastRead: c.lastRead, LastWrite: c.lastWrite,
		BytesPerSecond: c.flow.PerSecond(), ConfirmOffset: c.confirm, TransferAt: c.transferAt, TransferFrom: c.transferFrom,
		MasterEnd: c.masterEnd, NoConsistentPoint: c.noPoint}
}

// RuntimeInfo is the slave's GET_BROKER_HA_STATUS body (RocketMQ's
// AutoSwitchHAService.getRuntimeInfo on a slave): maxOffset is its
// CommitLog's end, masterFlushOffset the master's flushed offset as the
// broker knows it.
func (c *Client) RuntimeInfo(maxOffset, masterFlushOffset int64) ha.RuntimeInfo {
	st := c.Status()
	return ha.RuntimeInfo{HAConnectionInfo: []ha.ConnectionInfo{}, HAClientRuntimeInfo: ha.ClientInfo{
		MasterAddr: st.Master, TransferredByteInSecond: st.BytesPerSecond, MaxOffset: maxOffset,
		LastReadTimestamp: millis(st.LastRead), LastWriteTimestamp: millis(st.LastWrite), MasterFlushOffset: masterFlushOffset}}
}

// millis is t in Unix milliseconds, 0 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
