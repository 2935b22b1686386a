package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// brokerRole's values for a slave and for a master whose puts wait for
// its slaves.
const (
	roleSlave      = "SLAVE"
	roleSyncMaster = "SYNC_MASTER"
)

// replication is the broker's part in master-slave replication: a master
// serves its slaves (server); a slave follows its master (client) at the
// addresses its name servers give (or haMasterAddress).
type replication struct {
	server *ha.Server // master only
	client *ha.Client // slave only
	// auto and autoClient replace server and client in controller mode
	// (RocketMQ's AutoSwitch HA): the master's server, the slave's
	// client.
	auto       *autoswitch.Server
	autoClient *autoswitch.Client
	// masterHA and masterAddr are a slave's master: its HA address and
	// its Remoting address ("" while unknown).
	masterHA   atomic.Pointer[string]
	masterAddr atomic.Pointer[string]
	// masterTimer is the master's timer checkpoint as a slave with
	// timerWheelEnable last copied it (GET_TIMER_CHECK_POINT, every
	// slaveTimerSyncInterval), nil before the first copy: see
	// slaveTimerCheckpoint.
	masterTimer atomic.Pointer[rmqconfig.TimerCheckpoint]
	// savedTimerReadMs is the read time of the master's checkpoint the
	// slave saved before it last stopped, which it reports until its
	// first copy (0: none).
	savedTimerReadMs atomic.Int64
	// masterTimerMetrics is the master's timer metrics (GET_TIMER_METRICS)
	// as a slave with timerWheelEnable last copied them with the full sync,
	// nil before the first copy: see slaveTimerMetrics.
	masterTimerMetrics atomic.Pointer[timerMetrics]
	// sightings are the topics a slave's dispatcher met, for its sync
	// loop to look up (slavetopics.go); nil on a master.
	sightings *topicSightings
	// restarts are the queues a slave's dispatcher started anew while a
	// step of a sync of the master's tables was under way
	// (slaverestart.go); nil on a master.
	restarts *queueRestarts
	// master is a slave's kept connection to its master's Remoting
	// address, for its syncs (see masterLink).
	master masterLink
}

func (r *replication) load(p *atomic.Pointer[string]) string {
	if s := p.Load(); s != nil {
		return *s
	}
	return ""
}

// isSlave reports whether the broker is a slave (brokerRole=SLAVE).
func (b *Broker) isSlave() bool { return b.cfg.BrokerRole == roleSlave }

// CutCommitLogAt makes Start cut a slave's CommitLog at offset before
// anything reads it: the records from there on, which the slave's HA
// client found are not its master's (it logs the offset as cutAt), are
// removed with their index entries, and the master sends its own. Start
// refuses it on a master. Call it before Start.
//
// It cuts once: the offset is noted in the store (cutDoneFile), and a
// start asked to cut at the offset noted there does not cut again.
func (b *Broker) CutCommitLogAt(offset int64) { b.cutAt = offset }

// cutDoneFile, in the store's root, holds the offset of the last cut
// CutCommitLogAt made.
const cutDoneFile = "commitlog-cut"

// stepCommitLogCut names the step of a start that cut the CommitLog,
// before the cut is noted in cutDoneFile (Broker.recoveryStep).
const stepCommitLogCut = "commitlog cut"

// cutDone returns the offset of the last cut made in the store at root,
// 0 for none.
func cutDone(root string) (int64, error) {
	raw, err := os.ReadFile(filepath.Join(root, cutDoneFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the CommitLog's last cut: %w", err)
	}
	off, err := parseCutDone(raw)
	if err != nil {
		return 0, fmt.Errorf("read the CommitLog's last cut from %s: %w", filepath.Join(root, cutDoneFile), err)
	}
	return off, nil
}

// formatCutDone is the content of cutDoneFile for a cut at offset: the
// decimal offset and a newline.
func formatCutDone(offset int64) []byte {
	return append(strconv.AppendInt(nil, offset, 10), '\n')
}

// parseCutDone reads the content of cutDoneFile: a decimal offset, with
// white space around it (an editor's newline) ignored.
func parseCutDone(raw []byte) (int64, error) {
	off, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse the offset of the last cut: %w", err)
	}
	return off, nil
}

