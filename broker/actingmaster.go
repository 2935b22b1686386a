package broker

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Slave acting master (enableSlaveActingMaster), RocketMQ 5's failover
// without promotion: every broker of a group registers with
// enableActingMaster=true and heartbeats its name servers, so that they
// drop a dead member within brokerNotActiveTimeoutMillis. Each member
// follows its group's member list: asked every
// syncBrokerMemberGroupPeriod, and NOTIFY_MIN_BROKER_ID_CHANGE pushed by
// name servers with notifyMinBrokerIdChanged. A slave whose id is the
// smallest in its group (the master is gone) is the group's acting
// master: name servers with supportActingMaster route it as broker id 0
// with read-only queues, and it serves pulls and POP of what it holds
// without sending consumers back to the master. When the master is back
// (id 0 is the smallest again), the slave follows it again.
//
// RocketMQ's acting master also runs its special services (timers and
// delay levels, transaction checks, POP revive), whose messages go
// through its EscapeBridge: to another group's master with
// enableRemoteEscape, refused with SERVICE_NOT_AVAILABLE without it.
// rocketkv has the bridge (escape.go) and, with enableRemoteEscape, runs
// on an acting master the timer's and the delay levels' delivery, the
// escape of open transactions and the POP revive of what the master had
// in flight (changeSpecialServices; the revive, pop.Service's
// RunActingRevive, puts through the bridge's putToSpecificQueue, as
// RocketMQ's PopReviveService.reviveRetry, and the slave's pops then
// start past the master's copied pop position instead of popping that
// again). Without escape it starts none: RocketMQ's deliver nothing
// either (every put they make is refused; its timers retry until the
// master is back, its revive drops what it could not put, which the
// master revives when it is back); the slave's pops start from the
// committed offset then, so what the master had in flight is popped
// again from the slave (pop.Service.PopReadOnly).
//
// How a broker heartbeats and learns its group's members follows
// compatibleWithOldNameSrv (RocketMQ's default true): with it, requests a
// RocketMQ 4.x name server serves (a oneway QUERY_DATA_VERSION, and the
// route of rmq_sys_SYNC_BROKER_MEMBER_<brokerName>, the topic every
// broker creates at start); without it RocketMQ 5's BROKER_HEARTBEAT and
// GET_BROKER_MEMBER_GROUP.

// memberGroupTimeout bounds each request for the group's members
// (GET_BROKER_MEMBER_GROUP or the route), as RocketMQ's
// BrokerOuterAPI.getBrokerMemberGroup and getBrokerMemberGroupCompatible
// (3 s).
const memberGroupTimeout = 3 * time.Second

// groupState is a broker's view of its group under
// enableSlaveActingMaster: the smallest broker id among the members the
// name servers know, and its address, as RocketMQ's BrokerController
// keeps minBrokerIdInGroup and minBrokerAddrInGroup (both start as 0 and
// unknown: a slave does not act before its first answer). mu serialises
// the changes of the smallest id (RocketMQ's lock); the loads need no
// lock.
type groupState struct {
	mu      sync.Mutex
	minID   atomic.Int64
	minAddr atomic.Pointer[string]
	// members is the last member list a name server gave, nil before.
	members atomic.Pointer[map[int64]string]
	// syncFails reports failed syncs of the member list at most once a
	// minute, with the count held back: with compatibleWithOldNameSrv
	// false, against a name server without GET_BROKER_MEMBER_GROUP
	// (RocketMQ 4.x) every sync fails.
	syncFails *repeatlog.Limiter
}

// actingMaster reports whether the broker is its group's acting master:
// a slave under enableSlaveActingMaster whose id is the smallest its
// group's member list shows.
func (b *Broker) actingMaster() bool {
	return b.isSlave() && b.cfg.EnableSlaveActingMaster && b.group.minID.Load() == b.cfg.BrokerID
}

