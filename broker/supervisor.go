package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Supervisor runs a broker in RocketMQ's controller mode
// (enableControllerMode): it takes the broker's id from the controllers
// (GET_NEXT_BROKER_ID, APPLY_BROKER_ID, kept in RocketMQ's identity files),
// registers it with them (CONTROLLER_REGISTER_BROKER), sends them its
// heartbeats, and runs the Broker in the role the controller elected: a
// master (SYNC_MASTER, brokerId 0 at the name servers, as RocketMQ's
// controller-mode master) or a slave of the elected master (its own id).
//
// The Broker's role is fixed for its life, so a change of role, or of the
// master a slave follows, stops the Broker and starts a new one on the
// same store, ports and process: clients see the connection close and
// reconnect, and everything that depends on the role starts as at a start.
// The group replicates with RocketMQ's AutoSwitch HA (package
// ha/autoswitch): the master's server proposes the sync state set, which
// the supervisor sends to the controller (CONTROLLER_ALTER_SYNC_STATE_SET)
// and gives the server back as the controller answers; a slave whose
// CommitLog holds records of an epoch its master does not share (the
// client's CutError) is restarted with the CommitLog cut there
// (Broker.CutCommitLogAt), without an operator.
//
// Its own goroutines (heartbeats, the polls of the controller, the
// proposals and cuts) run from Start to Shutdown.
type Supervisor struct {
	cfg  configs.Broker
	root zerolog.Logger
	log  zerolog.Logger
	ctl  *controllerClient
	// peerTLS is the TLS of the supervisor's connections, to the
	// controllers and to peers (tls.enable and tls.client.*; nil:
	// plaintext).
	peerTLS *tls.Config
	// peers carries the requests to the group's other brokers
	// (EXCHANGE_BROKER_HA_INFO to the master).
	peers  *remoting.ClientPool
	addr   string // brokerIP1:listenPort, the address the controller knows
	epochs *autoswitch.EpochCache
	id     int64
	// changes are role notices from the controller (served by the
	// Broker), applied by run.
	changes chan replicaState
	// proposed is the last sync state set the master's AutoSwitch server
	// proposed and run has not sent yet, with the Broker whose server
	// proposed it (one of a Broker replaced since is dropped); proposal
	// wakes run.
	proposed atomic.Pointer[proposalRequest]
	proposal chan struct{}
	// pendingCut is the last cut a slave's Broker asked for
	// (CutError.At) that run has not applied; cutWake wakes run. A cut
	// names the Broker that asked for it: one asked for by a Broker
	// replaced since is dropped.
	pendingCut atomic.Pointer[cutRequest]
	cutWake    chan struct{}
	// servers are the process's Remoting servers, from Start to
	// Shutdown: every Broker serves behind them (processServers).
	servers *processServers
	// haInfoFails limits the lines of a master that keeps not answering
	// EXCHANGE_BROKER_HA_INFO (askMasterHA asks every
	// syncBrokerMetadataPeriod).
	haInfoFails *repeatlog.Limiter

	// mu guards b, cur and switches; switchMu makes switches one at a
	// time (run's goroutine and Shutdown).
	mu       sync.Mutex
	switchMu sync.Mutex
	b        *Broker
	cur      roleState
	switches []Switch
	// last is the last Broker that started, kept after its stop (under
	// switchMu): the next takes over its client tables, also when a
	// start failed in between.
	last *Broker
	// started is the last Broker whose Start was called (under
	// switchMu): the next starts only once it closed its stores, since
	// they share index.
	started *Broker
	// index is the index every Broker of the supervisor uses, open from
	// the first Broker's start to Shutdown (keptIndex).
	index keptIndex

	// Set between NewSupervisor and Start.
	configure  func(*Broker) // tests: applied to each Broker before its Start
	switchWait time.Duration // tests: the servers' gate's wait (handlerGate.wait)
	configFile string
	cutAt      int64
	resolve    namesrv.Resolver

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped atomic.Bool
	// lastEnd and lastConfirm are the CommitLog's end and the confirm
	// offset as the last heartbeat read them, reported while a switch
	// has no Broker running.
	lastEnd     atomic.Int64
	lastConfirm atomic.Int64
}

// roleState is the role a Supervisor's Broker runs in, as the controller
// gave it.
type roleState struct {
	running     bool // a Broker runs with this role
	master      bool
	masterID    int64
	masterAddr  string
	masterEpoch int32
	syncEpoch   int32
	syncSet     []int64
}

// Switch describes one start of the Broker in a role.
type Switch struct {
	// Master is true for a start as master.
	Master bool
	// Epoch is the master's epoch the start follows.
	Epoch int32
	// Took is from the decision to switch to the new Broker accepting
	// requests (the old one's stop included).
	Took time.Duration
	// CutAt is where the start cut the CommitLog, 0 for nowhere.
	CutAt int64
}

