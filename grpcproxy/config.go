package grpcproxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/listenconf"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
)

// Config configures a proxy. The defaults are RocketMQ proxy's
// (ProxyConfig); the comments name its keys.
type Config struct {
	// Addr is the gRPC listen address (grpcServerPort 8081).
	Addr string
	// NamesrvAddrs are the name servers asked for routes (namesrvAddr),
	// unless AddressServer is set.
	NamesrvAddrs []string
	// AddressServer, when not empty, is the URL of the HTTP address
	// server asked for the name server list instead of NamesrvAddrs
	// (namesrvDomain and namesrvDomainSubgroup, see
	// namesrv.AddressServerURL): at Start, AddressServerDelay later and
	// every AddressServerPeriod after (RocketMQ's 10 s and 2 min).
	AddressServer                           string
	AddressServerDelay, AddressServerPeriod time.Duration
	// RequestTimeout bounds each Remoting request to a broker or name
	// server, long polling excluded.
	RequestTimeout time.Duration
	// RouteTTL is how long a topic's route is reused before it is asked
	// again (topicRouteServiceCacheRefreshSeconds, 20 s); RouteIdle how
	// long a route no call asks for is kept (0: for ever), and
	// RouteCacheSize how many routes are kept, the least recently used
	// dropped first (topicRouteServiceCacheExpiredSeconds 300 s,
	// topicRouteServiceCacheMaxNum 20,000).
	RouteTTL       time.Duration
	RouteIdle      time.Duration
	RouteCacheSize int
	// MaxMessageSize is the largest body accepted (maxMessageSize, 4 MiB).
	MaxMessageSize int
	// MaxUserPropertySize bounds the bytes of a message's user properties,
	// tag and keys together (maxUserPropertySize, 16 KiB).
	MaxUserPropertySize int
	// UserPropertyMaxNum bounds how many user properties a message has
	// (userPropertyMaxNum, 128).
	UserPropertyMaxNum int
	// MaxMessageGroupSize bounds a message group's bytes, 0 or less not at
	// all
	// (maxMessageGroupSize, 64).
	MaxMessageGroupSize int
	// MaxDelay is the latest a delivery time may lie ahead, 0 or less
	// any time
	// (maxDelayTimeMills, one day).
	MaxDelay time.Duration
	// MinInvisible and MaxInvisible bound a receive's invisible duration
	// (minInvisibleTimeMillsForRecv 10 s, maxInvisibleTimeMills 12 h).
	MinInvisible, MaxInvisible time.Duration
	// DefaultInvisible is the invisible time of messages received with
	// auto_renew (defaultInvisibleTimeMills, 60 s).
	DefaultInvisible time.Duration
	// MinLongPolling and MaxLongPolling bound a receive's long polling
	// (grpcClientConsumerMinLongPollingTimeoutMillis 5 s,
	// grpcClientConsumerMaxLongPollingTimeoutMillis 20 s).
	MinLongPolling, MaxLongPolling time.Duration
	// ReceiveBatchSize is the batch size consumers are told to use
	// (grpcClientConsumerLongPollingBatchSize, 32).
	ReceiveBatchSize int
	// ProducerMaxAttempts, ProducerBackoffInitial, ProducerBackoffMax and
	// ProducerBackoffMultiplier are the send retry policy producers are
	// told (grpcClientProducerMaxAttempts 3, ...BackoffInitialMillis 10,
	// ...BackoffMaxMillis 1000, ...BackoffMultiplier 2).
	ProducerMaxAttempts       int
	ProducerBackoffInitial    time.Duration
	ProducerBackoffMax        time.Duration
	ProducerBackoffMultiplier float32
	// AutoRenew turns on the renewal of handles received with auto_renew
	// (enableProxyAutoRenew, true); RenewAhead is how long before a
	// handle's expiry it is renewed (renewAheadTimeMillis, 10 s), RenewMax
	// how long a message is renewed at most (renewMaxTimeMillis, 3 h) and
	// RenewPeriod how often the renewals are looked at
	// (renewSchedulePeriodMillis, 5 s). RenewPolicy is the invisible
	// time of a message's n-th renewal, the last one for later renewals
	// (RocketMQ proxy's RenewStrategyPolicy: 1 m, 3 m, 5 m, 10 m, 30 m,
	// 1 h); MaxRenewRetry is how often a renewal that did not reach its
	// broker is tried again (maxRenewRetryTimes, 3). A message renewed for
	// RenewMax is given back: visible again after its group's retry
	// pause.
	AutoRenew                         bool
	RenewAhead, RenewMax, RenewPeriod time.Duration
	RenewPolicy                       []time.Duration
	MaxRenewRetry                     int
	// ClientIdle is how long a client's settings and renewals are kept
	// after its last request (grpcClientIdleTimeMills, 120 s).
	ClientIdle time.Duration
	// MaxRecvMsgSize bounds one gRPC request (grpcMaxInboundMessageSize,
	// 130 MiB).
	MaxRecvMsgSize int
	// Remoting configures the connections to brokers and name servers:
	// its TLS, when set, dials them with TLS (tls.enable, tls.client.*).
	Remoting remoting.ClientOptions
	// TLSMode and TLS are the gRPC port's TLS (RocketMQ's tls.server.*
	// keys): disabled serves plaintext, permissive both on one port,
	// enforcing TLS only.
	TLSMode remoting.TLSMode
	TLS     *tls.Config
	// CertWatch, when its interval and paths are set, has the gRPC port
	// take a new certificate once its files both change (RocketMQ 5.3.4's
	// TlsCertificateManager); TLS's certificate is the one served until
	// then.
	CertWatch CertWatch
	// ProxyProtocol says which peers may open a gRPC connection with a
	// PROXY protocol header, as on the Remoting ports (the zero value:
	// any peer, as RocketMQ's proxy).
	ProxyProtocol remoting.ProxyProtocol
	// Authentication checks that each call is signed by a user the
	// brokers have (authenticationEnabled); Authorization checks the
	// user's access list for what the call does (authorizationEnabled).
	// Users and access lists are read from the brokers and kept for
	// AuthCacheTTL (aclCacheRefreshSeconds).
	Authentication, Authorization bool
	AuthCacheTTL                  time.Duration
	// InnerAccessKey and InnerSecretKey sign the proxy's own Remoting
	// requests, for brokers that check ACL (RocketMQ proxy's
	// innerClientAuthenticationCredentials with
	// enableAclRpcHookForClusterMode); empty sends them unsigned.
	InnerAccessKey, InnerSecretKey string
	// GroupPolicyTTL is how long a consumer group's policy read from a
	// broker is used before it is read again, and GroupPolicySize how many
	// groups' policies are kept (subscriptionGroupConfigCacheRefreshSeconds
	// 20 s, subscriptionGroupConfigCacheMaxNum 20,000).
	GroupPolicyTTL  time.Duration
	GroupPolicySize int
	// UserCacheTTL is how long a user read from the brokers is used
	// before it is read again (userCacheRefreshSeconds), as AuthCacheTTL
	// is for access lists; UserCacheSize and ACLCacheSize bound how many
	// of each are kept (userCacheMaxNum, aclCacheMaxNum, 20,000).
	UserCacheTTL                time.Duration
	UserCacheSize, ACLCacheSize int
	// ShutdownTimeout bounds how long Shutdown waits for calls in
	// progress before it cuts them (grpcShutdownTimeSeconds, 30 s); 0
	// leaves the bound to Shutdown's context.
	ShutdownTimeout time.Duration
	// CheckEmptyBody refuses messages with an empty body
	// (enableMessageBodyEmptyCheck, true).
	CheckEmptyBody bool
	// MaxTransactionRecovery bounds a transaction message's orphaned
	// transaction recovery time; 0 or less sets no bound
	// (maxTransactionRecoverySecond, an hour).
	MaxTransactionRecovery time.Duration
	// CheckMessageType refuses messages whose type is not their topic's
	// and tells producers to check it (enableTopicMessageTypeCheck, true).
	CheckMessageType bool
	// EndpointPortFromRequest answers routes with the port the client
	// named rather than the proxy's (useEndpointPortFromRequest, false).
	EndpointPortFromRequest bool
	// MetricCollector, host:port, is where clients are told to export
	// their metrics (metricCollectorMode on, metricCollectorAddress);
	// empty tells them not to.
	MetricCollector string
	// ClearInvisible is how soon the messages a client gone away was
	// renewing become visible again (invisibleTimeMillisWhenClear, 1 s).
	ClearInvisible time.Duration
	// Log receives the proxy's log lines.
	Log zerolog.Logger
}

