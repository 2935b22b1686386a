package configs

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Namesrv is the name server's configuration, under RocketMQ's key names
// (NamesrvConfig and NettyServerConfig). configs/namesrv.yaml documents
// every key with its default; bin/namesrv -c reads a RocketMQ
// namesrv.properties or a YAML file.
type Namesrv struct {
	// ListenPort is the port it serves on (9876).
	ListenPort int
	// BindAddress is the address it listens on; "0.0.0.0" (the default)
	// means every interface, IPv6 included.
	BindAddress string
	// KVConfigPath is the file the KV configuration (PUT_KV_CONFIG,
	// ORDER_TOPIC_CONFIG) persists in; empty keeps it in memory.
	KVConfigPath string
	// OrderMessageEnable makes routes carry orderTopicConf.
	OrderMessageEnable bool
	// ReturnOrderTopicConfigToBroker answers REGISTER_BROKER with the
	// ORDER_TOPIC_CONFIG table.
	ReturnOrderTopicConfigToBroker bool
	// EnableAllTopicList allows GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
	EnableAllTopicList bool
	// EnableTopicList allows GET_TOPICS_BY_CLUSTER and the unit topic
	// lists.
	EnableTopicList bool
	// DeleteTopicWithBrokerRegistration drops a broker's queue data of
	// topics missing from its registration.
	DeleteTopicWithBrokerRegistration bool
	// ScanNotActiveBrokerInterval is how often brokers that stopped
	// registering are looked for.
	ScanNotActiveBrokerInterval time.Duration
	// NeedWaitForService makes GET_ROUTEINFO_BY_TOPIC answer SYSTEM_ERROR
	// "name server not ready" until WaitForService has passed since the
	// start, so that a restarted name server does not tell clients a
	// topic is gone before its brokers registered again.
	NeedWaitForService bool
	// WaitForService is that wait (waitSecondsForService, 45 s).
	WaitForService time.Duration
	// SupportActingMaster makes the route of a broker group acting
	// without its master (5.x enableSlaveActingMaster) name its slave of
	// the smallest id as id 0 where the topic's queues there are not
	// writable, as RocketMQ's supportActingMaster does.
	SupportActingMaster bool
	// NotifyMinBrokerIdChanged sends NOTIFY_MIN_BROKER_ID_CHANGE to the
	// members of a broker group whose smallest broker id changed, as
	// RocketMQ's notifyMinBrokerIdChanged does.
	NotifyMinBrokerIdChanged bool
	// ConfigBlackList names keys (';'-separated) that UPDATE_NAMESRV_CONFIG
	// must not change, on top of configBlackList, configStorePath and
	// kvConfigPath, which it never changes.
	ConfigBlackList string
	// EnableControllerInNamesrv starts a controller beside the name
	// server (RocketMQ's enableControllerInNamesrv), configured by
	// Controller and served on the port of its controllerDLegerPeers
	// entry; it shares scanNotActiveBrokerInterval and configBlackList
	// with the name server, as in RocketMQ.
	EnableControllerInNamesrv bool
	// Controller are the embedded controller's keys.
	Controller Controller
	// TLS is the listener's TLS (RocketMQ's tls.server.* keys).
	TLS TLS
	// TLSEnable is tls.enable (useTLS): whether the name server sends
	// its NOTIFY_MIN_BROKER_ID_CHANGE notices, and its embedded
	// controller its NOTIFY_BROKER_ROLE_CHANGED ones, over TLS; empty
	// follows RocketMQ, TLS when tls.server.mode is enforcing (DialTLS).
	TLSEnable string
	// ProxyProtocol says which connections may open with a PROXY protocol
	// header.
	ProxyProtocol ProxyProtocol
	// Listener is the listener's idle timeout and socket buffers.
	Listener Listener
	// LogLevel is trace, debug, info, warn or error.
	LogLevel string
	// LogFormat is auto (console on a terminal, JSON otherwise), console or
	// json.
	LogFormat string
	// Log is where the log lines go: standard error, or a rolled file
	// (namesrv.log) in Log.Dir.
	Log LogFile
}

// DialTLS reports whether the name server (and its embedded controller)
// dials brokers with TLS.
func (n *Namesrv) DialTLS() bool { return DialTLS(n.TLSEnable, n.TLS.Mode) }