// controllerSlaveSync is how often a controller-mode slave copies its
// master's tables at most (RocketMQ's 10 s).
const controllerSlaveSync = 10 * time.Second

// supervisorRetry is how long the start waits between tries of a step
// the controller refused (RocketMQ retries its start every 5 s; a
// shorter wait makes a group of brokers started together find its master
// sooner).
const supervisorRetry = time.Second

// NewSupervisor checks cfg for controller mode and returns a supervisor
// that is not started.
func NewSupervisor(cfg configs.Broker, log zerolog.Logger) (*Supervisor, error) {
	if err := checkControllerMode(cfg); err != nil {
		return nil, err
	}
	if cfg.StorePathRootDir == "" {
		return nil, errors.New("storePathRootDir is empty")
	}
	ip, hostName, err := brokerIP(cfg.BrokerIP1)
	if err != nil {
		return nil, err
	}
	host := ip.String()
	if hostName != "" {
		host = hostName
	}
	slog := log.With().Str("component", "controller-mode").Logger()
	// EXCHANGE_BROKER_HA_INFO goes out as RocketMQ's BrokerOuterAPI sends
	// it: with tls.enable's TLS, as the requests to the name servers.
	peerTLS, err := tlsconf.Client("broker", cfg.DialNamesrvTLS(), cfg.TLS, slog)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{
		cfg:      cfg,
		root:     log,
		log:      slog,
		peerTLS:  peerTLS,
		peers:    remoting.NewClientPool(remoting.ClientOptions{Log: slog, TLS: peerTLS}),
		addr:     net.JoinHostPort(host, strconv.Itoa(cfg.ListenPort)),
		changes:  make(chan replicaState, 16),
		proposal: make(chan struct{}, 1),
		cutWake:  make(chan struct{}, 1),
	}
	s.haInfoFails = repeatlog.New(slog, 0, nil)
	return s, nil
}

// checkControllerMode refuses what controller mode cannot run with.
func checkControllerMode(cfg configs.Broker) error {
	if len(splitControllers(cfg.ControllerAddr)) == 0 {
		return errors.New("enableControllerMode=true needs controllerAddr (the controllers' addresses, separated by ';')")
	}
	if cfg.ListenPort == 0 {
		return errors.New("enableControllerMode=true needs a fixed listenPort: the controller knows the broker by its address before it listens")
	}
	if cfg.HAListenPort < 0 {
		return errors.New("enableControllerMode=true needs an HA port (haListenPort=-1 opens none): any broker of the group may be elected master")
	}
	return nil
}

// SetConfigFile is Broker.SetConfigFile for each Broker the supervisor
// starts. Call it before Start.
func (s *Supervisor) SetConfigFile(path string) { s.configFile = path }

// CutCommitLogAt is Broker.CutCommitLogAt for the first start. Call it
// before Start.
func (s *Supervisor) CutCommitLogAt(offset int64) { s.cutAt = offset }

// Broker returns the Broker running now (nil between a stop and the next
// start of a switch).
func (s *Supervisor) Broker() *Broker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

// BrokerID is the id the controller gave the broker (0 before Start).
func (s *Supervisor) BrokerID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Switches returns the starts of the Broker in a role so far, the first
// start included.
func (s *Supervisor) Switches() []Switch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.switches)
}

// role returns the role in force.
func (s *Supervisor) role() roleState {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.cur
	r.syncSet = slices.Clone(r.syncSet)
	return r
}

