package autoswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/ha"
)

// Defaults, as RocketMQ's MessageStoreConfig and BrokerConfig.
const (
	DefaultHeartbeatInterval      = 5 * time.Second  // haSendHeartbeatInterval
	DefaultHousekeepingInterval   = 20 * time.Second // haHousekeepingInterval
	DefaultTransferBatchSize      = 32 << 10         // haTransferBatchSize
	DefaultMaxTimeSlaveNotCatchup = 15 * time.Second // haMaxTimeSlaveNotCatchup
	DefaultCheckSyncStateSet      = 5 * time.Second  // checkSyncStateSetPeriod
	DefaultRetryInterval          = 5 * time.Second  // the slave's wait before dialling again
)

// ServerConfig configures a master's Server. Zero durations and sizes
// take the defaults.
type ServerConfig struct {
	// Addr is the HA listen address (":10912", haListenPort).
	Addr string
	// Log is the master's CommitLog.
	Log ha.Source
	// Epochs is the master's epoch file, its last entry the current
	// epoch (BecomeMaster appends it).
	Epochs *EpochCache
	// BrokerID is the master's own broker id: always in the sync state
	// set, never a slave.
	BrokerID int64
	// SyncStateSet is the group's SyncStateSet as the controller last
	// gave it (the master's id included); SetSyncStateSet replaces it.
	SyncStateSet []int64
	// SyncStateSetChanged is called, from one goroutine of the server and
	// in order, with the SyncStateSet the master proposes (its own id
	// included) when a slave catches up, falls behind for
	// MaxTimeSlaveNotCatchup or disconnects: the broker sends it to the
	// controller (CONTROLLER_ALTER_SYNC_STATE_SET) and calls
	// SetSyncStateSet with the controller's answer. nil: not reported.
	SyncStateSetChanged func(proposed []int64)
	// AllAckInSyncStateSet is allAckInSyncStateSet: the confirm offset is
	// the lowest acknowledgement of the SyncStateSet's slaves; otherwise
	// it is the master's end.
	AllAckInSyncStateSet bool
	// StoredConfirmOffset is the confirm offset the store last recorded
	// (the checkpoint's confirmPhyOffset): the confirm offset until every
	// slave of the SyncStateSet has connected, as RocketMQ's master
	// keeps its stored one (getConfirmOffsetDirectly), 0 included (its
	// recovery keeps a checkpoint's 0). Negative: none, the master's end
	// stands in.
	StoredConfirmOffset int64
	// ConfirmLimit, when set, is told where consumers' reads must stop:
	// with AllAckInSyncStateSet and a SyncStateSet larger than the master
	// the confirm offset (what every member holds), otherwise -1 (no
	// limit: the master's end, RocketMQ's getConfirmOffset). It is called
	// at Start and whenever the value changes, in order, with the
	// server's lock held: it must not block or call the Server (the
	// broker hands it to commitlog.Log.SetConfirmLimit).
	ConfirmLimit func(limit int64)
	// HeartbeatInterval is haSendHeartbeatInterval.
	HeartbeatInterval time.Duration
	// HousekeepingInterval is haHousekeepingInterval: a slave silent this
	// long is dropped.
	HousekeepingInterval time.Duration
	// TransferBatchSize is haTransferBatchSize (at most MaxTransferBody).
	TransferBatchSize int
	// MaxTimeSlaveNotCatchup is haMaxTimeSlaveNotCatchup: a slave of the
	// SyncStateSet that has not caught up for this long leaves it.
	MaxTimeSlaveNotCatchup time.Duration
	// CheckSyncStateSetPeriod is how often that is checked
	// (checkSyncStateSetPeriod).
	CheckSyncStateSetPeriod time.Duration
	// Logger receives the server's events.
	Logger zerolog.Logger
	// Listen opens the listener (nil: net.Listen "tcp").
	Listen func(addr string) (net.Listener, error)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
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
	if c.MaxTimeSlaveNotCatchup <= 0 {
		c.MaxTimeSlaveNotCatchup = DefaultMaxTimeSlaveNotCatchup
	}
	if c.CheckSyncStateSetPeriod <= 0 {
		c.CheckSyncStateSetPeriod = DefaultCheckSyncStateSet
	}
	if c.Listen == nil {
		c.Listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// BecomeMaster records in epochs that this broker is master from epoch
// on, its records starting at startOffset (the CommitLog's end):
// RocketMQ's changeToMaster. An epoch below the last one recorded is
// refused. The last epoch again (a master restarted in the same term,
// RocketMQ's changeToMasterWhenLastRoleIsMaster) keeps its entry, where
// RocketMQ moves its start to the log's end: the records this master took
// in that epoch stay labelled with it, so its slaves, which recorded the
// first start, agree with it up to its end instead of being cut at that
// start and copying those records again. When startOffset is
// not above the last entry's start (no record since that epoch began)
// the entry is not added, as RocketMQ's appendEntry refuses it, and the
// last epoch keeps labelling the records: that is logged, not an error.
func BecomeMaster(epochs *EpochCache, epoch int32, startOffset int64, log zerolog.Logger) error {
	if last := epochs.LastEpoch(); epoch < last {
		return fmt.Errorf("become master in epoch %d: the epoch file holds epoch %d already", epoch, last)
	}
	// Epochs that begin past the log's end hold none of its records (a
	// slave that recorded a master's epoch and lost the bytes after it):
	// they go, or the new epoch could not follow them.
	if err := epochs.TruncateSuffixByOffset(startOffset + 1); err != nil {
		return fmt.Errorf("become master in epoch %d: %w", epoch, err)
	}
	if epochs.LastEpoch() == epoch {
		log.Info().Int32("epoch", epoch).Msg("master again in the epoch the epoch file ends with: its entry stays")
		return nil
	}
	err := epochs.Append(EpochEntry{Epoch: epoch, StartOffset: startOffset})
	if errors.Is(err, ErrEpochOrder) {
		log.Warn().Err(err).Int32("epoch", epoch).Int64("startOffset", startOffset).
			Msg("new epoch not recorded: no record since the last epoch began (RocketMQ's rule); the last epoch labels the records")
		return nil
	}
	if err != nil {
		return fmt.Errorf("become master in epoch %d: %w", epoch, err)
	}
	return nil
}

// Server is a master's AutoSwitch HA service: it accepts slaves, answers
// their handshake with its epochs, streams its CommitLog to each, tracks
// their acknowledgements and the SyncStateSet.
//
// Goroutines: the accept loop, the SyncStateSet checker, the notifier of
// SyncStateSetChanged, and per slave a reader and a writer; Close stops
// them all and waits for them. Lock order: Server.mu before slave.mu.
type Server struct {
	cfg ServerConfig
	log zerolog.Logger
	ln  net.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	slaves     map[*slave]struct{}
	changed    chan struct{}       // closed when an acknowledgement moves or a slave leaves
	local      []int64             // SyncStateSet as the controller gave it
	remote     []int64             // the proposal in flight (syncing)
	syncing    bool                // a proposal is in flight
	caughtUp   map[int64]time.Time // per slave id, when it last caught up
	confirm    int64               // computed confirm offset, -1 before the first
	limit      int64               // last value given to ConfirmLimit (-2 before the first)
	proposals  [][]int64           // for the notifier, in order
	notifyWake chan struct{}
}

// slave is one connected slave.
type slave struct {
	conn net.Conn
	addr string
	wake chan struct{} // the reader wakes the writer (capacity 1)

	mu           sync.Mutex
	state        State
	handshakeDue bool
	id           int64
	fromLastFile bool
	learner      bool
	request      int64 // first report after the handshake, -1 before
	ack          int64 // last report, -1 before
	next         int64 // next transfer's offset, -1 before the first
	lastMax      int64 // the master's end at the last transfer
	// ahead is set when the first report after a handshake is past the
	// master's end: the slave holds bytes this master never wrote (its
	// epoch file was empty, so nothing was truncated). Its
	// acknowledgements prove nothing: it never joins the SyncStateSet
	// (RocketMQ proposes it as soon as its report reaches the confirm
	// offset, which it does at once).
	ahead        bool
	lastTransfer time.Time
	flow         ha.Rate
}

func (c *slave) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// NewServer returns a server that listens once started.
func NewServer(cfg ServerConfig) *Server {
	cfg = cfg.withDefaults()
	local := slices.Clone(cfg.SyncStateSet)
	slices.Sort(local)
	confirm := int64(-1)
	if cfg.StoredConfirmOffset >= 0 {
		confirm = cfg.StoredConfirmOffset
	}
	return &Server{
		cfg:        cfg,
		log:        cfg.Logger.With().Str("component", "autoswitch-ha").Logger(),
		slaves:     map[*slave]struct{}{},
		changed:    make(chan struct{}),
		local:      local,
		caughtUp:   map[int64]time.Time{},
		confirm:    confirm,
		limit:      -2,
		notifyWake: make(chan struct{}, 1),
	}
}

// Start listens and serves slaves until Close.
func (s *Server) Start() error {
	if s.cfg.Log == nil || s.cfg.Epochs == nil {
		return errors.New("autoswitch: ServerConfig needs Log and Epochs")
	}
	ln, err := s.cfg.Listen(s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("autoswitch: listen on %s (haListenPort): %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.publishLimitLocked()
	s.mu.Unlock()
	s.wg.Add(3)
	go s.accept()
	go s.checkSyncStateSet()
	go s.notifier()
	s.log.Info().Stringer("addr", ln.Addr()).Int32("epoch", s.cfg.Epochs.LastEpoch()).Msg("AutoSwitch HA service listening for slaves")
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
// goroutines. Proposals not yet delivered are dropped.
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
	ha.AcceptSlaves(s.ctx, s.ln, s.log, &s.wg, func(conn net.Conn) (read, write func(context.Context)) {
		c := &slave{conn: conn, addr: conn.RemoteAddr().String(), wake: make(chan struct{}, 1),
			state: StateHandshake, id: -1, request: -1, ack: -1, next: -1, lastMax: -1}
		s.mu.Lock()
		s.slaves[c] = struct{}{}
		s.mu.Unlock()
		s.log.Info().Str("slave", c.addr).Msg("slave connected")
		return func(ctx context.Context) { s.read(ctx, c) }, func(ctx context.Context) { s.write(ctx, c) }
	})
}

// drop forgets a slave whose connection ended; a slave of the
// SyncStateSet leaves it (RocketMQ's removeConnection).
func (s *Server) drop(c *slave, why error) {
	s.mu.Lock()
	_, ok := s.slaves[c]
	delete(s.slaves, c)
	c.mu.Lock()
	id, ack := c.id, c.ack
	c.mu.Unlock()
	if ok {
		s.signalLocked()
		if s.ctx.Err() == nil && slices.Contains(s.local, id) {
			set := slices.DeleteFunc(slices.Clone(s.local), func(x int64) bool { return x == id })
			s.proposeLocked(set)
		}
	}
	s.mu.Unlock()
	if ok && s.ctx.Err() == nil {
		s.log.Warn().Err(why).Str("slave", c.addr).Int64("brokerId", id).Int64("ack", ack).Msg("slave disconnected")
	}
}

// signalLocked wakes WaitAcked callers. Caller holds s.mu.
func (s *Server) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// proposeLocked marks set as the SyncStateSet in flight and queues it
// for SyncStateSetChanged, the master's id added. Caller holds s.mu.
func (s *Server) proposeLocked(set []int64) {
	if !slices.Contains(set, s.cfg.BrokerID) {
		set = append(set, s.cfg.BrokerID)
	}
	slices.Sort(set)
	s.syncing = true
	s.remote = slices.Clone(set)
	s.log.Info().Ints64("syncStateSet", s.local).Ints64("proposed", set).Msg("SyncStateSet changes")
	if s.cfg.SyncStateSetChanged == nil {
		return
	}
	s.proposals = append(s.proposals, set)
	select {
	case s.notifyWake <- struct{}{}:
	default:
	}
}

// notifier delivers proposals to SyncStateSetChanged in order.
func (s *Server) notifier() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.notifyWake:
		}
		for {
			s.mu.Lock()
			if len(s.proposals) == 0 || s.ctx.Err() != nil {
				s.mu.Unlock()
				break
			}
			p := s.proposals[0]
			s.proposals = s.proposals[1:]
			s.mu.Unlock()
			s.cfg.SyncStateSetChanged(p)
		}
	}
}

// read reads the slave's frames until the connection ends, breaks the
// protocol or stays silent for the housekeeping interval.
func (s *Server) read(ctx context.Context, c *slave) {
	var r SlaveReader
	buf := make([]byte, 4096)
	handshaken := false
	for ctx.Err() == nil {
		_ = c.conn.SetReadDeadline(time.Now().Add(s.cfg.HousekeepingInterval))
		n, err := c.conn.Read(buf)
		if n > 0 {
			r.Feed(buf[:n])
			for {
				f, ok, perr := r.Next()
				if perr == nil && ok && f.State == StateTransfer && !handshaken {
					perr = fmt.Errorf("%w: slave report before its handshake (an AutoSwitch slave sends the handshake first)", ErrProtocol)
				}
				if perr != nil {
					if f.State == StateReady {
						perr = fmt.Errorf("%w (a classic HA slave, brokerRole=SLAVE without controller mode, speaks another protocol)", perr)
					}
					s.log.Error().Err(perr).Str("slave", c.addr).Msg("closing the connection of a slave that broke the AutoSwitch HA protocol")
					s.drop(c, perr)
					return
				}
				if !ok {
					break
				}
				if f.State == StateHandshake {
					handshaken = true
					s.handshake(c, f.Handshake)
				} else {
					s.acknowledge(c, f.Offset)
				}
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

// handshake takes a slave's handshake: the writer answers it.
func (s *Server) handshake(c *slave, h SlaveHandshake) {
	c.mu.Lock()
	c.id, c.fromLastFile, c.learner = h.BrokerID, h.SyncFromLastFile, h.AsyncLearner
	c.state, c.handshakeDue = StateHandshake, true
	c.request, c.next, c.ahead = -1, -1, false
	c.mu.Unlock()
	s.log.Info().Str("slave", c.addr).Int64("brokerId", h.BrokerID).Bool("syncFromLastFile", h.SyncFromLastFile).
		Bool("asyncLearner", h.AsyncLearner).Msg("slave handshake")
	c.poke()
}

// acknowledge takes a slave's report of its CommitLog end.
func (s *Server) acknowledge(c *slave, offset int64) {
	now := s.cfg.Now()
	end := s.cfg.Log.MaxOffset()
	c.mu.Lock()
	c.state = StateTransfer
	first := c.request < 0
	if first {
		c.request = offset
		c.ahead = offset > end
	}
	c.ack = offset
	id, learner, lastMax, lastTransfer, ahead := c.id, c.learner, c.lastMax, c.lastTransfer, c.ahead
	c.mu.Unlock()
	if first {
		if ahead {
			s.log.Error().Str("slave", c.addr).Int64("brokerId", id).Int64("slave", offset).Int64("master", end).
				Msg("the slave's CommitLog is ahead of the master's: its bytes past the master's end are not the master's; it never joins the SyncStateSet (rebuild it from a copy of the master)")
		} else {
			s.log.Info().Str("slave", c.addr).Int64("brokerId", id).Int64("offset", offset).Msg("slave asks for the CommitLog from here")
		}
		c.poke()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !learner && !ahead && offset >= lastMax {
		at := lastTransfer
		if s.cfg.Log.MaxOffset() == offset {
			at = now
		}
		s.caughtUpLocked(id, at)
		s.maybeExpandLocked(id, offset)
	}
	if slices.Contains(s.local, id) {
		s.confirm = s.computeConfirmLocked()
		s.publishLimitLocked()
	}
	s.signalLocked()
}

func (s *Server) caughtUpLocked(id int64, at time.Time) {
	if prev, ok := s.caughtUp[id]; !ok || at.After(prev) {
		s.caughtUp[id] = at
	}
}

// maybeExpandLocked proposes the slave for the SyncStateSet once its
// acknowledgement reaches the confirm offset and the current epoch.
func (s *Server) maybeExpandLocked(id, offset int64) {
	if slices.Contains(s.local, id) {
		return
	}
	last, ok := s.cfg.Epochs.LastEntry()
	if !ok || offset < s.confirmOffsetLocked() || offset < last.StartOffset {
		return
	}
	s.proposeLocked(append(slices.Clone(s.local), id))
}

// checkSyncStateSet drops from the SyncStateSet the slaves that have not
// caught up for MaxTimeSlaveNotCatchup (RocketMQ's maybeShrinkSyncStateSet,
// run every checkSyncStateSetPeriod by its ReplicasManager).
func (s *Server) checkSyncStateSet() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CheckSyncStateSetPeriod)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.shrink()
	}
}

func (s *Server) shrink() {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	set := slices.DeleteFunc(slices.Clone(s.local), func(id int64) bool {
		if id == s.cfg.BrokerID {
			return false
		}
		at, ok := s.caughtUp[id]
		return !ok || now.Sub(at) > s.cfg.MaxTimeSlaveNotCatchup
	})
	if len(set) == len(s.local) {
		return
	}
	s.proposeLocked(set)
}

// SetSyncStateSet takes the SyncStateSet the controller answered (to an
// ALTER_SYNC_STATE_SET, or in a role change) and recomputes the confirm
// offset.
func (s *Server) SetSyncStateSet(set []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.local = slices.Clone(set)
	slices.Sort(s.local)
	s.syncing = false
	s.remote = nil
	s.confirm = s.computeConfirmLocked()
	s.publishLimitLocked()
	s.signalLocked()
}

// SyncStateSet returns the SyncStateSet as the controller last gave it.
func (s *Server) SyncStateSet() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.local)
}

// InSyncReplicas is RocketMQ's inSyncReplicasNums: the SyncStateSet's
// size, the proposal's when larger while one is in flight.
func (s *Server) InSyncReplicas() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncing {
		return max(len(s.local), len(s.remote))
	}
	return len(s.local)
}

