package configs

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Proxy is the gRPC proxy's configuration, under the key names of
// RocketMQ's proxy (ProxyConfig, rmq-proxy.json). configs/proxy.yaml
// documents every key with its default; bin/proxy -c reads RocketMQ's
// rmq-proxy.json, a properties file or YAML.
type Proxy struct {
	// ProxyMode must be cluster: the proxy reaches brokers through the
	// name servers (RocketMQ's local mode embeds a proxy in a broker).
	ProxyMode string
	// GrpcServerPort is the port gRPC clients connect to (8081).
	GrpcServerPort int
	// BindAddress is the address it listens on; "0.0.0.0" means every
	// interface.
	BindAddress string
	// NamesrvAddr lists the name servers, ';'-separated.
	NamesrvAddr string
	// NamesrvDomain, when not empty, names the HTTP address server the
	// name servers are asked of instead (RocketMQ's proxy then ignores
	// NamesrvAddr); NamesrvDomainSubgroup is the last element of its
	// path (see namesrv.AddressServerURL).
	NamesrvDomain, NamesrvDomainSubgroup string
	// MaxMessageSize is the largest message body accepted, in bytes.
	MaxMessageSize int
	// MaxUserPropertySize bounds a message's user properties, tag and keys.
	MaxUserPropertySize int
	// UserPropertyMaxNum bounds how many user properties a message has.
	UserPropertyMaxNum int
	// MaxMessageGroupSize bounds a message group's bytes; 0 or less sets
	// no bound, as in RocketMQ.
	MaxMessageGroupSize int
	// MaxDelayTime is the latest a delivery time may lie ahead; 0 or less
	// sets no bound, as in RocketMQ.
	MaxDelayTime time.Duration
	// MinInvisibleTimeForRecv and MaxInvisibleTime bound a receive's
	// invisible time.
	MinInvisibleTimeForRecv, MaxInvisibleTime time.Duration
	// DefaultInvisibleTime is the invisible time of auto-renewed messages.
	DefaultInvisibleTime time.Duration
	// MinLongPollingTimeout and MaxLongPollingTimeout bound a receive's
	// long polling.
	MinLongPollingTimeout, MaxLongPollingTimeout time.Duration
	// LongPollingBatchSize is the receive batch size consumers are told.
	LongPollingBatchSize int
	// ProducerMaxAttempts, ProducerBackoffInitial, ProducerBackoffMax and
	// ProducerBackoffMultiplier are the send retry policy producers are
	// told.
	ProducerMaxAttempts       int
	ProducerBackoffInitial    time.Duration
	ProducerBackoffMax        time.Duration
	ProducerBackoffMultiplier int
	// EnableProxyAutoRenew renews the handles of messages received with
	// auto_renew; RenewAheadTime, RenewMaxTime and RenewSchedulePeriod
	// tune it.
	EnableProxyAutoRenew                              bool
	RenewAheadTime, RenewMaxTime, RenewSchedulePeriod time.Duration
	// MaxRenewRetryTimes is how often a renewal that failed to reach its
	// broker is tried again before the message is left to expire.
	MaxRenewRetryTimes int
	// ClientIdleTime is how long a silent client's settings are kept.
	ClientIdleTime time.Duration
	// TopicRouteCacheRefresh is how long a route is reused,
	// TopicRouteCacheExpired how long one nobody asks for is kept, and
	// TopicRouteCacheMaxNum how many are kept.
	TopicRouteCacheRefresh time.Duration
	TopicRouteCacheExpired time.Duration
	TopicRouteCacheMaxNum  int
	// GrpcMaxInboundMessageSize bounds one gRPC request.
	GrpcMaxInboundMessageSize int
	// AuthenticationEnabled and AuthorizationEnabled check gRPC calls
	// with RocketMQ 5.3's ACL 2.0 (AuthConfig's keys), with the users and
	// access lists of the brokers, kept for UserCacheRefresh and
	// AuthCacheRefresh.
	AuthenticationEnabled, AuthorizationEnabled bool
	AuthenticationMetadataProvider              string
	AuthorizationMetadataProvider               string
	AuthCacheRefresh                            time.Duration
	// AuthenticationProvider, AuthorizationProvider, AuthenticationStrategy
	// and AuthorizationStrategy are AuthConfig's class names: empty or
	// RocketMQ's built-in ones, which rocketkv's checks follow (both
	// strategies check every call).
	AuthenticationProvider, AuthorizationProvider string
	AuthenticationStrategy, AuthorizationStrategy string
	// GroupConfigCacheRefresh is how long a consumer group's policy is
	// used before it is read again from a broker, and
	// GroupConfigCacheMaxNum how many groups' policies are kept.
	GroupConfigCacheRefresh time.Duration
	GroupConfigCacheMaxNum  int
	// UserCacheRefresh is how long a user read from the brokers is used
	// before it is read again (userCacheRefreshSeconds); AuthCacheRefresh
	// is the same for access lists (aclCacheRefreshSeconds).
	UserCacheRefresh time.Duration
	// UserCacheMaxNum and AclCacheMaxNum bound how many users and access
	// lists the proxy keeps.
	UserCacheMaxNum, AclCacheMaxNum int
	// EnableAclRPCHookForClusterMode signs the proxy's Remoting requests
	// with InnerClientAuthenticationCredentials ({"accessKey","secretKey"}),
	// for brokers that check ACL.
	EnableAclRPCHookForClusterMode       bool
	InnerClientAuthenticationCredentials string
	// TLS is the gRPC port's TLS (RocketMQ's tls.server.* keys) and
	// that of the proxy's connections to brokers and name servers when
	// it dials them with TLS (tls.client.*).
	TLS TLS
	// TLSEnable is tls.enable (useTLS): whether the proxy dials brokers
	// and name servers with TLS. "true" or "false"; empty (the default)
	// follows RocketMQ's proxy: TLS when tls.server.mode is enforcing.
	TLSEnable string
	// TLSTestModeEnable, TLSCertPath and TLSKeyPath are RocketMQ proxy's
	// own certificate keys for its gRPC port (tlsTestModeEnable,
	// tlsCertPath, tlsKeyPath): with test mode off and no
	// tls.server.certPath, the port's certificate and key are read from
	// TLSCertPath and TLSKeyPath.
	TLSTestModeEnable       bool
	TLSCertPath, TLSKeyPath string
	// TLSCertWatchInterval is how often the files of the gRPC port's
	// certificate and key are read for a change (tlsCertWatchIntervalMs,
	// RocketMQ 5.3.4): once both have changed the port serves the new
	// pair to the connections that follow.
	TLSCertWatchInterval time.Duration
	// GrpcShutdownTime is how long a shutdown waits for calls in progress
	// before it cuts them (grpcShutdownTimeSeconds).
	GrpcShutdownTime time.Duration
	// EnableMessageBodyEmptyCheck refuses messages with an empty body.
	EnableMessageBodyEmptyCheck bool
	// MaxTransactionRecovery bounds a transaction message's orphaned
	// transaction recovery time; 0 or less means no bound
	// (maxTransactionRecoverySecond).
	MaxTransactionRecovery time.Duration
	// EnableTopicMessageTypeCheck refuses messages whose type is not their
	// topic's, and tells producers to check it themselves.
	EnableTopicMessageTypeCheck bool
	// UseEndpointPortFromRequest answers routes with the port the client
	// named in its request rather than the proxy's gRPC port.
	UseEndpointPortFromRequest bool
	// MetricCollectorMode (off or on) and MetricCollectorAddress
	// (host:port) tell clients where to export their metrics.
	MetricCollectorMode, MetricCollectorAddress string
	// InvisibleTimeWhenClear is how soon the messages a client was
	// renewing become visible again once the client has gone away
	// (invisibleTimeMillisWhenClear).
	InvisibleTimeWhenClear time.Duration
	// ProxyProtocol says which connections may open with a PROXY protocol
	// header.
	ProxyProtocol ProxyProtocol
	// LogLevel is trace, debug, info, warn or error.
	LogLevel string
	// LogFormat is auto, console or json.
	LogFormat string
	// Log is where the log lines go: standard error, or a rolled file
	// (proxy.log) in Log.Dir. A proxy run in the broker's process
	// (--enable-proxy) writes to the broker's log.
	Log LogFile
}

