package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Controller holds the keys of RocketMQ's ControllerConfig that rocketkv's
// controller follows. bin/controller reads them (ControllerFile), and so
// does the name server with enableControllerInNamesrv (Namesrv.Controller),
// as RocketMQ's NamesrvStartup reads one properties file for both.
type Controller struct {
	// Group is controllerDLegerGroup, the controller cluster's name.
	Group string
	// Peers is controllerDLegerPeers, "n0-host:port;n1-host:port": each
	// controller serves brokers on its host:port (raft runs on port+1).
	Peers string
	// SelfID is controllerDLegerSelfId, this controller's id in Peers.
	SelfID string
	// StorePath is controllerStorePath, where the raft log and snapshots
	// live (~/controller/store when empty).
	StorePath string
	// ScanInactiveMasterInterval is how often the leader looks for groups
	// whose master is gone.
	ScanInactiveMasterInterval time.Duration
	// ElectMasterMaxRetryCount bounds a controller-started election's tries.
	ElectMasterMaxRetryCount int
	// EnableElectUncleanMaster lets an election pick a replica outside the
	// sync state set.
	EnableElectUncleanMaster bool
	// NotifyBrokerRoleChanged sends NOTIFY_BROKER_ROLE_CHANGED after an
	// election.
	NotifyBrokerRoleChanged bool
	// ProcessReadEvent makes reads confirm leadership through raft.
	ProcessReadEvent bool
	// MetricsExporterType is MetricsDisabled or MetricsPROM (RocketMQ's
	// OTLP_GRPC and LOG exporters are refused, as the broker refuses
	// them): PROM serves the controller's metrics on
	// MetricsPromExporterHost (every interface when empty, as RocketMQ's
	// controller) and MetricsPromExporterPort.
	MetricsExporterType     string
	MetricsPromExporterHost string
	MetricsPromExporterPort int
	// MetricsLabel adds "key:value,..." constant labels to every series;
	// MetricsInDelta adds aggregation="delta" (Prometheus counters stay
	// cumulative, as RocketMQ's do).
	MetricsLabel   string
	MetricsInDelta bool
	// MetricsNameUnitSuffix (rocketkv's own key, the broker's too) serves
	// the names of RocketMQ 5.1.4 and later, a declared unit appended
	// (request_latency_microseconds); false the bare names
	// (request_latency).
	MetricsNameUnitSuffix bool
}

// DefaultControllerStorePath is where the controller keeps its raft log
// when controllerStorePath is empty: store under ~/controller, the folder
// RocketMQ's controller keeps its controller.properties in; "controller-store"
// in the working directory when there is no home directory.
func DefaultControllerStorePath() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "controller-store"
	}
	return filepath.Join(home, "controller", "store")
}

// controllerFields are the ControllerConfig keys rocketkv follows, for a
// configuration struct T holding a Controller. scanNotActiveBrokerInterval
// and configBlackList are not among them: they are keys of the name server
// too, and the standalone controller declares them itself.
func controllerFields[T any](ptr func(*T) *Controller) []field[T] {
	return []field[T]{
		str("controllerDLegerGroup", "", func(c *T) *string { return &ptr(c).Group }),
		str("controllerDLegerPeers", "", func(c *T) *string { return &ptr(c).Peers }),
		str("controllerDLegerSelfId", "", func(c *T) *string { return &ptr(c).SelfID }),
		str("controllerStorePath", "", func(c *T) *string { return &ptr(c).StorePath }),
		millisRange("scanInactiveMasterInterval", "5000", 1, func(c *T) *time.Duration { return &ptr(c).ScanInactiveMasterInterval }),
		intRange("electMasterMaxRetryCount", "3", 1, 1<<31-1, func(c *T) *int { return &ptr(c).ElectMasterMaxRetryCount }),
		boolean("enableElectUncleanMaster", "false", func(c *T) *bool { return &ptr(c).EnableElectUncleanMaster }),
		boolean("notifyBrokerRoleChanged", "true", func(c *T) *bool { return &ptr(c).NotifyBrokerRoleChanged }),
		withAliases(boolean("processReadEvent", "false", func(c *T) *bool { return &ptr(c).ProcessReadEvent }), "isProcessReadEvent"),
		controllerType[T](),
		oneOf("metricsExporterType", MetricsDisabled, []string{MetricsDisabled, MetricsPROM}, func(c *T) *string { return &ptr(c).MetricsExporterType }),
		str("metricsPromExporterHost", "", func(c *T) *string { return &ptr(c).MetricsPromExporterHost }),
		intRange("metricsPromExporterPort", "5557", 0, 65535, func(c *T) *int { return &ptr(c).MetricsPromExporterPort }),
		str("metricsLabel", "", func(c *T) *string { return &ptr(c).MetricsLabel }),
		boolean("metricsInDelta", "false", func(c *T) *bool { return &ptr(c).MetricsInDelta }),
		boolean("metricsNameUnitSuffix", "true", func(c *T) *bool { return &ptr(c).MetricsNameUnitSuffix }),
	}
}

