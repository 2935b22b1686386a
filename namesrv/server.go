package namesrv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
)

// Config configures a name server. DefaultConfig returns Java's defaults;
// the zero Config turns every optional feature off.
type Config struct {
	// Remoting configures the listener; Remoting.Addr is the listen address
	// (":9876" by default). Remoting.TLSMode and Remoting.TLS, when set,
	// win over TLS.
	Remoting remoting.ServerConfig
	// TLS is the listener's TLS under RocketMQ's tls.* keys (permissive
	// with a self-signed certificate by default); NewServer builds the
	// certificate, applying tls.config.file. An empty Mode leaves TLS off.
	TLS configs.TLS
	// ScanInterval is how often expired brokers are removed (5 s).
	ScanInterval time.Duration
	// OrderMessageEnable makes routes carry orderTopicConf from the
	// ORDER_TOPIC_CONFIG namespace (Java default false).
	OrderMessageEnable bool
	// ReturnOrderTopicConfigToBroker answers REGISTER_BROKER with the
	// ORDER_TOPIC_CONFIG table (Java default true).
	ReturnOrderTopicConfigToBroker bool
	// EnableAllTopicList allows GET_ALL_TOPIC_LIST_FROM_NAMESERVER (true).
	EnableAllTopicList bool
	// EnableTopicList allows GET_TOPICS_BY_CLUSTER and the unit topic
	// lists (true).
	EnableTopicList bool
	// DeleteTopicWithBrokerRegistration: see RegistryOptions (false).
	DeleteTopicWithBrokerRegistration bool
	// KVConfigPath persists the KV configuration; empty keeps it in memory.
	KVConfigPath string
	// Now is the registry's clock; time.Now when nil.
	Now func() time.Time
	// Settings is the configuration under RocketMQ's keys the server was
	// built from (ConfigFrom); nil stands for the defaults. The fields
	// above win over it. GET_NAMESRV_CONFIG reports it, and
	// UPDATE_NAMESRV_CONFIG changes its runtime keys.
	Settings *configs.Namesrv
	// ConfigFile is the file Settings were read from (bin/namesrv -c);
	// UPDATE_NAMESRV_CONFIG writes its changes back into it. Empty: they
	// last until the server stops.
	ConfigFile string
	// ClientTLS, when set, is the TLS of the connections the name server
	// opens to brokers (its NOTIFY_MIN_BROKER_ID_CHANGE notices); nil is
	// plaintext. Left nil with Settings, NewServer builds it as RocketMQ's
	// NettyClientConfig useTLS (Settings' tls.enable) decides, from TLS's
	// tls.client.* keys.
	ClientTLS *tls.Config
}

// DefaultConfig returns Java's name server defaults listening on :9876.
func DefaultConfig() Config {
	return Config{
		Remoting:                       remoting.ServerConfig{Addr: ":9876"},
		TLS:                            configs.DefaultNamesrv().TLS,
		ScanInterval:                   5 * time.Second,
		ReturnOrderTopicConfigToBroker: true,
		EnableAllTopicList:             true,
		EnableTopicList:                true,
	}
}

// connHook marks a connection whose close unregisters the brokers that
// registered on it.
type connHook struct{}

// Server is a RocketMQ name server: the route Registry and KVStore behind
// a remoting.Server, plus the expiry scanner.
//
// Goroutines: the remoting server's (see remoting.Server) and the expiry
// scanner, started by Start and stopped and awaited by Shutdown.
type Server struct {
	cfg Config
	log zerolog.Logger
	reg *Registry
	kv  *KVStore
	rs  *remoting.Server
	mux *remoting.Mux

	// live is the configuration in force: Settings with the runtime keys
	// as last updated. Handlers load it; updates are serialised by liveMu.
	live   atomic.Pointer[configs.Namesrv]
	liveMu sync.Mutex

	// started is when Start began serving, read by the route requests
	// that needWaitForService holds back.
	started atomic.Pointer[time.Time]

	stop     chan struct{}
	stopOnce sync.Once
	scanner  sync.WaitGroup
	// tlsWatch reloads the listener's TLS when its files change (nil
	// without TLS files); run with the scanner.
	tlsWatch *certwatch.Watcher

	// minChanges queues the NOTIFY_MIN_BROKER_ID_CHANGE notices the
	// notifier goroutine (started by Start, stopped with the scanner)
	// sends with brokerPool, the name server's only client connections.
	minChanges chan MinBrokerIDChange
	brokerPool *remoting.ClientPool
}