// DefaultConfig returns RocketMQ proxy's defaults with name servers at
// 127.0.0.1:9876.
func DefaultConfig() Config {
	return Config{
		Addr:                      ":8081",
		NamesrvAddrs:              []string{"127.0.0.1:9876"},
		AddressServerDelay:        10 * time.Second,
		AddressServerPeriod:       2 * time.Minute,
		RequestTimeout:            5 * time.Second,
		RouteTTL:                  20 * time.Second,
		RouteIdle:                 300 * time.Second,
		RouteCacheSize:            20_000,
		MaxMessageSize:            4 << 20,
		MaxUserPropertySize:       16 << 10,
		UserPropertyMaxNum:        128,
		MaxMessageGroupSize:       64,
		MaxDelay:                  24 * time.Hour,
		MinInvisible:              10 * time.Second,
		MaxInvisible:              12 * time.Hour,
		DefaultInvisible:          60 * time.Second,
		MinLongPolling:            5 * time.Second,
		MaxLongPolling:            20 * time.Second,
		ReceiveBatchSize:          32,
		ProducerMaxAttempts:       3,
		ProducerBackoffInitial:    10 * time.Millisecond,
		ProducerBackoffMax:        time.Second,
		ProducerBackoffMultiplier: 2,
		AutoRenew:                 true,
		RenewAhead:                10 * time.Second,
		RenewMax:                  3 * time.Hour,
		RenewPeriod:               5 * time.Second,
		RenewPolicy:               []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour},
		MaxRenewRetry:             3,
		ClientIdle:                120 * time.Second,
		MaxRecvMsgSize:            130 << 20,
		AuthCacheTTL:              20 * time.Second,
		GroupPolicyTTL:            20 * time.Second,
		GroupPolicySize:           20_000,
		UserCacheTTL:              20 * time.Second,
		UserCacheSize:             20_000,
		ACLCacheSize:              20_000,
		ShutdownTimeout:           30 * time.Second,
		CheckEmptyBody:            true,
		MaxTransactionRecovery:    time.Hour,
		CheckMessageType:          true,
		ClearInvisible:            time.Second,
		Log:                       zerolog.Nop(),
	}
}