// checkRole applies RocketMQ's start-up rules of brokerRole: a master's
// brokerId is 0, a slave's above 0.
func checkRole(cfgRole string, brokerID int64) (int64, error) {
	if cfgRole == roleSlave {
		if brokerID <= 0 {
			return 0, fmt.Errorf("brokerRole=SLAVE needs a brokerId above 0 (the master's is 0), have %d", brokerID)
		}
		return brokerID, nil
	}
	return 0, nil
}

// checkSyncMasterPort refuses a SYNC_MASTER that waits for slaves
// (inSyncReplicas above 1) without an HA port (haListenPort=-1): no slave
// could ever follow it, and its sends would wait for none.
func checkSyncMasterPort(role string, haPort, inSyncReplicas int) error {
	if role == roleSyncMaster && haPort < 0 && inSyncReplicas > 1 {
		return fmt.Errorf("brokerRole=SYNC_MASTER with inSyncReplicas=%d needs slaves, and haListenPort=-1 opens no port for them: set an haListenPort, or inSyncReplicas=1", inSyncReplicas)
	}
	return nil
}

// haAddressMinLength is the length below which RocketMQ's broker ignores
// haMasterAddress (BrokerController's HA_ADDRESS_MIN_LENGTH, 6): a slave
// configured with a shorter one ("h:1") takes its master's HA address
// from its name servers' answers, as one with none does.
const haAddressMinLength = 6

// fixedMasterHA is the master's HA address a slave is configured with
// (haMasterAddress), "" when none is or when it is too short for
// RocketMQ to use it: then the name servers' answers say where the
// master is.
func (b *Broker) fixedMasterHA() string {
	if a := b.cfg.HAMasterAddress; len(a) >= haAddressMinLength {
		return a
	}
	return ""
}

// startReplication starts the HA server of a master or the HA client of
// a slave.
func (b *Broker) startReplication() error {
	if b.isSlave() {
		if a := b.fixedMasterHA(); a != "" {
			b.repl.masterHA.Store(&a)
		} else if a := b.cfg.HAMasterAddress; a != "" {
			b.log.Warn().Str("haMasterAddress", a).Int("minLength", haAddressMinLength).
				Msg("haMasterAddress is shorter than RocketMQ takes and is ignored, as RocketMQ ignores it: the master's HA address comes from the name servers")
		}
		if b.cfg.TimerWheelEnable {
			if ms, ok, err := b.db.TimerReadTime(); err != nil {
				b.log.Warn().Err(err).Msg("read the master's timer read time saved at the last copy")
			} else if ok {
				b.repl.savedTimerReadMs.Store(ms)
			}
		}
		if b.ctl != nil {
			b.startAutoSwitchSlave()
			return nil
		}
		b.repl.client = ha.NewClient(ha.ClientConfig{
			MasterAddr:           func() string { return b.repl.load(&b.repl.masterHA) },
			Log:                  b.clog,
			HeartbeatInterval:    b.cfg.HASendHeartbeatInterval,
			HousekeepingInterval: b.cfg.HAHousekeepingInterval,
			Logger:               b.root,
		})
		b.goBackground("ha-client", b.repl.client.Run)
		b.goBackground("slave-sync", func(ctx context.Context) { b.slaveSyncLoop(ctx, b.masterAddr) })
		b.startSlaveCatchUp(b.repl.client.Status, b.askMasterEnd)
		if b.cfg.TimerWheelEnable {
			b.goBackground("slave-timer-sync", func(ctx context.Context) { b.slaveTimerSyncLoop(ctx, slaveTimerSyncInterval, b.masterAddr) })
		}
		b.log.Info().Str("haMasterAddress", b.fixedMasterHA()).
			Msg("slave: the CommitLog is replicated from the master; sends are refused")
		return nil
	}
	port := haListenPortOf(b.cfg)
	if port < 0 {
		b.log.Info().Msg("haListenPort=-1: no HA port, slaves cannot follow this master")
		return nil
	}
	if b.ctl != nil {
		return b.startAutoSwitchMaster(port)
	}
	srv := ha.NewServer(ha.ServerConfig{
		Addr:                 net.JoinHostPort("", strconv.Itoa(port)),
		Log:                  b.clog,
		HeartbeatInterval:    b.cfg.HASendHeartbeatInterval,
		HousekeepingInterval: b.cfg.HAHousekeepingInterval,
		TransferBatchSize:    b.cfg.HATransferBatchSize,
		MaxGapNotInSync:      b.cfg.HAMaxGapNotInSync,
		MaxBytesPerSecond:    haRateLimit(b.cfg),
		Logger:               b.root,
	})
	if err := srv.Start(); err != nil {
		return err
	}
	b.repl.server = srv
	if why := fastPortMismatch(b.cfg.ListenPort, b.fastListenPort()); why != "" {
		b.log.Warn().Msg(why)
	}
	if b.cfg.BrokerRole == roleSyncMaster && b.slaveAcks() == 0 {
		b.log.Warn().Msg("brokerRole=SYNC_MASTER with inSyncReplicas=1: sends do not wait for a slave (RocketMQ 5's rule); set inSyncReplicas=2 for the 4.x behaviour")
	}
	return nil
}