// NewServer builds a name server; it loads the KV configuration but does
// not listen until Start.
func NewServer(cfg Config, log zerolog.Logger) (*Server, error) {
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = 5 * time.Second
	}
	var tlsWatch *certwatch.Watcher
	if cfg.Remoting.TLSMode == remoting.TLSDisabled && cfg.Remoting.TLS == nil && cfg.TLS.Mode != "" {
		mode, tc, w, err := tlsconf.WatchedListener("name server", cfg.TLS, log)
		if err != nil {
			return nil, err
		}
		cfg.Remoting.TLSMode, cfg.Remoting.TLS, tlsWatch = mode, tc, w
	}
	if cfg.ClientTLS == nil && cfg.Settings != nil {
		ct, err := tlsconf.Client("name server", configs.DialTLS(cfg.Settings.TLSEnable, cfg.TLS.Mode), cfg.TLS, log)
		if err != nil {
			return nil, err
		}
		cfg.ClientTLS = ct
	}
	kv, err := OpenKVStore(cfg.KVConfigPath)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        log,
		kv:         kv,
		mux:        remoting.NewMux(),
		stop:       make(chan struct{}),
		tlsWatch:   tlsWatch,
		minChanges: make(chan MinBrokerIDChange, maxQueuedMinChanges),
		brokerPool: remoting.NewClientPool(remoting.ClientOptions{Log: log, TLS: cfg.ClientTLS}),
	}
	s.reg = NewRegistry(RegistryOptions{
		DeleteTopicWithBrokerRegistration: cfg.DeleteTopicWithBrokerRegistration,
		Now:                               cfg.Now,
		OnMinBrokerIDChange:               s.queueMinBrokerIDChange,
	})
	set := settingsOf(cfg)
	s.live.Store(&set)
	s.routes()
	s.rs = remoting.NewServer(cfg.Remoting, s.mux, log)
	return s, nil
}

// Registry returns the route table.
func (s *Server) Registry() *Registry { return s.reg }

// KV returns the KV configuration store.
func (s *Server) KV() *KVStore { return s.kv }

// Addr returns the bound address once started.
func (s *Server) Addr() net.Addr { return s.rs.Addr() }

// Start listens and starts the expiry scanner.
func (s *Server) Start(ctx context.Context) error {
	now := s.now()
	s.started.Store(&now)
	if err := s.rs.Start(ctx); err != nil {
		return fmt.Errorf("start name server: %w", err)
	}
	if tcp, ok := s.Addr().(*net.TCPAddr); ok && tcp.Port != s.settings().ListenPort {
		// Asked for any free port (":0"): report the one taken. An update
		// may already be running.
		s.liveMu.Lock()
		set := *s.settings()
		set.ListenPort = tcp.Port
		s.live.Store(&set)
		s.liveMu.Unlock()
	}
	s.scanner.Add(2)
	go s.scan()
	go s.notifyMinBrokerIDChanges()
	if s.tlsWatch != nil {
		s.scanner.Add(1)
		go s.watchTLS()
	}
	s.log.Info().Str("addr", s.Addr().String()).Msg("name server started")
	return nil
}

// now reads the server's clock (Config.Now).
func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// Shutdown stops the scanner and the remoting server and waits for them;
// with enableShutdownGracefully it first tells clients newer than
// RocketMQ 5.3.1 to go away for shutdownWaitTimeSeconds (remoting
// Server.GoAway), serving the others meanwhile.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.rs.GoAway(ctx); err != nil {
		s.log.Warn().Err(err).Msg("graceful shutdown wait cut short")
	}
	s.stopOnce.Do(func() { close(s.stop) })
	s.scanner.Wait()
	_ = s.brokerPool.Close()
	if err := s.rs.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down name server: %w", err)
	}
	return nil
}

