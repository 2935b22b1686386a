package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/remoting"
)

// ctlLink is what a controller-mode Broker shares with the Supervisor that
// runs it (nil on a broker outside controller mode). The Supervisor sets it
// between New and Start.
type ctlLink struct {
	// id is the broker id the controller gave the broker (the one it
	// registers with the name servers is 0 on a master).
	id int64
	// epochs is the broker's epoch file.
	epochs *autoswitch.EpochCache
	// notify takes the role a controller announced
	// (NOTIFY_BROKER_ROLE_CHANGED); it must not block.
	notify func(replicaState)
	// storesOpen is called by Start once the stores are open and
	// recovered, before the broker accepts a request: a new master notes
	// its epoch's start there.
	storesOpen func(b *Broker) error
	// syncSet is the group's sync state set when the Broker was started
	// (a master's AutoSwitch server starts from it).
	syncSet []int64
	// propose takes the sync state set a master's AutoSwitch server
	// proposes; it must not block (the Supervisor sends it to the
	// controller and answers with SetSyncStateSet).
	propose func(set []int64)
	// cut takes a slave's cut (its CommitLog holds records its master
	// does not); it must not block (the Supervisor restarts the broker
	// with the CommitLog cut there).
	cut func(at int64)
}

// processEpochCache answers GET_BROKER_EPOCH_CACHE as RocketMQ's
// AdminBrokerProcessor: the broker's epochs (each entry's end is the next
// one's start, the last one's Long.MAX_VALUE as RocketMQ leaves it) and
// its CommitLog's end; SYSTEM_ERROR outside controller mode.
func (b *Broker) processEpochCache(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.ctl == nil {
		return remoting.NewResponse(req, remoting.SystemError, "this request only for controllerMode ")
	}
	list := b.ctl.epochs.Entries()
	for i := range list {
		list[i].EndOffset = autoswitch.NoEnd
		if i+1 < len(list) {
			list[i].EndOffset = list[i+1].StartOffset
		}
	}
	body, err := json.Marshal(autoswitch.EpochEntryCache{ClusterName: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName,
		BrokerID: b.cfg.BrokerID, EpochList: list, MaxOffset: b.clog.MaxOffset()})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("encode the epoch cache: %v", err))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// processRoleChanged takes NOTIFY_BROKER_ROLE_CHANGED from a controller:
// the group's master (id, address, epoch) and sync state set. The
// Supervisor applies it after the answer (a change of role restarts the
// broker). Outside controller mode the notice is answered and ignored, as
// RocketMQ's broker without a ReplicasManager does.
func (b *Broker) processRoleChanged(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.ctl == nil {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	st := replicaFromHeader(remoting.Header(req.ExtFields))
	if len(req.Body) > 0 {
		var body syncStateSetBody
		if err := json.Unmarshal(req.Body, &body); err != nil {
			b.log.Warn().Err(err).Stringer("conn", conn).Msg("role change notice: the sync state set does not parse")
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("decode the sync state set: %v", err))
		}
		st.SyncStateSet = body.SyncStateSet
		if body.SyncStateSetEpoch != 0 {
			st.SyncEpoch = body.SyncStateSetEpoch
		}
	}
	b.log.Info().Stringer("conn", conn).Int64("masterBrokerId", st.MasterID).Str("masterAddress", st.MasterAddr).
		Int32("masterEpoch", st.MasterEpoch).Ints64("syncStateSet", st.SyncStateSet).Msg("controller: role change notice")
	b.ctl.notify(st)
	return remoting.NewResponse(req, remoting.Success, "")
}

