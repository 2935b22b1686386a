package configs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// rocketMQ53ProxyKeys are the keys RocketMQ 5.3.3's proxy reads from
// rmq-proxy.json: every field of ProxyConfig and of AuthConfig (the file
// is read into both).
var rocketMQ53ProxyKeys = strings.Fields(`
rocketMQClusterName proxyClusterName proxyName localServeAddr heartbeatSyncerTopicClusterName
heartbeatSyncerThreadPoolNums heartbeatSyncerThreadPoolQueueCapacity heartbeatSyncerTopicName
enablePrintJstack printJstackInMillis printThreadPoolStatusInMillis namesrvAddr namesrvDomain
namesrvDomainSubgroup tlsTestModeEnable tlsKeyPath tlsCertPath proxyMode grpcServerPort
grpcShutdownTimeSeconds grpcBossLoopNum grpcWorkerLoopNum enableGrpcEpoll grpcThreadPoolNums
grpcThreadPoolQueueCapacity brokerConfigPath grpcMaxInboundMessageSize maxMessageSize
enableMessageBodyEmptyCheck maxUserPropertySize userPropertyMaxNum maxMessageGroupSize
defaultInvisibleTimeMills minInvisibleTimeMillsForRecv maxInvisibleTimeMills maxDelayTimeMills
maxTransactionRecoverySecond enableTopicMessageTypeCheck grpcClientProducerMaxAttempts
grpcClientProducerBackoffInitialMillis grpcClientProducerBackoffMaxMillis
grpcClientProducerBackoffMultiplier grpcClientConsumerMinLongPollingTimeoutMillis
grpcClientConsumerMaxLongPollingTimeoutMillis grpcClientConsumerLongPollingBatchSize
grpcClientIdleTimeMills channelExpiredInSeconds contextExpiredInSeconds rocketmqMQClientNum
grpcProxyRelayRequestTimeoutInSeconds grpcProducerThreadPoolNums grpcProducerThreadQueueCapacity
grpcConsumerThreadPoolNums grpcConsumerThreadQueueCapacity grpcRouteThreadPoolNums
grpcRouteThreadQueueCapacity grpcClientManagerThreadPoolNums grpcClientManagerThreadQueueCapacity
grpcTransactionThreadPoolNums grpcTransactionThreadQueueCapacity producerProcessorThreadPoolNums
producerProcessorThreadPoolQueueCapacity consumerProcessorThreadPoolNums
consumerProcessorThreadPoolQueueCapacity useEndpointPortFromRequest
topicRouteServiceCacheExpiredSeconds topicRouteServiceCacheRefreshSeconds
topicRouteServiceCacheMaxNum topicRouteServiceThreadPoolNums
topicRouteServiceThreadPoolQueueCapacity topicConfigCacheExpiredSeconds
topicConfigCacheRefreshSeconds topicConfigCacheMaxNum subscriptionGroupConfigCacheExpiredSeconds
subscriptionGroupConfigCacheRefreshSeconds subscriptionGroupConfigCacheMaxNum
userCacheExpiredSeconds userCacheRefreshSeconds userCacheMaxNum aclCacheExpiredSeconds
aclCacheRefreshSeconds aclCacheMaxNum metadataThreadPoolNums metadataThreadPoolQueueCapacity
transactionHeartbeatThreadPoolNums transactionHeartbeatThreadPoolQueueCapacity
transactionHeartbeatPeriodSecond transactionHeartbeatBatchNum transactionDataExpireScanPeriodMillis
transactionDataMaxWaitClearMillis transactionDataExpireMillis transactionDataMaxNum
longPollingReserveTimeInMillis invisibleTimeMillisWhenClear enableProxyAutoRenew maxRenewRetryTimes
renewThreadPoolNums renewMaxThreadPoolNums renewThreadPoolQueueCapacity lockTimeoutMsInHandleGroup
renewAheadTimeMillis renewMaxTimeMillis renewSchedulePeriodMillis enableAclRpcHookForClusterMode
useDelayLevel messageDelayLevel metricCollectorMode metricCollectorAddress regionId traceOn
metricsExporterType metricsGrpcExporterTarget metricsGrpcExporterHeader
metricGrpcExporterTimeOutInMills metricGrpcExporterIntervalInMills
metricLoggingExporterIntervalInMills metricsPromExporterPort metricsPromExporterHost metricsLabel
metricsInDelta channelExpiredTimeout enableRemotingLocalProxyGrpc localProxyConnectTimeoutMs
remotingAccessAddr remotingListenPort sendLatencyEnable startDetectorEnable detectTimeout
detectInterval remotingHeartbeatThreadPoolNums remotingTopicRouteThreadPoolNums
remotingSendMessageThreadPoolNums remotingPullMessageThreadPoolNums
remotingUpdateOffsetThreadPoolNums remotingDefaultThreadPoolNums
remotingHeartbeatThreadPoolQueueCapacity remotingTopicRouteThreadPoolQueueCapacity
remotingSendThreadPoolQueueCapacity remotingPullThreadPoolQueueCapacity
remotingUpdateOffsetThreadPoolQueueCapacity remotingDefaultThreadPoolQueueCapacity
remotingWaitTimeMillsInSendQueue remotingWaitTimeMillsInPullQueue
remotingWaitTimeMillsInHeartbeatQueue remotingWaitTimeMillsInUpdateOffsetQueue
remotingWaitTimeMillsInTopicRouteQueue remotingWaitTimeMillsInDefaultQueue enableBatchAck

configName clusterName authConfigPath authenticationEnabled authenticationProvider
authenticationMetadataProvider authenticationStrategy authenticationWhitelist
initAuthenticationUser innerClientAuthenticationCredentials authorizationEnabled
authorizationProvider authorizationMetadataProvider authorizationStrategy authorizationWhitelist
migrateAuthFromV1Enabled userCacheMaxNum userCacheExpiredSecond userCacheRefreshSecond
aclCacheMaxNum aclCacheExpiredSecond aclCacheRefreshSecond statefulAuthenticationCacheMaxNum
statefulAuthenticationCacheExpiredSecond statefulAuthorizationCacheMaxNum
statefulAuthorizationCacheExpiredSecond

tlsCertWatchIntervalMs`) // added by RocketMQ 5.3.4 (develop 8fc57f1468)