// specialServicesActive is what GET_BROKER_RUNTIME_INFO reports as
// brokerActive, RocketMQ's isSpecialServiceRunning: true on a master and
// on an acting master, false on a slave following its master.
func (b *Broker) specialServicesActive() bool {
	return !b.isSlave() || b.actingMaster()
}

// startActingMaster starts, under enableSlaveActingMaster, the heartbeats
// to the name servers and the sync of the group's member list, as
// RocketMQ's BrokerController.start schedules them (each first after 1 s).
// The registrar must be started.
func (b *Broker) startActingMaster() {
	if !b.cfg.EnableSlaveActingMaster {
		return
	}
	b.group.syncFails = repeatlog.New(b.log, time.Minute, nil)
	b.goBackground("broker-heartbeat", func(ctx context.Context) {
		ctx, cancel := b.register.untilStopped(ctx)
		defer cancel()
		periodic.RunDelayed(ctx, time.Second, b.cfg.BrokerHeartbeatInterval, b.sendHeartbeat)
	})
	b.goBackground("sync-member-group", func(ctx context.Context) {
		ctx, cancel := b.register.untilStopped(ctx)
		defer cancel()
		periodic.RunDelayed(ctx, time.Second, b.cfg.SyncBrokerMemberGroupPeriod, b.syncMemberGroup)
	})
}

// sendHeartbeat renews the broker's registration with every available
// name server, as RocketMQ's BrokerController.sendHeartbeat: with
// compatibleWithOldNameSrv by a oneway QUERY_DATA_VERSION carrying the
// data version of the broker's topics, else by BROKER_HEARTBEAT.
func (b *Broker) sendHeartbeat(ctx context.Context) {
	if !b.register.hasNameServers() {
		return
	}
	var err error
	if b.current().CompatibleWithOldNameSrv {
		err = b.register.ns.HeartbeatViaDataVersion(ctx, b.register.info(), b.topics.dataVersion(), b.cfg.SendHeartbeatTimeout)
	} else {
		err = b.register.ns.Heartbeat(ctx, b.register.info(), b.cfg.SendHeartbeatTimeout)
	}
	if err != nil && ctx.Err() == nil {
		b.log.Debug().Err(err).Msg("broker heartbeat")
	}
}

// syncMemberGroup asks a name server for the group's members and takes
// its smallest id, as RocketMQ's BrokerController.syncBrokerMemberGroup:
// with compatibleWithOldNameSrv from the route of
// rmq_sys_SYNC_BROKER_MEMBER_<brokerName>, else by
// GET_BROKER_MEMBER_GROUP. An answer without members (the name server
// does not know the group) changes nothing.
func (b *Broker) syncMemberGroup(ctx context.Context) {
	if !b.register.hasNameServers() {
		return
	}
	ask := b.register.ns.MemberGroup
	if b.current().CompatibleWithOldNameSrv {
		ask = b.register.ns.MemberGroupFromRoute
	}
	members, err := ask(ctx, b.cfg.BrokerClusterName, b.cfg.BrokerName, memberGroupTimeout)
	if err != nil {
		if ctx.Err() == nil {
			b.group.syncFails.Failed().Err(err).Msg("sync the broker group's members from the name servers")
		}
		return
	}
	if len(members) == 0 {
		b.group.syncFails.Failed().Str("cluster", b.cfg.BrokerClusterName).Str("brokerName", b.cfg.BrokerName).
			Msg("no member of the broker group known to the name server")
		return
	}
	b.group.syncFails.Recovered().Msg("the broker group's members synced from the name servers again")
	b.group.members.Store(&members)
	minID := slices.Min(slices.Collect(maps.Keys(members)))
	b.updateMinBroker(minID, members[minID], minBrokerChange{polled: true})
}

// minBrokerChange is what accompanies a new smallest id: the address of
// the member that went offline and the master's HA address, when a name
// server's NOTIFY_MIN_BROKER_ID_CHANGE says them.
type minBrokerChange struct {
	offlineAddr string
	masterHA    string
	// polled is set for the member list's periodic sync, which gives up
	// when a change is under way (RocketMQ's tryLock) and takes the
	// previous smallest member as the one offline when the id grows.
	polled bool
}