// watchTLS reloads the listener's TLS configuration when its files
// change, until Shutdown.
func (s *Server) watchTLS() {
	defer s.scanner.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	s.tlsWatch.Run(ctx, certwatch.DefaultInterval)
}

// scan removes expired brokers every ScanInterval and closes their
// connections, as Java's scanNotActiveBroker does; the brokers that still
// renew over such a connection stay registered (see Registry.Expire).
func (s *Server) scan() {
	defer s.scanner.Done()
	t := time.NewTicker(s.cfg.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			for _, e := range s.reg.Expire() {
				s.log.Warn().Str("cluster", e.ClusterName).Str("broker", e.BrokerName).Int64("id", e.BrokerID).
					Str("addr", e.BrokerAddr).Dur("idle", e.Idle).Msg("broker expired")
				if c := s.rs.Conn(e.ConnID); c != nil {
					_ = c.Close()
				}
			}
		}
	}
}

func (s *Server) routes() {
	m := s.mux
	m.Handle(remoting.RegisterBroker, remoting.RespondFunc(s.registerBroker))
	m.Handle(remoting.UnregisterBroker, remoting.RespondFunc(s.unregisterBroker))
	m.Handle(remoting.QueryDataVersion, remoting.RespondFunc(s.queryDataVersion))
	m.Handle(remoting.BrokerHeartbeat, remoting.RespondFunc(s.brokerHeartbeat))
	m.Handle(remoting.GetRouteInfoByTopic, remoting.RespondFunc(s.getRouteInfo))
	m.Handle(remoting.GetBrokerClusterInfo, remoting.RespondFunc(s.getClusterInfo))
	m.Handle(remoting.GetAllTopicListFromNameServer, remoting.RespondFunc(s.getAllTopicList))
	m.Handle(remoting.DeleteTopicInNamesrv, remoting.RespondFunc(s.deleteTopic))
	m.Handle(remoting.GetTopicsByCluster, remoting.RespondFunc(s.getTopicsByCluster))
	m.Handle(remoting.PutKVConfig, remoting.RespondFunc(s.putKVConfig))
	m.Handle(remoting.GetKVConfig, remoting.RespondFunc(s.getKVConfig))
	m.Handle(remoting.DeleteKVConfig, remoting.RespondFunc(s.deleteKVConfig))
	m.Handle(remoting.GetKVListByNamespace, remoting.RespondFunc(s.getKVList))
	m.Handle(remoting.WipeWritePermOfBroker, s.writePermChanger(s.reg.WipeWritePerm, "wipeTopicCount", "write permission of broker wiped"))
	m.Handle(remoting.AddWritePermOfBroker, s.writePermChanger(s.reg.AddWritePerm, "addTopicCount", "write permission of broker added"))
	m.Handle(remoting.RegisterTopicInNamesrv, remoting.RespondFunc(s.registerTopic))
	m.Handle(remoting.GetBrokerMemberGroup, remoting.RespondFunc(s.getBrokerMemberGroup))
	m.Handle(remoting.UpdateNamesrvConfig, remoting.RespondFunc(s.updateConfig))
	m.Handle(remoting.GetNamesrvConfig, remoting.RespondFunc(s.getConfig))
	m.Handle(remoting.GetSystemTopicListFromNS, remoting.RespondFunc(s.getSystemTopicList))
	m.Handle(remoting.GetUnitTopicList, s.topicsWithSysFlag(func(f int32) bool { return f&topicFlagUnit != 0 }))
	m.Handle(remoting.GetHasUnitSubTopicList, s.topicsWithSysFlag(func(f int32) bool { return f&topicFlagUnitSub != 0 }))
	m.Handle(remoting.GetHasUnitSubUnUnitTopicList, s.topicsWithSysFlag(func(f int32) bool {
		return f&topicFlagUnit == 0 && f&topicFlagUnitSub != 0
	}))
}

func success(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, remoting.Success, "")
}

