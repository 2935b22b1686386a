package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/logging"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// runtimeKeys are the settings UPDATE_BROKER_CONFIG may change while the
// broker runs. Everything else is fixed at start: the store layout, the
// listener, the services built from the configuration. Changing one of
// those is refused with a remark that says to restart, rather than
// accepted and ignored as RocketMQ does for most of its keys.
var runtimeKeys = map[string]bool{
	// Taking a broker out of service: 4 (read only) stops sends and
	// makes the name servers route producers elsewhere; 6 restores it.
	"brokerPermission":            true,
	"autoCreateSubscriptionGroup": true,
	"rejectTransactionMessage":    true,
	// The transaction checker's settings, read by each check as
	// RocketMQ's checker reads them by each pass.
	"transactionTimeOut":       true,
	"transactionCheckInterval": true,
	"transactionCheckMax":      true,
	// Freeing disk without a restart.
	"fileReservedTime":        true,
	"deleteWhen":              true,
	"diskMaxUsedSpaceRatio":   true,
	"cleanFileForciblyEnable": true,
	// A nearly full disk: when to start forced deletion, when to refuse
	// sends.
	"diskSpaceCleanForciblyRatio": true,
	"diskSpaceWarningLevelRatio":  true,
	// Features an operator turns on for a running broker's clients.
	"enablePropertyFilter":              true,
	"filterSupportRetry":                true,
	"recallMessageEnable":               true,
	"allowRecallWhenBrokerNotWriteable": true,
	// Holding due timer messages back, read by each delivery round, and
	// new ones, read by the dispatcher's timer hook and each round.
	"timerStopDequeue": true,
	"timerStopEnqueue": true,
	// Protecting the page cache from slow consumers, read by each pull
	// and pop.
	"disableConsumeIfConsumerReadSlowly": true,
	"consumerFallbehindThreshold":        true,
	// Cold-data read flow control, read by each pull and by each pass of
	// its accounting and of its page-cache scan (usePIDColdCtrStrategy,
	// the strategy chosen at start, and sampleSteps, the scan's sampling,
	// are not).
	"coldDataFlowControlEnable":     true,
	"cgColdReadThreshold":           true,
	"globalColdReadThreshold":       true,
	"coldCtrStrategyEnable":         true,
	"accessMessageInMemoryHotRatio": true,
	"coldDataScanEnable":            true,
	"timerColdDataCheckIntervalMs":  true,
	// Holding producers off until a time, read by each send.
	"startAcceptSendRequestTimeStamp": true,
	// Lite pull consumers on or off, read by each lite pull.
	"litePullMessageEnable": true,
	// Where a new group's pops start, read by each first pop.
	"initPopOffsetByCheckMsgInMem": true,
	// POP's in-flight threshold per queue, read by each pop of a queue.
	"enablePopMessageThreshold":   true,
	"popInflightMessageThreshold": true,
	// Pull consumers kept out, read by each heartbeat and pull.
	"rejectPullConsumerEnable": true,
	// How an offset reset reaches the consumers (server-side, or pushed
	// to the clients), read by each reset, pull and offset commit.
	"useServerSideResetOffset": true,
	// The request mode of groups that set none, read by each
	// QUERY_ASSIGNMENT.
	"defaultMessageRequestMode": true,
	"defaultPopShareQueueNum":   true,
	// How QUERY_ASSIGNMENT divides queues and how long it keeps a route,
	// read by each.
	"serverLoadBalancerEnable":          true,
	"loadBalancePollNameServerInterval": true,
	// Whether a topic's deletion takes its pop-retry topics along, read
	// by each deletion.
	"clearRetryTopicWhenDeleteTopic": true,
	// What topic admin requests may do, read by each.
	"validateSystemTopicWhenUpdateTopic": true,
	"enableMixedMessageType":             true,
	// Paging of the topic and group tables, read by each request.
	"enableSplitMetadata": true,
	"splitMetadataSize":   true,
	// Query caps, read by each query.
	"maxMsgsNumBatch":    true,
	"defaultQueryMaxNum": true,
	// Read-ahead of the CommitLog's sealed segments, applied to them at
	// once (also SET_COMMITLOG_READ_MODE).
	"dataReadAheadEnable": true,
	// Moving the broker to other name servers: registrations, route
	// fetches and the scan follow the new list at once, and the broker
	// registers with it before the answer (see nameServersChange).
	"namesrvAddr": true,
	// Whether periodic registrations send the topics or ask the name
	// servers first, read by each period.
	"forceRegister": true,
	// Whether a request of the broker's (to a name server, a slave's to
	// its master) answered GO_AWAY goes once more on a new connection,
	// read at each GO_AWAY as RocketMQ's client reads its
	// NettyClientConfig, which its broker's config update sets.
	"enableReconnectForGoAway": true,
	// Replication: reads from a slave (mqadmin updateBrokerConfig -k
	// slaveReadEnable, the usual way to turn them on), read by each pull;
	// how many copies a SYNC_MASTER's put waits for, and how long, read
	// by each put.
	"slaveReadEnable": true,
	"inSyncReplicas":  true,
	"slaveTimeout":    true,
	// Whether a slave without a masterFlushedOffset takes its master's,
	// read by each EXCHANGE_BROKER_HA_INFO and each return of the master
	// as RocketMQ reads its MessageStoreConfig there.
	"syncMasterFlushOffsetWhenStartup": true,
}