// unionLocked is the SyncStateSet with the proposal in flight.
func (s *Server) unionLocked() []int64 {
	set := slices.Clone(s.local)
	if s.syncing {
		for _, id := range s.remote {
			if !slices.Contains(set, id) {
				set = append(set, id)
			}
		}
	}
	return set
}

// computeConfirmLocked is RocketMQ's computeConfirmOffset: the lowest
// acknowledgement of the connected slaves of the SyncStateSet (and the
// proposal), at most the master's end; the last value when a member is
// not connected.
func (s *Server) computeConfirmLocked() int64 {
	end := s.cfg.Log.MaxOffset()
	acks := map[int64]int64{}
	for c := range s.slaves {
		c.mu.Lock()
		acks[c.id] = max(acks[c.id], c.ack)
		c.mu.Unlock()
	}
	confirm := end
	for _, id := range s.unionLocked() {
		if id == s.cfg.BrokerID {
			continue
		}
		a, ok := acks[id]
		if !ok {
			if s.confirm < 0 {
				return end
			}
			return s.confirm
		}
		if a > 0 {
			confirm = min(confirm, a)
		}
	}
	return confirm
}

// confirmOffsetLocked is the confirm offset RocketMQ's CommitLog reports
// on a master: its end when the SyncStateSet is the master alone or
// AllAckInSyncStateSet is off, else the computed one.
func (s *Server) confirmOffsetLocked() int64 {
	if len(s.local) == 1 || !s.cfg.AllAckInSyncStateSet {
		return s.cfg.Log.MaxOffset()
	}
	if s.confirm < 0 {
		s.confirm = s.computeConfirmLocked()
	}
	return s.confirm
}