// proxyFields is the single list of keys the proxy understands; proxy.yaml
// documents each (a test checks both agree).
var proxyFields = slices.Concat([]field[Proxy]{
	oneOf("proxyMode", "cluster", []string{"cluster"}, func(p *Proxy) *string { return &p.ProxyMode }),
	intRange("grpcServerPort", "8081", 0, 65535, func(p *Proxy) *int { return &p.GrpcServerPort }),
	str("bindAddress", "0.0.0.0", func(p *Proxy) *string { return &p.BindAddress }),
	nameServerList("namesrvAddr", "127.0.0.1:9876", proxyNameServerSeps, func(p *Proxy) *string { return &p.NamesrvAddr }),
	str("namesrvDomain", "", func(p *Proxy) *string { return &p.NamesrvDomain }),
	str("namesrvDomainSubgroup", "", func(p *Proxy) *string { return &p.NamesrvDomainSubgroup }),
	intRange("maxMessageSize", "4194304", 1, 1<<30, func(p *Proxy) *int { return &p.MaxMessageSize }),
	intRange("maxUserPropertySize", "16384", 1, 1<<30, func(p *Proxy) *int { return &p.MaxUserPropertySize }),
	intRange("userPropertyMaxNum", "128", 1, 1<<20, func(p *Proxy) *int { return &p.UserPropertyMaxNum }),
	intRange("maxMessageGroupSize", "64", -1<<31, 1<<20, func(p *Proxy) *int { return &p.MaxMessageGroupSize }),
	millisRange("maxDelayTimeMills", "86400000", -1<<40, func(p *Proxy) *time.Duration { return &p.MaxDelayTime }),
	millis("minInvisibleTimeMillsForRecv", "10000", func(p *Proxy) *time.Duration { return &p.MinInvisibleTimeForRecv }),
	millisRange("maxInvisibleTimeMills", "43200000", 1, func(p *Proxy) *time.Duration { return &p.MaxInvisibleTime }),
	millisRange("defaultInvisibleTimeMills", "60000", 1, func(p *Proxy) *time.Duration { return &p.DefaultInvisibleTime }),
	millisRange("grpcClientConsumerMinLongPollingTimeoutMillis", "5000", 1, func(p *Proxy) *time.Duration { return &p.MinLongPollingTimeout }),
	millisRange("grpcClientConsumerMaxLongPollingTimeoutMillis", "20000", 1, func(p *Proxy) *time.Duration { return &p.MaxLongPollingTimeout }),
	intRange("grpcClientConsumerLongPollingBatchSize", "32", 1, 1024, func(p *Proxy) *int { return &p.LongPollingBatchSize }),
	intRange("grpcClientProducerMaxAttempts", "3", 1, 1000, func(p *Proxy) *int { return &p.ProducerMaxAttempts }),
	millis("grpcClientProducerBackoffInitialMillis", "10", func(p *Proxy) *time.Duration { return &p.ProducerBackoffInitial }),
	millis("grpcClientProducerBackoffMaxMillis", "1000", func(p *Proxy) *time.Duration { return &p.ProducerBackoffMax }),
	intRange("grpcClientProducerBackoffMultiplier", "2", 1, 1000, func(p *Proxy) *int { return &p.ProducerBackoffMultiplier }),
	boolean("enableProxyAutoRenew", "true", func(p *Proxy) *bool { return &p.EnableProxyAutoRenew }),
	millis("renewAheadTimeMillis", "10000", func(p *Proxy) *time.Duration { return &p.RenewAheadTime }),
	millisRange("renewMaxTimeMillis", "10800000", 1, func(p *Proxy) *time.Duration { return &p.RenewMaxTime }),
	millisRange("renewSchedulePeriodMillis", "5000", 1, func(p *Proxy) *time.Duration { return &p.RenewSchedulePeriod }),
	intRange("maxRenewRetryTimes", "3", 0, 1000, func(p *Proxy) *int { return &p.MaxRenewRetryTimes }),
	millisRange("grpcClientIdleTimeMills", "120000", 1, func(p *Proxy) *time.Duration { return &p.ClientIdleTime }),
	seconds("topicRouteServiceCacheRefreshSeconds", "20", func(p *Proxy) *time.Duration { return &p.TopicRouteCacheRefresh }),
	seconds("topicRouteServiceCacheExpiredSeconds", "300", func(p *Proxy) *time.Duration { return &p.TopicRouteCacheExpired }),
	intRange("topicRouteServiceCacheMaxNum", "20000", 1, 1<<26, func(p *Proxy) *int { return &p.TopicRouteCacheMaxNum }),
	secondsFrom0("subscriptionGroupConfigCacheRefreshSeconds", "20", func(p *Proxy) *time.Duration { return &p.GroupConfigCacheRefresh }),
	intRange("subscriptionGroupConfigCacheMaxNum", "20000", 1, 1<<26, func(p *Proxy) *int { return &p.GroupConfigCacheMaxNum }),
	intRange("grpcMaxInboundMessageSize", "136314880", 1024, 1<<31-1, func(p *Proxy) *int { return &p.GrpcMaxInboundMessageSize }),
	boolean("authenticationEnabled", "false", func(p *Proxy) *bool { return &p.AuthenticationEnabled }),
	boolean("authorizationEnabled", "false", func(p *Proxy) *bool { return &p.AuthorizationEnabled }),
	className("authenticationMetadataProvider", func(p *Proxy) *string { return &p.AuthenticationMetadataProvider }, ProxyAuthenticationMetadataProvider),
	className("authorizationMetadataProvider", func(p *Proxy) *string { return &p.AuthorizationMetadataProvider }, ProxyAuthorizationMetadataProvider),
	className("authenticationProvider", func(p *Proxy) *string { return &p.AuthenticationProvider }, DefaultAuthenticationProvider),
	className("authorizationProvider", func(p *Proxy) *string { return &p.AuthorizationProvider }, DefaultAuthorizationProvider),
	className("authenticationStrategy", func(p *Proxy) *string { return &p.AuthenticationStrategy }, StatelessAuthenticationStrategy, StatefulAuthenticationStrategy),
	className("authorizationStrategy", func(p *Proxy) *string { return &p.AuthorizationStrategy }, StatelessAuthorizationStrategy, StatefulAuthorizationStrategy),
	// ProxyConfig's cache keys, which RocketMQ's proxy reads users and
	// access lists from the brokers with (ClusterMetadataService); the
	// AuthConfig keys of nearly the same names (aclCacheRefreshSecond,
	// ...) size a broker's local caches and are inert here.
	secondsFrom0("userCacheRefreshSeconds", "20", func(p *Proxy) *time.Duration { return &p.UserCacheRefresh }),
	secondsFrom0("aclCacheRefreshSeconds", "20", func(p *Proxy) *time.Duration { return &p.AuthCacheRefresh }),
	intRange("userCacheMaxNum", "20000", 1, 1<<26, func(p *Proxy) *int { return &p.UserCacheMaxNum }),
	intRange("aclCacheMaxNum", "20000", 1, 1<<26, func(p *Proxy) *int { return &p.AclCacheMaxNum }),
	boolean("enableAclRpcHookForClusterMode", "false", func(p *Proxy) *bool { return &p.EnableAclRPCHookForClusterMode }),
	checkedSecret("innerClientAuthenticationCredentials", func(raw string) error { _, _, err := ParseInnerCredentials(raw); return err },
		func(p *Proxy) *string { return &p.InnerClientAuthenticationCredentials }),
}, tlsServerFields(func(p *Proxy) *TLS { return &p.TLS }), tlsClientFields(func(p *Proxy) *TLS { return &p.TLS }), []field[Proxy]{
	tlsEnableField(func(p *Proxy) *string { return &p.TLSEnable }),
	boolean("tlsTestModeEnable", "true", func(p *Proxy) *bool { return &p.TLSTestModeEnable }),
	str("tlsCertPath", "", func(p *Proxy) *string { return &p.TLSCertPath }),
	str("tlsKeyPath", "", func(p *Proxy) *string { return &p.TLSKeyPath }),
	// A Java int of milliseconds; below 1 RocketMQ's watcher would spin.
	millisRange("tlsCertWatchIntervalMs", "3600000", 1, func(p *Proxy) *time.Duration { return &p.TLSCertWatchInterval }),
	secondsFrom0("grpcShutdownTimeSeconds", "30", func(p *Proxy) *time.Duration { return &p.GrpcShutdownTime }),
	boolean("enableMessageBodyEmptyCheck", "true", func(p *Proxy) *bool { return &p.EnableMessageBodyEmptyCheck }),
	inUnit("maxTransactionRecoverySecond", "3600", time.Second, "seconds", -1<<32, 1<<32, func(p *Proxy) *time.Duration { return &p.MaxTransactionRecovery }),
	boolean("enableTopicMessageTypeCheck", "true", func(p *Proxy) *bool { return &p.EnableTopicMessageTypeCheck }),
	boolean("useEndpointPortFromRequest", "false", func(p *Proxy) *bool { return &p.UseEndpointPortFromRequest }),
	metricCollectorMode(func(p *Proxy) *string { return &p.MetricCollectorMode }),
	hostPort("metricCollectorAddress", "", func(p *Proxy) *string { return &p.MetricCollectorAddress }),
	millis("invisibleTimeMillisWhenClear", "1000", func(p *Proxy) *time.Duration { return &p.InvisibleTimeWhenClear }),
}, proxyProtocolFields(func(p *Proxy) *ProxyProtocol { return &p.ProxyProtocol }), []field[Proxy]{
	oneOf("logLevel", "info", []string{"trace", "debug", "info", "warn", "error"}, func(p *Proxy) *string { return &p.LogLevel }),
	oneOf("logFormat", "auto", []string{"auto", "console", "json"}, func(p *Proxy) *string { return &p.LogFormat }),
}, logFileFields(proxyLogMaxSizeMiB, proxyLogMaxRolled, func(p *Proxy) *LogFile { return &p.Log }))