// processExchangeHAInfo answers EXCHANGE_BROKER_HA_INFO as RocketMQ's
// AdminBrokerProcessor: a request that names a master's HA address makes a
// slave follow it (and its Remoting address) and, with
// syncMasterFlushOffsetWhenStartup and no masterFlushedOffset in its
// checkpoint yet (0), take the request's masterFlushOffset as its
// master's flushed offset; one that does not name it is asked of a master
// (brokerId 0), which answers its HA address, its CommitLog's end at
// start (masterFlushOffset) and its address. A masterFlushOffset that is
// not an integer is SYSTEM_ERROR, as RocketMQ's header decoding fails it;
// one left out sets nothing (RocketMQ's handler fails on it).
func (b *Broker) processExchangeHAInfo(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	resp := remoting.NewResponse(req, remoting.Success, "")
	if ha := h.OptString("masterHaAddress", ""); h.Has("masterHaAddress") {
		var flush *int64
		if h.Has("masterFlushOffset") {
			off, err := h.Int64("masterFlushOffset")
			if err != nil {
				b.log.Warn().Err(err).Stringer("conn", conn).Msg("EXCHANGE_BROKER_HA_INFO: bad header")
				return remoting.NewResponse(req, remoting.SystemError, err.Error())
			}
			flush = &off
		}
		if b.isSlave() {
			b.repl.masterHA.Store(&ha)
			if a := h.OptString("masterAddress", ""); a != "" {
				b.repl.masterAddr.Store(&a)
			}
			b.log.Info().Stringer("conn", conn).Str("masterHA", ha).Msg("master's HA address from EXCHANGE_BROKER_HA_INFO")
			if flush != nil {
				b.syncMasterFlushOffset(*flush, "EXCHANGE_BROKER_HA_INFO")
			}
		}
		return resp
	}
	if b.cfg.BrokerID == 0 {
		resp.ExtFields = map[string]string{
			"masterHaAddress":   b.haServerAddr(),
			"masterFlushOffset": strconv.FormatInt(b.initMaxOffset, 10),
			"masterAddress":     b.Addr(),
		}
	}
	return resp
}

// storedConfirm is the confirm offset the store recorded (the
// checkpoint's confirmPhyOffset), brought within the CommitLog as
// RocketMQ's recovery corrects it.
func storedConfirm(clog *commitlog.Log) int64 {
	return min(max(clog.Checkpoint().ConfirmPhyOffset, clog.MinOffset()), clog.MaxOffset())
}

// holdUnconfirmed sets the confirm limit a controller-mode broker starts
// with, before dispatch resumes: consumers see only the records the
// store last knew confirmed (RocketMQ's recovery dispatches up to its
// stored confirm offset) until the AutoSwitch HA service moves the limit.
// A slave is always held (its master's confirm offset moves it); a
// master only with allAckInSyncStateSet and a sync state set larger than
// itself, where its slaves' acknowledgements move it. A master alone, or
// one without allAckInSyncStateSet, shows everything it holds (RocketMQ's
// changeToMaster dispatches a promoted slave's whole log).
func (b *Broker) holdUnconfirmed(clog *commitlog.Log) {
	if !b.isSlave() && (len(b.ctl.syncSet) <= 1 || !b.cfg.AllAckInSyncStateSet) {
		return
	}
	at := storedConfirm(clog)
	clog.SetConfirmLimit(at)
	if at < clog.MaxOffset() {
		b.log.Info().Int64("confirmOffset", at).Int64("end", clog.MaxOffset()).
			Msg("controller mode: records past the stored confirm offset are shown once the sync state set confirms them")
	}
}

// startAutoSwitchMaster serves the group's slaves on port with RocketMQ's
// AutoSwitch HA (controller mode): the epoch file's last entry is the
// epoch the controller elected this broker in (noted at storesOpen).
func (b *Broker) startAutoSwitchMaster(port int) error {
	srv := autoswitch.NewServer(autoswitch.ServerConfig{
		Addr:                    net.JoinHostPort("", strconv.Itoa(port)),
		Log:                     b.clog,
		Epochs:                  b.ctl.epochs,
		BrokerID:                b.ctl.id,
		SyncStateSet:            b.ctl.syncSet,
		SyncStateSetChanged:     b.ctl.propose,
		AllAckInSyncStateSet:    b.cfg.AllAckInSyncStateSet,
		StoredConfirmOffset:     storedConfirm(b.clog),
		ConfirmLimit:            b.clog.SetConfirmLimit,
		HeartbeatInterval:       b.cfg.HASendHeartbeatInterval,
		HousekeepingInterval:    b.cfg.HAHousekeepingInterval,
		TransferBatchSize:       b.cfg.HATransferBatchSize,
		MaxTimeSlaveNotCatchup:  b.cfg.HAMaxTimeSlaveNotCatchup,
		CheckSyncStateSetPeriod: b.cfg.CheckSyncStateSetPeriod,
		Logger:                  b.root,
		Listen:                  b.haListen(),
	})
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start the AutoSwitch HA server: %w", err)
	}
	b.repl.auto = srv
	if b.cfg.BrokerRole == roleSyncMaster && b.slaveAcks() == 0 && !b.cfg.AllAckInSyncStateSet {
		b.log.Warn().Msg("controller mode with inSyncReplicas=1 and allAckInSyncStateSet=false: sends do not wait for a slave")
	}
	b.log.Info().Int("haListenPort", port).Ints64("syncStateSet", b.ctl.syncSet).
		Msg("master: slaves replicate with the AutoSwitch HA protocol")
	return nil
}