// Start finds the leading controller, takes the broker's id (from its
// identity file, or from the controller), registers, and starts the
// Broker once the controller names the group's master (electing one when
// there is none). It returns when the Broker accepts requests, or with
// ctx's error if that does not come first.
func (s *Supervisor) Start(ctx context.Context) (err error) {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ctl = newControllerClient(s.cfg.ControllerAddr, s.cfg.FetchControllerAddrByDNSLookup, s.resolve, s.peerTLS, s.log)
	defer func() {
		if err != nil {
			s.cancel()
			s.wg.Wait()
			_ = s.ctl.close()
			_ = s.peers.Close()
			if s.servers != nil {
				s.servers.gate.close()
				_ = s.servers.shutdown(context.Background())
			}
			// A Broker whose start failed has closed its stores but
			// left the kept index open.
			if cerr := s.closeIndex(context.Background()); cerr != nil {
				s.log.Warn().Err(cerr).Msg("close the index after the failed start")
			}
			s.stopped.Store(true)
		}
	}()
	if s.epochs, err = autoswitch.OpenEpochFile(epochFilePath(s.cfg)); err != nil {
		return err
	}
	// The ports first, as RocketMQ's broker listens before its replicas
	// manager asks the controller for a role: clients connecting before
	// the first Broker runs wait for it, up to a second, and are answered
	// SERVICE_NOT_AVAILABLE past that rather than refused.
	servers, err := newProcessServers(s.cfg, s.root)
	if err != nil {
		return err
	}
	servers.gate.wait = s.switchWait
	if err := servers.start(ctx, s.cfg.ListenPort, fastListenPortOf(s.cfg)); err != nil {
		return err
	}
	s.servers = servers
	// The HA port too: a slave of the group dialling this broker while
	// it switches to master waits for the master Broker's server rather
	// than being refused (haPort).
	if servers.ha, err = listenHA(net.JoinHostPort("", strconv.Itoa(haListenPortOf(s.cfg))), s.switchWait,
		s.root.With().Str("component", "autoswitch-ha").Logger()); err != nil {
		return err
	}
	if w := servers.tlsWatch; w != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			w.Run(s.ctx, certwatch.DefaultInterval)
		}()
	}
	s.readStoreEnd()
	s.ctl.refreshAddresses(ctx)
	st, err := s.register(ctx)
	if err != nil {
		return err
	}
	s.goLoop("controller-heartbeat", s.cfg.BrokerHeartbeatInterval, s.sendHeartbeat)
	s.sendHeartbeat(ctx)
	for !st.hasMaster() {
		if st, err = s.ctl.elect(ctx, s.cfg.BrokerClusterName, s.cfg.BrokerName, s.BrokerID()); err != nil || !st.hasMaster() {
			s.log.Info().Err(err).Msg("no master in the group yet; asking again")
			select {
			case <-ctx.Done():
				return fmt.Errorf("controller mode: no master elected before the start's deadline: %w", ctx.Err())
			case <-time.After(supervisorRetry):
			}
			if info, ierr := s.ctl.replicaInfo(ctx, s.cfg.BrokerName); ierr == nil && info.hasMaster() {
				st = info
			}
		}
	}
	cut := s.cutAt
	if err := s.switchTo(ctx, st, cut); err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(s.ctx)
	}()
	s.goLoop("master-ha-info", s.cfg.SyncBrokerMetadataPeriod, s.askMasterHA)
	return nil
}

// goLoop runs fn every period until Shutdown.
func (s *Supervisor) goLoop(name string, period time.Duration, fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				fn(s.ctx)
			}
		}
	}()
	s.log.Debug().Str("loop", name).Dur("period", period).Msg("started")
}

// register takes the broker's id as RocketMQ's ReplicasManager.register:
// from the identity file when there is one; else it resumes from the temp
// file (an id asked for, maybe granted) or asks the controller for the
// next id, notes it with a check code in the temp file, applies for it,
// and writes the identity file. Then it registers the id and address
// with the controller and returns what the controller says of the group.
// A name in a file that is not the configuration's stops the start, as
// RocketMQ's checkMetadataValid.
func (s *Supervisor) register(ctx context.Context) (replicaState, error) {
	cluster, name := s.cfg.BrokerClusterName, s.cfg.BrokerName
	idPath, tmpPath := identityPath(s.cfg), tempIdentityPath(s.cfg)
	for try := 0; ; try++ {
		id, ok, err := readIdentity(idPath, false)
		if err != nil {
			return replicaState{}, err
		}
		if ok {
			if id.Cluster != cluster || id.Broker != name {
				return replicaState{}, fmt.Errorf("broker identity file %s is %s/%s, the configuration says %s/%s: use the store of this broker group, or remove the file",
					idPath, id.Cluster, id.Broker, cluster, name)
			}
		} else if id, err = s.applyForID(ctx, tmpPath, idPath); err != nil {
			if ctx.Err() != nil {
				return replicaState{}, err
			}
			s.log.Warn().Err(err).Int("try", try+1).Msg("broker id not granted; trying again")
			if !periodic.Sleep(ctx, registerRetryWait(try)) {
				return replicaState{}, fmt.Errorf("%w (the start ended: %w)", err, ctx.Err())
			}
			continue
		}
		s.mu.Lock()
		s.id = id.ID
		s.mu.Unlock()
		st, err := s.ctl.register(ctx, cluster, name, id.ID, s.addr)
		if err != nil {
			if ctx.Err() != nil {
				return replicaState{}, err
			}
			s.log.Warn().Err(err).Int("try", try+1).Msg("registration with the controller failed; trying again")
			if !periodic.Sleep(ctx, registerRetryWait(try)) {
				return replicaState{}, fmt.Errorf("%w (the start ended: %w)", err, ctx.Err())
			}
			continue
		}
		s.log.Info().Int64("brokerId", id.ID).Str("addr", s.addr).Int64("masterBrokerId", st.MasterID).
			Int32("masterEpoch", st.MasterEpoch).Msg("registered with the controller")
		return st, nil
	}
}

