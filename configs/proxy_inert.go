package configs

import (
	"fmt"
	"slices"
	"strings"
)

// proxyInert lists the rest of RocketMQ 5.3's ProxyConfig and AuthConfig
// keys (both are read from the same rmq-proxy.json), which rocketkv's
// proxy accepts without effect, each with the reason: Java thread pools
// and their queues (each call runs on its own goroutine), RocketMQ's
// Remoting proxy and its local mode (rocketkv's brokers serve Remoting
// clients themselves), metrics exporters the proxy does not have, and
// caches rocketkv's proxy keeps otherwise. Like the broker's inert keys,
// ignoring any of them cannot change what a gRPC client is answered;
// keys whose values would are fields (proxyFields) or are warned about
// when set to such a value.
var proxyInert = slices.Concat(
	inertInts[Proxy](reasonProxyThreadPool, "grpcBossLoopNum", "grpcWorkerLoopNum", "grpcThreadPoolNums",
		"grpcThreadPoolQueueCapacity", "grpcProducerThreadPoolNums", "grpcProducerThreadQueueCapacity",
		"grpcConsumerThreadPoolNums", "grpcConsumerThreadQueueCapacity", "grpcRouteThreadPoolNums",
		"grpcRouteThreadQueueCapacity", "grpcClientManagerThreadPoolNums", "grpcClientManagerThreadQueueCapacity",
		"grpcTransactionThreadPoolNums", "grpcTransactionThreadQueueCapacity", "renewThreadPoolNums",
		"renewMaxThreadPoolNums", "renewThreadPoolQueueCapacity", "topicRouteServiceThreadPoolNums",
		"topicRouteServiceThreadPoolQueueCapacity", "producerProcessorThreadPoolNums",
		"producerProcessorThreadPoolQueueCapacity", "consumerProcessorThreadPoolNums",
		"consumerProcessorThreadPoolQueueCapacity", "metadataThreadPoolNums", "metadataThreadPoolQueueCapacity",
		"transactionHeartbeatThreadPoolNums", "transactionHeartbeatThreadPoolQueueCapacity"),
	inertInts[Proxy]("the timeout of a Java lock around a message's receipt handles; rocketkv's renewals take a Go mutex held only to read and update them",
		"lockTimeoutMsInHandleGroup"),
	inertBools[Proxy]("a Java thread dump logged periodically; rocketkv's proxy has no thread pools to watch (Go's runtime/pprof serves goroutine dumps)",
		"enablePrintJstack"),
	inertInts[Proxy]("the period of a Java thread dump or thread pool status log; rocketkv's proxy has no thread pools to watch",
		"printJstackInMillis", "printThreadPoolStatusInMillis"),
	inertBools[Proxy]("a Netty transport choice; Go's network poller uses epoll on Linux whatever the value", "enableGrpcEpoll"),

	// RocketMQ's Remoting proxy: rocketkv's brokers serve Remoting
	// clients directly.
	inertInts[Proxy](reasonRemotingProxy, "remotingListenPort", "localProxyConnectTimeoutMs",
		"remotingHeartbeatThreadPoolNums", "remotingTopicRouteThreadPoolNums", "remotingSendMessageThreadPoolNums",
		"remotingPullMessageThreadPoolNums", "remotingUpdateOffsetThreadPoolNums", "remotingDefaultThreadPoolNums",
		"remotingHeartbeatThreadPoolQueueCapacity", "remotingTopicRouteThreadPoolQueueCapacity",
		"remotingSendThreadPoolQueueCapacity", "remotingPullThreadPoolQueueCapacity",
		"remotingUpdateOffsetThreadPoolQueueCapacity", "remotingDefaultThreadPoolQueueCapacity",
		"remotingWaitTimeMillsInSendQueue", "remotingWaitTimeMillsInPullQueue", "remotingWaitTimeMillsInHeartbeatQueue",
		"remotingWaitTimeMillsInUpdateOffsetQueue", "remotingWaitTimeMillsInTopicRouteQueue",
		"remotingWaitTimeMillsInDefaultQueue"),
	inertBools[Proxy](reasonRemotingProxy, "enableRemotingLocalProxyGrpc", "traceOn"),
	inertStrings[Proxy](reasonRemotingProxy, "remotingAccessAddr", "regionId"),

	// Cluster names, proxy names and the heartbeat sync between proxies.
	inertStrings[Proxy]("the proxy serves the brokers of every cluster the name servers know; RocketMQ's proxy uses it for its local-mode broker, its heartbeat-sync topic and its auth configuration's cluster name",
		"rocketMQClusterName"),
	inertStrings[Proxy]("RocketMQ labels its proxy's metrics with it; rocketkv's proxy exports no metrics", "proxyClusterName"),
	inertStrings[Proxy]("RocketMQ labels its proxy's metrics with it and names its auth configuration after it; rocketkv's proxy exports no metrics and has no auth configuration of its own to name",
		"proxyName"),
	inertStrings[Proxy](reasonHeartbeatSync, "localServeAddr", "heartbeatSyncerTopicClusterName", "heartbeatSyncerTopicName"),
	inertInts[Proxy](reasonHeartbeatSync, "heartbeatSyncerThreadPoolNums", "heartbeatSyncerThreadPoolQueueCapacity"),
	inertStrings[Proxy]("read only in RocketMQ's local mode (the broker a proxy embeds); rocketkv accepts only proxyMode cluster",
		"brokerConfigPath"),
	[]inert[Proxy]{
		whenNot("sendLatencyEnable", "false", "RocketMQ's proxy then avoids brokers that answered sends slowly or failed; rocketkv's picks write queues round robin (by message group for FIFO messages)",
			"sends are not steered away from slow brokers"),
		whenNot("startDetectorEnable", "false", "RocketMQ's proxy then probes brokers it marked unavailable for sends; rocketkv's marks none",
			"no broker is probed"),
		whenNot("metricsExporterType", "DISABLE", "rocketkv's proxy exports no metrics (its brokers serve Prometheus metrics)",
			"no proxy metrics are exported"),
		whenNotEmpty("authenticationWhitelist", "RocketMQ skips authentication for the gRPC request names it lists; rocketkv's proxy authenticates every call",
			"the calls it names are authenticated all the same"),
		whenNotEmpty("authorizationWhitelist", "RocketMQ skips authorization for the gRPC request names it lists; rocketkv's proxy authorizes every call",
			"the calls it names are authorized all the same"),
	},
	inertInts[Proxy]("read only with sendLatencyEnable or startDetectorEnable, whose fault detection rocketkv's proxy does not have",
		"detectTimeout", "detectInterval"),
	inertStrings[Proxy]("read only by metrics exporters (metricsExporterType), which rocketkv's proxy does not have",
		"metricsGrpcExporterTarget", "metricsGrpcExporterHeader", "metricsPromExporterHost", "metricsLabel"),
	inertInts[Proxy]("read only by metrics exporters (metricsExporterType), which rocketkv's proxy does not have",
		"metricGrpcExporterTimeOutInMills", "metricGrpcExporterIntervalInMills", "metricLoggingExporterIntervalInMills",
		"metricsPromExporterPort"),
	inertBools[Proxy]("read only by metrics exporters (metricsExporterType), which rocketkv's proxy does not have", "metricsInDelta"),

	// Caches and housekeeping kept otherwise.
	inertInts[Proxy]("a topic's message type is read with its route and refreshed with it (topicRouteServiceCacheRefreshSeconds); there is no topic config cache",
		"topicConfigCacheExpiredSeconds", "topicConfigCacheRefreshSeconds", "topicConfigCacheMaxNum"),
	inertInts[Proxy]("a cached consumer group's policy is refreshed in the background after subscriptionGroupConfigCacheRefreshSeconds; only subscriptionGroupConfigCacheMaxNum drops policies",
		"subscriptionGroupConfigCacheExpiredSeconds"),
	inertInts[Proxy]("a cached user or access list is refreshed in the background after userCacheRefreshSeconds or aclCacheRefreshSeconds; only the count bounds (userCacheMaxNum, aclCacheMaxNum) drop them",
		"userCacheExpiredSeconds", "aclCacheExpiredSeconds"),
	inertInts[Proxy]("producers are registered with the masters of their topics at each of their heartbeats and settings; there are no batched transaction-producer heartbeats",
		"transactionHeartbeatPeriodSecond", "transactionHeartbeatBatchNum"),
	inertInts[Proxy]("RocketMQ's proxy drops a consumer that sent no heartbeat for this long; rocketkv's forgets a client after grpcClientIdleTimeMills without a call, and the brokers expire the consumers it registers",
		"channelExpiredTimeout"),
	inertInts[Proxy]("RocketMQ forgets a sent or checked half message for its EndTransaction after transactionDataExpireMillis (30 s), keeping 15 per transaction id; rocketkv's proxy remembers it for an hour from its send or latest check, 100,000 at most",
		"transactionDataExpireScanPeriodMillis", "transactionDataMaxWaitClearMillis", "transactionDataExpireMillis",
		"transactionDataMaxNum"),
	inertInts[Proxy]("RocketMQ expires requests its proxy never answered on a client channel (a bug it logs); rocketkv's calls end with their own deadlines",
		"channelExpiredInSeconds"),
	inertInts[Proxy]("the size of RocketMQ's pool of Remoting clients to brokers; rocketkv's proxy shares one connection pool among all calls",
		"rocketmqMQClientNum"),
	inertInts[Proxy]("RocketMQ waits this long for a client's answer to a command relayed from a broker (a thread stack, a message check); rocketkv's proxy relays only transaction checks, which need no answer",
		"grpcProxyRelayRequestTimeoutInSeconds"),
	inertInts[Proxy](reasonUnread, "contextExpiredInSeconds", "longPollingReserveTimeInMillis"),
	inertBools[Proxy]("an AckMessage's entries are acknowledged one request each, as RocketMQ's default (false); its batch mode sends one request per broker, with the same outcome per entry",
		"enableBatchAck"),
	inertBools[Proxy]("RocketMQ's proxy then also gives delayed messages the delay level nearest their delivery time, for brokers without timer messages; rocketkv's brokers deliver at the exact time",
		"useDelayLevel"),
	inertStrings[Proxy]("read only with useDelayLevel, which rocketkv's proxy does not act on", "messageDelayLevel"),

	// AuthConfig keys that act in a broker or RocketMQ's local mode.
	inertStrings[Proxy]("RocketMQ sets it from proxyName and rocketMQClusterName, whatever the file says", "configName", "clusterName"),
	inertStrings[Proxy]("read by RocketMQ's local auth metadata store (a broker's); the proxy reads users and access lists from the brokers",
		"authConfigPath"),
	inertStrings[Proxy]("the brokers create the first user (their initAuthenticationUser); the proxy reads users from them",
		"initAuthenticationUser"),
	inertBools[Proxy]("the brokers import ACL 1.0 accounts (their migrateAuthFromV1Enabled); the proxy reads users from them",
		"migrateAuthFromV1Enabled"),
	inertInts[Proxy]("AuthConfig's cache setting of a broker's local store; the proxy's caches are set by the ProxyConfig keys userCacheRefreshSeconds, aclCacheRefreshSeconds, userCacheMaxNum and aclCacheMaxNum",
		"userCacheExpiredSecond", "userCacheRefreshSecond", "aclCacheExpiredSecond", "aclCacheRefreshSecond"),
	inertInts[Proxy]("the stateful strategies' cache of a connection's checks; rocketkv's proxy checks every call",
		"statefulAuthenticationCacheMaxNum", "statefulAuthenticationCacheExpiredSecond",
		"statefulAuthorizationCacheMaxNum", "statefulAuthorizationCacheExpiredSecond"),
)

// Reasons shared by several of proxyInert's keys.
const (
	reasonProxyThreadPool = "a Java thread pool's size or queue; rocketkv's proxy runs each call on its own goroutine"
	reasonRemotingProxy   = "a setting of RocketMQ's proxy for Remoting clients; rocketkv's proxy serves gRPC clients only, and its brokers serve Remoting clients directly"
	reasonHeartbeatSync   = "RocketMQ's proxies share Remoting consumers' heartbeats through a system topic; rocketkv's proxy serves gRPC clients only, whose calls each proxy answers itself"
)

// whenNot is an inert key of any value that is warned about when it is
// not def (in any case): the value asks for something rocketkv does not
// do; warning says what.
func whenNot(key, def, reason, warning string) inert[Proxy] {
	return inert[Proxy]{key: key, reason: reason, parse: func(string) error { return nil },
		warn: func(_ *Proxy, raw string) string {
			if raw == "" || strings.EqualFold(raw, def) {
				return ""
			}
			return fmt.Sprintf("%s=%s is not acted on: %s", key, raw, warning)
		}}
}

// whenNotEmpty is whenNot for a key whose default is empty.
func whenNotEmpty(key, reason, warning string) inert[Proxy] {
	return whenNot(key, "", reason, warning)
}