// Values of metricCollectorMode.
const (
	MetricCollectorOff = "off"
	MetricCollectorOn  = "on"
)

// metricCollectorMode reads metricCollectorMode: off or on, in any case.
// RocketMQ's third mode, proxy, has clients export their metrics to the
// proxy's own endpoint, where rocketkv serves no collector: it is refused.
func metricCollectorMode(ptr func(*Proxy) *string) field[Proxy] {
	f := oneOf("metricCollectorMode", MetricCollectorOff, []string{MetricCollectorOff, MetricCollectorOn}, ptr)
	set := f.set
	f.set = func(p *Proxy, raw string) error {
		if strings.EqualFold(raw, "proxy") {
			return fmt.Errorf("%q: rocketkv's proxy collects no client metrics; set on with metricCollectorAddress to name a collector, or off", raw)
		}
		return set(p, raw)
	}
	return f
}

// The metadata providers RocketMQ's proxy reads users and access lists
// through: from the brokers, as rocketkv's proxy always does.
const (
	ProxyAuthenticationMetadataProvider = "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider"
	ProxyAuthorizationMetadataProvider  = "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider"
)

// secondsFrom0 reads a duration in whole seconds, 0 included.
func secondsFrom0[T any](key, def string, ptr func(*T) *time.Duration) field[T] {
	return inUnit(key, def, time.Second, "seconds", 0, 1<<31-1, ptr)
}