// updateMinBroker applies a smallest id of minID at minAddr on a slave
// under enableSlaveActingMaster (a master ignores it, as RocketMQ's does).
func (b *Broker) updateMinBroker(minID int64, minAddr string, ch minBrokerChange) {
	if !b.cfg.EnableSlaveActingMaster || !b.isSlave() {
		return
	}
	if ch.polled {
		if !b.group.mu.TryLock() {
			return
		}
	} else {
		b.group.mu.Lock()
	}
	defer b.group.mu.Unlock()
	prev := b.group.minID.Load()
	prevAddr := ""
	if p := b.group.minAddr.Load(); p != nil {
		prevAddr = *p
	}
	if minID == prev {
		// The smallest member's address is kept even when its id is the
		// one assumed at the start (0): RocketMQ's stays unknown then, so
		// that the master's going, seen by the sync, does not let go of
		// it until a registration's answer no longer names it.
		if minAddr != "" && minAddr != prevAddr {
			b.group.minAddr.Store(&minAddr)
		}
		return
	}
	if ch.polled && minID > prev {
		ch.offlineAddr = prevAddr
	}
	b.log.Warn().Int64("oldMinBrokerId", prev).Str("oldMinBrokerAddr", prevAddr).
		Int64("minBrokerId", minID).Str("minBrokerAddr", minAddr).
		Bool("actingMaster", minID == b.cfg.BrokerID).Msg("the smallest broker id of the group changed")
	// The master is let go of before the slave reports itself acting,
	// and followed again before it stops. The special services stop
	// first: the slave's sync with its master, once it follows it again,
	// forgets what the master delivered, beside no timer round of its own.
	acting := minID == b.cfg.BrokerID
	if !acting {
		b.changeSpecialServices(false)
	}
	if ch.offlineAddr != "" && ch.offlineAddr == b.masterAddr() {
		b.onMasterOffline()
	}
	if minID == namesrv.MasterID && minAddr != "" {
		b.onMasterOnline(minAddr, ch.masterHA)
	}
	b.group.minID.Store(minID)
	b.group.minAddr.Store(&minAddr)
	if acting {
		b.changeSpecialServices(true)
	}
}

// specialServices are the special services an acting master runs with
// enableRemoteEscape (RocketMQ's changeSpecialServiceStatus): the timer's
// and the delay levels' delivery, whose messages escape to another
// group's master, the transaction checker's escape of the open
// halves (txn.RunEscape) and the POP revive of the checkpoints copied
// from the master (pop.Service.RunActingRevive). mu
// serialises their start and stop; lock order: groupState.mu before it.
type specialServices struct {
	mu sync.Mutex
	// stop ends the running services and done is closed once they
	// returned; both nil while none runs.
	stop context.CancelFunc
	done chan struct{}
}