// controllerType reads controllerType: DLedger, RocketMQ's default, is
// the raft-replicated controller rocketkv has; jRaft is refused.
func controllerType[T any]() field[T] {
	return field[T]{key: "controllerType", def: "DLedger", set: func(_ *T, raw string) error {
		if raw != "DLedger" {
			return fmt.Errorf("%q: only DLedger (a raft-replicated controller, hashicorp/raft in rocketkv) is there; RocketMQ's jRaft controller is not", raw)
		}
		return nil
	}, get: func(*T) string { return "DLedger" }}
}

// reasonControllerThreads and the others are the reasons of the
// controller's inert keys.
const (
	reasonControllerThreads = "no thread pool: controller requests run on the Remoting workers, checked and replicated one at a time"
	reasonControllerOTLP    = "read only by RocketMQ's OTLP gRPC exporter; rocketkv's controller serves Prometheus only and refuses metricsExporterType=OTLP_GRPC"
	reasonControllerLogging = "read only by RocketMQ's LOG metrics exporter; rocketkv's controller serves Prometheus only and refuses metricsExporterType=LOG"
	reasonJRaft             = "a setting of RocketMQ's jRaft controller (controllerType=jRaft), which rocketkv does not have"
)

// controllerInert are the ControllerConfig and JraftConfig keys accepted
// without effect.
func controllerInert[T any]() []inert[T] {
	return slices.Concat(
		inertInts[T](reasonControllerThreads, "controllerThreadPoolNums", "controllerRequestThreadPoolQueueCapacity"),
		[]inert[T]{inertInt[T]("mappedFileSize", "the raft log is a bbolt file (raft.db under controllerStorePath), not DLedger's mapped files")},
		inertStrings[T](reasonControllerOTLP, "metricsGrpcExporterTarget", "metricsGrpcExporterHeader"),
		inertInts[T](reasonControllerOTLP, "metricGrpcExporterTimeOutInMills", "metricGrpcExporterIntervalInMills"),
		inertInts[T](reasonControllerLogging, "metricLoggingExporterIntervalInMills"),
		inertInts[T](reasonJRaft, "jRaftElectionTimeoutMs", "jRaftScanWaitTimeoutMs", "jRaftSnapshotIntervalSecs"),
		inertStrings[T](reasonJRaft, "jRaftGroupId", "jRaftServerId", "jRaftInitConf", "jRaftControllerRPCAddr"),
	)
}

// ControllerFile is the standalone controller's configuration (bin/controller,
// RocketMQ's ControllerStartup): the controller's keys, the two it shares
// with a name server, the listener's and logging.
type ControllerFile struct {
	// Controller are the controller's own keys.
	Controller Controller
	// ScanNotActiveBrokerInterval is how often expired heartbeats are
	// looked for.
	ScanNotActiveBrokerInterval time.Duration
	// ConfigBlackList names keys UPDATE_CONTROLLER_CONFIG refuses.
	ConfigBlackList string
	// Listener is the listener's idle timeout and socket buffers.
	Listener Listener
	// TLS is the listener's TLS (RocketMQ's tls.server.* keys).
	TLS TLS
	// TLSEnable is tls.enable (useTLS): whether the controller sends its
	// NOTIFY_BROKER_ROLE_CHANGED notices over TLS; empty follows
	// RocketMQ, TLS when tls.server.mode is enforcing (DialTLS).
	TLSEnable string
	// ProxyProtocol says which connections may open with a PROXY
	// protocol header.
	ProxyProtocol ProxyProtocol
	// LogLevel is trace, debug, info, warn or error.
	LogLevel string
	// LogFormat is auto, console or json.
	LogFormat string
	// Log is where the log lines go: standard error, or a rolled file
	// (controller.log) in Log.Dir.
	Log LogFile
}

// DialTLS reports whether the controller dials brokers with TLS.
func (c *ControllerFile) DialTLS() bool { return DialTLS(c.TLSEnable, c.TLS.Mode) }