// proxySchema is the proxy's key table with its lookups.
var proxySchema = newSchema(proxyFields, nil).withInert(proxyInert)

// DefaultProxy returns RocketMQ proxy's defaults.
func DefaultProxy() Proxy { return proxySchema.defaults() }

// LoadedProxy is the outcome of reading a proxy configuration.
type LoadedProxy struct {
	// Proxy is the resulting configuration.
	Proxy Proxy
	// UnknownKeys lists keys of the file the proxy does not know.
	UnknownKeys []string
	// InertKeys lists keys accepted without effect, with the reason.
	InertKeys []InertKey
}

// LoadProxy reads a proxy configuration: path may be empty (defaults
// only), RocketMQ's rmq-proxy.json (JSON), a properties file or YAML;
// overrides win over the file and must name known keys.
func LoadProxy(path string, overrides map[string]string) (LoadedProxy, error) {
	return LoadProxyFrom(path, nil, []Source{{Name: "override", Values: overrides}})
}

// LoadProxyFrom is LoadProxy with each setting's origin named, as
// LoadBrokerFrom: defaults replace the built-in ones and give way to the
// file and the overrides (what RocketMQ's proxy takes from its
// environment, NAMESRV_ADDR, or, run in a broker, from the broker), and a
// later source wins over an earlier one. An error in a source starts with
// its Name.
func LoadProxyFrom(path string, defaults, overrides []Source) (LoadedProxy, error) {
	out := LoadedProxy{Proxy: DefaultProxy()}
	inerts, err := loadLayers(proxySchema, &out.Proxy, path, defaults, overrides, &out.UnknownKeys)
	if err != nil {
		return LoadedProxy{}, err
	}
	if out.Proxy.MaxLongPollingTimeout < out.Proxy.MinLongPollingTimeout {
		return LoadedProxy{}, fmt.Errorf("grpcClientConsumerMaxLongPollingTimeoutMillis (%v) is below grpcClientConsumerMinLongPollingTimeoutMillis (%v)",
			out.Proxy.MaxLongPollingTimeout, out.Proxy.MinLongPollingTimeout)
	}
	if out.Proxy.MetricCollectorMode == MetricCollectorOn && out.Proxy.MetricCollectorAddress == "" {
		return LoadedProxy{}, fmt.Errorf("metricCollectorMode on needs metricCollectorAddress, the host:port clients export their metrics to")
	}
	if out.Proxy.MaxInvisibleTime < out.Proxy.MinInvisibleTimeForRecv {
		return LoadedProxy{}, fmt.Errorf("maxInvisibleTimeMills (%v) is below minInvisibleTimeMillsForRecv (%v)",
			out.Proxy.MaxInvisibleTime, out.Proxy.MinInvisibleTimeForRecv)
	}
	out.InertKeys = report(inerts, &out.Proxy)
	return out, nil
}