// liveConfig is the configuration in force: the start configuration with
// the runtime keys as last updated. Readers load an immutable snapshot;
// updates are serialised by mu and persisted to the configuration file
// before they take effect.
type liveConfig struct {
	mu   sync.Mutex
	file string // the configuration file the broker started from, or ""
	cur  atomic.Pointer[liveSnapshot]
}

// liveSnapshot is one configuration in force with its version, which
// moves on with every update: GET_BROKER_CONFIG reports the two together.
type liveSnapshot struct {
	cfg     configs.Broker
	version meta.DataVersion
}

// current returns the configuration in force. The result must not be
// modified.
func (b *Broker) current() *configs.Broker { return &b.live.cur.Load().cfg }

// permission returns brokerPermission as in force now.
func (b *Broker) permission() int { return b.current().BrokerPermission }

// SetConfigFile names the configuration file the broker was started from
// (bin/broker -c). Runtime configuration changes are written back into it
// so they survive a restart, as RocketMQ writes them back to its -c file;
// without one they last until the broker stops. Call it before Start.
func (b *Broker) SetConfigFile(path string) {
	b.live.mu.Lock()
	defer b.live.mu.Unlock()
	b.live.file = path
}

// processUpdateBrokerConfig answers UPDATE_BROKER_CONFIG (mqadmin
// updateBrokerConfig): the body is a properties text of keys to set, read
// as RocketMQ's AdminBrokerProcessor reads it (configs.ParseProperties).
// The update is all or nothing: an unknown key, an entry without a key, a
// value that does not parse or a change to a key that is fixed while the
// broker runs refuses the whole body with a remark naming the key. A
// change to brokerPermission moves the topic data version on and
// re-registers with the name servers at once, so routes carry the new
// permission; a change to namesrvAddr registers with the new name servers
// at once, which know no route of the broker yet. The answer waits for
// that registration (register).
func (b *Broker) processUpdateBrokerConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) (*remoting.Command, bool) {
	if len(req.Body) == 0 {
		return remoting.NewResponse(req, remoting.Success, ""), false
	}
	props, err := configs.ParseProperties(req.Body)
	if err != nil {
		// RocketMQ answers SYSTEM_ERROR "string2Properties error".
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("update broker config: body is not a properties text")
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("update broker config: the body is not a properties text: %v", err)), false
	}
	if black := b.cfg.BlackListed(props); len(black) > 0 {
		b.log.Warn().Strs("keys", black).Stringer("conn", conn).Msg("update broker config: keys in configBlackList refused")
		return remoting.NewResponse(req, remoting.NoPermission, "Can not update config in black list."), false
	}
	if _, ok := props[""]; ok {
		// RocketMQ sets nothing from it and answers SUCCESS, as for any
		// key it does not know; rocketkv refuses those.
		b.log.Warn().Stringer("conn", conn).Msg("update broker config refused: an entry without a key")
		return remoting.NewResponse(req, remoting.SystemError, "update broker config: an entry without a key (a line that starts with = or :); nothing was changed"), false
	}
	changed, inert, unsaved, err := b.updateConfig(props)
	if err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("update broker config refused")
		return remoting.NewResponse(req, remoting.SystemError, err.Error()), false
	}
	if len(changed) > 0 {
		b.log.Info().Stringer("conn", conn).Strs("keys", changed).Msg("broker config updated")
	}
	logging.IgnoredKeys(b.log, "", nil, inert)
	// A new brokerPermission is answered once the routes carry it (a
	// drain's producers move at their next route refresh), new name
	// servers once they route the broker.
	register := slices.Contains(changed, "brokerPermission") || slices.Contains(changed, "namesrvAddr")
	return remoting.NewResponse(req, remoting.Success, configs.UpdateRemark(unsaved, inert)), register
}

