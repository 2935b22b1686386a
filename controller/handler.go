package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// Codes lists the request codes a Controller serves.
var Codes = []int32{
	remoting.ControllerAlterSyncStateSet, remoting.ControllerElectMaster, remoting.ControllerRegisterBroker,
	remoting.ControllerGetReplicaInfo, remoting.ControllerGetMetadataInfo, remoting.ControllerGetSyncStateData,
	remoting.BrokerHeartbeat, remoting.UpdateControllerConfig, remoting.GetControllerConfig,
	remoting.CleanBrokerData, remoting.ControllerGetNextBrokerID, remoting.ControllerApplyBrokerID,
}

// Register routes the controller's request codes on mux (a name server
// hosting the controller registers them on its own).
func (c *Controller) Register(mux *remoting.Mux) {
	for _, code := range Codes {
		mux.Handle(code, remoting.RespondFunc(c.respond))
	}
}

// Handler returns a Mux serving the controller's requests and answering
// REQUEST_CODE_NOT_SUPPORTED to the rest.
func (c *Controller) Handler() remoting.Handler {
	mux := remoting.NewMux()
	c.Register(mux)
	return mux
}

// connKey marks a connection whose close the controller watches.
type connKey struct{}

// respond answers one controller request.
func (c *Controller) respond(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var start time.Time
	if c.metrics != nil {
		start = time.Now()
	}
	res := c.serve(conn, req)
	if c.metrics != nil {
		c.metrics.Request(req.Code, res.status, time.Since(start))
	}
	if res.code != remoting.Success && res.code != remoting.ControllerMasterStillExist {
		ev := c.log.Warn()
		if res.code == remoting.SystemError {
			ev = c.log.Error()
		}
		ev.Int32("request", req.Code).Int32("code", res.code).Str("remark", res.remark).Str("from", peerOf(conn)).Msg("controller request refused")
	}
	resp := remoting.NewResponse(req, res.code, res.remark)
	resp.ExtFields = res.ext
	resp.Body = res.body
	return resp
}

func peerOf(conn *remoting.Conn) string {
	if conn == nil || conn.RemoteAddr() == nil {
		return ""
	}
	return conn.RemoteAddr().String()
}

// badRequest answers a header or body that cannot be read, as RocketMQ's
// decoding failure (SYSTEM_ERROR) with the field named; RocketMQ's handler
// throws there, which request_total counts as failed.
func badRequest(what string, err error) result {
	res := fail(remoting.SystemError, "%s: %v", what, err)
	res.status = metrics.OpFailed
	return res
}

func (c *Controller) serve(conn *remoting.Conn, req *remoting.Command) result {
	switch req.Code {
	case remoting.ControllerAlterSyncStateSet:
		h, err := DecodeAlterSyncStateSetHeader(req.ExtFields)
		if err != nil {
			return badRequest("alter sync state set header", err)
		}
		set, err := DecodeSyncStateSet(req.Body)
		if err != nil {
			return badRequest("alter sync state set", err)
		}
		return c.propose(true, func(st *State, ch checks) result { return ch.alterSyncStateSet(st, h, set) })
	case remoting.ControllerElectMaster:
		h, err := DecodeElectMasterHeader(req.ExtFields)
		if err != nil {
			return badRequest("elect master header", err)
		}
		res := c.propose(true, c.elect(h, false))
		if res.code == remoting.Success {
			c.notifyRoleChanged(res.role)
		}
		return res
	case remoting.ControllerRegisterBroker:
		h, err := DecodeRegisterBrokerHeader(req.ExtFields)
		if err != nil {
			return badRequest("register broker header", err)
		}
		return c.propose(true, func(st *State, ch checks) result { return ch.registerBroker(st, h) })
	case remoting.ControllerGetReplicaInfo:
		h, err := DecodeBrokerNameHeader(req.ExtFields)
		if err != nil {
			return badRequest("get replica info header", err)
		}
		return c.propose(false, func(st *State, ch checks) result { return ch.getReplicaInfo(st, h) })
	case remoting.ControllerGetMetadataInfo:
		return result{ext: c.metadata()}
	case remoting.ControllerGetSyncStateData:
		return c.syncStateData(req.Body)
	case remoting.BrokerHeartbeat:
		return c.heartbeat(conn, req)
	case remoting.UpdateControllerConfig:
		return c.updateConfig(req.Body)
	case remoting.GetControllerConfig:
		return result{body: []byte(formatProperties(c.settings()))}
	case remoting.CleanBrokerData:
		h, err := DecodeCleanBrokerDataHeader(req.ExtFields)
		if err != nil {
			return badRequest("clean broker data header", err)
		}
		return c.propose(true, func(st *State, ch checks) result { return ch.cleanBrokerData(st, h) })
	case remoting.ControllerGetNextBrokerID:
		h, err := DecodeBrokerIdentityHeader(req.ExtFields)
		if err != nil {
			return badRequest("get next broker id header", err)
		}
		return c.propose(false, func(st *State, ch checks) result { return ch.getNextBrokerID(st, h) })
	case remoting.ControllerApplyBrokerID:
		h, err := DecodeApplyBrokerIDHeader(req.ExtFields)
		if err != nil {
			return badRequest("apply broker id header", err)
		}
		return c.propose(true, func(st *State, ch checks) result { return ch.applyBrokerID(st, h) })
	}
	return fail(remoting.RequestCodeNotSupported, " request type %d not supported", req.Code)
}

