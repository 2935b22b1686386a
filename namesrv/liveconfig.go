package namesrv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/listenconf"
	"github.com/rocketkv/rocketkv/internal/logging"
	"github.com/rocketkv/rocketkv/remoting"
)

// runtimeKeys are the settings UPDATE_NAMESRV_CONFIG may change while the
// name server runs: the switches its handlers read on every request or
// registration.
// Everything else (the listener, the KV file, the scan period) is fixed at
// start, and a change to it is refused with a remark that says to restart
// rather than accepted and ignored.
var runtimeKeys = map[string]bool{
	"orderMessageEnable":             true,
	"returnOrderTopicConfigToBroker": true,
	"enableAllTopicList":             true,
	"enableTopicList":                true,
	// Read at every registration (RocketMQ's RouteInfoManager reads it
	// from the NamesrvConfig the update changes).
	"deleteTopicWithBrokerRegistration": true,
	// Read at every route request, as RocketMQ's ClientRequestProcessor
	// reads them.
	"needWaitForService":    true,
	"waitSecondsForService": true,
	"supportActingMaster":   true,
	// Read at each change of a group's smallest broker id.
	"notifyMinBrokerIdChanged": true,
}

// ConfigFrom builds a server configuration from the name server's
// settings under RocketMQ's keys (bin/namesrv -c). file names the file
// they were read from, into which UPDATE_NAMESRV_CONFIG writes its
// changes back; empty keeps changes in memory.
func ConfigFrom(n configs.Namesrv, file string) Config {
	cfg := DefaultConfig()
	cfg.Remoting.Addr = n.ListenAddr()
	cfg.ScanInterval = n.ScanNotActiveBrokerInterval
	cfg.OrderMessageEnable = n.OrderMessageEnable
	cfg.ReturnOrderTopicConfigToBroker = n.ReturnOrderTopicConfigToBroker
	cfg.EnableAllTopicList = n.EnableAllTopicList
	cfg.EnableTopicList = n.EnableTopicList
	cfg.DeleteTopicWithBrokerRegistration = n.DeleteTopicWithBrokerRegistration
	cfg.KVConfigPath = n.KVConfigPath
	cfg.TLS = n.TLS
	listenconf.Apply(&cfg.Remoting, n.Listener, n.ProxyProtocol)
	cfg.Settings = &n
	cfg.ConfigFile = file
	return cfg
}

// settingsOf is the configuration in force at start under RocketMQ's
// keys: cfg.Settings (or the defaults) with the fields of cfg itself,
// which a caller may have set directly, winning.
func settingsOf(cfg Config) configs.Namesrv {
	n := configs.DefaultNamesrv()
	if cfg.Settings != nil {
		n = *cfg.Settings
	}
	n.ScanNotActiveBrokerInterval = cfg.ScanInterval
	n.OrderMessageEnable = cfg.OrderMessageEnable
	n.ReturnOrderTopicConfigToBroker = cfg.ReturnOrderTopicConfigToBroker
	n.EnableAllTopicList = cfg.EnableAllTopicList
	n.EnableTopicList = cfg.EnableTopicList
	n.DeleteTopicWithBrokerRegistration = cfg.DeleteTopicWithBrokerRegistration
	n.KVConfigPath = cfg.KVConfigPath
	n.TLS = cfg.TLS
	n.ProxyProtocol = configs.ProxyProtocol{Enable: !cfg.Remoting.ProxyProtocol.Disabled, TrustedNetworks: cfg.Remoting.ProxyProtocol.Trusted}
	n.Listener = configs.Listener{MaxIdle: maxIdleSetting(cfg.Remoting.IdleTimeout),
		SendBuffer: cfg.Remoting.SocketSendBuffer, RecvBuffer: cfg.Remoting.SocketRecvBuffer,
		WriteBufferHighWaterMark: cfg.Remoting.WriteBufferHighWaterMark, WriteBufferLowWaterMark: cfg.Remoting.WriteBufferLowWaterMark}
	// The mode in force: set directly on the listener, or off.
	if cfg.Remoting.TLS != nil || cfg.Remoting.TLSMode != remoting.TLSDisabled || n.TLS.Mode == "" {
		n.TLS.Mode = cfg.Remoting.TLSMode.String()
	}
	if host, port, err := net.SplitHostPort(cfg.Remoting.Addr); err == nil {
		if p, err := strconv.Atoi(port); err == nil && p > 0 {
			n.ListenPort = p
		}
		if host == "" {
			host = "0.0.0.0"
		}
		n.BindAddress = host
	}
	return n
}