// Every key RocketMQ 5.3's proxy reads is known to the proxy's schema,
// as a key that acts or as an inert one, never both.
func TestProxyKnowsEveryRocketMQ53Key(t *testing.T) {
	for _, k := range rocketMQ53ProxyKeys {
		_, field := proxySchema.lookup(k)
		_, inert := proxySchema.lookupInert(k)
		if field == inert {
			t.Errorf("%s: a key %v, inert %v; want exactly one", k, field, inert)
		}
	}
}

// An rmq-proxy.json holding every key of RocketMQ 5.3.3's ProxyConfig and
// AuthConfig at RocketMQ's default (testdata, written from their field
// initialisers, thread counts for two processors) loads with nothing
// unknown and nothing warned about, to rocketkv's defaults but for the
// two certificate paths, which rocketkv has no RocketMQ home to default.
func TestProxyRocketMQ53DefaultsFile(t *testing.T) {
	got, err := LoadProxy("testdata/rmq-proxy-rocketmq533-defaults.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UnknownKeys) != 0 {
		t.Errorf("unknown keys %v", got.UnknownKeys)
	}
	for _, k := range got.InertKeys {
		if k.Reason == "" || k.Warning != "" {
			t.Errorf("%s=%s: reason %q, warning %q", k.Key, k.Value, k.Reason, k.Warning)
		}
	}
	want := DefaultProxy()
	want.TLSCertPath, want.TLSKeyPath = "/opt/rocketmq/conf/tls/rocketmq.crt", "/opt/rocketmq/conf/tls/rocketmq.key"
	if !reflect.DeepEqual(got.Proxy, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", got.Proxy, want)
	}
}