// validate reports the first setting a proxy cannot run with.
func (c *Config) validate() error {
	switch {
	case len(c.NamesrvAddrs) == 0 && c.AddressServer == "":
		return errors.New("grpcproxy: no name server address (namesrvAddr) and no address server (namesrvDomain)")
	case c.AddressServer != "" && (c.AddressServerDelay <= 0 || c.AddressServerPeriod <= 0):
		return fmt.Errorf("grpcproxy: address server %s: delay %v and period %v must be positive", c.AddressServer, c.AddressServerDelay, c.AddressServerPeriod)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("grpcproxy: request timeout %v is not positive", c.RequestTimeout)
	case c.MinLongPolling <= 0 || c.MaxLongPolling < c.MinLongPolling:
		return fmt.Errorf("grpcproxy: long polling bounds %v..%v are not a range", c.MinLongPolling, c.MaxLongPolling)
	case c.MinInvisible < 0 || c.MaxInvisible < c.MinInvisible:
		return fmt.Errorf("grpcproxy: invisible time bounds %v..%v are not a range", c.MinInvisible, c.MaxInvisible)
	case c.AutoRenew && (c.RenewPeriod <= 0 || c.DefaultInvisible <= c.RenewAhead):
		return fmt.Errorf("grpcproxy: auto-renewal needs a positive period and a default invisible time (%v) above the renew-ahead time (%v)", c.DefaultInvisible, c.RenewAhead)
	case c.AutoRenew && (len(c.RenewPolicy) == 0 || slices.Min(c.RenewPolicy) <= c.RenewAhead):
		return fmt.Errorf("grpcproxy: auto-renewal needs renewal invisible times (%v) above the renew-ahead time (%v)", c.RenewPolicy, c.RenewAhead)
	case c.ReceiveBatchSize <= 0 || c.MaxMessageSize <= 0:
		return errors.New("grpcproxy: batch size and message size must be positive")
	}
	if c.AddressServer != "" {
		if u, err := url.Parse(c.AddressServer); err != nil || u.Scheme != "http" || u.Hostname() == "" {
			return fmt.Errorf("grpcproxy: namesrvDomain, namesrvDomainSubgroup: %q is no URL to ask for the name servers", c.AddressServer)
		}
		return nil // namesrvAddr is not used
	}
	if err := configs.CheckNameServerAddrs(c.NamesrvAddrs); err != nil {
		return fmt.Errorf("grpcproxy: namesrvAddr: %w", err)
	}
	return nil
}