var controllerFileFields = slices.Concat(controllerFields(func(c *ControllerFile) *Controller { return &c.Controller }), []field[ControllerFile]{
	millisRange("scanNotActiveBrokerInterval", "5000", 1, func(c *ControllerFile) *time.Duration { return &c.ScanNotActiveBrokerInterval }),
	str("configBlackList", "configBlackList;configStorePath", func(c *ControllerFile) *string { return &c.ConfigBlackList }),
}, listenerFields(func(c *ControllerFile) *Listener { return &c.Listener }),
	tlsServerFields(func(c *ControllerFile) *TLS { return &c.TLS }),
	tlsClientFields(func(c *ControllerFile) *TLS { return &c.TLS }),
	[]field[ControllerFile]{tlsEnableField(func(c *ControllerFile) *string { return &c.TLSEnable })},
	proxyProtocolFields(func(c *ControllerFile) *ProxyProtocol { return &c.ProxyProtocol }), []field[ControllerFile]{
		oneOf("logLevel", "info", []string{"trace", "debug", "info", "warn", "error"}, func(c *ControllerFile) *string { return &c.LogLevel }),
		oneOf("logFormat", "auto", []string{"auto", "console", "json"}, func(c *ControllerFile) *string { return &c.LogFormat }),
	}, logFileFields(controllerLogMaxSizeMiB, controllerLogMaxRolled, func(c *ControllerFile) *LogFile { return &c.Log }))

// controllerFileInert adds the keys of ControllerStartup's other objects.
var controllerFileInert = slices.Concat(controllerInert[ControllerFile](), nettyServerInert[ControllerFile](), []inert[ControllerFile]{
	inertInt[ControllerFile]("listenPort", "the controller serves brokers on the port of its own controllerDLegerPeers entry, as RocketMQ's DLedger controller does (its 19876 is not used)"),
	{key: "rocketmqHome", reason: "no RocketMQ installation is read", parse: func(string) error { return nil }},
	{key: "configStorePath", reason: "UPDATE_CONTROLLER_CONFIG writes back into the -c file", parse: func(string) error { return nil }},
}, inertInts[ControllerFile](namesrvClientSettingController, "connectTimeoutMillis", "clientWorkerThreads", "clientCallbackExecutorThreads",
	"clientOnewaySemaphoreValue", "clientAsyncSemaphoreValue", "clientChannelMaxIdleTimeSeconds", "clientSocketSndBufSize", "clientSocketRcvBufSize"),
	inertBools[ControllerFile](namesrvClientSettingController, "clientCloseSocketIfTimeout", "clientPooledByteBufAllocatorEnable"))

// namesrvClientSettingController is the reason of the client keys of a
// controller.
const namesrvClientSettingController = "a client connection setting (NettyClientConfig); the controller's only connections out are its NOTIFY_BROKER_ROLE_CHANGED notices, sent with its own settings (over TLS as tls.enable says)"

var controllerFileSchema = newSchema(controllerFileFields, nil).withInert(controllerFileInert)

// DefaultControllerFile returns the standalone controller's defaults.
func DefaultControllerFile() ControllerFile { return controllerFileSchema.defaults() }

// LoadedController is the outcome of reading a controller configuration.
type LoadedController struct {
	// Controller is the resulting configuration.
	Controller ControllerFile
	// UnknownKeys lists the file's keys the controller does not know.
	UnknownKeys []string
	// InertKeys lists the file's keys accepted without effect.
	InertKeys []InertKey
}

// LoadControllerFrom reads a controller configuration (RocketMQ's
// controller.properties, or the same keys in YAML) as LoadNamesrvFrom
// reads a name server's.
func LoadControllerFrom(path string, overrides []Source) (LoadedController, error) {
	out := LoadedController{Controller: DefaultControllerFile()}
	inerts, err := loadLayers(controllerFileSchema, &out.Controller, path, nil, overrides, &out.UnknownKeys)
	if err != nil {
		return LoadedController{}, err
	}
	out.InertKeys = report(inerts, &out.Controller)
	return out, nil
}

// Settings returns every key's value as text under its canonical name.
func (c *ControllerFile) Settings() map[string]string { return controllerFileSchema.settings(c) }

// ControllerKeys returns every key the standalone controller understands.
func ControllerKeys() []string { return controllerFileSchema.keys() }

// StorePathOrDefault is controllerStorePath, or DefaultControllerStorePath
// when it is empty.
func (c *Controller) StorePathOrDefault() string {
	if c.StorePath == "" {
		return DefaultControllerStorePath()
	}
	return c.StorePath
}

// PersistControllerSettings writes settings (the controller's keys, its
// inert ones included) into the standalone controller's configuration
// file as PersistSettings does for the broker's: what
// UPDATE_CONTROLLER_CONFIG changed survives a restart.
func PersistControllerSettings(path string, settings map[string]string) error {
	return persistSettings(path, settings, controllerFileSchema.persistedName)
}