// updateConfig applies props to the configuration in force and returns
// the canonical names of the keys whose value changed, the RocketMQ keys
// among props that rocketkv accepts without effect, and why the changes
// could not be written back to the configuration file when they could
// not.
func (b *Broker) updateConfig(props map[string]string) (changed []string, inert []configs.InertKey, unsaved, err error) {
	b.live.mu.Lock()
	defer b.live.mu.Unlock()
	old := b.current()
	next := *old
	if _, inert, err = next.ApplyReporting(props); err != nil {
		return nil, nil, nil, fmt.Errorf("update broker config: %w; nothing was changed", err)
	}
	after := next.Settings()
	keys := old.ChangedKeys(&next) // secrets too, whose reports match
	sort.Strings(keys)             // the first fixed key by name is the one refused
	for _, k := range keys {
		if !runtimeKeys[k] {
			return nil, nil, nil, fmt.Errorf("update broker config: %s cannot change while the broker runs (set it in the configuration file and restart); nothing was changed", k)
		}
		changed = append(changed, k)
	}
	if len(changed) == 0 && len(inert) == 0 {
		return nil, nil, nil, nil
	}
	if err := nameServersChange(old, &next); err != nil {
		return nil, nil, nil, fmt.Errorf("update broker config: %w; nothing was changed", err)
	}
	if err := checkSyncMasterPort(next.BrokerRole, next.HAListenPort, next.InSyncReplicas); err != nil {
		return nil, nil, nil, fmt.Errorf("update broker config: %w; nothing was changed", err)
	}
	// The keys written back: those changed, and the inert keys of the
	// update as given, which RocketMQ's broker sets on its config objects
	// and writes back with every other key, so that a drop-in broker.conf
	// keeps what the operator set across a restart.
	persist := make(map[string]string, len(changed)+len(inert))
	for _, k := range changed {
		persist[k] = after[k]
	}
	for _, k := range inert {
		persist[k.Key] = k.Value
	}
	persisted := slices.Sorted(maps.Keys(persist))
	if b.live.file != "" {
		if err := configs.PersistSettings(b.live.file, persist); err != nil {
			// As RocketMQ: the change takes effect all the same (a broker
			// whose file is read-only must still be drainable), and the
			// caller is told it lasts until restart.
			unsaved = err
			b.log.Error().Err(err).Strs("keys", persisted).Msg("broker config changed in memory only: writing it back to the configuration file failed")
		}
	} else {
		b.log.Warn().Strs("keys", persisted).Msg("broker config changed in memory only: the broker was started without a configuration file")
	}
	if len(changed) == 0 {
		// Only inert keys: the configuration in force, and so its
		// version, stay as they were.
		return nil, inert, unsaved, nil
	}
	v := b.live.cur.Load().version
	b.live.cur.Store(&liveSnapshot{cfg: next, version: meta.DataVersion{Counter: v.Counter + 1, Timestamp: time.Now().UnixMilli()}})
	for _, k := range []string{"fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "cleanFileForciblyEnable",
		"diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio"} {
		if slices.Contains(changed, k) {
			b.clog.SetRetention(retentionOf(&next))
			break
		}
	}
	if old.DataReadAheadEnable != next.DataReadAheadEnable {
		b.clog.SetRandomReads(!next.DataReadAheadEnable)
	}
	if old.EnablePopMessageThreshold != next.EnablePopMessageThreshold || old.PopInflightMessageThreshold != next.PopInflightMessageThreshold {
		// Pops held on queues the threshold stopped may be served now.
		if svc := b.reviving.Load(); svc != nil {
			svc.InFlightLimitChanged()
		}
	}
	if old.NamesrvAddr != next.NamesrvAddr && b.register != nil {
		// Under live.mu: a DNS lookup (3 s at most) holds other updates.
		b.register.namesrvAddrChanged(b.ctx, next.NamesrvAddr)
	}
	if old.BrokerPermission != next.BrokerPermission {
		if err := b.topics.table.Touch(); err != nil {
			// The permission is in force; a Java name server may keep the
			// old route until the next topic change.
			b.log.Error().Err(err).Msg("brokerPermission changed but the topic data version could not move on")
		}
		if b.register != nil {
			b.register.trigger()
		}
	}
	return changed, inert, unsaved, nil
}

// nameServersChange says why namesrvAddr cannot change from old's to
// next's while the broker runs, or nil when it can: from one list of name
// servers to another. A broker started without name servers registers
// with none, or with those its address server names
// (fetchNamesrvAddrByAddressServer) until it restarts (RocketMQ's
// BrokerController schedules no re-reading of namesrvAddr when it
// started without one), and one whose list is emptied would stop
// registering until every route of it expired (RocketMQ splits an empty
// value into one empty address).
func nameServersChange(old, next *configs.Broker) error {
	switch had, has := len(namesrv.ParseNameServers(old.NamesrvAddr)) > 0, len(namesrv.ParseNameServers(next.NamesrvAddr)) > 0; {
	case had == has:
		return nil
	case !had && nameServerSource(old) == nsAddressServer:
		return errors.New("namesrvAddr cannot be set while the broker runs: it takes its name servers from the address server " +
			"(fetchNamesrvAddrByAddressServer) until it restarts (set it in the configuration file and restart)")
	case !had:
		return errors.New("namesrvAddr cannot be set while the broker runs: it started without name servers and registers with none " +
			"(set it in the configuration file and restart)")
	default:
		return errors.New("namesrvAddr cannot be emptied while the broker runs: the broker would stop registering and its routes expire " +
			"(remove it from the configuration file and restart)")
	}
}