func failure(req *remoting.Command, code int32, err error) *remoting.Command {
	return remoting.NewResponse(req, code, err.Error())
}

func (s *Server) registerBroker(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	r := h.Reader()
	rr := RegisterRequest{
		BrokerName:   r.String("brokerName"),
		BrokerAddr:   r.String("brokerAddr"),
		ClusterName:  r.String("clusterName"),
		HAServerAddr: r.String("haServerAddr"),
		BrokerID:     r.Int64("brokerId"),
		Timeout:      time.Duration(r.OptInt64("heartbeatTimeoutMillis", 0)) * time.Millisecond,
		ZoneName:     h.OptString(extZoneName, ""),
		ConnID:       conn.ID(),
	}
	compressed := r.OptBool("compressed", false)
	crc := r.OptInt32("bodyCrc32", 0)
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	if h.Has("enableActingMaster") {
		v := h.OptBool("enableActingMaster", false)
		rr.EnableActingMaster = &v
	}
	if crc != 0 && int32(crc32.ChecksumIEEE(req.Body)&0x7FFFFFFF) != crc {
		s.log.Warn().Stringer("conn", conn).Str("broker", rr.BrokerName).Msg("register broker: crc32 not match")
		return remoting.NewResponse(req, remoting.SystemError, "crc32 not match")
	}
	body, err := DecodeRegisterBrokerBody(req.Body, compressed, req.Version)
	if err != nil {
		s.log.Warn().Err(err).Stringer("conn", conn).Str("broker", rr.BrokerName).Msg("register broker: bad body")
		return failure(req, remoting.SystemError, fmt.Errorf("Failed to decode RegisterBrokerBody: %w", err))
	}
	rr.Body = body
	res, err := s.reg.Register(rr)
	if err != nil {
		return failure(req, remoting.SystemError, err)
	}
	if _, loaded := conn.LoadOrStoreValue(connHook{}, true); !loaded {
		conn.OnClose(func() {
			for _, k := range s.reg.ConnClosed(conn.ID()) {
				s.log.Info().Str("cluster", k.ClusterName).Str("addr", k.BrokerAddr).
					Msg("broker connection closed: unregistered")
			}
		})
	}
	s.log.Debug().Str("cluster", rr.ClusterName).Str("broker", rr.BrokerName).Int64("id", rr.BrokerID).
		Str("addr", rr.BrokerAddr).Int("topics", len(body.TopicConfigTable)).Msg("broker registered")
	resp := success(req)
	resp.ExtFields = map[string]string{}
	if res.HAServerAddr != "" {
		resp.ExtFields["haServerAddr"] = res.HAServerAddr
	}
	if res.MasterAddr != "" {
		resp.ExtFields["masterAddr"] = res.MasterAddr
	}
	if s.settings().ReturnOrderTopicConfigToBroker {
		if table, ok := s.kv.List(OrderTopicConfigNamespace); ok {
			resp.Body = appendKVTableJSON(nil, table)
		}
	}
	return resp
}

func (s *Server) unregisterBroker(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	name, addr, cluster := r.String("brokerName"), r.String("brokerAddr"), r.String("clusterName")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	s.reg.Unregister(cluster, addr, name)
	s.log.Info().Str("cluster", cluster).Str("broker", name).Str("addr", addr).Msg("broker unregistered")
	return success(req)
}

func (s *Server) queryDataVersion(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	cluster, addr := r.String("clusterName"), r.String("brokerAddr")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	var dv DataVersion
	if err := json.Unmarshal(req.Body, &dv); err != nil {
		return failure(req, remoting.SystemError, fmt.Errorf("decode data version: %w", err))
	}
	known, ok := s.reg.DataVersionOf(cluster, addr)
	s.reg.Heartbeat(cluster, addr)
	resp := success(req)
	resp.ExtFields = map[string]string{}
	remoting.Header(resp.ExtFields).SetBool("changed", !ok || known != dv)
	if ok {
		resp.Body = known.appendJSON(nil)
	}
	return resp
}