// slaveAcks is how many slaves must hold a put before a SYNC_MASTER
// answers it: inSyncReplicas-1 as in force now (UPDATE_BROKER_CONFIG
// changes it, as RocketMQ's put reads it each time); 0 when puts do not
// wait.
func (b *Broker) slaveAcks() int {
	if b.cfg.BrokerRole != roleSyncMaster || (b.repl.server == nil && b.repl.auto == nil) {
		return 0
	}
	if b.repl.auto != nil && b.cfg.AllAckInSyncStateSet {
		// Controller mode: every broker of the sync state set, as
		// RocketMQ's allAckInSyncStateSet (replicated waits for the
		// set itself, which may change during the wait).
		return max(len(b.repl.auto.SyncStateSet())-1, 0)
	}
	return max(b.current().InSyncReplicas-1, 0)
}

// inSyncReplicasShort reports whether a put that waits for its
// replication must be refused before it is stored: a controller-mode
// SYNC_MASTER whose sync state set (the master included) holds fewer
// brokers than minInSyncReplicas, where RocketMQ's CommitLog put answers
// IN_SYNC_REPLICAS_NOT_ENOUGH and its send processor SYSTEM_ERROR "in-sync
// replicas not enough". Outside controller mode minInSyncReplicas does
// nothing, as in RocketMQ without enableAutoInSyncReplicas.
func (b *Broker) inSyncReplicasShort() bool {
	if b.repl.auto == nil || b.cfg.BrokerRole != roleSyncMaster {
		return false
	}
	return b.repl.auto.InSyncReplicas() < b.current().MinInSyncReplicas
}

// inSyncReplicasRemark is RocketMQ's remark for IN_SYNC_REPLICAS_NOT_ENOUGH.
const inSyncReplicasRemark = "in-sync replicas not enough"

// errInSyncReplicasNotEnough is a put refused by inSyncReplicasShort
// (RocketMQ's IN_SYNC_REPLICAS_NOT_ENOUGH): nothing was stored.
var errInSyncReplicasNotEnough = errors.New(inSyncReplicasRemark)

// waitsForReplicas reports whether RocketMQ's put would wait for msgs to
// replicate (its needHandleHA): unless the message says WAIT=false, every
// put on a SYNC_MASTER does, the broker's own (transaction commits, POP
// checkpoints and revives) included; a send-back's copy carries
// WAIT=false in its properties, as RocketMQ writes it. The records RocketMQ
// puts with WAIT=false in the message's map only (the transaction
// service's op messages and halves given up or resumed, the deliveries
// of delayed and timer messages, a timer message's roll) are put with
// appendOptions.ownRecord and not asked.
func waitsForReplicas(msgs []*commitlog.Message) bool {
	v, ok := commitlog.LookupProperty(msgs[0].Properties, propWait)
	return !ok || v != "false"
}

// stopReplication closes the HA server (the client stops with the
// broker's background tasks) and a slave's connection to its master,
// once the background tasks that use it stopped.
func (b *Broker) stopReplication() error {
	errs := []error{b.repl.master.close(), b.escape.link.close(), b.staticLink.close()}
	if b.repl.server != nil {
		// The field stays: puts still running read it (Close is
		// idempotent).
		errs = append(errs, b.repl.server.Close())
	}
	if b.repl.auto != nil {
		errs = append(errs, b.repl.auto.Close())
	}
	return errors.Join(errs...)
}