// changeSpecialServices starts the acting master's special services when
// start is true and escape is on (without it every message they put
// would be refused, as RocketMQ's are: they would deliver nothing), and
// stops them, waiting for them to return, when it is false. The timer
// starts at the read time last saved (the master's, which a slave copies;
// its progress while acting is its own index and read time; the delay
// levels at the master's progress, which a slave copies, then at their
// own, which the next copy from the master replaces), and
// deletes what it delivers from this slave's index only; the open
// transactions sent to another group are forgotten from this slave's
// index only, and so are the checkpoints revived. When the master is
// back, it goes on from its own state: what both delivered or revived is
// delivered twice, and a transaction both hold is checked by both, as
// with RocketMQ.
func (b *Broker) changeSpecialServices(start bool) {
	sp := &b.special
	sp.mu.Lock()
	defer sp.mu.Unlock()
	running := sp.stop != nil
	if start && !b.escape.enabled() {
		return
	}
	switch {
	case start == running:
		return
	case start:
		if b.ctx.Err() != nil {
			return // stopping
		}
		ctx, cancel := context.WithCancel(b.ctx)
		done := make(chan struct{})
		sp.stop, sp.done = cancel, done
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer close(done)
			var wg sync.WaitGroup
			wg.Go(func() { b.timers.Run(ctx) })
			wg.Go(func() { b.scheduleLoop(ctx) })
			wg.Go(func() { b.txns.RunEscape(ctx, b.escape.put) })
			if svc := b.popSvc; svc != nil {
				wg.Go(func() { svc.RunActingRevive(ctx, b.escape.putToSpecificQueue) })
			}
			wg.Wait()
		}()
		b.log.Warn().Msg("acting master: special services started (timer and delay-level delivery, open transactions, POP revive, through the escape bridge)")
	default:
		sp.stop()
		<-sp.done
		sp.stop, sp.done = nil, nil
		b.timers.ForgetReadTime()
		b.log.Warn().Msg("acting master no more: special services stopped")
	}
}

// onMasterOffline stops following the master: no more HA transfer from
// it nor copies of its metadata, and its connection is closed, as
// RocketMQ's BrokerController.onMasterOffline.
func (b *Broker) onMasterOffline() {
	empty := ""
	if prev := b.repl.masterAddr.Swap(&empty); prev != nil && *prev != "" {
		b.repl.master.forget(*prev)
	}
	b.repl.masterHA.Store(&empty)
	b.log.Warn().Msg("master offline: the slave stops following it")
}

// onMasterOnline follows the master at addr again: its HA address is the
// one the name server's notice gave, else haMasterAddress when
// configured, else the one the next registration's answer gives (a
// registration is made at once; RocketMQ asks the master with
// EXCHANGE_BROKER_HA_INFO instead). The pulls held on the slave are run
// again, so that their consumers are sent to the master (RocketMQ's
// notifyMasterOnline). With syncMasterFlushOffsetWhenStartup a slave
// without a masterFlushedOffset asks the master for it, in the
// background (RocketMQ asks before following).
func (b *Broker) onMasterOnline(addr, masterHA string) {
	b.repl.masterAddr.Store(&addr)
	if masterHA == "" {
		masterHA = b.fixedMasterHA()
	}
	if masterHA != "" {
		b.repl.masterHA.Store(&masterHA)
	}
	if b.needMasterFlushOffset() {
		b.goBackground("master flush offset", func(ctx context.Context) { b.fetchMasterFlushOffset(ctx, addr) })
	}
	b.register.trigger()
	b.holds.wakeAll()
	b.log.Warn().Str("master", addr).Str("masterHA", masterHA).Msg("master online: the slave follows it again")
}

// processNotifyMinBrokerIDChange answers NOTIFY_MIN_BROKER_ID_CHANGE, a
// name server's notice (notifyMinBrokerIdChanged) that the smallest
// broker id of the group changed; applied as RocketMQ's
// AdminBrokerProcessor applies it (a master ignores it), answered
// SUCCESS.
func (b *Broker) processNotifyMinBrokerIDChange(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	minID := r.Int64("minBrokerId")
	if err := r.Err(); err != nil {
		b.log.Warn().Err(err).Msg("NOTIFY_MIN_BROKER_ID_CHANGE without a minBrokerId: refused")
		return remoting.NewResponse(req, remoting.SystemError, "minBrokerId: "+err.Error())
	}
	minAddr := r.OptString("minBrokerAddr", "")
	ch := minBrokerChange{offlineAddr: r.OptString("offlineBrokerAddr", ""), masterHA: r.OptString("haBrokerAddr", "")}
	b.log.Warn().Int64("prev", b.group.minID.Load()).Int64("new", minID).Msg("min broker id changed (NOTIFY_MIN_BROKER_ID_CHANGE)")
	b.updateMinBroker(minID, minAddr, ch)
	return remoting.NewResponse(req, remoting.Success, "")
}