func (s *Server) brokerHeartbeat(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	cluster, addr := r.String("clusterName"), r.String("brokerAddr")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	s.reg.Heartbeat(cluster, addr)
	return success(req)
}

func (s *Server) getRouteInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, err := remoting.Header(req.ExtFields).String("topic")
	if err != nil {
		return failure(req, remoting.SystemError, err)
	}
	set := s.settings() // one view of the settings for the whole answer
	if set.NeedWaitForService && !s.serving(set.WaitForService) {
		// RocketMQ's needWaitForService: brokers re-register every 30 s,
		// so right after a restart a topic's route may not be complete.
		s.log.Warn().Str("topic", topic).Msg("route request refused: name server not ready (needWaitForService)")
		return remoting.NewResponse(req, remoting.SystemError, "name server not ready")
	}
	route, ok := s.reg.Route(topic)
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist,
			"No topic route info in name server for the topic: "+topic+faqApplyTopic)
	}
	if set.OrderMessageEnable {
		route.OrderTopicConf, _ = s.kv.Get(OrderTopicConfigNamespace, topic)
	}
	if set.SupportActingMaster && !strings.HasPrefix(topic, SyncBrokerMemberGroupPrefix) {
		route.showActingMasters()
	}
	if zoneMode, _ := strconv.ParseBool(req.ExtFields[extZoneMode]); zoneMode && strings.TrimSpace(req.ExtFields[extZoneName]) != "" {
		route.keepZone(req.ExtFields[extZoneName])
	}
	resp := success(req)
	resp.Body = route.AppendJSON(make([]byte, 0, 256))
	return resp
}

// serving reports whether wait has passed since the server started.
func (s *Server) serving(wait time.Duration) bool {
	started := s.started.Load()
	return started != nil && s.now().Sub(*started) >= wait
}

// faqApplyTopic ends the remark of TOPIC_NOT_EXIST as RocketMQ's name
// server ends it (FAQUrl.suggestTodo(APPLY_TOPIC_URL)), which a Java
// client's MQClientException message carries.
const faqApplyTopic = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."

// Ext fields of a client in zone mode (-Drocketmq.zone.mode): it asks for
// the routes of its own zone.
const (
	extZoneMode = "__ZONE_MODE"
	extZoneName = "__ZONE_NAME"
)

// SyncBrokerMemberGroupPrefix begins the system topics RocketMQ's brokers
// of an acting-master group use among themselves (TopicValidator's
// SYNC_BROKER_MEMBER_GROUP_PREFIX): each broker creates the one of its
// broker name at start, and under compatibleWithOldNameSrv reads its
// group's members from that topic's route, which names no acting master.
const SyncBrokerMemberGroupPrefix = "rmq_sys_SYNC_BROKER_MEMBER_"

// showActingMasters names, in each broker group acting without its master
// (enableActingMaster, no broker id 0) whose queue data of the topic is
// not writable, the slave of the smallest id as id 0, as RocketMQ's name
// server does with supportActingMaster: a client sends what only a master
// takes (queue locks, offset searches) to id 0. Producers still do not
// send to it, the queues being read-only.
func (r *TopicRouteData) showActingMasters() {
	for i := range r.BrokerDatas {
		bd := &r.BrokerDatas[i]
		if _, hasMaster := bd.BrokerAddrs[MasterID]; hasMaster || len(bd.BrokerAddrs) == 0 || !bd.EnableActingMaster {
			continue
		}
		j := slices.IndexFunc(r.QueueDatas, func(q QueueData) bool { return q.BrokerName == bd.BrokerName })
		if j < 0 || r.QueueDatas[j].Perm&PermWrite != 0 {
			continue
		}
		id := slices.Min(slices.Collect(maps.Keys(bd.BrokerAddrs)))
		bd.BrokerAddrs[MasterID] = bd.BrokerAddrs[id]
		delete(bd.BrokerAddrs, id)
	}
}

