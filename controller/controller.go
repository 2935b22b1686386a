package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// applyTimeout bounds the wait for an event to commit (RocketMQ waits 5 s
// for DLedger).
const applyTimeout = 5 * time.Second

// notifyTimeout bounds one NOTIFY_BROKER_ROLE_CHANGED send (RocketMQ's 3 s).
const notifyTimeout = 3 * time.Second

// Options configures a Controller.
type Options struct {
	// Config is the controller's configuration.
	Config Config
	// Log receives the controller's lines.
	Log zerolog.Logger
	// ExtraSettings are reported by GET_CONTROLLER_CONFIG beside the
	// controller's own keys (the hosting process's listener, say).
	ExtraSettings map[string]string
	// Now is the clock of heartbeats; nil is time.Now.
	Now func() time.Time
	// Settings is the configuration the controller was started from, whose
	// keys UPDATE_CONTROLLER_CONFIG may set (checked as a configuration
	// file's). Nil is bin/controller's defaults with Config's keys.
	Settings configs.ControllerSettings
	// Persist, when set, writes the keys UPDATE_CONTROLLER_CONFIG changed
	// (canonical names, new values) back into the configuration file; an
	// error leaves them in force until restart and is told in the remark.
	Persist func(map[string]string) error
	// Metrics, when set, keeps the controller's metrics (Metrics returns
	// them; StartHost serves them).
	Metrics *MetricsOptions
	// ClientTLS, when set, is the TLS of the connections the controller
	// opens to brokers for its NOTIFY_BROKER_ROLE_CHANGED notices, as
	// RocketMQ's ControllerManager sends them with its NettyClientConfig
	// (useTLS, tls.enable); nil sends them in plaintext, which a broker
	// whose listener enforces TLS closes. It is also how this controller
	// dials the other controllers' raft ports, as RocketMQ's DLedger
	// peers share the controller's NettyClientConfig.
	ClientTLS *tls.Config
	// RaftTLSMode and RaftTLS are the TLS of the raft listener (port+1
	// of this controller's peer address, with several peers): the
	// controller's own listener's (tls.server.mode and its
	// certificate), as RocketMQ's DLedger controller serves its peers on
	// its one Remoting server. The zero values serve plaintext only;
	// StartHost sets them from the listener's ServerConfig.
	RaftTLSMode remoting.TLSMode
	RaftTLS     *tls.Config
	// TLSWatch, when set, reloads the listener's TLS (the configuration
	// StartHost is given, built by tlsconf.WatchedListener) when its
	// files change; StartHost runs it until Shutdown.
	TLSWatch *certwatch.Watcher
}