// registerRetryWait is the pause before try+2 of a start's registration:
// under a second (random, so brokers started together spread out) for the
// first five, then RocketMQ's ReplicasManager interval of 5 s. A start
// keeps trying until its context ends (bin/broker's: a signal), as
// RocketMQ's broker keeps retrying its ReplicasManager's start.
func registerRetryWait(try int) time.Duration {
	if try < 4 {
		return time.Duration(rand.Int64N(int64(time.Second)))
	}
	return 5 * time.Second
}

// applyForID runs the steps of a broker without an identity file: the
// temp file's id, or the controller's next, applied for and written to
// the identity file.
func (s *Supervisor) applyForID(ctx context.Context, tmpPath, idPath string) (brokerIdentity, error) {
	cluster, name := s.cfg.BrokerClusterName, s.cfg.BrokerName
	tmp, ok, err := readIdentity(tmpPath, true)
	if err != nil {
		s.log.Warn().Err(err).Msg("the temp broker identity does not read; asking for a new id")
		ok = false
	}
	if ok && (tmp.Cluster != cluster || tmp.Broker != name) {
		return brokerIdentity{}, fmt.Errorf("temp broker identity file %s is %s/%s, the configuration says %s/%s", tmpPath, tmp.Cluster, tmp.Broker, cluster, name)
	}
	if !ok {
		next, err := s.ctl.nextBrokerID(ctx, cluster, name)
		if err != nil {
			return brokerIdentity{}, err
		}
		tmp = brokerIdentity{Cluster: cluster, Broker: name, ID: next,
			CheckCode: s.addr + ";" + strconv.FormatInt(time.Now().UnixMilli(), 10)}
		if err := writeIdentity(tmpPath, tmp, true); err != nil {
			return brokerIdentity{}, err
		}
	}
	if err := s.ctl.applyBrokerID(ctx, cluster, name, tmp.ID, tmp.CheckCode); err != nil {
		// Taken by another broker: start over with the next id.
		if rerr := removeIdentity(tmpPath); rerr != nil {
			s.log.Error().Err(rerr).Msg("remove the temp broker identity")
		}
		return brokerIdentity{}, err
	}
	id := brokerIdentity{Cluster: cluster, Broker: name, ID: tmp.ID}
	if err := writeIdentity(idPath, id, false); err != nil {
		return brokerIdentity{}, err
	}
	if err := removeIdentity(tmpPath); err != nil {
		return brokerIdentity{}, err
	}
	s.log.Info().Int64("brokerId", id.ID).Str("file", idPath).Msg("broker id granted by the controller")
	return id, nil
}

// readStoreEnd sets the CommitLog end the heartbeats report until the
// first Broker runs: the end a read-only scan of the store's CommitLog
// finds (the one recovery finds), lowered to the cut the first start
// makes. RocketMQ's broker loads its store before its first heartbeat, and
// the controller elects among the live brokers of a group by epoch, then
// by this end: a broker that reported 0 while it waited for a master would
// lose the election of a group restarted together to a broker holding
// fewer records, and the records only it held would be cut. The confirm
// offset they report meanwhile is the checkpoint's (confirmPhyOffset,
// within the end), the one RocketMQ's loaded store reports.
func (s *Supervisor) readStoreEnd() {
	dir := s.cfg.CommitLogDir()
	l, err := commitlog.OpenReadOnlyDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn().Err(err).Str("dir", dir).
				Msg("the CommitLog's end is not read before the start: the heartbeats report 0 until the broker runs")
		}
		return
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		s.log.Warn().Err(err).Str("dir", dir).Msg("close the CommitLog read for its end")
	}
	if s.cutAt > 0 {
		end = min(end, s.cutAt)
	}
	s.lastEnd.Store(end)
	if ck, err := commitlog.ReadCheckpointFile(s.cfg.StorePathRootDir); err == nil {
		s.lastConfirm.Store(min(max(ck.ConfirmPhyOffset, 0), end))
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn().Err(err).Msg("the checkpoint is not read before the start: the heartbeats report confirm offset 0 until the broker runs")
	}
	s.log.Info().Int64("maxPhyOffset", end).Msg("the heartbeats report the store's CommitLog end until the broker runs")
}

// heartbeatOffsets returns the CommitLog end and confirmed offset a
// heartbeat reports: the running Broker's, or, while none runs or its
// stores close at a switch, the last ones read.
func (s *Supervisor) heartbeatOffsets() (end, confirm int64) {
	if b := s.Broker(); b != nil {
		if end, confirm, ok := b.replicaOffsets(); ok {
			s.lastEnd.Store(end)
			s.lastConfirm.Store(confirm)
			return end, confirm
		}
	}
	return s.lastEnd.Load(), s.lastConfirm.Load()
}