// keepZone keeps the broker groups of zone (case-insensitive) and those
// without a master, whose slaves a consumer may read from whatever their
// zone, with their queues and filter servers, as RocketMQ's name server
// answers a client in zone mode (its ZoneRouteRPCHook).
func (r *TopicRouteData) keepZone(zone string) {
	removed := map[string]bool{}
	kept := r.BrokerDatas[:0]
	for _, bd := range r.BrokerDatas {
		if _, hasMaster := bd.BrokerAddrs[MasterID]; !hasMaster || strings.EqualFold(bd.ZoneName, zone) {
			kept = append(kept, bd)
			continue
		}
		removed[bd.BrokerName] = true
		for _, addr := range bd.BrokerAddrs {
			delete(r.FilterServerTable, addr)
		}
	}
	r.BrokerDatas = kept
	r.QueueDatas = slices.DeleteFunc(r.QueueDatas, func(q QueueData) bool { return removed[q.BrokerName] })
}

func (s *Server) getClusterInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := success(req)
	resp.Body = s.reg.ClusterInfo().AppendJSON(nil)
	return resp
}

func (s *Server) getAllTopicList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !s.settings().EnableAllTopicList {
		return remoting.NewResponse(req, remoting.SystemError, "disable")
	}
	resp := success(req)
	resp.Body = appendTopicListJSON(nil, s.reg.Topics(), "")
	return resp
}

func (s *Server) deleteTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	topic, err := h.String("topic")
	if err != nil {
		return failure(req, remoting.SystemError, err)
	}
	s.reg.DeleteTopic(topic, h.OptString("clusterName", ""))
	return success(req)
}

func (s *Server) getTopicsByCluster(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !s.settings().EnableTopicList {
		return remoting.NewResponse(req, remoting.SystemError, "disable")
	}
	cluster, err := remoting.Header(req.ExtFields).String("cluster")
	if err != nil {
		return failure(req, remoting.SystemError, err)
	}
	resp := success(req)
	resp.Body = appendTopicListJSON(nil, s.reg.TopicsByCluster(cluster), "")
	return resp
}

func (s *Server) putKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	ns, key, value := r.String("namespace"), r.String("key"), r.String("value")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	if err := s.kv.Put(ns, key, value); err != nil {
		s.log.Error().Err(err).Msg("put kv config")
		return failure(req, remoting.SystemError, err)
	}
	return success(req)
}

func (s *Server) getKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	ns, key := r.String("namespace"), r.String("key")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	v, ok := s.kv.Get(ns, key)
	if !ok {
		return remoting.NewResponse(req, remoting.QueryNotFound, "No config item, Namespace: "+ns+" Key: "+key)
	}
	resp := success(req)
	resp.ExtFields = map[string]string{"value": v}
	return resp
}

func (s *Server) deleteKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	ns, key := r.String("namespace"), r.String("key")
	if err := r.Err(); err != nil {
		return failure(req, remoting.SystemError, err)
	}
	if err := s.kv.Delete(ns, key); err != nil {
		s.log.Error().Err(err).Msg("delete kv config")
		return failure(req, remoting.SystemError, err)
	}
	return success(req)
}

func (s *Server) getKVList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	ns, err := remoting.Header(req.ExtFields).String("namespace")
	if err != nil {
		return failure(req, remoting.SystemError, err)
	}
	table, ok := s.kv.List(ns)
	if !ok {
		return remoting.NewResponse(req, remoting.QueryNotFound, "No config item, Namespace: "+ns)
	}
	resp := success(req)
	resp.Body = appendKVTableJSON(nil, table)
	return resp
}

// Topic system flags (RocketMQ's TopicSysFlag).
const (
	topicFlagUnit    int32 = 1 << 0
	topicFlagUnitSub int32 = 1 << 1
)

// writePermChanger answers WIPE_WRITE_PERM_OF_BROKER (mqadmin
// wipeWritePerm, the first step of taking a broker group out of service)
// or ADD_WRITE_PERM_OF_BROKER (mqadmin addWritePerm) with change: the
// response header's countField (wipeTopicCount, addTopicCount) is the
// number of topics changed.
func (s *Server) writePermChanger(change func(brokerName string) int, countField, what string) remoting.RespondFunc {
	return func(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		name, err := remoting.Header(req.ExtFields).String("brokerName")
		if err != nil {
			return failure(req, remoting.SystemError, err)
		}
		n := change(name)
		s.log.Info().Str("brokerName", name).Int("topics", n).Stringer("conn", conn).Msg(what)
		resp := success(req)
		resp.ExtFields = map[string]string{countField: strconv.Itoa(n)}
		return resp
	}
}