// CheckConfig returns the error a proxy of these configuration keys would
// not start with (ConfigFrom's, then New's), without starting anything:
// bin/proxy -p runs it, so that what it prints as the configuration that
// would run does start.
func CheckConfig(p configs.Proxy) error {
	c, err := ConfigFrom(p, zerolog.Nop())
	if err != nil {
		return err
	}
	return c.validate()
}

// ConfigFrom builds a proxy's Config from its configuration keys; a TLS
// certificate or key that cannot be loaded is an error naming the key.
func ConfigFrom(p configs.Proxy, log zerolog.Logger) (Config, error) {
	c := DefaultConfig()
	t, ownKeys := proxyTLS(p)
	mode, tc, err := tlsconf.Listener("proxy", t, log.With().Str("component", "grpcproxy").Logger())
	if err != nil && ownKeys {
		// The error names tls.server.*, which the file may not have set.
		return c, fmt.Errorf("tlsTestModeEnable=false, tlsCertPath %q, tlsKeyPath %q: %w", p.TLSCertPath, p.TLSKeyPath, err)
	}
	if err != nil {
		return c, err
	}
	c.TLSMode, c.TLS = mode, tc
	if tc != nil {
		// The files tlsconf.Listener loaded the certificate from, the
		// keys of tls.config.file applied (none: self-signed).
		if resolved, _, err := t.WithConfigFile(); err == nil && resolved.CertPath != "" {
			c.CertWatch = CertWatch{Interval: p.TLSCertWatchInterval, CertPath: resolved.CertPath,
				KeyPath: resolved.KeyPath, KeyPassword: resolved.KeyPassword}
		}
	}
	// The connections to brokers and name servers (tls.enable,
	// tls.client.*), as RocketMQ's proxy dials them.
	if c.Remoting.TLS, err = tlsconf.Client("proxy", p.DialTLS(), p.TLS, log.With().Str("component", "grpcproxy").Logger()); err != nil {
		return c, err
	}
	c.Addr = p.ListenAddr()
	c.NamesrvAddrs = p.NamesrvAddrs()
	// A namesrvDomain wins over namesrvAddr, as in RocketMQ's proxy.
	c.AddressServer = addressServerOf(p.NamesrvDomain, p.NamesrvDomainSubgroup)
	c.RouteTTL, c.RouteIdle, c.RouteCacheSize = p.TopicRouteCacheRefresh, p.TopicRouteCacheExpired, p.TopicRouteCacheMaxNum
	c.MaxMessageSize = p.MaxMessageSize
	c.MaxUserPropertySize = p.MaxUserPropertySize
	c.UserPropertyMaxNum = p.UserPropertyMaxNum
	c.MaxMessageGroupSize = p.MaxMessageGroupSize
	c.MaxDelay = p.MaxDelayTime
	c.MinInvisible, c.MaxInvisible, c.DefaultInvisible = p.MinInvisibleTimeForRecv, p.MaxInvisibleTime, p.DefaultInvisibleTime
	c.MinLongPolling, c.MaxLongPolling = p.MinLongPollingTimeout, p.MaxLongPollingTimeout
	c.ReceiveBatchSize = p.LongPollingBatchSize
	c.ProducerMaxAttempts = p.ProducerMaxAttempts
	c.ProducerBackoffInitial, c.ProducerBackoffMax = p.ProducerBackoffInitial, p.ProducerBackoffMax
	c.ProducerBackoffMultiplier = float32(p.ProducerBackoffMultiplier)
	c.AutoRenew = p.EnableProxyAutoRenew
	c.RenewAhead, c.RenewMax, c.RenewPeriod = p.RenewAheadTime, p.RenewMaxTime, p.RenewSchedulePeriod
	c.MaxRenewRetry = p.MaxRenewRetryTimes
	c.ClientIdle = p.ClientIdleTime
	c.MaxRecvMsgSize = p.GrpcMaxInboundMessageSize
	c.ProxyProtocol = listenconf.ProxyProtocol(p.ProxyProtocol)
	c.Authentication, c.Authorization, c.AuthCacheTTL = p.AuthenticationEnabled, p.AuthorizationEnabled, p.AuthCacheRefresh
	c.UserCacheTTL, c.UserCacheSize, c.ACLCacheSize = p.UserCacheRefresh, p.UserCacheMaxNum, p.AclCacheMaxNum
	c.GroupPolicyTTL, c.GroupPolicySize = p.GroupConfigCacheRefresh, p.GroupConfigCacheMaxNum
	c.ShutdownTimeout = p.GrpcShutdownTime
	c.CheckEmptyBody = p.EnableMessageBodyEmptyCheck
	c.MaxTransactionRecovery = p.MaxTransactionRecovery
	c.CheckMessageType = p.EnableTopicMessageTypeCheck
	c.EndpointPortFromRequest = p.UseEndpointPortFromRequest
	if p.MetricCollectorMode == configs.MetricCollectorOn {
		c.MetricCollector = p.MetricCollectorAddress
	}
	c.ClearInvisible = p.InvisibleTimeWhenClear
	if p.EnableAclRPCHookForClusterMode {
		creds, ok, err := configs.ParseInnerCredentials(p.InnerClientAuthenticationCredentials)
		if err != nil {
			return c, fmt.Errorf("innerClientAuthenticationCredentials: %w", err)
		}
		if !ok {
			return c, errors.New("enableAclRpcHookForClusterMode needs innerClientAuthenticationCredentials, the account the proxy signs its requests to brokers as")
		}
		c.InnerAccessKey, c.InnerSecretKey = creds.AccessKey, creds.SecretKey
	}
	c.Log = log
	return c, nil
}

// proxyTLS is the gRPC port's TLS keys with RocketMQ proxy's own
// certificate keys applied: tlsTestModeEnable=false turns the self-signed
// certificate off and, unless tls.server.certPath or tls.server.keyPath
// names a certificate, takes tlsCertPath and tlsKeyPath (ownKeys then
// tells).
func proxyTLS(p configs.Proxy) (t configs.TLS, ownKeys bool) {
	t = p.TLS
	if !p.TLSTestModeEnable {
		t.TestModeEnable = false
		if t.CertPath == "" && t.KeyPath == "" {
			t.CertPath, t.KeyPath = p.TLSCertPath, p.TLSKeyPath
			ownKeys = true
		}
	}
	return t, ownKeys
}