// haListenPortOf is the HA port cfg opens: -1 for none (haListenPort
// -1), haListenPort when set, else listenPort+1 as RocketMQ's, 0 (any
// free port) when the Remoting port is chosen by the system too.
func haListenPortOf(cfg configs.Broker) int {
	switch p := cfg.HAListenPort; {
	case p < 0:
		return -1
	case p > 0:
		return p
	case cfg.ListenPort != 0:
		return cfg.ListenPort + 1
	}
	return 0
}

// haServerAddr is the address slaves replicate from: brokerIP2 (brokerIP1
// when empty) and the HA port, as the broker registers it. Either may be
// a host name (a replication network's, resolved where the slave dials),
// as RocketMQ passes it on verbatim.
func (b *Broker) haServerAddr() string {
	port := b.cfg.HAListenPort
	if b.repl.server != nil {
		if a, ok := b.repl.server.Addr().(*net.TCPAddr); ok {
			port = a.Port
		}
	}
	if b.repl.auto != nil {
		if a, ok := b.repl.auto.Addr().(*net.TCPAddr); ok {
			port = a.Port
		}
	}
	if host := b.cfg.BrokerIP2; host != "" {
		if a, err := netip.ParseAddr(host); err == nil {
			return netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
		}
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	return net.JoinHostPort(b.announcedHost(), strconv.Itoa(port))
}

// noteRegistration takes a slave's master from a registration's answers,
// as RocketMQ's handleRegisterBrokerResult: the first name server that
// answered says where the master is (its HA address is kept when a name
// server no longer knows it; its Remoting address is not).
func (b *Broker) noteRegistration(results []namesrv.Registration) {
	if !b.isSlave() {
		return
	}
	for _, r := range results {
		if r.Err != nil {
			continue
		}
		if b.fixedMasterHA() == "" && r.Result.HAServerAddr != "" {
			if a := r.Result.HAServerAddr; b.repl.load(&b.repl.masterHA) != a {
				b.repl.masterHA.Store(&a)
				b.log.Info().Str("masterHA", a).Msg("master's HA address from the name server")
			}
		}
		a := r.Result.MasterAddr
		if prev := b.repl.masterAddr.Swap(&a); prev != nil && *prev != "" && *prev != a {
			// The old master gets no more requests: its connection is
			// closed now rather than left open (RocketMQ's client
			// closes a channel idle for clientChannelMaxIdleTimeSeconds,
			// 120 s). The new master's is made by the next request.
			b.repl.master.forget(*prev)
		}
		return
	}
}

// masterAddr is a slave's master's Remoting address ("" while unknown).
func (b *Broker) masterAddr() string { return b.repl.load(&b.repl.masterAddr) }

// replicated waits up to slaveTimeout until enough slaves hold the
// CommitLog up to end (inSyncReplicas copies, the master's included) and
// reports whether they do. Outside a SYNC_MASTER with inSyncReplicas >= 2
// it is true at once.
func (b *Broker) replicated(ctx context.Context, end int64) bool {
	acks := b.slaveAcks()
	if acks == 0 {
		return true
	}
	wctx, cancel := context.WithTimeout(ctx, b.current().SlaveTimeout)
	defer cancel()
	var ok bool
	switch {
	case b.repl.auto != nil && b.cfg.AllAckInSyncStateSet:
		ok = b.repl.auto.WaitSyncStateSet(wctx, end)
	case b.repl.auto != nil:
		ok = b.repl.auto.WaitAcked(wctx, end, acks)
	default:
		ok = b.repl.server.WaitAcked(wctx, end, acks)
	}
	if !ok {
		b.busyLog.Warn().Int64("offset", end).Int("inSyncReplicas", acks+1).
			Msg("transfer to slaves timed out: FLUSH_SLAVE_TIMEOUT (sampled, at most one line a second)")
		return false
	}
	return true
}

// slaveRefusesWrites answers the other requests that would write messages
// on a slave (replies and POP_ROLLBACK), as RocketMQ's store refuses puts
// there: SERVICE_NOT_AVAILABLE. Pops, acks and changes of invisible time
// are answered as RocketMQ's slave answers them, without a write
// (processPop, processAck, slaveChangeInvisibleTime).
func (b *Broker) slaveRefusesWrites(process remoting.RespondFunc) remoting.RespondFunc {
	if !b.isSlave() {
		return process
	}
	return func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.ServiceNotAvailable,
			"service not available now: the broker is a slave (brokerRole=SLAVE); messages are put to its master")
	}
}