// syncStateData answers CONTROLLER_GET_SYNC_STATE_DATA: the body lists
// broker names; without any RocketMQ answers SYSTEM_ERROR.
func (c *Controller) syncStateData(body []byte) result {
	if len(body) == 0 {
		return fail(remoting.SystemError, "no broker names in the request body")
	}
	names, err := DecodeBrokerNames(body)
	if err != nil {
		return badRequest("get sync state data", err)
	}
	if len(names) == 0 {
		return fail(remoting.SystemError, "no broker names in the request body")
	}
	var info BrokerReplicasInfo
	res := c.propose(false, func(st *State, ch checks) result {
		info = ch.syncStateData(st, names)
		return result{}
	})
	if res.code != remoting.Success {
		return res
	}
	res.body = encodeJSON(info)
	return res
}

// heartbeat records a BROKER_HEARTBEAT; any controller takes them, leader
// or not (brokers send them to every controller).
func (c *Controller) heartbeat(conn *remoting.Conn, req *remoting.Command) result {
	h, err := DecodeHeartbeatHeader(req.ExtFields)
	if err != nil {
		return badRequest("broker heartbeat header", err)
	}
	if !h.HasBrokerID {
		return fail(remoting.ControllerInvalidRequest, "Heart beat with empty brokerId")
	}
	if h.HeartbeatTimeout <= 0 {
		h.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	c.hb.onHeartbeat(h, conn)
	if conn != nil {
		if _, loaded := conn.LoadOrStoreValue(connKey{}, true); !loaded {
			conn.OnClose(func() {
				for _, id := range c.hb.connClosed(conn) {
					c.log.Info().Str("brokerName", id.BrokerName).Int64("brokerId", id.BrokerID).Msg("broker connection closed")
					c.brokerInactiveLater(id)
				}
			})
		}
	}
	return result{remark: "Heart beat success"}
}

// settings are the controller's keys with their values, for
// GET_CONTROLLER_CONFIG.
func (c *Controller) settings() map[string]string {
	cfg := c.config()
	m := map[string]string{
		"controllerDLegerGroup":       cfg.Group,
		"controllerDLegerPeers":       cfg.Peers,
		"controllerDLegerSelfId":      cfg.SelfID,
		"controllerStorePath":         cfg.StorePath,
		"controllerType":              "DLedger",
		"scanNotActiveBrokerInterval": strconv.FormatInt(cfg.ScanNotActiveBrokerInterval.Milliseconds(), 10),
		"scanInactiveMasterInterval":  strconv.FormatInt(cfg.ScanInactiveMasterInterval.Milliseconds(), 10),
		"electMasterMaxRetryCount":    strconv.Itoa(cfg.ElectMasterMaxRetryCount),
		"enableElectUncleanMaster":    strconv.FormatBool(cfg.EnableElectUncleanMaster),
		"notifyBrokerRoleChanged":     strconv.FormatBool(cfg.NotifyBrokerRoleChanged),
		"isProcessReadEvent":          strconv.FormatBool(cfg.ProcessReadEvent),
		"configBlackList":             cfg.ConfigBlackList,
	}
	for k, v := range c.extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	// The keys updated for the next start, with the values kept, as
	// RocketMQ reports the fields its update set.
	c.cfgMu.Lock()
	maps.Copy(m, c.stored)
	c.cfgMu.Unlock()
	return m
}

// runTimeKeys are the keys UPDATE_CONTROLLER_CONFIG puts in force at
// once: the switches read at each election, request or notice, and the
// scan periods, whose tickers are reset. Every other key it takes is
// written back for the next start (RocketMQ's update sets them all on
// its ControllerConfig, where nothing reads them again).
var runTimeKeys = map[string]bool{
	"electMasterMaxRetryCount": true, "enableElectUncleanMaster": true, "notifyBrokerRoleChanged": true,
	"processReadEvent": true, "scanNotActiveBrokerInterval": true, "scanInactiveMasterInterval": true,
}

// updateConfig answers UPDATE_CONTROLLER_CONFIG as RocketMQ's
// ControllerRequestProcessor does: a properties body, any key of the
// black list (configBlackList, configStorePath, rocketmqHome and those
// configBlackList names) refused with NO_PERMISSION "Can not update
// config in black list.", every other key of the controller's
// configuration set. A run-time key (runTimeKeys) is in force at once;
// the others are kept, reported by GET_CONTROLLER_CONFIG and written
// back into the configuration file, taking effect at the next start.
// Unlike RocketMQ, which skips what it cannot set, an unknown key, a
// value that does not parse or peers the next start would refuse are
// INVALID_PARAMETER naming the key, and nothing is changed.
func (c *Controller) updateConfig(body []byte) result {
	if body == nil {
		return result{}
	}
	props, err := parseProperties(string(body))
	if err != nil {
		return fail(remoting.SystemError, "string2Properties error: %v", err)
	}
	c.cfgMu.Lock()
	defer c.cfgMu.Unlock()
	if black := c.file.BlackListed(props); len(black) > 0 {
		c.log.Warn().Strs("keys", black).Msg("controller configuration update refused: key in the black list")
		return fail(remoting.NoPermission, "Can not update config in black list.")
	}
	next, changed, inert, err := c.file.Update(props)
	if err != nil {
		return fail(remoting.InvalidParameter, "update controller config: %v; nothing was changed", err)
	}
	keys, scanNotActive, _ := next.Controller()
	cfg := c.cfg
	cfg.ElectMasterMaxRetryCount = keys.ElectMasterMaxRetryCount
	cfg.EnableElectUncleanMaster = keys.EnableElectUncleanMaster
	cfg.NotifyBrokerRoleChanged = keys.NotifyBrokerRoleChanged
	cfg.ProcessReadEvent = keys.ProcessReadEvent
	cfg.ScanNotActiveBrokerInterval = scanNotActive
	cfg.ScanInactiveMasterInterval = keys.ScanInactiveMasterInterval
	if slices.Contains(changed, "controllerDLegerPeers") || slices.Contains(changed, "controllerDLegerSelfId") {
		// Kept for the next start, which must not fail on them.
		check := Config{Peers: keys.Peers, SelfID: keys.SelfID}
		if _, _, err := check.validate(); err != nil {
			return fail(remoting.InvalidParameter, "update controller config: %v (the next start would refuse it); nothing was changed", err)
		}
	}
	var live, later []string
	for _, k := range changed {
		if runTimeKeys[k] {
			live = append(live, k)
		} else {
			later = append(later, k)
		}
	}
	values := next.Settings()
	for _, k := range later {
		c.stored[k] = values[k]
	}
	c.file = next
	c.cfg = cfg
	if slices.Contains(live, "scanNotActiveBrokerInterval") || slices.Contains(live, "scanInactiveMasterInterval") {
		select {
		case c.rescan <- struct{}{}:
		default:
		}
	}
	if len(live) > 0 {
		c.log.Info().Strs("keys", live).Msg("controller configuration updated: in force now")
	}
	if len(later) > 0 {
		c.log.Info().Strs("keys", later).Msg("controller configuration updated: written back, takes effect at the next start")
	}
	for _, ik := range inert {
		c.log.Info().Str("key", ik.Key).Str("value", ik.Value).Str("reason", ik.Reason).Msg("controller configuration update: key kept without effect in rocketkv")
	}
	// The keys written back: those changed, and the inert keys as given
	// (RocketMQ writes back every key an update set).
	persist := next.Values(changed)
	for _, ik := range inert {
		persist[ik.Key] = ik.Value
	}
	var unsaved error
	if len(persist) > 0 {
		if c.persist == nil {
			unsaved = errors.New("the controller was started without a configuration file")
			c.log.Warn().Strs("keys", slices.Sorted(maps.Keys(persist))).Msg("controller configuration changed in memory only: the controller was started without a configuration file")
		} else if err := c.persist(persist); err != nil {
			unsaved = err
			c.log.Error().Err(err).Msg("controller configuration changed in memory only: writing it back to the configuration file failed")
		}
	}
	return result{remark: updateRemark(live, later, unsaved, inert)}
}

// updateRemark tells what an update did beyond putting keys in force:
// the keys that wait for the next start, a write-back that failed and the
// inert keys (configs.UpdateRemark).
func updateRemark(live, later []string, unsaved error, inert []configs.InertKey) string {
	var parts []string
	if len(later) > 0 {
		r := "in force from the next start: " + strings.Join(later, ", ")
		if unsaved != nil {
			r += fmt.Sprintf(" (not written back to the configuration file, so lost at the next start: %v)", unsaved)
		}
		parts = append(parts, r)
	}
	if len(live) > 0 && unsaved != nil {
		parts = append(parts, configs.UpdateRemark(unsaved, nil))
	}
	if r := configs.UpdateRemark(nil, inert); r != "" {
		parts = append(parts, r)
	}
	return strings.Join(parts, "; ")
}

func mapsKeysString(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// parseProperties reads "key=value" lines (also "key: value"); '#' and '!'
// start comments. It is the subset of java.util.Properties RocketMQ's
// tools send.
func parseProperties(text string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		sep := strings.IndexAny(line, "=:")
		if sep <= 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", i+1, line)
		}
		out[strings.TrimSpace(line[:sep])] = strings.TrimSpace(line[sep+1:])
	}
	return out, nil
}

// formatProperties writes settings as sorted "key=value" lines, the form
// RocketMQ's getAllConfigsFormatString answers with.
func formatProperties(m map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(mapsKeysString(m)) {
		sb.WriteString(k + "=" + m[k] + "\n")
	}
	return sb.String()
}