// Controller serves RocketMQ's controller requests over Remoting: it hands
// out broker ids, elects masters and keeps each group's sync state set,
// replicating every change through raft. Create it with New, start it with
// Start, serve its Handler (or Register it on a Mux), stop it with Close.
//
// Lock order: mu (one request's check-and-replicate at a time, as
// RocketMQ's single event thread) before fsm.mu and cfgMu; heartbeats.mu
// is taken alone.
type Controller struct {
	log   zerolog.Logger
	peers []Peer
	self  Peer
	extra map[string]string
	// persist is Options.Persist.
	persist func(map[string]string) error
	// metrics is nil unless Options.Metrics is set.
	metrics *metrics.Controller

	cfgMu sync.Mutex
	// cfg is guarded by cfgMu (UPDATE_CONTROLLER_CONFIG changes it).
	cfg Config
	// file is the configuration as UPDATE_CONTROLLER_CONFIG left it;
	// stored are the keys it set that take effect at the next start, with
	// their values (as GET_CONTROLLER_CONFIG reports them). Both guarded
	// by cfgMu.
	file   configs.ControllerSettings
	stored map[string]string
	// rescan tells the scan goroutine a scan period changed.
	rescan chan struct{}

	fsm    *fsm
	hb     *heartbeats
	node   *node
	notify chan bool
	// readyTerm is the raft term in which this peer leads with its state
	// machine having applied everything committed before (a barrier
	// passed in that term); 0 when it does not. IsLeader also asks that
	// the term be the current one: a peer that lost and won leadership
	// again before watchLeadership saw the loss must not answer from a
	// state the new term's barrier has not caught up.
	readyTerm atomic.Uint64
	// leaderSince is when this peer last became ready as the leader
	// (UnixNano): the inactive-master scan waits one
	// scanInactiveMasterInterval from then, as RocketMQ's DLedgerController
	// schedules that scan one period after it becomes leader. A restarted
	// controller knows no heartbeat yet: without the wait, a scan right
	// after it leads would take a master for gone when a slave of its
	// group heartbeats first.
	leaderSince atomic.Int64
	// barrier waits until the state machine has applied everything
	// committed (raft's Barrier); tests replace it before Start.
	barrier func() error

	mu sync.Mutex

	clients *remoting.ClientPool
	// tlsOut says whether clients dial brokers with TLS.
	tlsOut bool
	// raftTLS is the TLS of the raft transport between controllers.
	raftTLS raftTLS
	// noticeMu guards pending (the newest notice waiting per broker
	// address) and sending (the addresses whose sender runs).
	noticeMu sync.Mutex
	pending  map[string]notice
	sending  map[string]bool

	inactive chan BrokerIdentity
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   atomic.Bool
}

// New checks the configuration and returns a Controller that is not
// started yet. A missing controllerDLegerPeers or controllerDLegerSelfId
// is an error, as in RocketMQ.
func New(opts Options) (*Controller, error) {
	cfg := opts.Config
	peers, self, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	for _, p := range peers {
		if _, err := p.RaftAddr(); err != nil {
			return nil, fmt.Errorf("controllerDLegerPeers: %w", err)
		}
	}
	if cfg.ScanNotActiveBrokerInterval <= 0 {
		cfg.ScanNotActiveBrokerInterval = 5 * time.Second
	}
	if cfg.ScanInactiveMasterInterval <= 0 {
		cfg.ScanInactiveMasterInterval = 5 * time.Second
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	file := opts.Settings
	if file == nil {
		f := configs.DefaultControllerFile()
		f.Controller.Group, f.Controller.Peers, f.Controller.SelfID, f.Controller.StorePath = cfg.Group, cfg.Peers, cfg.SelfID, cfg.StorePath
		f.Controller.ScanInactiveMasterInterval = cfg.ScanInactiveMasterInterval
		f.Controller.ElectMasterMaxRetryCount = cfg.ElectMasterMaxRetryCount
		f.Controller.EnableElectUncleanMaster = cfg.EnableElectUncleanMaster
		f.Controller.NotifyBrokerRoleChanged = cfg.NotifyBrokerRoleChanged
		f.Controller.ProcessReadEvent = cfg.ProcessReadEvent
		f.ScanNotActiveBrokerInterval = cfg.ScanNotActiveBrokerInterval
		f.ConfigBlackList = cfg.ConfigBlackList
		file = configs.StandaloneControllerSettings(f)
	}
	c := &Controller{
		file:     file,
		stored:   map[string]string{},
		rescan:   make(chan struct{}, 1),
		log:      opts.Log.With().Str("component", "controller").Logger(),
		peers:    peers,
		self:     self,
		extra:    maps.Clone(opts.ExtraSettings),
		persist:  opts.Persist,
		cfg:      cfg,
		fsm:      &fsm{log: opts.Log, st: NewState()},
		hb:       newHeartbeats(now),
		notify:   make(chan bool, 16),
		clients:  remoting.NewClientPool(remoting.ClientOptions{TLS: opts.ClientTLS, Log: opts.Log.With().Str("component", "controller-notices").Logger()}),
		tlsOut:   opts.ClientTLS != nil,
		raftTLS:  raftTLS{mode: opts.RaftTLSMode, server: opts.RaftTLS, client: opts.ClientTLS},
		pending:  map[string]notice{},
		sending:  map[string]bool{},
		inactive: make(chan BrokerIdentity, 1024),
		stop:     make(chan struct{}),
	}
	if opts.Metrics != nil {
		c.metrics = c.newMetrics(opts.Metrics)
	}
	return c, nil
}

// Metrics returns the controller's metrics, nil unless Options.Metrics
// was set.
func (c *Controller) Metrics() *metrics.Controller { return c.metrics }

// Start opens the raft store under controllerStorePath, joins (or
// bootstraps) the controller cluster and starts the heartbeat scan.
func (c *Controller) Start() error {
	n, err := openNode(c.config(), c.peers, c.self, c.fsm, c.notify, c.raftTLS, c.log)
	if err != nil {
		return err
	}
	c.node = n
	if c.barrier == nil {
		// Counted as an append (dledger_op_total), as RocketMQ's new
		// leader's first proposal is.
		c.barrier = func() error { return c.raftWait(time.Now(), n.raft.Barrier(applyTimeout)) }
	}
	c.wg.Add(2)
	go c.watchLeadership()
	go c.scan()
	c.log.Info().Str("self", c.self.ID).Str("peers", c.config().Peers).Str("store", c.config().StorePath).
		Bool("noticesOverTLS", c.tlsOut).Msg("controller started")
	return nil
}

// Close stops the scans and raft and closes the notification connections.
func (c *Controller) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	// A notice queued from now on sees closed; one queued before has
	// added its sender to wg already.
	c.noticeMu.Lock()
	c.noticeMu.Unlock() //nolint:staticcheck // an empty critical section orders enqueueNotice before wg.Wait
	close(c.stop)
	var err error
	if c.node != nil {
		err = c.node.close()
	}
	c.wg.Wait()
	c.readyTerm.Store(0)
	return errors.Join(err, c.clients.Close())
}