// getSystemTopicList answers GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and
// broker names, and one broker's address.
func (s *Server) getSystemTopicList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topics, addr := s.reg.SystemTopics()
	resp := success(req)
	resp.Body = appendTopicListJSON(nil, topics, addr)
	return resp
}

// topicsWithSysFlag answers the unit topic list requests.
func (s *Server) topicsWithSysFlag(keep func(int32) bool) remoting.RespondFunc {
	return func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if !s.settings().EnableTopicList {
			return remoting.NewResponse(req, remoting.SystemError, "disable")
		}
		resp := success(req)
		resp.Body = appendTopicListJSON(nil, s.reg.TopicsWithSysFlag(keep), "")
		return resp
	}
}

// maxQueuedMinChanges bounds the notices waiting for the notifier; past
// it a notice is dropped with a log line (the brokers still learn the
// change from GET_BROKER_MEMBER_GROUP).
const maxQueuedMinChanges = 256

// minChangeTimeout bounds the dial and queueing of each oneway
// NOTIFY_MIN_BROKER_ID_CHANGE, as RocketMQ's invokeOneway of 300 ms.
const minChangeTimeout = 300 * time.Millisecond

// queueMinBrokerIDChange is the registry's OnMinBrokerIDChange: under
// notifyMinBrokerIdChanged as in force now, the change is queued for the
// notifier. Called with the registry's lock held, it never blocks.
func (s *Server) queueMinBrokerIDChange(ch MinBrokerIDChange) {
	if !s.settings().NotifyMinBrokerIdChanged {
		return
	}
	select {
	case s.minChanges <- ch:
	default:
		s.log.Warn().Str("broker", ch.BrokerName).Int64("minBrokerId", ch.MinBrokerID).
			Msg("too many NOTIFY_MIN_BROKER_ID_CHANGE notices queued: this one is dropped")
	}
}

// notifyMinBrokerIDChanges sends the queued notices until the server
// stops: NOTIFY_MIN_BROKER_ID_CHANGE with minBrokerId, minBrokerAddr,
// offlineBrokerAddr and haBrokerAddr to each member chosen, as RocketMQ's
// RouteInfoManager.notifyMinBrokerIdChanged, each oneway (no answer is
// awaited) within minChangeTimeout; a member that cannot be reached is
// logged and left (it learns the change from GET_BROKER_MEMBER_GROUP).
func (s *Server) notifyMinBrokerIDChanges() {
	defer s.scanner.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case ch := <-s.minChanges:
			h := remoting.Header{}
			h.SetInt64("minBrokerId", ch.MinBrokerID)
			h.Set("minBrokerAddr", ch.MinBrokerAddr)
			if ch.OfflineBrokerAddr != "" {
				h.Set("offlineBrokerAddr", ch.OfflineBrokerAddr)
			}
			if ch.HABrokerAddr != "" {
				h.Set("haBrokerAddr", ch.HABrokerAddr)
			}
			s.log.Info().Str("broker", ch.BrokerName).Int64("minBrokerId", ch.MinBrokerID).
				Strs("notify", ch.Notify).Str("offline", ch.OfflineBrokerAddr).Msg("min broker id changed")
			for _, addr := range ch.Notify {
				cctx, cancelOne := context.WithTimeout(ctx, minChangeTimeout)
				err := s.brokerPool.InvokeOneway(cctx, addr, remoting.NewRequest(remoting.NotifyMinBrokerIDChange, h, nil))
				cancelOne()
				if err != nil && ctx.Err() == nil {
					s.log.Warn().Err(err).Str("broker", addr).Msg("NOTIFY_MIN_BROKER_ID_CHANGE")
				}
			}
		}
	}
}