// sendHeartbeat sends BROKER_HEARTBEAT to every controller: the last
// epoch of its epoch file (a slave's holds the epochs its master's
// transfers carried), its CommitLog's end, the confirm offset of its
// AutoSwitch HA, its timeout and election priority.
func (s *Supervisor) sendHeartbeat(ctx context.Context) {
	end, confirm := s.heartbeatOffsets()
	s.ctl.sendHeartbeat(ctx, ctlHeartbeat{Cluster: s.cfg.BrokerClusterName, Name: s.cfg.BrokerName, Addr: s.addr,
		ID: s.BrokerID(), Epoch: s.epochs.LastEpoch(), MaxOffset: end, ConfirmOffset: confirm,
		Timeout: s.cfg.ControllerHeartBeatTimeout, Priority: s.cfg.BrokerElectionPriority}, s.cfg.SendHeartbeatTimeout)
}

// run applies the controller's word until Shutdown: notices, the
// periodic GET_REPLICA_INFO, the leading controller's address, a master's
// proposals of its sync state set, and a slave's cut.
func (s *Supervisor) run(ctx context.Context) {
	replica := time.NewTicker(s.cfg.SyncBrokerMetadataPeriod)
	defer replica.Stop()
	meta := time.NewTicker(s.cfg.SyncControllerMetadataPeriod)
	defer meta.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case st := <-s.changes:
			s.consider(ctx, st)
		case <-replica.C:
			st, err := s.ctl.replicaInfo(ctx, s.cfg.BrokerName)
			if err != nil {
				s.log.Warn().Err(err).Msg("get replica info")
				if controllerCode(err) == remoting.ControllerBrokerMetadataNotExist {
					if _, err := s.ctl.register(ctx, s.cfg.BrokerClusterName, s.cfg.BrokerName, s.BrokerID(), s.addr); err != nil {
						s.log.Warn().Err(err).Msg("register again with the controller")
					}
				}
				continue
			}
			s.consider(ctx, st)
		case <-meta.C:
			s.ctl.refreshAddresses(ctx)
			if _, err := s.ctl.findLeader(ctx); err != nil {
				s.log.Warn().Err(err).Msg("find the leading controller")
			}
		case <-s.proposal:
			if p := s.proposed.Swap(nil); p != nil {
				s.alterSyncStateSet(ctx, p.from, p.set)
			}
		case <-s.cutWake:
			if c := s.pendingCut.Swap(nil); c != nil {
				s.cutSlave(ctx, c.from, c.at)
			}
		}
	}
}

// consider applies what the controller says of the group (a notice or
// GET_REPLICA_INFO's answer), as RocketMQ's changeBrokerRole: a newer
// master epoch switches the broker to master or slave; the same epoch
// updates a master's sync state set; no master has the broker ask for
// an election.
func (s *Supervisor) consider(ctx context.Context, st replicaState) {
	cur := s.role()
	if !st.hasMaster() {
		if st.MasterEpoch >= cur.masterEpoch {
			el, err := s.ctl.elect(ctx, s.cfg.BrokerClusterName, s.cfg.BrokerName, s.BrokerID())
			if err != nil {
				s.log.Info().Err(err).Msg("the group has no master; election asked")
				return
			}
			st = el
		}
		if !st.hasMaster() {
			return
		}
	}
	if st.MasterEpoch < cur.masterEpoch || (st.MasterEpoch == cur.masterEpoch && cur.running) {
		if st.MasterEpoch == cur.masterEpoch && cur.master && st.SyncEpoch > cur.syncEpoch && len(st.SyncStateSet) > 0 {
			s.setSyncStateSet(st.SyncStateSet, st.SyncEpoch)
		}
		return
	}
	if err := s.switchTo(ctx, st, 0); err != nil {
		s.log.Error().Err(err).Int64("masterBrokerId", st.MasterID).Int32("masterEpoch", st.MasterEpoch).
			Msg("switch of role failed; the next answer of the controller tries again")
	}
}

// setSyncStateSet records the master's sync state set.
func (s *Supervisor) setSyncStateSet(set []int64, epoch int32) {
	s.mu.Lock()
	s.cur.syncSet, s.cur.syncEpoch = slices.Clone(set), epoch
	b := s.b
	s.mu.Unlock()
	if b != nil && b.repl.auto != nil {
		b.repl.auto.SetSyncStateSet(set)
	}
	s.log.Info().Ints64("syncStateSet", set).Int32("syncStateSetEpoch", epoch).Msg("sync state set changed")
}

// shutdownTimeout bounds the stop of the old Broker at a switch.
const shutdownTimeout = 30 * time.Second