// IsLeader reports whether this controller leads and answers requests.
func (c *Controller) IsLeader() bool {
	return c.node != nil && c.readyNow() && c.node.raft.State() == raft.Leader
}

// readyNow reports whether the barrier of the current term passed.
func (c *Controller) readyNow() bool {
	t := c.readyTerm.Load()
	return t != 0 && t == c.node.raft.CurrentTerm()
}

// WaitLeader waits until some controller of the cluster leads and this
// one knows it (it may be another peer), or ctx ends.
func (c *Controller) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if c.node != nil {
			if _, id := c.node.raft.LeaderWithID(); id != "" && (string(id) != c.self.ID || c.IsLeader()) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for a controller leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// State returns a copy of the replicated state.
func (c *Controller) State() *State {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	return c.fsm.st.clone()
}

// LiveInfo returns what heartbeats told of a broker.
func (c *Controller) LiveInfo(cluster, brokerName string, id int64) (LiveInfo, bool) {
	return c.hb.get(cluster, brokerName, id)
}

func (c *Controller) config() Config {
	c.cfgMu.Lock()
	defer c.cfgMu.Unlock()
	return c.cfg
}

// watchLeadership follows raft's leadership changes: on gaining it, it
// waits for the state machine to apply everything committed before
// answering requests.
func (c *Controller) watchLeadership() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case leader := <-c.notify:
			if !leader {
				c.readyTerm.Store(0)
				c.log.Info().Msg("controller is no longer the leader")
				continue
			}
			c.becomeReady()
		}
	}
}