// processDeleteExpiredCommitLog answers DELETE_EXPIRED_COMMITLOG (mqadmin
// deleteExpiredCommitLog): the cleaner's next passes delete segments older
// than fileReservedTime whatever the hour, as RocketMQ's do. With
// UPDATE_BROKER_CONFIG of fileReservedTime it frees disk without waiting
// for deleteWhen.
func (b *Broker) processDeleteExpiredCommitLog(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	b.log.Info().Stringer("conn", conn).Msg("deletion of expired CommitLog segments requested")
	b.clog.DeleteExpiredSoon()
	return remoting.NewResponse(req, remoting.Success, "")
}

// Read-ahead modes of SET_COMMITLOG_READ_MODE, as Linux's madvise
// advice values RocketMQ's mqadmin sends.
const (
	readAheadNormal = "0" // MADV_NORMAL
	readAheadRandom = "1" // MADV_RANDOM
)

// processSetCommitLogReadMode answers SET_COMMITLOG_READ_MODE (mqadmin
// setCommitLogReadAheadMode -m 0|1): READ_AHEAD_MODE 1 advises the
// CommitLog's sealed segments for random reads, 0 gives them the kernel's
// read-ahead again. It is dataReadAheadEnable changed with
// UPDATE_BROKER_CONFIG (written back into the configuration file, where
// RocketMQ's lasts until restart); the answers are RocketMQ's.
func (b *Broker) processSetCommitLogReadMode(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	mode, ok := req.ExtFields["READ_AHEAD_MODE"]
	if !ok {
		b.log.Warn().Stringer("conn", conn).Msg("set commitlog readahead mode: no READ_AHEAD_MODE")
		return remoting.NewResponse(req, remoting.SystemError, "set commitlog readahead mode param error")
	}
	if mode != readAheadNormal && mode != readAheadRandom {
		b.log.Warn().Stringer("conn", conn).Str("mode", mode).Msg("set commitlog readahead mode: neither 0 nor 1")
		return remoting.NewResponse(req, remoting.InvalidParameter, "set commitlog readahead mode param value error")
	}
	changed, _, unsaved, err := b.updateConfig(map[string]string{"dataReadAheadEnable": strconv.FormatBool(mode == readAheadNormal)})
	if err != nil {
		b.log.Error().Err(err).Stringer("conn", conn).Msg("set commitlog readahead mode failed")
		return remoting.NewResponse(req, remoting.SystemError, "set commitlog readahead mode failed")
	}
	b.log.Info().Stringer("conn", conn).Str("mode", mode).Bool("changed", len(changed) > 0).AnErr("unsaved", unsaved).
		Msg("commitlog readahead mode set")
	return remoting.NewResponse(req, remoting.Success, "set commitlog readahead mode success, mode: "+mode)
}

// retentionOf is the CommitLog retention part of a configuration. The
// disk ratios are bounded as RocketMQ's getters bound them (a broker.conf
// with diskMaxUsedSpaceRatio=98 runs there with 95), but for the warning
// level's 100, which turns the refusal of appends off (beyond RocketMQ's
// 90).
func retentionOf(cfg *configs.Broker) commitlog.Retention {
	within := func(v, lo, hi int) float64 { return float64(min(max(v, lo), hi)) }
	return commitlog.Retention{
		FileReservedTime:      cfg.FileReservedTime,
		DeleteWhen:            cfg.DeleteWhen,
		DiskMaxUsedSpaceRatio: within(cfg.DiskMaxUsedSpaceRatio, 10, 95),
		KeepUnexpiredWhenFull: !cfg.CleanFileForciblyEnable,
		DiskForceCleanRatio:   within(cfg.DiskSpaceCleanForciblyRatio, 30, 85),
		DiskWarningLevelRatio: within(cfg.DiskSpaceWarningLevelRatio, 35, 100),
	}
}

// registeredPerm is the permission a topic is registered with: RocketMQ
// masks every topic's permission with brokerPermission when the broker is
// not both readable and writable, so that producers stop routing to a
// read-only broker and consumers to a write-only one.
func registeredPerm(topicPerm, brokerPerm int) int {
	if meta.Writable(brokerPerm) && meta.Readable(brokerPerm) {
		return topicPerm
	}
	return topicPerm & brokerPerm
}