// switchTo runs the Broker in the role st gives this broker. A master
// that stays master of a newer epoch, or a slave whose master stays the
// same, only notes the epoch (a master appends it to its epoch file);
// otherwise the running Broker is stopped (without enableShutdownGracefully's
// waits: see Broker.stopForSwitch) and a new one started, cutting its
// CommitLog at cut when positive.
func (s *Supervisor) switchTo(ctx context.Context, st replicaState, cut int64) error {
	s.switchMu.Lock()
	defer s.switchMu.Unlock()
	if s.stopped.Load() {
		return errors.New("the supervisor is shut down")
	}
	began := time.Now()
	master := st.MasterID == s.BrokerID()
	cur := s.role()
	next := roleState{running: true, master: master, masterID: st.MasterID, masterAddr: st.MasterAddr,
		masterEpoch: st.MasterEpoch, syncEpoch: st.SyncEpoch, syncSet: slices.Clone(st.SyncStateSet)}
	if master && len(next.syncSet) == 0 {
		next.syncSet = []int64{s.BrokerID()}
	}
	if old := s.Broker(); old != nil && cut == 0 && cur.running && cur.master == master &&
		(master || (cur.masterID == st.MasterID && cur.masterAddr == st.MasterAddr)) {
		if master {
			if err := autoswitch.BecomeMaster(s.epochs, st.MasterEpoch, old.clog.MaxOffset(), s.log); err != nil {
				return err
			}
			if old.repl.auto != nil {
				old.repl.auto.SetSyncStateSet(next.syncSet)
			}
		}
		s.mu.Lock()
		s.cur = next
		s.mu.Unlock()
		s.log.Info().Bool("master", master).Int32("masterEpoch", st.MasterEpoch).Msg("new epoch, same role: the broker runs on")
		return nil
	}
	if old := s.Broker(); old != nil {
		s.mu.Lock()
		s.b = nil
		s.cur.running = false
		s.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		err := old.stopForSwitch(sctx)
		if err == nil {
			select {
			case <-old.Closed():
			case <-sctx.Done():
				err = sctx.Err()
			}
		}
		cancel()
		if err != nil {
			return fmt.Errorf("stop the broker to switch its role: %w", err)
		}
	}
	if err := s.waitStopped(ctx); err != nil {
		return err
	}
	cfg := s.cfg
	if master {
		cfg.BrokerRole, cfg.BrokerID, cfg.HAMasterAddress = roleSyncMaster, 0, ""
	} else {
		cfg.BrokerRole, cfg.BrokerID = roleSlave, s.BrokerID()
		// RocketMQ's controller-mode slave copies its master's tables
		// every 10 s (ReplicasManager.handleSlaveSynchronize), not
		// every slaveSyncIntervalMillis: a slave elected master has
		// its topics.
		cfg.SlaveSyncInterval = min(cfg.SlaveSyncInterval, controllerSlaveSync)
		cfg.HAMasterAddress = s.masterHA(ctx, st.MasterAddr)
	}
	b, err := newBroker(cfg, s.root)
	if err != nil {
		return err
	}
	link := &ctlLink{id: s.BrokerID(), epochs: s.epochs, notify: s.notify, syncSet: slices.Clone(next.syncSet),
		propose: func(set []int64) { s.propose(b, set) }, cut: func(at int64) { s.cut(b, at) }}
	if master {
		link.storesOpen = func(b *Broker) error {
			return autoswitch.BecomeMaster(s.epochs, st.MasterEpoch, b.clog.MaxOffset(), s.log)
		}
	}
	b.ctl = link
	b.shared, b.predecessor, b.keptIndex = s.servers, s.last, &s.index
	if s.configFile != "" {
		b.SetConfigFile(s.configFile)
	}
	if cut > 0 {
		b.CutCommitLogAt(cut)
	}
	if s.configure != nil {
		s.configure(b)
	}
	s.started = b
	if err := b.Start(ctx); err != nil {
		return fmt.Errorf("start the broker as %s: %w", cfg.BrokerRole, err)
	}
	if !master {
		a := st.MasterAddr
		b.repl.masterAddr.Store(&a)
	}
	took := time.Since(began)
	s.mu.Lock()
	s.b, s.cur, s.last = b, next, b
	s.switches = append(s.switches, Switch{Master: master, Epoch: st.MasterEpoch, Took: took, CutAt: cut})
	s.mu.Unlock()
	s.log.Info().Bool("master", master).Int64("brokerId", s.BrokerID()).Int64("masterBrokerId", st.MasterID).
		Str("masterAddress", st.MasterAddr).Int32("masterEpoch", st.MasterEpoch).Int64("cutAt", cut).
		Dur("took", took).Msgf("broker running as %s", cfg.BrokerRole)
	return nil
}