// slaveRejectsSends answers sends and send-backs on a slave as RocketMQ's
// send processor rejects them there (rejectRequest on a SLAVE):
// SYSTEM_BUSY, after which producers send to another broker. Under
// enableSlaveActingMaster RocketMQ's processor takes them and its store
// refuses the put: SERVICE_NOT_AVAILABLE, which producers retry elsewhere
// too.
func (b *Broker) slaveRejectsSends(process remoting.RespondFunc) remoting.RespondFunc {
	if !b.isSlave() {
		return process
	}
	if b.cfg.EnableSlaveActingMaster {
		return func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.ServiceNotAvailable,
				"service not available now: the broker is a slave (brokerRole=SLAVE, acting master or not); messages are put to a master")
		}
	}
	return func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return rejectRequest(req)
	}
}

// slaveReads answers pulls on a slave only with slaveReadEnable as in
// force now (UPDATE_BROKER_CONFIG turns it on for a running slave, as
// mqadmin updateBrokerConfig does in RocketMQ, whose pull processor
// rejects them otherwise).
func (b *Broker) slaveReads(process remoting.RespondFunc) remoting.RespondFunc {
	if !b.isSlave() {
		return process
	}
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		if b.current().SlaveReadEnable {
			return process(ctx, conn, req)
		}
		return rejectRequest(req)
	}
}

// rejectRequest is RocketMQ's answer to a request its processor rejects
// (NettyRemotingAbstract, when rejectRequest() says so): SYSTEM_BUSY, which
// clients take as a reason to try elsewhere.
func rejectRequest(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, remoting.SystemBusy, "[REJECTREQUEST]system busy, start flow control for a while")
}

// processResetMasterFlushOffset answers RESET_MASTER_FLUSH_OFFSET (mqadmin
// resetMasterFlushOffset) as RocketMQ's AdminBrokerProcessor does: a
// broker whose brokerId is not 0 takes the header's masterFlushOffset as
// its master's flushed offset, kept in its checkpoint file (bytes 24..32,
// RocketMQ's masterFlushedOffset) and shown by haStatus; a master answers
// SUCCESS without reading the header. RocketMQ's slave only stores the
// value too: its recovery and HA client do not read it (in 5.3.4 only
// syncMasterFlushOffsetWhenStartup tests it, for 0: syncMasterFlushOffset).
// A slave's header without the field, or
// with one that is not an integer, is SYSTEM_ERROR, as RocketMQ's header
// decoding fails it.
func (b *Broker) processResetMasterFlushOffset(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.cfg.BrokerID == 0 {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	off, err := remoting.Header(req.ExtFields).Int64("masterFlushOffset")
	if err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("reset master flush offset: bad header")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if err := b.clog.SetMasterFlushedOffset(off); err != nil {
		b.log.Error().Err(err).Stringer("conn", conn).Int64("masterFlushOffset", off).Msg("reset master flush offset failed")
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("reset master flush offset: %v", err))
	}
	b.log.Info().Stringer("conn", conn).Int64("masterFlushOffset", off).Msg("master flush offset reset")
	return remoting.NewResponse(req, remoting.Success, "")
}

// syncMasterFlushOffset takes off, the master's flushed offset as from
// tells it, as a slave's masterFlushedOffset when
// syncMasterFlushOffsetWhenStartup is set and the checkpoint holds none
// yet (0), as RocketMQ's slave takes it from EXCHANGE_BROKER_HA_INFO and
// when its master comes back.
func (b *Broker) syncMasterFlushOffset(off int64, from string) {
	if !b.needMasterFlushOffset() {
		return
	}
	if err := b.clog.SetMasterFlushedOffset(off); err != nil {
		b.log.Error().Err(err).Int64("masterFlushOffset", off).Str("from", from).Msg("set the master's flush offset in the slave")
		return
	}
	b.log.Info().Int64("masterFlushOffset", off).Str("from", from).Msg("master's flush offset set in the slave (syncMasterFlushOffsetWhenStartup)")
}