// namesrvFields is the single list of keys the name server understands.
// Adding a key means adding a line here and documenting it in
// namesrv.yaml (a test checks both agree).
var namesrvFields = slices.Concat([]field[Namesrv]{
	intRange("listenPort", "9876", 0, 65535, func(n *Namesrv) *int { return &n.ListenPort }),
	str("bindAddress", "0.0.0.0", func(n *Namesrv) *string { return &n.BindAddress }),
	str("kvConfigPath", DefaultKVConfigPath(), func(n *Namesrv) *string { return &n.KVConfigPath }),
	boolean("orderMessageEnable", "false", func(n *Namesrv) *bool { return &n.OrderMessageEnable }),
	boolean("returnOrderTopicConfigToBroker", "true", func(n *Namesrv) *bool { return &n.ReturnOrderTopicConfigToBroker }),
	boolean("enableAllTopicList", "true", func(n *Namesrv) *bool { return &n.EnableAllTopicList }),
	boolean("enableTopicList", "true", func(n *Namesrv) *bool { return &n.EnableTopicList }),
	boolean("deleteTopicWithBrokerRegistration", "false", func(n *Namesrv) *bool { return &n.DeleteTopicWithBrokerRegistration }),
	millisRange("scanNotActiveBrokerInterval", "5000", 1, func(n *Namesrv) *time.Duration { return &n.ScanNotActiveBrokerInterval }),
	boolean("needWaitForService", "false", func(n *Namesrv) *bool { return &n.NeedWaitForService }),
	boolean("supportActingMaster", "false", func(n *Namesrv) *bool { return &n.SupportActingMaster }),
	boolean("notifyMinBrokerIdChanged", "false", func(n *Namesrv) *bool { return &n.NotifyMinBrokerIdChanged }),
	// An int of seconds in RocketMQ; 0 or less waits for nothing.
	inUnit("waitSecondsForService", "45", time.Second, "seconds", -1<<31, 1<<31-1, func(n *Namesrv) *time.Duration { return &n.WaitForService }),
	boolean("enableControllerInNamesrv", "false", func(n *Namesrv) *bool { return &n.EnableControllerInNamesrv }),
	str("configBlackList", "configBlackList;configStorePath;kvConfigPath", func(n *Namesrv) *string { return &n.ConfigBlackList }),
}, controllerFields(func(n *Namesrv) *Controller { return &n.Controller }), tlsServerFields(func(n *Namesrv) *TLS { return &n.TLS }), tlsClientFields(func(n *Namesrv) *TLS { return &n.TLS }),
	[]field[Namesrv]{tlsEnableField(func(n *Namesrv) *string { return &n.TLSEnable })}, proxyProtocolFields(func(n *Namesrv) *ProxyProtocol { return &n.ProxyProtocol }), listenerFields(func(n *Namesrv) *Listener { return &n.Listener }), []field[Namesrv]{
		oneOf("logLevel", "info", []string{"trace", "debug", "info", "warn", "error"}, func(n *Namesrv) *string { return &n.LogLevel }),
		oneOf("logFormat", "auto", []string{"auto", "console", "json"}, func(n *Namesrv) *string { return &n.LogFormat }),
	}, logFileFields(namesrvLogMaxSizeMiB, namesrvLogMaxRolled, func(n *Namesrv) *LogFile { return &n.Log }))

// namesrvSchema is the name server's key table with its lookups.
var namesrvSchema = newSchema(namesrvFields, nil).withInert(slices.Concat(namesrvInert, namesrvClientInert, nettyServerInert[Namesrv](), controllerInert[Namesrv]()))

// reasonControllerOff is why a name server without an embedded
// controller takes the controller's keys without effect.
const reasonControllerOff = "the name server reads the controller's keys only with enableControllerInNamesrv=true, as RocketMQ's NamesrvStartup does"

// namesrvWithoutControllerSchema reads the file of a name server that
// hosts no controller: the controller's keys are inert whatever their
// values, as RocketMQ's name server reads its ControllerConfig only with
// enableControllerInNamesrv (a file left with controllerType=jRaft, say,
// still starts it).
var namesrvWithoutControllerSchema = func() *schema[Namesrv] {
	var keys []string
	controllerKey := map[string]bool{}
	for _, f := range controllerFields(func(n *Namesrv) *Controller { return &n.Controller }) {
		for _, k := range append([]string{f.key}, f.aliases...) {
			controllerKey[k] = true
			keys = append(keys, k)
		}
	}
	for _, in := range controllerInert[Namesrv]() {
		keys = append(keys, in.key)
	}
	fields := slices.DeleteFunc(slices.Clone(namesrvFields), func(f field[Namesrv]) bool { return controllerKey[f.key] })
	return newSchema(fields, nil).withInert(slices.Concat(namesrvInert, namesrvClientInert, nettyServerInert[Namesrv](),
		inertStrings[Namesrv](reasonControllerOff, keys...)))
}()

// DefaultKVConfigPath is RocketMQ's default kvConfigPath,
// ~/namesrv/kvConfig.json, so a name server that replaces RocketMQ's finds
// the order-topic configuration it kept; "" (memory only) when there is
// no home directory.
func DefaultKVConfigPath() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, "namesrv", "kvConfig.json")
}

// DefaultNamesrv returns the configuration a name server runs with when no
// key is set: RocketMQ's defaults.
func DefaultNamesrv() Namesrv { return namesrvSchema.defaults() }