// waitStopped waits until the Broker started last (stopped by now, or
// whose start failed) has closed its stores, at most shutdownTimeout:
// a Broker whose stop outlived its switch's deadline may still be
// running request handlers on the index the next would open. It runs
// under switchMu.
func (s *Supervisor) waitStopped(ctx context.Context) error {
	prev := s.started
	if prev == nil || closedAlready(prev) {
		return nil
	}
	wait := time.NewTimer(shutdownTimeout)
	defer wait.Stop()
	select {
	case <-prev.Closed():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the previous broker to close its stores: %w", ctx.Err())
	case <-wait.C:
		return fmt.Errorf("the previous broker has not closed its stores %s after its stop; not starting another on them", shutdownTimeout)
	}
}

// closedAlready reports whether b has closed its stores by now: checked
// before a wait that also ends with a context, since a select between
// two ready cases picks either.
func closedAlready(b *Broker) bool {
	select {
	case <-b.Closed():
		return true
	default:
		return false
	}
}

// notify queues a role notice for run; a full queue drops it (the next
// GET_REPLICA_INFO brings the same news).
func (s *Supervisor) notify(st replicaState) {
	select {
	case s.changes <- st:
	default:
		s.log.Warn().Msg("role notices queue full: this one is left to the next poll of the controller")
	}
}

// masterHA asks the master at addr for its HA address
// (EXCHANGE_BROKER_HA_INFO); "" when it does not answer (a master being
// restarted), and the slave takes it from its name servers' answers or
// from a later answer of its master (askMasterHA).
func (s *Supervisor) masterHA(ctx context.Context, addr string) string {
	ctx, cancel := context.WithTimeout(ctx, controllerTimeout)
	defer cancel()
	resp, err := s.peers.Invoke(ctx, addr, remoting.NewRequest(remoting.ExchangeBrokerHAInfo, nil, nil))
	if err == nil && resp.Code != remoting.Success {
		err = fmt.Errorf("EXCHANGE_BROKER_HA_INFO answered code %d: %s", resp.Code, resp.Remark)
	}
	var ha string
	if err == nil {
		if ha = remoting.Header(resp.ExtFields).OptString("masterHaAddress", ""); ha == "" {
			err = errors.New("EXCHANGE_BROKER_HA_INFO answered without masterHaAddress")
		}
	}
	if err != nil {
		s.haInfoFails.Failed().Err(err).Str("master", addr).
			Msg("the master's HA address not read; asked again every syncBrokerMetadataPeriod until it or a name server gives it")
		return ""
	}
	s.haInfoFails.Recovered().Str("master", addr).Str("masterHA", ha).Msg("the master's HA address read")
	return ha
}

// askMasterHA asks the master again for its HA address while the running
// slave has none (its master did not answer EXCHANGE_BROKER_HA_INFO at the
// switch, and no name server's answer gave it), and hands the answer to
// the running Broker, whose HA client dials the address it reads at each
// try: the slave replicates without a restart. RocketMQ's controller-mode
// slave learns the address from its registrations with the name servers
// only; without one it would never replicate.
func (s *Supervisor) askMasterHA(ctx context.Context) {
	s.mu.Lock()
	b, cur := s.b, s.cur
	s.mu.Unlock()
	if b == nil || !cur.running || cur.master || cur.masterAddr == "" || b.repl.load(&b.repl.masterHA) != "" {
		return
	}
	ha := s.masterHA(ctx, cur.masterAddr)
	if ha == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The broker may have switched meanwhile (a new master, a new Broker),
	// or a name server's answer come first.
	if s.b != b || s.cur.masterAddr != cur.masterAddr || b.repl.load(&b.repl.masterHA) != "" {
		return
	}
	b.repl.masterHA.Store(&ha)
	s.log.Info().Str("master", cur.masterAddr).Str("masterHA", ha).Msg("master's HA address from EXCHANGE_BROKER_HA_INFO asked again")
}

// proposalRequest is a sync state set proposed by the AutoSwitch server
// of Broker from.
type proposalRequest struct {
	from *Broker
	set  []int64
}

// propose takes a sync state set the AutoSwitch server of Broker from
// proposes (its SyncStateSetChanged) for run to send: only the last one
// waiting is sent, each being the whole set.
func (s *Supervisor) propose(from *Broker, set []int64) {
	s.proposed.Store(&proposalRequest{from: from, set: slices.Clone(set)})
	select {
	case s.proposal <- struct{}{}:
	default:
	}
}