// publishLimitLocked gives ConfirmLimit the limit consumers' reads stop
// at, when it changed.
func (s *Server) publishLimitLocked() {
	if s.cfg.ConfirmLimit == nil {
		return
	}
	limit := int64(-1)
	if len(s.local) > 1 && s.cfg.AllAckInSyncStateSet {
		limit = s.confirmOffsetLocked()
	}
	if limit != s.limit {
		s.limit = limit
		s.cfg.ConfirmLimit(limit)
	}
}

// ConfirmOffset is the master's confirm offset, sent to slaves in every
// transfer header.
func (s *Server) ConfirmOffset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmOffsetLocked()
}

// WaitAcked waits until at least n connected slaves have acknowledged
// offset (the end of a send's records): RocketMQ's wait of a SYNC_MASTER
// in controller mode without allAckInSyncStateSet, n being
// inSyncReplicas-1 (the master counts itself); the broker first answers
// IN_SYNC_REPLICAS_NOT_ENOUGH when InSyncReplicas is below
// minInSyncReplicas. A slave ahead of the master never counts. It
// returns false when ctx ends first.
func (s *Server) WaitAcked(ctx context.Context, offset int64, n int) bool {
	return s.waitAcks(ctx, offset, func(_ []int64, _ map[int64]bool, count int) bool { return count >= n })
}