// LoadedNamesrv is the outcome of reading a name server configuration.
type LoadedNamesrv struct {
	// Namesrv is the resulting configuration: defaults, then the file,
	// then the overrides.
	Namesrv Namesrv
	// UnknownKeys lists keys of the file the name server does not know
	// (RocketMQ's thread-pool and Netty tuning keys, for example); the
	// caller logs them as warnings.
	UnknownKeys []string
	// InertKeys lists the RocketMQ keys of the file that the name server
	// accepts without effect, with the reason; the caller logs each once.
	InertKeys []InertKey
}

// LoadNamesrv reads a name server configuration as LoadBroker reads a
// broker's: path may be empty (defaults only), a properties file
// (RocketMQ's namesrv.properties) or YAML; overrides win over the file and
// must name known keys.
func LoadNamesrv(path string, overrides map[string]string) (LoadedNamesrv, error) {
	return LoadNamesrvFrom(path, []Source{{Name: "override", Values: overrides}})
}

// LoadNamesrvFrom is LoadNamesrv with each override's origin named (a
// later source wins over an earlier one): an error in a source starts
// with its Name, one in the file with the file and line.
//
// The controller's keys are read only when the configuration sets
// enableControllerInNamesrv=true; otherwise they are reported inert and
// their values not checked, as RocketMQ's name server ignores them.
func LoadNamesrvFrom(path string, overrides []Source) (LoadedNamesrv, error) {
	out := LoadedNamesrv{Namesrv: DefaultNamesrv()}
	inerts, err := loadLayers(namesrvWithoutControllerSchema, &out.Namesrv, path, nil, overrides, &out.UnknownKeys)
	if err == nil && !out.Namesrv.EnableControllerInNamesrv {
		out.InertKeys = report(inerts, &out.Namesrv)
		return out, nil
	}
	out = LoadedNamesrv{Namesrv: DefaultNamesrv()}
	inerts, err = loadLayers(namesrvSchema, &out.Namesrv, path, nil, overrides, &out.UnknownKeys)
	if err != nil {
		return LoadedNamesrv{}, err
	}
	out.InertKeys = report(inerts, &out.Namesrv)
	return out, nil
}

// Apply sets the given keys on n as a configuration file would and returns
// the canonical names of the keys it set. An unknown key or a value that
// does not parse is an error naming the key, and n is left unchanged.
func (n *Namesrv) Apply(props map[string]string) ([]string, error) {
	set, _, err := namesrvSchema.apply(n, props)
	return set, err
}

// ApplyReporting is Apply that also returns the inert keys among props
// (marked Override), for the caller to log.
func (n *Namesrv) ApplyReporting(props map[string]string) ([]string, []InertKey, error) {
	return namesrvSchema.applyReporting(n, props)
}

// Settings returns every key's current value as text under its canonical
// name: what GET_NAMESRV_CONFIG reports.
func (n *Namesrv) Settings() map[string]string { return namesrvSchema.settings(n) }

// ChangedKeys lists the keys whose values differ between n and next,
// secrets included (Settings reports them masked, so their texts match).
func (n *Namesrv) ChangedKeys(next *Namesrv) []string { return namesrvSchema.changed(n, next) }

// ListenAddr is the address to listen on: bindAddress and listenPort, with
// 0.0.0.0 standing for every interface.
func (n *Namesrv) ListenAddr() string { return listenAddr(n.BindAddress, n.ListenPort) }

// listenAddr joins a bind address and a port, with 0.0.0.0 standing for
// every interface, IPv6 included.
func listenAddr(bind string, port int) string {
	if bind == "0.0.0.0" {
		bind = ""
	}
	return net.JoinHostPort(bind, strconv.Itoa(port))
}

// BlackListed reports the keys of props UPDATE_NAMESRV_CONFIG must refuse:
// the keys RocketMQ never lets it change (configBlackList, configStorePath,
// kvConfigPath, rocketmqHome) plus those configBlackList names, compared
// by the key they set (any case, aliases) as the update reads them.
func (n *Namesrv) BlackListed(props map[string]string) []string {
	return blackListed(props, []string{"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}, n.ConfigBlackList,
		keyNorm(namesrvSchema.canonical))
}

// blackListed returns the keys of props that are among always or the
// ';'-separated list, both compared after norm.
func blackListed(props map[string]string, always []string, list string, norm func(string) string) []string {
	black := map[string]bool{}
	for _, k := range always {
		black[norm(k)] = true
	}
	for _, k := range strings.Split(list, ";") {
		if k = strings.TrimSpace(k); k != "" {
			black[norm(k)] = true
		}
	}
	var out []string
	for k := range props {
		if black[norm(k)] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// NamesrvKeys returns every key the name server understands, in table
// order, without aliases.
func NamesrvKeys() []string { return namesrvSchema.keys() }

// PersistNamesrvSettings writes settings into the name server's
// configuration file as PersistSettings does for the broker's.
func PersistNamesrvSettings(path string, settings map[string]string) error {
	return persistSettings(path, settings, namesrvSchema.persistedName)
}