// The ProxyConfig keys act and the AuthConfig keys of nearly the same
// names, which size a broker's local caches, do not.
func TestProxyAuthCacheKeys(t *testing.T) {
	got, err := LoadProxy(testutil.WriteFile(t, "rmq-proxy.json", `{"aclCacheRefreshSeconds": 5, "userCacheRefreshSeconds": 7,
  "aclCacheMaxNum": 10, "userCacheMaxNum": 11, "aclCacheRefreshSecond": 60, "userCacheRefreshSecond": 60}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	x := got.Proxy
	if x.AuthCacheRefresh != 5*time.Second || x.UserCacheRefresh != 7*time.Second || x.AclCacheMaxNum != 10 || x.UserCacheMaxNum != 11 {
		t.Errorf("acl refresh %v, user refresh %v, acl max %d, user max %d; want 5s, 7s, 10, 11",
			x.AuthCacheRefresh, x.UserCacheRefresh, x.AclCacheMaxNum, x.UserCacheMaxNum)
	}
	var inert []string
	for _, k := range got.InertKeys {
		inert = append(inert, k.Key)
	}
	if !reflect.DeepEqual(inert, []string{"aclCacheRefreshSecond", "userCacheRefreshSecond"}) {
		t.Errorf("inert %v, want AuthConfig's aclCacheRefreshSecond and userCacheRefreshSecond", inert)
	}
}

// Inert keys whose value asks for something rocketkv's proxy does not do
// are warned about, naming what is not done; at RocketMQ's defaults they
// are not.
func TestProxyInertKeysWarn(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"metricsExporterType", "PROM", "no proxy metrics"},
		{"sendLatencyEnable", "true", "slow brokers"},
		{"startDetectorEnable", "true", "probed"},
		{"authenticationWhitelist", "apache.rocketmq.v2.QueryRouteRequest", "authenticated all the same"},
		{"authorizationWhitelist", "apache.rocketmq.v2.QueryRouteRequest", "authorized all the same"},
	} {
		got, err := LoadProxy(testutil.WriteFile(t, "rmq-proxy.properties", "namesrvAddr=10.0.0.1:9876\n"+tc.key+"="+tc.value+"\n"), nil)
		if err != nil {
			t.Fatalf("%s=%s: %v", tc.key, tc.value, err)
		}
		if len(got.InertKeys) != 1 || !strings.Contains(got.InertKeys[0].Warning, tc.want) || !strings.Contains(got.InertKeys[0].Warning, tc.key) {
			t.Errorf("%s=%s: inert %+v; want a warning naming the key and %q", tc.key, tc.value, got.InertKeys, tc.want)
		}
	}
	got, err := LoadProxy(testutil.WriteFile(t, "rmq-proxy.properties", "metricsExporterType=disable\nsendLatencyEnable=false\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range got.InertKeys {
		if k.Warning != "" {
			t.Errorf("%s=%s warned %q", k.Key, k.Value, k.Warning)
		}
	}
}

// metricCollectorMode takes off and on (any case), on only with a
// collector's address; RocketMQ's proxy mode, whose collector rocketkv's
// proxy does not have, and other values are errors naming the key.
func TestProxyMetricCollectorMode(t *testing.T) {
	got, err := LoadProxy("", map[string]string{"metricCollectorMode": "ON", "metricCollectorAddress": "otel.example.com:4317"})
	if err != nil || got.Proxy.MetricCollectorMode != MetricCollectorOn || got.Proxy.MetricCollectorAddress != "otel.example.com:4317" {
		t.Errorf("on: %+v, %v", got.Proxy, err)
	}
	for _, o := range []map[string]string{
		{"metricCollectorMode": "proxy"},
		{"metricCollectorMode": "sometimes"},
		{"metricCollectorMode": "on"},
		{"metricCollectorMode": "on", "metricCollectorAddress": "otel.example.com"},
	} {
		if _, err := LoadProxy("", o); err == nil || !strings.Contains(err.Error(), "metricCollector") {
			t.Errorf("%v: error %v, want one naming the key", o, err)
		}
	}
}

// maxTransactionRecoverySecond takes 0 and negative values (no bound, as
// RocketMQ reads them) and refuses what is not a number, naming the key.
func TestProxyMaxTransactionRecoverySecond(t *testing.T) {
	got, err := LoadProxy("", map[string]string{"maxTransactionRecoverySecond": "-1"})
	if err != nil || got.Proxy.MaxTransactionRecovery != -time.Second {
		t.Errorf("-1: %v, %v", got.Proxy.MaxTransactionRecovery, err)
	}
	if _, err := LoadProxy("", map[string]string{"maxTransactionRecoverySecond": "1h"}); err == nil || !strings.Contains(err.Error(), "maxTransactionRecoverySecond") {
		t.Errorf("1h: error %v, want one naming the key", err)
	}
}

// maxMessageGroupSize and maxDelayTimeMills take 0 and negative values,
// which RocketMQ's proxy reads as no bound.
func TestProxyNoBoundValues(t *testing.T) {
	got, err := LoadProxy("", map[string]string{"maxMessageGroupSize": "0", "maxDelayTimeMills": "-1"})
	if err != nil || got.Proxy.MaxMessageGroupSize != 0 || got.Proxy.MaxDelayTime != -time.Millisecond {
		t.Errorf("%d, %v, %v; want 0 and -1ms", got.Proxy.MaxMessageGroupSize, got.Proxy.MaxDelayTime, err)
	}
}