// needMasterFlushOffset reports whether the slave takes its master's
// flushed offset: syncMasterFlushOffsetWhenStartup, and none in its
// checkpoint yet.
func (b *Broker) needMasterFlushOffset() bool {
	return b.current().SyncMasterFlushOffsetWhenStartup && b.clog.Checkpoint().MasterFlushedOffset == 0
}

// fetchMasterFlushOffset asks the master at addr for its flushed offset
// (EXCHANGE_BROKER_HA_INFO without a header, which a master answers with
// its masterFlushOffset) and takes it (syncMasterFlushOffset), as
// RocketMQ's slave does when its master comes back.
func (b *Broker) fetchMasterFlushOffset(ctx context.Context, addr string) {
	pool, err := b.repl.master.get(b.newMasterPool)
	if err != nil {
		b.log.Warn().Err(err).Str("master", addr).Msg("master's flush offset not asked")
		return
	}
	resp, err := invokeMaster(ctx, masterClient{pool: pool, addr: addr}, remoting.ExchangeBrokerHAInfo, nil)
	if err != nil {
		b.log.Warn().Err(err).Str("master", addr).Msg("master's flush offset not read (EXCHANGE_BROKER_HA_INFO)")
		return
	}
	off, err := remoting.Header(resp.ExtFields).Int64("masterFlushOffset")
	if err != nil {
		b.log.Warn().Err(err).Str("master", addr).Msg("master's flush offset not read: its EXCHANGE_BROKER_HA_INFO answer has none")
		return
	}
	b.syncMasterFlushOffset(off, "master "+addr)
}

// processHAStatus answers GET_BROKER_HA_STATUS: a master's slaves and how
// far each is behind, or a slave's master and what it holds.
func (b *Broker) processHAStatus(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	info := ha.RuntimeInfo{HAConnectionInfo: []ha.ConnectionInfo{}}
	if c := b.repl.autoClient; c != nil {
		info = c.RuntimeInfo(b.clog.ReplicaOffset(), b.clog.Checkpoint().MasterFlushedOffset)
	} else if s := b.repl.auto; s != nil {
		info = s.RuntimeInfo(b.clog.MaxOffset())
	} else if c := b.repl.client; c != nil {
		st := c.Status()
		info.HAClientRuntimeInfo = ha.ClientInfo{MasterAddr: st.Master, TransferredByteInSecond: st.BytesPerSecond,
			MaxOffset: b.clog.ReplicaOffset(), LastReadTimestamp: unixMillis(st.LastRead), LastWriteTimestamp: unixMillis(st.LastWrite),
			MasterFlushOffset: b.clog.Checkpoint().MasterFlushedOffset}
	} else if !b.isSlave() {
		// A master, with an HA port or not (haListenPort=-1: no slaves).
		end := b.clog.MaxOffset()
		info.Master = true
		info.MasterCommitLogMaxOffset = end
		var slaves []ha.SlaveStatus
		if s := b.repl.server; s != nil {
			slaves = s.Slaves(end)
		}
		for _, sl := range slaves {
			if sl.InSync {
				info.InSyncSlaveNums++
			}
			info.HAConnectionInfo = append(info.HAConnectionInfo, ha.ConnectionInfo{Addr: sl.Addr, SlaveAckOffset: sl.AckOffset,
				Diff: end - sl.AckOffset, InSync: sl.InSync, TransferredByteInSecond: sl.BytesPerSecond, TransferFromWhere: sl.TransferFrom})
		}
	}
	body, err := json.Marshal(info)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("encode HA status: %v", err))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// unixMillis is t in Unix milliseconds, 0 for the zero time (never).
func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// haRateLimit is what a master may send each slave per second: 0 (no
// limit) unless haFlowControlEnable.
func haRateLimit(cfg configs.Broker) int64 {
	if !cfg.HAFlowControlEnable {
		return 0
	}
	return cfg.MaxHATransferByteInSecond
}