// settings returns the configuration in force. The result must not be
// modified.
func (s *Server) settings() *configs.Namesrv { return s.live.Load() }

// updateConfig answers UPDATE_NAMESRV_CONFIG (mqadmin updateNamesrvConfig):
// the body is a properties text of keys to set, read as RocketMQ's
// DefaultRequestProcessor reads it (configs.ParseProperties). A key of the
// black list is refused with NO_PERMISSION as RocketMQ does; otherwise the
// update is all or nothing: an unknown key, an entry without a key, a
// value that does not parse or a change to a key fixed while the name
// server runs refuses the whole body with a remark naming the key. A
// change is written back into the file the name server was started from.
func (s *Server) updateConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if len(req.Body) == 0 {
		return success(req)
	}
	props, err := configs.ParseProperties(req.Body)
	if err != nil {
		// RocketMQ answers SYSTEM_ERROR "string2Properties error".
		s.log.Warn().Err(err).Stringer("conn", conn).Msg("update namesrv config: body is not a properties text")
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("update namesrv config: the body is not a properties text: %v", err))
	}
	if black := s.settings().BlackListed(props); len(black) > 0 {
		s.log.Warn().Strs("keys", black).Stringer("conn", conn).Msg("update namesrv config refused: key in the black list")
		return remoting.NewResponse(req, remoting.NoPermission, "Can not update config in black list.")
	}
	if _, ok := props[""]; ok {
		// RocketMQ sets nothing from it and answers SUCCESS, as for any
		// key it does not know; rocketkv refuses those.
		s.log.Warn().Stringer("conn", conn).Msg("update namesrv config refused: an entry without a key")
		return remoting.NewResponse(req, remoting.SystemError, "update namesrv config: an entry without a key (a line that starts with = or :); nothing was changed")
	}
	changed, inert, unsaved, err := s.applyUpdate(props)
	if err != nil {
		s.log.Warn().Err(err).Stringer("conn", conn).Msg("update namesrv config refused")
		return failure(req, remoting.SystemError, err)
	}
	if len(changed) > 0 {
		s.log.Info().Stringer("conn", conn).Strs("keys", changed).Msg("namesrv config updated")
	}
	logging.IgnoredKeys(s.log, "", nil, inert)
	return remoting.NewResponse(req, remoting.Success, configs.UpdateRemark(unsaved, inert))
}

// applyUpdate applies props to the configuration in force and returns the
// keys whose value changed, the RocketMQ keys among props that have no
// effect in rocketkv, and why the changes could not be written back to
// the configuration file when they could not.
func (s *Server) applyUpdate(props map[string]string) (changed []string, inert []configs.InertKey, unsaved, err error) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	old := s.settings()
	next := *old
	if _, inert, err = next.ApplyReporting(props); err != nil {
		return nil, nil, nil, fmt.Errorf("update namesrv config: %w; nothing was changed", err)
	}
	after := next.Settings()
	for _, k := range slices.Sorted(slices.Values(old.ChangedKeys(&next))) { // secrets too, whose reports match
		if !runtimeKeys[k] {
			return nil, nil, nil, fmt.Errorf("update namesrv config: %s cannot change while the name server runs (set it in the configuration file and restart); nothing was changed", k)
		}
		changed = append(changed, k)
	}
	if len(changed) == 0 {
		return nil, inert, nil, nil
	}
	if s.cfg.ConfigFile != "" {
		persist := make(map[string]string, len(changed))
		for _, k := range changed {
			persist[k] = after[k]
		}
		if err := configs.PersistNamesrvSettings(s.cfg.ConfigFile, persist); err != nil {
			// In force all the same, as in RocketMQ; the caller is told
			// it lasts until restart.
			unsaved = err
			s.log.Error().Err(err).Strs("keys", changed).Msg("namesrv config changed in memory only: writing it back to the configuration file failed")
		}
	} else {
		s.log.Warn().Strs("keys", changed).Msg("namesrv config changed in memory only: the name server was started without a configuration file")
	}
	s.live.Store(&next)
	s.reg.SetDeleteTopicWithBrokerRegistration(next.DeleteTopicWithBrokerRegistration)
	return changed, inert, unsaved, nil
}