// ProxyKeys returns every key the proxy understands, in table order.
func ProxyKeys() []string { return proxySchema.keys() }

// ListenAddr is the gRPC listen address: bindAddress and grpcServerPort.
func (p *Proxy) ListenAddr() string { return listenAddr(p.BindAddress, p.GrpcServerPort) }

// proxyNameServerSeps separate the proxy's namesrvAddr list: ';', as
// RocketMQ's proxy splits it (MQClientAPIImpl.updateNameServerAddressList),
// and ','.
const proxyNameServerSeps = ";,"

// NamesrvAddrs splits namesrvAddr at ';' (and ','), trimming spaces and
// dropping blanks.
func (p *Proxy) NamesrvAddrs() []string { return splitNameServers(p.NamesrvAddr, proxyNameServerSeps) }

// DialTLS reports whether the proxy dials brokers and name servers with
// TLS: tls.enable, or when it is empty, whether tls.server.mode is
// enforcing, as RocketMQ's proxy defaults the useTLS of its clients
// (NettyClientConfig).
func (p *Proxy) DialTLS() bool { return DialTLS(p.TLSEnable, p.TLS.Mode) }

// Settings returns every key's current value as text under its canonical
// name.
func (p *Proxy) Settings() map[string]string { return proxySchema.settings(p) }