// becomeReady runs the barrier of a new leadership and then answers
// requests. A barrier that fails while this peer still leads (raft's
// enqueue timeout: its loop held up, by a slow disk say) is tried again,
// as RocketMQ's controller retries its initial proposal: no other
// leadership notice would come to retry it, and a leader that is never
// ready leaves every controller answering CONTROLLER_NOT_LEADER. A lost
// leadership ends the tries (its notice follows).
func (c *Controller) becomeReady() {
	wait := 10 * time.Millisecond
	for try := 1; ; try++ {
		// The term the barrier runs in: entries a later leader
		// committed are not behind it.
		term := c.node.raft.CurrentTerm()
		err := c.barrier()
		if err == nil {
			c.leaderSince.Store(time.Now().UnixNano())
			c.readyTerm.Store(term)
			c.log.Info().Str("self", c.self.ID).Msg("controller is the leader")
			return
		}
		if c.node.raft.State() != raft.Leader || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrRaftShutdown) {
			c.log.Warn().Err(err).Msg("controller: leader barrier failed; no longer the leader")
			return
		}
		c.log.Warn().Err(err).Int("try", try).Msg("controller: leader barrier failed; trying again")
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// scan expires brokers whose heartbeats stopped (each
// scanNotActiveBrokerInterval) and, on the leader, re-elects masters of
// groups whose master is gone (each scanInactiveMasterInterval).
func (c *Controller) scan() {
	defer c.wg.Done()
	cfg := c.config()
	brokers := time.NewTicker(cfg.ScanNotActiveBrokerInterval)
	defer brokers.Stop()
	masters := time.NewTicker(cfg.ScanInactiveMasterInterval)
	defer masters.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-brokers.C:
			gone, conns := c.hb.expire()
			for _, conn := range conns {
				_ = conn.Close()
			}
			for _, id := range gone {
				c.log.Warn().Str("cluster", id.Cluster).Str("brokerName", id.BrokerName).Int64("brokerId", id.BrokerID).Msg("broker heartbeats expired")
				c.onBrokerInactive(id)
			}
		case <-c.rescan:
			// UPDATE_CONTROLLER_CONFIG changed a period: the next scan
			// comes one new period from now.
			cfg := c.config()
			brokers.Reset(cfg.ScanNotActiveBrokerInterval)
			masters.Reset(cfg.ScanInactiveMasterInterval)
			c.log.Info().Dur("scanNotActiveBrokerInterval", cfg.ScanNotActiveBrokerInterval).Dur("scanInactiveMasterInterval", cfg.ScanInactiveMasterInterval).Msg("controller scans follow the new periods")
		case id := <-c.inactive:
			c.onBrokerInactive(id)
		case <-masters.C:
			if !c.IsLeader() || time.Since(time.Unix(0, c.leaderSince.Load())) < c.config().ScanInactiveMasterInterval {
				continue
			}
			c.fsm.mu.RLock()
			names := c.checks().needReelect(c.fsm.st)
			c.fsm.mu.RUnlock()
			for _, name := range names {
				c.triggerElect(name)
			}
		}
	}
}

// onBrokerInactive elects a new master when the broker that went away was
// its group's master (RocketMQ's ControllerManager.onBrokerInactive).
func (c *Controller) onBrokerInactive(id BrokerIdentity) {
	if !c.IsLeader() {
		return
	}
	c.fsm.mu.RLock()
	ss, ok := c.fsm.st.SyncStates[id.BrokerName]
	isMaster := ok && ss.HasMaster && ss.MasterID == id.BrokerID
	c.fsm.mu.RUnlock()
	if isMaster {
		c.triggerElect(id.BrokerName)
	}
}

// triggerElect runs a controller-started election for a group, up to
// electMasterMaxRetryCount times until one succeeds (RocketMQ's
// ControllerManager.triggerElectMaster).
func (c *Controller) triggerElect(brokerName string) {
	tries := max(c.config().ElectMasterMaxRetryCount, 1)
	for i := 0; i < tries; i++ {
		res := c.propose(true, c.elect(ElectMasterHeader{BrokerName: brokerName, BrokerID: -1}, true))
		if res.code == remoting.Success {
			c.log.Info().Str("brokerName", brokerName).Str("master", res.ext["masterBrokerId"]).Str("masterEpoch", res.ext["masterEpoch"]).Msg("elected a new master")
			c.notifyRoleChanged(res.role)
			return
		}
		c.log.Warn().Str("brokerName", brokerName).Int32("code", res.code).Str("remark", res.remark).Int("try", i+1).Msg("controller-triggered election failed")
		if res.code == remoting.ControllerNotLeader {
			return
		}
		// Every other failure is tried again, as RocketMQ does; a try that
		// found no candidate records that the group has no master, which
		// bumps its master epoch each time.
	}
}

