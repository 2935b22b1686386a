package controller

import (
	"context"
	"errors"
	"fmt"
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
	return m
}

// liveKeys are the keys UPDATE_CONTROLLER_CONFIG changes at run time
// (written back through Options.Persist); the others need a restart.
var liveKeys = []string{"electMasterMaxRetryCount", "enableElectUncleanMaster", "notifyBrokerRoleChanged", "isProcessReadEvent", "processReadEvent"}

// updateConfig answers UPDATE_CONTROLLER_CONFIG: a properties body whose
// keys must not be black-listed (NO_PERMISSION, as RocketMQ) and must be
// keys the controller changes at run time.
func (c *Controller) updateConfig(body []byte) result {
	if body == nil {
		return result{}
	}
	props, err := parseProperties(string(body))
	if err != nil {
		return fail(remoting.SystemError, "string2Properties error: %v", err)
	}
	cfg := c.config()
	black := map[string]bool{"configblacklist": true, "configstorepath": true, "rocketmqhome": true}
	for _, k := range strings.Split(cfg.ConfigBlackList, ";") {
		if k = strings.TrimSpace(k); k != "" {
			black[strings.ToLower(k)] = true
		}
	}
	for k := range props {
		if black[strings.ToLower(k)] {
			return fail(remoting.NoPermission, "Can not update config in black list.")
		}
	}
	next := cfg
	// persisted are the changed keys under the names a configuration file
	// gives them.
	persisted := map[string]string{}
	for _, k := range slices.Sorted(mapsKeysString(props)) {
		v := strings.TrimSpace(props[k])
		switch k {
		case "electMasterMaxRetryCount":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fail(remoting.InvalidParameter, "electMasterMaxRetryCount: %q is not a positive integer", v)
			}
			next.ElectMasterMaxRetryCount = n
			persisted[k] = strconv.Itoa(n)
		case "enableElectUncleanMaster":
			next.EnableElectUncleanMaster = strings.EqualFold(v, "true")
			persisted[k] = strconv.FormatBool(next.EnableElectUncleanMaster)
		case "notifyBrokerRoleChanged":
			next.NotifyBrokerRoleChanged = strings.EqualFold(v, "true")
			persisted[k] = strconv.FormatBool(next.NotifyBrokerRoleChanged)
		case "isProcessReadEvent", "processReadEvent":
			next.ProcessReadEvent = strings.EqualFold(v, "true")
			persisted["processReadEvent"] = strconv.FormatBool(next.ProcessReadEvent)
		default:
			if _, known := c.settings()[k]; known {
				return fail(remoting.InvalidParameter, "%s cannot change while the controller runs (restart it with the new value); run-time keys: %s", k, strings.Join(liveKeys, ", "))
			}
			return fail(remoting.InvalidParameter, "unknown controller key %q", k)
		}
	}
	c.cfgMu.Lock()
	c.cfg = next
	c.cfgMu.Unlock()
	c.log.Info().Interface("keys", props).Msg("controller configuration updated")
	var unsaved error
	if c.persist == nil {
		unsaved = errors.New("the controller was started without a configuration file")
	} else if err := c.persist(persisted); err != nil {
		unsaved = err
		c.log.Error().Err(err).Msg("controller configuration changed in memory only: writing it back to the configuration file failed")
	}
	return result{remark: configs.UpdateRemark(unsaved, nil)}
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