// haListen is how the AutoSwitch server of a master Broker listens:
// behind a Supervisor, on a lease of the process's HA port, which
// outlives the Broker (haPort); else nil, its own listener.
func (b *Broker) haListen() func(string) (net.Listener, error) {
	if b.shared == nil || b.shared.ha == nil {
		return nil
	}
	return func(string) (net.Listener, error) { return b.shared.ha.lease() }
}

// startAutoSwitchSlave follows the master with RocketMQ's AutoSwitch HA
// (controller mode): the client records the master's epochs in the epoch
// file, and a slave holding records past the point where its log and the
// master's part goes to the Supervisor to be cut (ctlLink.cut).
func (b *Broker) startAutoSwitchSlave() {
	c := autoswitch.NewClient(autoswitch.ClientConfig{
		MasterAddr:           func() string { return b.repl.load(&b.repl.masterHA) },
		BrokerID:             b.ctl.id,
		Log:                  b.clog,
		Epochs:               b.ctl.epochs,
		SyncFromLastFile:     b.cfg.SyncFromLastFile,
		AsyncLearner:         b.cfg.AsyncLearner,
		StoredConfirmOffset:  storedConfirm(b.clog),
		ConfirmLimit:         b.clog.SetConfirmLimit,
		HeartbeatInterval:    b.cfg.HASendHeartbeatInterval,
		HousekeepingInterval: b.cfg.HAHousekeepingInterval,
		Logger:               b.root,
	})
	b.repl.autoClient = c
	b.goBackground("autoswitch-ha-client", func(ctx context.Context) {
		err := c.Run(ctx)
		var cut *autoswitch.CutError
		if errors.As(err, &cut) {
			b.log.Warn().Int64("cutAt", cut.At).Int64("end", cut.End).
				Msg("this slave holds records its master does not have: it stops replicating until restarted with the CommitLog cut there")
			if b.ctl.cut != nil {
				b.ctl.cut(cut.At)
			}
		}
	})
	b.goBackground("slave-sync", func(ctx context.Context) { b.slaveSyncLoop(ctx, b.masterAddr) })
	if b.cfg.TimerWheelEnable {
		b.goBackground("slave-timer-sync", func(ctx context.Context) { b.slaveTimerSyncLoop(ctx, slaveTimerSyncInterval, b.masterAddr) })
	}
	b.startSlaveCatchUp(autoSwitchStatus(c), autoSwitchMasterEnd(c))
	b.log.Info().Int64("brokerId", b.ctl.id).Msg("slave: the CommitLog is replicated from the master with the AutoSwitch HA protocol; sends are refused")
}

// replicaOffsets returns the CommitLog's end and the confirmed offset for
// a controller heartbeat. The Supervisor's heartbeat calls it from a
// goroutine of its own while a role switch may be stopping the Broker:
// ok is false, and nothing is read, while the CommitLog closes or once it
// is closed (the heartbeat sends the last values it read instead).
func (b *Broker) replicaOffsets() (end, confirm int64, ok bool) {
	if !b.clogMu.TryRLock() {
		return 0, 0, false
	}
	defer b.clogMu.RUnlock()
	if b.clog == nil {
		return 0, 0, false
	}
	return b.clog.MaxOffset(), b.confirmOffset(), true
}

// confirmOffset is the confirm offset a controller-mode broker reports in
// its heartbeats, as RocketMQ's CommitLog.getConfirmOffset: a master's
// from its AutoSwitch server (its end, or with allAckInSyncStateSet what
// the whole sync state set holds), a slave's the one its master's last
// transfer carried (-1 before the first); the CommitLog's end otherwise.
func (b *Broker) confirmOffset() int64 {
	switch {
	case b.repl.auto != nil:
		return b.repl.auto.ConfirmOffset()
	case b.repl.autoClient != nil:
		return b.repl.autoClient.ConfirmOffset()
	default:
		return b.clog.MaxOffset()
	}
}