// checks returns the checks with the current liveness and settings.
func (c *Controller) checks() checks {
	return checks{
		alive:   c.hb.isActive,
		policy:  electPolicy{alive: c.hb.isActive, live: c.hb.get},
		unclean: c.config().EnableElectUncleanMaster,
	}
}

// propose runs one request's check against the state and, when it yields
// an event, replicates the event before returning the answer (RocketMQ's
// event scheduler). write says whether the check may change the state;
// reads go through the log only with isProcessReadEvent.
func (c *Controller) propose(write bool, check func(*State, checks) result) result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.IsLeader() {
		return fail(remoting.ControllerNotLeader, "The controller is not in leader state")
	}
	c.fsm.mu.RLock()
	res := check(c.fsm.st, c.checks())
	c.fsm.mu.RUnlock()
	if !write || res.event == nil {
		if c.config().ProcessReadEvent {
			if err := c.raftWait(time.Now(), c.node.raft.VerifyLeader()); err != nil {
				return c.raftFailure(err)
			}
		}
		return res
	}
	data, err := encodeEvent(res.event)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	start := time.Now()
	f := c.node.raft.Apply(data, applyTimeout)
	if err := c.raftWait(start, f); err != nil {
		return c.raftFailure(err)
	}
	if rej, ok := f.Response().(*Rejection); ok && rej != nil {
		// The event landed on a state its check did not see: answer what
		// the check answers against that state; nothing changed.
		out := fail(rej.Code, "%s", rej.Remark)
		if t := res.event.Type; t == EventApplyBrokerID || t == EventUpdateBrokerAddress {
			out.ext = identityExt(res.event.Cluster, res.event.BrokerName)
		}
		return out
	}
	if rerr, ok := f.Response().(error); ok && rerr != nil {
		return fail(remoting.SystemError, "apply %s: %v", res.event.Type, rerr)
	}
	return res
}

// raftFailure answers a request whose event could not be committed. Its
// status is what RocketMQ's request_total counts such a request as: its
// handler throws when its wait for the log times out (timeout) or the log
// does not take the event (failed).
func (c *Controller) raftFailure(err error) result {
	var res result
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		res = fail(remoting.ControllerNotLeader, "The controller is not in leader state: %v", err)
	} else {
		c.log.Error().Err(err).Msg("controller: replicating an event failed")
		res = fail(remoting.SystemError, "replicate the controller event: %v", err)
	}
	res.status = raftStatus(err)
	return res
}

// notifyRoleChanged tells the group's alive members of a new master with
// NOTIFY_BROKER_ROLE_CHANGED (oneway), when notifyBrokerRoleChanged.
// Notices to one broker go one at a time and only the newest waiting one
// is sent (RocketMQ's NotifyService cancels an older pending notice for a
// newer master epoch), so a broker never hears an older master last.
func (c *Controller) notifyRoleChanged(rc *roleChange) {
	if rc == nil || !c.config().NotifyBrokerRoleChanged {
		return
	}
	ext := map[string]string{
		"masterAddress":     rc.masterAddr,
		"masterEpoch":       strconv.Itoa(int(rc.masterEpoch)),
		"syncStateSetEpoch": strconv.Itoa(int(rc.syncStateSetEpoch)),
		"masterBrokerId":    itoa(rc.masterID),
	}
	body := SyncStateSetBody{SyncStateSet: rc.syncStateSet, SyncStateSetEpoch: rc.syncStateSetEpoch}.Encode()
	for _, id := range slices.Sorted(mapsKeys(rc.members.BrokerAddrs)) {
		addr := rc.members.BrokerAddrs[id]
		if addr == "" || !c.hb.isActive(rc.members.Cluster, rc.members.BrokerName, id) {
			continue
		}
		c.enqueueNotice(addr, notice{masterEpoch: rc.masterEpoch, masterID: rc.masterID, ext: maps.Clone(ext), body: body})
	}
}