// getConfig answers GET_NAMESRV_CONFIG (mqadmin getNamesrvConfig): every
// setting in force as "key=value" lines.
func (s *Server) getConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := success(req)
	resp.Body = configs.PropertiesText(s.settings().Settings())
	return resp
}

// registerTopic answers REGISTER_TOPIC_IN_NAMESRV: the body is a
// TopicRouteData whose queueDatas are added to the topic's route
// (Registry.RegisterTopic), with SUCCESS even when an entry names a broker
// that has not registered, as RocketMQ answers. Only its
// queueDatas are read, so the brokerDatas a Java client writes with
// fastjson's unquoted broker-id keys do not matter.
func (s *Server) registerTopic(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, err := remoting.Header(req.ExtFields).String("topic")
	if err != nil {
		return failure(req, remoting.SystemError, err)
	}
	queues, err := decodeQueueDatas(req.Body)
	if err != nil {
		s.log.Warn().Err(err).Stringer("conn", conn).Str("topic", topic).Msg("register topic: bad body")
		return failure(req, remoting.SystemError, fmt.Errorf("register topic %s: %w", topic, err))
	}
	if len(queues) == 0 {
		return success(req)
	}
	if err := s.reg.RegisterTopic(topic, queues); err != nil {
		// RocketMQ answers success all the same (its registerTopic only
		// logs the broker it does not know).
		s.log.Warn().Err(err).Stringer("conn", conn).Msg("register topic: stopped at a broker that has not registered")
		return success(req)
	}
	s.log.Info().Str("topic", topic).Int("brokers", len(queues)).Msg("topic registered")
	return success(req)
}

// maxRegisteredQueues bounds the queue counts REGISTER_TOPIC_IN_NAMESRV
// takes (a broker's queue ids are int32, but no topic has more queues than
// this; clients allocate a slot per queue).
const maxRegisteredQueues = 65536

// checkCounts refuses queue counts outside [0, maxRegisteredQueues] and
// permission bits outside PERM_*: clients, the gRPC proxy and the
// broker's assignments build lists of every queue from these numbers.
func (q QueueData) checkCounts() error {
	if q.ReadQueueNums < 0 || q.ReadQueueNums > maxRegisteredQueues || q.WriteQueueNums < 0 ||
		q.WriteQueueNums > maxRegisteredQueues || q.Perm < 0 || q.Perm > PermPriority|PermRead|PermWrite|PermInherit {
		return fmt.Errorf("broker %s: readQueueNums %d, writeQueueNums %d, perm %d: want queue counts in [0, %d] and perm bits of 15",
			q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, q.Perm, maxRegisteredQueues)
	}
	return nil
}

// decodeQueueDatas reads the queueDatas of a TopicRouteData body.
func decodeQueueDatas(body []byte) ([]QueueData, error) {
	if len(body) == 0 {
		return nil, nil
	}
	members, err := adminbody.Members(body)
	if err != nil {
		return nil, fmt.Errorf("decode topic route data: %w", err)
	}
	for _, m := range members {
		if string(m.Key) != `"queueDatas"` {
			continue
		}
		var queues []QueueData
		if err := json.Unmarshal(m.Value, &queues); err != nil {
			return nil, fmt.Errorf("decode topic route data: queueDatas: %w", err)
		}
		for _, q := range queues {
			if strings.TrimSpace(q.BrokerName) == "" {
				return nil, fmt.Errorf("decode topic route data: a queue data entry has no brokerName")
			}
			if err := q.checkCounts(); err != nil {
				return nil, fmt.Errorf("decode topic route data: %w", err)
			}
		}
		return queues, nil
	}
	return nil, nil
}

// getBrokerMemberGroup answers GET_BROKER_MEMBER_GROUP: the addresses of a
// broker group's members by id, under the cluster and name asked for.
func (s *Server) getBrokerMemberGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	cluster, name := r.String("clusterName"), r.String("brokerName")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	resp := success(req)
	resp.Body = appendMemberGroupJSON(nil, cluster, name, s.reg.MemberGroup(name))
	return resp
}

// maxIdleSetting reports a listener's idle timeout as
// serverChannelMaxIdleTimeSeconds sets it: zero is the server's default,
// negative is never (0).
func maxIdleSetting(idle time.Duration) time.Duration {
	switch {
	case idle == 0:
		return remoting.DefaultIdleTimeout
	case idle < 0:
		return 0
	}
	return idle
}