// alterSyncStateSet sends the master's proposed sync state set to the
// controller (CONTROLLER_ALTER_SYNC_STATE_SET) and gives the master the
// set the controller answers. A refusal gives the master back the set
// the controller holds: its server proposes again at its next check
// (every checkSyncStateSetPeriod). A set proposed by a Broker that no
// longer runs is dropped: it was worked out from that Broker's slaves and
// epoch, and the controller, which checks only the master's id and the
// current epochs, would take it (master, slave, then master again: each
// a new Broker). A master that stays master of a newer epoch keeps its
// Broker, and its proposals go.
func (s *Supervisor) alterSyncStateSet(ctx context.Context, from *Broker, set []int64) {
	if b := s.Broker(); b != from {
		s.log.Info().Ints64("syncStateSet", set).Msg("a sync state set proposed by a broker replaced since is dropped")
		return
	}
	r := s.role()
	if !r.running || !r.master {
		return
	}
	got, err := s.ctl.alterSyncStateSet(ctx, s.cfg.BrokerName, s.BrokerID(), r.masterEpoch, set, r.syncEpoch)
	if heldAlready(err) {
		// The controller holds this set: a shrink and the growth back
		// proposed before run sent the first (a slave that reconnected
		// at once) leave the set where it was.
		s.log.Info().Ints64("syncStateSet", set).Int32("syncStateSetEpoch", r.syncEpoch).
			Msg("the controller holds the proposed sync state set already")
		s.setSyncStateSet(set, r.syncEpoch)
		return
	}
	if err != nil {
		s.log.Warn().Err(err).Ints64("syncStateSet", set).Msg("alter sync state set")
		if b := s.Broker(); b != nil && b.repl.auto != nil {
			b.repl.auto.SetSyncStateSet(r.syncSet)
		}
		return
	}
	s.setSyncStateSet(got.SyncStateSet, got.SyncStateSetEpoch)
}

// heldAlready reports whether err is the controller's refusal of a sync
// state set equal to the one it holds (CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
// with RocketMQ's remark for it; the code alone also covers other
// refusals).
func heldAlready(err error) bool {
	var ce *controllerError
	return errors.As(err, &ce) && ce.Code == remoting.ControllerAlterSyncStateSetFailed &&
		strings.Contains(ce.Remark, "is equal with oldSyncStateSet")
}

// cutRequest is a slave's cut and the Broker whose AutoSwitch client
// found it.
type cutRequest struct {
	from *Broker
	at   int64
}

// cut takes a slave's cut from the AutoSwitch client of Broker from for
// run. It replaces a cut still waiting: a Broker asks once (its client
// stops), and the Broker that asked before was stopped, and its client
// with it, before from started.
func (s *Supervisor) cut(from *Broker, at int64) {
	s.pendingCut.Store(&cutRequest{from: from, at: at})
	select {
	case s.cutWake <- struct{}{}:
	default:
	}
}

// cutSlave restarts a slave whose AutoSwitch client found records past
// the consistent point with its master, cutting its CommitLog there. A
// cut asked for by a Broker that no longer runs (its client found it
// just before a switch) is dropped: it was found against the master of
// that Broker, and the Broker running now checks its own.
func (s *Supervisor) cutSlave(ctx context.Context, from *Broker, at int64) {
	if b := s.Broker(); b != from {
		s.log.Info().Int64("cutAt", at).Msg("a cut asked for by a broker replaced since is dropped")
		return
	}
	r := s.role()
	if !r.running || r.master {
		return
	}
	s.log.Warn().Int64("cutAt", at).
		Msg("this slave holds records its master does not have: restarting it with the CommitLog cut there")
	st := replicaState{MasterID: r.masterID, MasterAddr: r.masterAddr, MasterEpoch: r.masterEpoch,
		SyncEpoch: r.syncEpoch, SyncStateSet: r.syncSet, masterPresent: true}
	if err := s.switchTo(ctx, st, at); err != nil {
		s.log.Error().Err(err).Msg("restart with the CommitLog cut")
	}
}

// Shutdown stops the supervisor's loops and the Broker.
func (s *Supervisor) Shutdown(ctx context.Context) error {
	if s.cancel == nil || s.stopped.Swap(true) {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	s.switchMu.Lock()
	defer s.switchMu.Unlock()
	var errs []error
	if b := s.Broker(); b != nil {
		errs = append(errs, b.Shutdown(ctx))
	}
	errs = append(errs, s.closeIndex(ctx))
	// After the Broker's stop, which ran the graceful waits on them.
	s.servers.gate.close()
	errs = append(errs, s.servers.shutdown(ctx))
	errs = append(errs, s.ctl.close(), s.peers.Close())
	return errors.Join(errs...)
}

// closeIndex closes the index once the last Broker started has closed its
// stores. When ctx ends first the index is left open, with an error: a
// request handler of that Broker may still be using it (the process is
// going away; the index's write-ahead log holds what it acknowledged).
func (s *Supervisor) closeIndex(ctx context.Context) error {
	if b := s.started; b != nil && !closedAlready(b) {
		select {
		case <-b.Closed():
		case <-ctx.Done():
			return fmt.Errorf("index left open: the broker has not closed its stores: %w", ctx.Err())
		}
	}
	return s.index.close()
}

// GoAwayWait is the running Broker's (Broker.GoAwayWait).
func (s *Supervisor) GoAwayWait() time.Duration {
	if b := s.Broker(); b != nil {
		return b.GoAwayWait()
	}
	return 0
}