// notice is one NOTIFY_BROKER_ROLE_CHANGED waiting for its broker.
type notice struct {
	masterEpoch int32
	masterID    int64
	ext         map[string]string
	body        []byte
}

// enqueueNotice queues n for addr, replacing a waiting notice of an older
// or equal epoch, and starts addr's sender when none runs.
func (c *Controller) enqueueNotice(addr string, n notice) {
	c.noticeMu.Lock()
	defer c.noticeMu.Unlock()
	if c.closed.Load() {
		return
	}
	if p, ok := c.pending[addr]; !ok || n.masterEpoch >= p.masterEpoch {
		c.pending[addr] = n
	}
	if c.sending[addr] {
		return
	}
	c.sending[addr] = true
	c.wg.Add(1)
	go c.sendNotices(addr)
}

// sendNotices sends addr's waiting notices until none is left.
func (c *Controller) sendNotices(addr string) {
	defer c.wg.Done()
	for {
		c.noticeMu.Lock()
		n, ok := c.pending[addr]
		if !ok {
			delete(c.sending, addr)
			c.noticeMu.Unlock()
			return
		}
		delete(c.pending, addr)
		c.noticeMu.Unlock()
		c.sendNotice(addr, n)
	}
}

// sendNotice sends one notice, bounded by notifyTimeout and by Close.
func (c *Controller) sendNotice(addr string, n notice) {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req := remoting.NewRequest(remoting.NotifyBrokerRoleChanged, n.ext, n.body)
	if err := c.clients.InvokeOneway(ctx, addr, req); err != nil {
		c.log.Warn().Err(err).Str("broker", addr).Int32("masterEpoch", n.masterEpoch).Bool("tls", c.tlsOut).
			Msg("notify broker of its role change failed")
		return
	}
	// Oneway, as RocketMQ's: a broker that closes the connection unread
	// (a plaintext notice to a broker enforcing TLS) is not seen here,
	// only in the broker's log; it learns its role at its next poll.
	c.log.Info().Str("broker", addr).Int64("master", n.masterID).Int32("masterEpoch", n.masterEpoch).Bool("tls", c.tlsOut).
		Msg("role change notice sent (oneway, not acknowledged)")
}

// metadata answers CONTROLLER_GET_METADATA_INFO's header: the group, the
// leader's id and address, whether this peer leads, and the peers as
// "id:host:port;" (RocketMQ's DLedger form).
func (c *Controller) metadata() map[string]string {
	cfg := c.config()
	var sb strings.Builder
	for _, p := range c.peers {
		sb.WriteString(p.ID + ":" + p.Addr + ";")
	}
	ext := map[string]string{"isLeader": strconv.FormatBool(c.IsLeader()), "peers": sb.String()}
	if cfg.Group != "" {
		ext["group"] = cfg.Group
	}
	if c.node != nil {
		if _, id := c.node.raft.LeaderWithID(); id != "" {
			ext["controllerLeaderId"] = string(id)
			for _, p := range c.peers {
				if p.ID == string(id) {
					ext["controllerLeaderAddress"] = p.Addr
				}
			}
		}
	}
	return ext
}

// brokerInactiveLater queues a broker whose connection closed for the scan
// goroutine, which may elect (an OnClose hook must not block on raft).
func (c *Controller) brokerInactiveLater(id BrokerIdentity) {
	select {
	case c.inactive <- id:
	default:
		c.log.Warn().Str("brokerName", id.BrokerName).Int64("brokerId", id.BrokerID).Msg("controller: inactive-broker queue full; the master scan will catch it")
	}
}