// WaitSyncStateSet waits until every slave of the SyncStateSet (and of
// the proposal in flight) has acknowledged offset: RocketMQ's wait with
// allAckInSyncStateSet. It returns true at once when the set is the
// master alone, false when ctx ends first.
func (s *Server) WaitSyncStateSet(ctx context.Context, offset int64) bool {
	return s.waitAcks(ctx, offset, func(set []int64, acked map[int64]bool, _ int) bool {
		for _, id := range set {
			if id != s.cfg.BrokerID && !acked[id] {
				return false
			}
		}
		return true
	})
}

// waitAcks waits until done holds for the SyncStateSet (with the
// proposal), the ids of the slaves that acknowledged offset and their
// count.
func (s *Server) waitAcks(ctx context.Context, offset int64, done func(set []int64, acked map[int64]bool, count int) bool) bool {
	for {
		s.mu.Lock()
		set := s.unionLocked()
		acked := map[int64]bool{}
		count := 0
		for c := range s.slaves {
			c.mu.Lock()
			if c.ack >= 0 && c.ack >= offset && !c.ahead {
				acked[c.id] = true
				count++
			}
			c.mu.Unlock()
		}
		ch := s.changed
		s.mu.Unlock()
		if done(set, acked, count) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// SlaveStatus describes one connected slave.
type SlaveStatus struct {
	// BrokerID is the id from its handshake (-1 before it).
	BrokerID int64
	// Addr is its address.
	Addr string
	// AckOffset is the CommitLog end it last reported.
	AckOffset int64
	// TransferFrom is where the next transfer to it starts.
	TransferFrom int64
	// BytesPerSecond is what it was sent in the last whole second.
	BytesPerSecond int64
	// InSync is true when it is in the SyncStateSet.
	InSync bool
	// AsyncLearner is its handshake's flag.
	AsyncLearner bool
}

// Slaves returns the connected slaves.
func (s *Server) Slaves() []SlaveStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SlaveStatus, 0, len(s.slaves))
	for c := range s.slaves {
		c.mu.Lock()
		out = append(out, SlaveStatus{BrokerID: c.id, Addr: c.addr, AckOffset: c.ack, TransferFrom: c.next,
			BytesPerSecond: c.flow.PerSecond(), InSync: slices.Contains(s.local, c.id), AsyncLearner: c.learner})
		c.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b SlaveStatus) int { return int(a.BrokerID - b.BrokerID) })
	return out
}

// RuntimeInfo is the master's GET_BROKER_HA_STATUS body (RocketMQ's
// AutoSwitchHAService.getRuntimeInfo): masterPutWhere is the CommitLog's
// end.
func (s *Server) RuntimeInfo(masterPutWhere int64) ha.RuntimeInfo {
	info := ha.RuntimeInfo{Master: true, MasterCommitLogMaxOffset: masterPutWhere, HAConnectionInfo: []ha.ConnectionInfo{}}
	for _, sl := range s.Slaves() {
		info.HAConnectionInfo = append(info.HAConnectionInfo, ha.ConnectionInfo{Addr: sl.Addr, SlaveAckOffset: sl.AckOffset,
			Diff: masterPutWhere - sl.AckOffset, InSync: sl.InSync, TransferredByteInSecond: sl.BytesPerSecond, TransferFromWhere: sl.TransferFrom})
	}
	info.InSyncSlaveNums = len(s.SyncStateSet()) - 1
	return info
}
