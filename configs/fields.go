package configs

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/meta"
)

// field binds one configuration key (and its historical aliases) to a field
// of a configuration struct T (Broker, Namesrv). Values are parsed from
// their text form, whether they came from a properties file, YAML or a
// command-line flag, so every source accepts the same spellings. get
// writes the field's current value in a text set accepts, so what is
// reported (GET_BROKER_CONFIG, GET_NAMESRV_CONFIG) is the configuration in
// force, however it was built.
type field[T any] struct {
	key     string
	aliases []string
	def     string
	set     func(c *T, raw string) error
	get     func(c *T) string
	// value, when set, is the value itself where get reports it masked
	// (a secret): what tells a change.
	value func(c *T) string
}

// DefaultMaxDispatchLagBytes is the default of maxDispatchLagBytes: at the
// dispatcher's rate on a small machine (100-300k records of 1 KiB a
// second) it keeps a consumer's view of the log within about 20-70 ms.
const DefaultMaxDispatchLagBytes = 4 << 20

// brokerFields is the single list of keys the broker understands. Adding a
// key means adding a line here and documenting it in broker.yaml (a test
// checks both agree).
var brokerFields = slices.Concat([]field[Broker]{
	nonEmpty("brokerClusterName", "DefaultCluster", "the broker registers with the name servers under its cluster's name (RocketMQ's default is DefaultCluster)", func(b *Broker) *string { return &b.BrokerClusterName }),
	nonEmpty("brokerName", "broker-a", "routes name the broker group by it, and the broker creates a topic of that name", func(b *Broker) *string { return &b.BrokerName }),
	i64("brokerId", "0", func(b *Broker) *int64 { return &b.BrokerID }),
	str("brokerIP1", "", func(b *Broker) *string { return &b.BrokerIP1 }),
	intRange("listenPort", "10911", 0, 65535, func(b *Broker) *int { return &b.ListenPort }),
	str("bindAddress", "0.0.0.0", func(b *Broker) *string { return &b.BindAddress }),
	nameServerList("namesrvAddr", "", ";", func(b *Broker) *string { return &b.NamesrvAddr }),
	oneOf("brokerRole", "ASYNC_MASTER", []string{"ASYNC_MASTER", "SYNC_MASTER", "SLAVE"}, func(b *Broker) *string { return &b.BrokerRole }),
	intRange("brokerPermission", "6", 0, 15, func(b *Broker) *int { return &b.BrokerPermission }),
	str("regionId", "DefaultRegion", func(b *Broker) *string { return &b.RegionID }),
	boolean("traceOn", "true", func(b *Broker) *bool { return &b.TraceOn }),
	boolean("storeReplyMessageEnable", "true", func(b *Broker) *bool { return &b.StoreReplyMessageEnable }),

	intRange("fastListenPort", "0", -1, 65535, func(b *Broker) *int { return &b.FastListenPort }),
	host("brokerIP2", "", func(b *Broker) *string { return &b.BrokerIP2 }),
	intRange("haListenPort", "0", -1, 65535, func(b *Broker) *int { return &b.HAListenPort }),
	hostPort("haMasterAddress", "", func(b *Broker) *string { return &b.HAMasterAddress }),
	millisRange("haSendHeartbeatInterval", "5000", 1, func(b *Broker) *time.Duration { return &b.HASendHeartbeatInterval }),
	millisRange("haHousekeepingInterval", "20000", 1, func(b *Broker) *time.Duration { return &b.HAHousekeepingInterval }),
	intRange("haTransferBatchSize", "32768", 1, 4<<20-12, func(b *Broker) *int { return &b.HATransferBatchSize }),
	i64Range("haMaxGapNotInSync", "268435456", 1, 1<<50, func(b *Broker) *int64 { return &b.HAMaxGapNotInSync }),
	boolean("haFlowControlEnable", "false", func(b *Broker) *bool { return &b.HAFlowControlEnable }),
	i64Range("maxHaTransferByteInSecond", "104857600", 1, math.MaxInt64, func(b *Broker) *int64 { return &b.MaxHATransferByteInSecond }),
	millisRange("slaveTimeout", "3000", 1, func(b *Broker) *time.Duration { return &b.SlaveTimeout }),
	intRange("inSyncReplicas", "1", 1, 64, func(b *Broker) *int { return &b.InSyncReplicas }),
	intRange("minInSyncReplicas", "1", 1, 64, func(b *Broker) *int { return &b.MinInSyncReplicas }),
	boolean("slaveReadEnable", "false", func(b *Broker) *bool { return &b.SlaveReadEnable }),
	boolean("disableConsumeIfConsumerReadSlowly", "false", func(b *Broker) *bool { return &b.DisableConsumeIfConsumerReadSlowly }),
	i64Range("consumerFallbehindThreshold", "17179869184", 0, math.MaxInt64, func(b *Broker) *int64 { return &b.ConsumerFallbehindThreshold }),
	boolean("coldDataFlowControlEnable", "false", func(b *Broker) *bool { return &b.ColdDataFlowControlEnable }),
	i64Range("cgColdReadThreshold", "3145728", 0, math.MaxInt64, func(b *Broker) *int64 { return &b.CgColdReadThreshold }),
	i64Range("globalColdReadThreshold", "104857600", 0, math.MaxInt64, func(b *Broker) *int64 { return &b.GlobalColdReadThreshold }),
	boolean("coldCtrStrategyEnable", "false", func(b *Broker) *bool { return &b.ColdCtrStrategyEnable }),
	boolean("usePIDColdCtrStrategy", "true", func(b *Broker) *bool { return &b.UsePIDColdCtrStrategy }),
	intRange("accessMessageInMemoryMaxRatio", "40", 0, 100, func(b *Broker) *int { return &b.AccessMessageInMemoryMaxRatio }),
	// A Java int, unchecked as RocketMQ's: above 100 nothing in a log
	// shorter than that share of memory is cold by distance, below 0
	// every read is.
	intRange("accessMessageInMemoryHotRatio", "26", math.MinInt32, math.MaxInt32, func(b *Broker) *int { return &b.AccessMessageInMemoryHotRatio }),
	boolean("coldDataScanEnable", "false", func(b *Broker) *bool { return &b.ColdDataScanEnable }),
	// A Java int, unchecked as RocketMQ's: 0 or below is 32 (the scan's
	// default) when the broker starts.
	intRange("sampleSteps", "32", math.MinInt32, math.MaxInt32, func(b *Broker) *int { return &b.SampleSteps }),
	// A Java int of milliseconds; 0 or below, which makes RocketMQ's scan
	// loop spin, is refused.
	inUnit("timerColdDataCheckIntervalMs", "60000", time.Millisecond, "milliseconds", 1, math.MaxInt32, func(b *Broker) *time.Duration { return &b.TimerColdDataCheckInterval }),
	// RocketMQ 5's other replication modes are not there: a file that
	// turns one on is refused rather than run with classic HA unnoticed.
	// RocketMQ 5's controller mode: the broker's id and role come from
	// a controller (broker.Supervisor). Periods and timeouts are Java
	// longs of milliseconds; RocketMQ's scheduler refuses a period of 0
	// or below, rocketkv refuses it in the file.
	boolean("enableControllerMode", "false", func(b *Broker) *bool { return &b.EnableControllerMode }),
	str("controllerAddr", "", func(b *Broker) *string { return &b.ControllerAddr }),
	boolean("fetchControllerAddrByDnsLookup", "false", func(b *Broker) *bool { return &b.FetchControllerAddrByDNSLookup }),
	millisRange("syncBrokerMetadataPeriod", "5000", 1, func(b *Broker) *time.Duration { return &b.SyncBrokerMetadataPeriod }),
	millisRange("checkSyncStateSetPeriod", "5000", 1, func(b *Broker) *time.Duration { return &b.CheckSyncStateSetPeriod }),
	millisRange("syncControllerMetadataPeriod", "10000", 1, func(b *Broker) *time.Duration { return &b.SyncControllerMetadataPeriod }),
	millisRange("controllerHeartBeatTimeoutMills", "10000", 1, func(b *Broker) *time.Duration { return &b.ControllerHeartBeatTimeout }),
	intRange("brokerElectionPriority", "2147483647", math.MinInt32, math.MaxInt32, func(b *Broker) *int { return &b.BrokerElectionPriority }),
	boolean("allAckInSyncStateSet", "false", func(b *Broker) *bool { return &b.AllAckInSyncStateSet }),
	millisRange("haMaxTimeSlaveNotCatchup", "15000", 1, func(b *Broker) *time.Duration { return &b.HAMaxTimeSlaveNotCatchup }),
	boolean("syncFromLastFile", "false", func(b *Broker) *bool { return &b.SyncFromLastFile }),
	boolean("asyncLearner", "false", func(b *Broker) *bool { return &b.AsyncLearner }),
	str("storePathEpochFile", "", func(b *Broker) *string { return &b.StorePathEpochFile }),
	str("storePathBrokerIdentity", "", func(b *Broker) *string { return &b.StorePathBrokerIdentity }),
	notImplemented[Broker]("enableDLegerCommitLog", "rocketkv replicates with RocketMQ's master-slave HA (brokerRole) and controller mode's AutoSwitch HA; a DLedger CommitLog is not there (bin/kvdump import-dledger moves a DLedger store's messages to a rocketkv store)"),
	// RocketMQ 5's slave acting master: the slave of the smallest id in
	// a group without its master reports itself acting (see broker.yaml
	// for what it does and does not do then).
	boolean("enableSlaveActingMaster", "false", func(b *Broker) *bool { return &b.EnableSlaveActingMaster }),
	boolean("compatibleWithOldNameSrv", "true", func(b *Broker) *bool { return &b.CompatibleWithOldNameSrv }),
	boolean("syncMasterFlushOffsetWhenStartup", "false", func(b *Broker) *bool { return &b.SyncMasterFlushOffsetWhenStartup }),
	boolean("enableRemoteEscape", "false", func(b *Broker) *bool { return &b.EnableRemoteEscape }),
	// Java ints of milliseconds; RocketMQ's scheduler refuses a period of
	// 0 or below at start, rocketkv refuses it in the file.
	millisRange("syncBrokerMemberGroupPeriod", "1000", 1, func(b *Broker) *time.Duration { return &b.SyncBrokerMemberGroupPeriod }),
	millisRange("brokerHeartbeatInterval", "1000", 1, func(b *Broker) *time.Duration { return &b.BrokerHeartbeatInterval }),
	millis("brokerNotActiveTimeoutMillis", "10000", func(b *Broker) *time.Duration { return &b.BrokerNotActiveTimeout }),
	millis("sendHeartbeatTimeoutMillis", "1000", func(b *Broker) *time.Duration { return &b.SendHeartbeatTimeout }),

	boolean("autoCreateTopicEnable", "true", func(b *Broker) *bool { return &b.AutoCreateTopicEnable }),
	boolean("autoCreateSubscriptionGroup", "true", func(b *Broker) *bool { return &b.AutoCreateSubscriptionGroup }),
	boolean("enableCreateSysGroup", "true", func(b *Broker) *bool { return &b.EnableCreateSysGroup }),
	str("configBlackList", "configBlackList;brokerConfigPath", func(b *Broker) *string { return &b.ConfigBlackList }),
	boolean("enableSplitMetadata", "true", func(b *Broker) *bool { return &b.EnableSplitMetadata }),
	// A Java int, unchecked as RocketMQ's: a page size that comes out
	// below 1 has a paged request refused.
	intRange("splitMetadataSize", "2000", math.MinInt32, math.MaxInt32, func(b *Broker) *int { return &b.SplitMetadataSize }),
	boolean("validateSystemTopicWhenUpdateTopic", "true", func(b *Broker) *bool { return &b.ValidateSystemTopicWhenUpdateTopic }),
	boolean("enableMixedMessageType", "false", func(b *Broker) *bool { return &b.EnableMixedMessageType }),
	boolean("clusterTopicEnable", "true", func(b *Broker) *bool { return &b.ClusterTopicEnable }),
	boolean("brokerTopicEnable", "true", func(b *Broker) *bool { return &b.BrokerTopicEnable }),
	intRange("defaultTopicQueueNums", "8", 1, 65535, func(b *Broker) *int { return &b.DefaultTopicQueueNums }),
	delayLevels("messageDelayLevel", meta.DefaultMessageDelayLevel, func(b *Broker) *string { return &b.MessageDelayLevel }),
	boolean("notifyConsumerIdsChangedEnable", "true", func(b *Broker) *bool { return &b.NotifyConsumerIdsChangedEnable }),
	intRange("maxTransferCountOnMessageInMemory", "32", 1, 1<<20, func(b *Broker) *int { return &b.MaxTransferCountOnMessageInMemory }),
	intRange("maxTransferBytesOnMessageInMemory", "262144", 1, 1<<30, func(b *Broker) *int { return &b.MaxTransferBytesOnMessageInMemory }),
	boolean("traceTopicEnable", "false", func(b *Broker) *bool { return &b.TraceTopicEnable }),
	str("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC", func(b *Broker) *string { return &b.MsgTraceTopicName }),

	millis("registerNameServerPeriod", "30000", func(b *Broker) *time.Duration { return &b.RegisterNameServerPeriod }),
	millis("registerBrokerTimeoutMills", "24000", func(b *Broker) *time.Duration { return &b.RegisterBrokerTimeout }),
	boolean("compressedRegister", "false", func(b *Broker) *bool { return &b.CompressedRegister }),
	boolean("forceRegister", "true", func(b *Broker) *bool { return &b.ForceRegister }),
	boolean("fetchNamesrvAddrByAddressServer", "false", func(b *Broker) *bool { return &b.FetchNamesrvAddrByAddressServer }),
	anyMillis("fetchNamesrvAddrInterval", "10000", func(b *Broker) *time.Duration { return &b.FetchNamesrvAddrInterval }),
	str("rmqAddressServerDomain", "jmenv.tbsite.net", func(b *Broker) *string { return &b.RmqAddressServerDomain }),
	str("rmqAddressServerSubGroup", "nsaddr", func(b *Broker) *string { return &b.RmqAddressServerSubGroup }),
	boolean("fetchNameSrvAddrByDnsLookup", "false", func(b *Broker) *bool { return &b.FetchNameSrvAddrByDnsLookup }),
	anyMillis("updateNameServerAddrPeriod", "120000", func(b *Broker) *time.Duration { return &b.UpdateNameServerAddrPeriod }),
	boolean("enableReconnectForGoAway", "true", func(b *Broker) *bool { return &b.ReconnectForGoAway }),

	millisRange("slaveSyncIntervalMillis", "60000", 1, func(b *Broker) *time.Duration { return &b.SlaveSyncInterval }),

	boolean("longPollingEnable", "true", func(b *Broker) *bool { return &b.LongPollingEnable }),
	boolean("litePullMessageEnable", "true", func(b *Broker) *bool { return &b.LitePullMessageEnable }),
	boolean("initPopOffsetByCheckMsgInMem", "true", func(b *Broker) *bool { return &b.InitPopOffsetByCheckMsgInMem }),
	boolean("rejectPullConsumerEnable", "false", func(b *Broker) *bool { return &b.RejectPullConsumerEnable }),
	boolean("useServerSideResetOffset", "true", func(b *Broker) *bool { return &b.UseServerSideResetOffset }),
	boolean("enablePropertyFilter", "false", func(b *Broker) *bool { return &b.EnablePropertyFilter }),
	boolean("filterSupportRetry", "false", func(b *Broker) *bool { return &b.FilterSupportRetry }),
	boolean("recallMessageEnable", "false", func(b *Broker) *bool { return &b.RecallMessageEnable }),
	i64Range("startAcceptSendRequestTimeStamp", "0", 0, math.MaxInt64, func(b *Broker) *int64 { return &b.StartAcceptSendRequestTimeStamp }),
	boolean("allowRecallWhenBrokerNotWriteable", "true", func(b *Broker) *bool { return &b.AllowRecallWhenBrokerNotWriteable }),
	millis("shortPollingTimeMills", "1000", func(b *Broker) *time.Duration { return &b.ShortPollingTime }),
	millis("channelExpiredTimeout", "120000", func(b *Broker) *time.Duration { return &b.ChannelExpiredTimeout }),
	boolean("enableRetryTopicV2", "false", func(b *Broker) *bool { return &b.EnableRetryTopicV2 }),
	boolean("clearRetryTopicWhenDeleteTopic", "true", func(b *Broker) *bool { return &b.ClearRetryTopicWhenDeleteTopic }),
	oneOf("defaultMessageRequestMode", "PULL", []string{"PULL", "POP"}, func(b *Broker) *string { return &b.DefaultMessageRequestMode }),
	intRange("defaultPopShareQueueNum", "-1", -1, 1<<16, func(b *Broker) *int { return &b.DefaultPopShareQueueNum }),
	boolean("serverLoadBalancerEnable", "true", func(b *Broker) *bool { return &b.ServerLoadBalancerEnable }),
	millis("loadBalancePollNameServerInterval", "30000", func(b *Broker) *time.Duration { return &b.LoadBalancePollNameServerInterval }),
	boolean("retrieveMessageFromPopRetryTopicV1", "true", func(b *Broker) *bool { return &b.RetrieveMessageFromPopRetryTopicV1 }),
	boolean("enableNotifyAfterPopOrderLockRelease", "true", func(b *Broker) *bool { return &b.EnableNotifyAfterPopOrderLockRelease }),
	boolean("popResponseReturnActualRetryTopic", "false", func(b *Broker) *bool { return &b.PopResponseReturnActualRetryTopic }),
	boolean("skipWhenCKRePutReachMaxTimes", "false", func(b *Broker) *bool { return &b.SkipWhenCKRePutReachMaxTimes }),
	millis("popReviveStageAhead", "60000", func(b *Broker) *time.Duration { return &b.PopReviveStageAhead }),
	boolean("enablePopMessageThreshold", "false", func(b *Broker) *bool { return &b.EnablePopMessageThreshold }),
	i64Range("popInflightMessageThreshold", "10000", 0, math.MaxInt64, func(b *Broker) *int64 { return &b.PopInflightMessageThreshold }),
	intRange("popFromRetryProbability", "20", 0, 100, func(b *Broker) *int { return &b.PopFromRetryProbability }),
	intRange("popPollingSize", "1024", 0, 1<<30, func(b *Broker) *int { return &b.PopPollingSize }),
	intRange("maxPopPollingSize", "100000", 0, 1<<30, func(b *Broker) *int { return &b.MaxPopPollingSize }),
	i64Range("popLongPollingForceNotifyInterval", "800", math.MinInt64, math.MaxInt64, func(b *Broker) *int64 { return &b.PopLongPollingForceNotifyInterval }),

	boolean("rejectTransactionMessage", "false", func(b *Broker) *bool { return &b.RejectTransactionMessage }),
	millisRange("transactionTimeOut", "6000", 1, func(b *Broker) *time.Duration { return &b.TransactionTimeOut }),
	millisRange("transactionCheckInterval", "30000", 1, func(b *Broker) *time.Duration { return &b.TransactionCheckInterval }),
	// RocketMQ takes any int; 0 or less gives a half one check.
	intRange("transactionCheckMax", "15", math.MinInt32, 1<<30, func(b *Broker) *int { return &b.TransactionCheckMax }),

	boolean("timerWheelEnable", "true", func(b *Broker) *bool { return &b.TimerWheelEnable }),
	boolean("timerStopDequeue", "false", func(b *Broker) *bool { return &b.TimerStopDequeue }),
	boolean("timerStopEnqueue", "false", func(b *Broker) *bool { return &b.TimerStopEnqueue }),
	boolean("enableScheduleMessageStats", "true", func(b *Broker) *bool { return &b.EnableScheduleMessageStats }),
	boolean("enableCompaction", "true", func(b *Broker) *bool { return &b.EnableCompaction }),
	timerPrecision("timerPrecisionMs", "1000", func(b *Broker) *time.Duration { return &b.TimerPrecision }),
	seconds("timerMaxDelaySec", "259200", func(b *Broker) *time.Duration { return &b.TimerMaxDelay }),
	intRange("timerRollWindowSlot", "172800", 2, 1<<31-1, func(b *Broker) *int { return &b.TimerRollWindowSlot }),
	intRange("timerCongestNumEachSlot", "2147483647", 1, 1<<31-1, func(b *Broker) *int { return &b.TimerCongestNumEachSlot }),

	nonEmpty("storePathRootDir", DefaultStoreRoot(), "the store needs a directory (RocketMQ's default is ~/store)", func(b *Broker) *string { return &b.StorePathRootDir }),
	commitLogPath("storePathCommitLog", func(b *Broker) *string { return &b.StorePathCommitLog }),
	// RocketMQ's own values name the same two layouts: its file
	// ConsumeQueue (default) and its ConsumeQueue in an embedded KV store
	// (defaultRocksDB), so its migration steps read the same here.
	oneOfAliased("storeType", StoreTypeKV, []string{StoreTypeKV, StoreTypeFile},
		map[string]string{"default": StoreTypeFile, "defaultRocksDB": StoreTypeKV}, func(b *Broker) *string { return &b.StoreType }),
	boolean("rocksdbCQDoubleWriteEnable", "false", func(b *Broker) *bool { return &b.CQDoubleWrite }),
	millisRange("flushIntervalConsumeQueue", "1000", 1, func(b *Broker) *time.Duration { return &b.FlushIntervalConsumeQueue }),
	withAliases(i64Range("mappedFileSizeCommitLog", "1073741824", 4096, 1<<40, func(b *Broker) *int64 { return &b.MappedFileSizeCommitLog }), "mapedFileSizeCommitLog"),
	withAliases(i64Range("mappedFileSizeConsumeQueue", "6000000", 20, 1<<32, func(b *Broker) *int64 { return &b.MappedFileSizeConsumeQueue }), "mapedFileSizeConsumeQueue"),
	oneOf("flushDiskType", AsyncFlush, []string{AsyncFlush, SyncFlush}, func(b *Broker) *string { return &b.FlushDiskType }),
	millis("flushIntervalCommitLog", "500", func(b *Broker) *time.Duration { return &b.FlushIntervalCommitLog }),
	intRange("flushCommitLogLeastPages", "4", 0, 1<<20, func(b *Broker) *int { return &b.FlushCommitLogLeastPages }),
	boolean("wakeFlushWhenPutMessage", "false", func(b *Broker) *bool { return &b.WakeFlushWhenPutMessage }),
	millis("flushCommitLogThoroughInterval", "10000", func(b *Broker) *time.Duration { return &b.FlushCommitLogThorough }),
	millis("syncFlushTimeout", "5000", func(b *Broker) *time.Duration { return &b.SyncFlushTimeout }),
	boolean("readUnCommitted", "false", func(b *Broker) *bool { return &b.ReadUnCommitted }),
	intRange("maxMessageSize", "4194304", 1, 1<<30, func(b *Broker) *int { return &b.MaxMessageSize }),
	hours("fileReservedTime", "72", func(b *Broker) *time.Duration { return &b.FileReservedTime }),
	hourList("deleteWhen", "04", func(b *Broker) *[]int { return &b.DeleteWhen }),
	intRange("diskMaxUsedSpaceRatio", "75", 0, 100, func(b *Broker) *int { return &b.DiskMaxUsedSpaceRatio }),
	boolean("cleanFileForciblyEnable", "true", func(b *Broker) *bool { return &b.CleanFileForciblyEnable }),
	intRange("diskSpaceCleanForciblyRatio", "85", 0, 100, func(b *Broker) *int { return &b.DiskSpaceCleanForciblyRatio }),
	intRange("diskSpaceWarningLevelRatio", "90", 0, 100, func(b *Broker) *int { return &b.DiskSpaceWarningLevelRatio }),
	millis("cleanResourceInterval", "10000", func(b *Broker) *time.Duration { return &b.CleanResourceInterval }),
	boolean("checkCRCOnRecover", "true", func(b *Broker) *bool { return &b.CheckCRCOnRecover }),
	boolean("enabledAppendPropCRC", "false", func(b *Broker) *bool { return &b.EnabledAppendPropCRC }),
	boolean("forceVerifyPropCRC", "false", func(b *Broker) *bool { return &b.ForceVerifyPropCRC }),
	boolean("dataReadAheadEnable", "true", func(b *Broker) *bool { return &b.DataReadAheadEnable }),
	str("indexCheckpointDir", "", func(b *Broker) *string { return &b.IndexCheckpointDir }),
	boolean("messageIndexEnable", "true", func(b *Broker) *bool { return &b.MessageIndexEnable }),
	intRange("maxMsgsNumBatch", "64", 1, 1<<16, func(b *Broker) *int { return &b.MaxMsgsNumBatch }),
	intRange("defaultQueryMaxNum", "32", 1, 1<<16, func(b *Broker) *int { return &b.DefaultQueryMaxNum }),
	boolean("enableLmq", "false", func(b *Broker) *bool { return &b.EnableLMQ }),
	boolean("enableMultiDispatch", "false", func(b *Broker) *bool { return &b.EnableMultiDispatch }),
	micros("dispatchBatchIntervalMicros", "500", 1_000_000, func(b *Broker) *time.Duration { return &b.DispatchBatchInterval }),
	i64Range("maxDispatchLagBytes", strconv.FormatInt(DefaultMaxDispatchLagBytes, 10), 0, 1<<40, func(b *Broker) *int64 { return &b.MaxDispatchLagBytes }),
	millis("waitTimeMillsInSendQueue", "200", func(b *Broker) *time.Duration { return &b.WaitTimeMillsInSendQueue }),
	oneOf("indexWalSync", IndexWALSyncAuto, []string{IndexWALSyncAuto, IndexWALSyncAlways, IndexWALSyncInterval}, func(b *Broker) *string { return &b.IndexWALSync }),
	millisRange("indexWalSyncIntervalMillis", "500", 1, func(b *Broker) *time.Duration { return &b.IndexWALSyncInterval }),

	intRange("topicConfigCacheSize", "65536", 16, 1<<26, func(b *Broker) *int { return &b.TopicConfigCacheSize }),
	intRange("queueOffsetCacheSize", "1048576", 16, 1<<28, func(b *Broker) *int { return &b.QueueOffsetCacheSize }),
	intRange("consumeQueueCacheSize", "1048576", 16, 1<<28, func(b *Broker) *int { return &b.ConsumeQueueCacheSize }),
	intRange("indexBlockCacheMiB", "128", 8, 1<<20, func(b *Broker) *int { return &b.IndexBlockCacheMiB }),
	intRange("gcPercent", "100", 25, 10000, func(b *Broker) *int { return &b.GCPercent }),
	intRange("memoryLimitMiB", "0", 0, 1<<30, func(b *Broker) *int { return &b.MemoryLimitMiB }),
	intRange("goMaxProcs", "0", 0, 1<<16, func(b *Broker) *int { return &b.GoMaxProcs }),

	oneOf("metricsExporterType", MetricsDisabled, []string{MetricsDisabled, MetricsPROM}, func(b *Broker) *string { return &b.MetricsExporterType }),
	str("metricsPromExporterHost", "", func(b *Broker) *string { return &b.MetricsPromExporterHost }),
	intRange("metricsPromExporterPort", "5557", 0, 65535, func(b *Broker) *int { return &b.MetricsPromExporterPort }),
	str("metricsLabel", "", func(b *Broker) *string { return &b.MetricsLabel }),
	boolean("enableLagAndDlqMetrics", "true", func(b *Broker) *bool { return &b.EnableLagAndDlqMetrics }),
	boolean("metricsInDelta", "false", func(b *Broker) *bool { return &b.MetricsInDelta }),
	boolean("enableStatsMetrics", "true", func(b *Broker) *bool { return &b.EnableStatsMetrics }),
	boolean("enableRequestMetrics", "true", func(b *Broker) *bool { return &b.EnableRequestMetrics }),
	boolean("enableConnectionMetrics", "true", func(b *Broker) *bool { return &b.EnableConnectionMetrics }),
	boolean("enableTransactionMetrics", "true", func(b *Broker) *bool { return &b.EnableTransactionMetrics }),
	boolean("enableRemotingMetrics", "true", func(b *Broker) *bool { return &b.EnableRemotingMetrics }),
	boolean("enableMessageStoreMetrics", "true", func(b *Broker) *bool { return &b.EnableMessageStoreMetrics }),
	boolean("enablePopMetrics", "true", func(b *Broker) *bool { return &b.EnablePopMetrics }),
	boolean("metricsNameUnitSuffix", "true", func(b *Broker) *bool { return &b.MetricsNameUnitSuffix }),
	// A Java int, as RocketMQ's; the start refuses <= 0 with the exporter
	// on (broker.startMetrics), as RocketMQ's does.
	intRange("metricsOtelCardinalityLimit", "50000", math.MinInt32, math.MaxInt32, func(b *Broker) *int { return &b.MetricsOtelCardinalityLimit }),

	boolean("aclEnable", "false", func(b *Broker) *bool { return &b.AclEnable }),
	str("plainAclFile", "", func(b *Broker) *string { return &b.PlainAclFile }),
}, authFields(), tlsServerFields(func(b *Broker) *TLS { return &b.TLS }), tlsClientFields(func(b *Broker) *TLS { return &b.TLS }), proxyProtocolFields(func(b *Broker) *ProxyProtocol { return &b.ProxyProtocol }), listenerFields(func(b *Broker) *Listener { return &b.Listener }), []field[Broker]{
	tlsEnableField(func(b *Broker) *string { return &b.TLSEnable }),

	oneOf("logLevel", "info", []string{"trace", "debug", "info", "warn", "error"}, func(b *Broker) *string { return &b.LogLevel }),
	oneOf("logFormat", "auto", []string{"auto", "console", "json"}, func(b *Broker) *string { return &b.LogFormat }),
}, logFileFields(brokerLogMaxSizeMiB, brokerLogMaxRolled, func(b *Broker) *LogFile { return &b.Log }), []field[Broker]{
	boolean("isolateLogEnable", "false", func(b *Broker) *bool { return &b.IsolateLogEnable }),
}, brokerRefusedRocketMQ53)

func withAliases[T any](f field[T], aliases ...string) field[T] {
	f.aliases = aliases
	return f
}

func str[T any](key, def string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		*ptr(b) = raw
		return nil
	}, get: func(b *T) string { return *ptr(b) }}
}

// nonEmpty is a string key that must hold something: an empty value (a
// "brokerName=" line) is refused with why, rather than met later as an
// error that does not name the key.
func nonEmpty[T any](key, def, why string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		if raw == "" {
			return fmt.Errorf("empty: %s", why)
		}
		*ptr(b) = raw
		return nil
	}, get: func(b *T) string { return *ptr(b) }}
}

// host is a key naming a host, or empty: an IP address or a host name
// (letters, digits, '-', '_' and '.'). A value with a port, which the
// key's user adds itself, or anything else no host is named by, is
// refused rather than met as a connection that never opens (brokerIP2
// with a port gives slaves "[10.0.0.1:10912]:10912" to dial).
func host[T any](key, def string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(c *T, raw string) error {
		if err := checkHost(raw); err != nil {
			return err
		}
		*ptr(c) = raw
		return nil
	}, get: func(c *T) string { return *ptr(c) }}
}

// checkHost refuses a host that is neither an IP address nor a host name
// ("" passes).
func checkHost(raw string) error {
	if raw == "" {
		return nil
	}
	if _, err := netip.ParseAddr(raw); err == nil {
		return nil
	}
	for _, r := range raw {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q is neither an IP address nor a host name (no port: the port is a key of its own)", raw)
		}
	}
	return nil
}

// hostPort is a key naming host:port with a port in [1, 65535], or
// empty, refused otherwise rather than dialled in vain (a slave's
// haMasterAddress).
func hostPort[T any](key, def string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(c *T, raw string) error {
		if raw != "" {
			h, port, err := net.SplitHostPort(raw)
			if err == nil {
				_, err = parseInt(port, 1, 65535)
			}
			if err == nil {
				err = checkHost(h)
			}
			if err != nil || h == "" {
				return fmt.Errorf("%q is not host:port with a port in [1, 65535]", raw)
			}
		}
		*ptr(c) = raw
		return nil
	}, get: func(c *T) string { return *ptr(c) }}
}

// nameServerList reads a namesrvAddr list, kept as written: host:port
// addresses separated by any rune of seps, blanks around and between them
// left out as the list is read where it is used (the broker's registrar,
// namesrv.ParseNameServers, splits at ';'; the proxy, Proxy.NamesrvAddrs,
// at ';' and ','). Each address is checked as RocketMQ's BrokerStartup
// checks it before it starts (NetworkUtil.string2SocketAddress), and its
// port must be one a name server can listen on, so that a list that could
// not be dialed is refused, at start (and by the broker's
// UPDATE_BROKER_CONFIG), rather than used in vain.
func nameServerList[T any](key, def, seps string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(c *T, raw string) error {
		if err := CheckNameServerAddrs(splitNameServers(raw, seps)); err != nil {
			return err
		}
		*ptr(c) = raw
		return nil
	}, get: func(c *T) string { return *ptr(c) }}
}

// splitNameServers splits a namesrvAddr list at every rune of seps into
// trimmed addresses, blanks dropped.
func splitNameServers(raw, seps string) []string {
	var out []string
	for _, a := range strings.FieldsFunc(raw, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// CheckNameServerAddrs refuses a name server address that is not
// host:port with a port in [1, 65535]: the check of namesrvAddr, for
// those that take the addresses from elsewhere than a configuration key.
func CheckNameServerAddrs(addrs []string) error {
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err == nil {
			_, err = parseInt(port, 1, 65535)
		}
		if err != nil {
			return fmt.Errorf("name server address %q is not host:port (write the list as \"127.0.0.1:9876;192.168.0.1:9876\"): %w", a, err)
		}
	}
	return nil
}

// delayLevels reads a messageDelayLevel list, checked as the broker will
// parse it, and keeps it as written.
func delayLevels[T any](key, def string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		if _, err := meta.ParseDelayLevels(raw); err != nil {
			return err
		}
		*ptr(b) = raw
		return nil
	}, get: func(b *T) string { return *ptr(b) }}
}

func oneOf[T any](key, def string, allowed []string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		for _, a := range allowed {
			if strings.EqualFold(raw, a) {
				*ptr(b) = a
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", raw, strings.Join(allowed, ", "))
	}, get: func(b *T) string { return *ptr(b) }}
}

// oneOfAliased is oneOf that also takes other spellings of the allowed
// values, in any case, each kept as the value it stands for.
func oneOfAliased[T any](key, def string, allowed []string, aliases map[string]string, ptr func(*T) *string) field[T] {
	f := oneOf(key, def, allowed, ptr)
	set := f.set
	names := slices.Sorted(maps.Keys(aliases))
	f.set = func(c *T, raw string) error {
		for _, alias := range names {
			if strings.EqualFold(raw, alias) {
				*ptr(c) = aliases[alias]
				return nil
			}
		}
		if err := set(c, raw); err != nil {
			return fmt.Errorf("%w (or %s)", err, strings.Join(names, ", "))
		}
		return nil
	}
	return f
}

// parseBool reads a boolean value: true or false in any case, the values
// RocketMQ's Boolean.parseBoolean gives their meaning. It reads anything
// else as false, so "1", "yes" or "on" would turn a switch off there; such
// a value is an error here rather than read either way.
func parseBool(raw string) (bool, error) {
	switch {
	case strings.EqualFold(raw, "true"):
		return true, nil
	case strings.EqualFold(raw, "false"):
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false (RocketMQ reads anything but true as false)", raw)
}

func boolean[T any](key, def string, ptr func(*T) *bool) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		v, err := parseBool(raw)
		if err != nil {
			return err
		}
		*ptr(b) = v
		return nil
	}, get: func(b *T) string { return strconv.FormatBool(*ptr(b)) }}
}

// commitLogPath reads storePathCommitLog: one directory, or empty for
// RocketMQ's default (see Broker.CommitLogDir). RocketMQ takes a
// comma-separated list to spread segments over several disks
// (MultiPathMappedFileQueue); rocketkv does not, and refuses one rather
// than look for the segments in a directory named by the whole list.
func commitLogPath[T any](key string, ptr func(*T) *string) field[T] {
	return field[T]{key: key, def: "", set: func(b *T, raw string) error {
		if strings.Contains(raw, ",") {
			return fmt.Errorf("%q: several CommitLog directories (a comma-separated list) are not supported; name one", raw)
		}
		*ptr(b) = raw
		return nil
	}, get: func(b *T) string { return *ptr(b) }}
}

// notImplemented is a boolean key whose true value rocketkv refuses: the
// feature is not there, and running without it unnoticed would be worse
// than not starting.
func notImplemented[T any](key, why string) field[T] {
	return field[T]{key: key, def: "false", set: func(_ *T, raw string) error {
		v, err := parseBool(raw)
		if err != nil {
			return err
		}
		if v {
			return fmt.Errorf("true: %s", why)
		}
		return nil
	}, get: func(*T) string { return "false" }}
}

func parseInt(raw string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", raw)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", v, lo, hi)
	}
	return v, nil
}

func intRange[T any](key, def string, lo, hi int64, ptr func(*T) *int) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		v, err := parseInt(raw, lo, hi)
		if err != nil {
			return err
		}
		*ptr(b) = int(v)
		return nil
	}, get: func(b *T) string { return strconv.Itoa(*ptr(b)) }}
}

func i64[T any](key, def string, ptr func(*T) *int64) field[T] {
	return i64Range(key, def, -1<<63, 1<<63-1, ptr)
}

func i64Range[T any](key, def string, lo, hi int64, ptr func(*T) *int64) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		v, err := parseInt(raw, lo, hi)
		if err != nil {
			return err
		}
		*ptr(b) = v
		return nil
	}, get: func(b *T) string { return strconv.FormatInt(*ptr(b), 10) }}
}

// millis reads a duration written in milliseconds, RocketMQ's unit for
// intervals and timeouts.
func millis[T any](key, def string, ptr func(*T) *time.Duration) field[T] {
	return millisRange(key, def, 0, ptr)
}

// anyMillis reads milliseconds of any sign, as RocketMQ's setter takes
// them, for a period that matters only in a mode that is off by default:
// the code that uses it refuses a period that is not positive then.
func anyMillis[T any](key, def string, ptr func(*T) *time.Duration) field[T] {
	return millisRange(key, def, -(1 << 40), ptr)
}

// millisRange reads milliseconds of at least lo (a period that must not be
// zero). A duration is reported in whole milliseconds (any finer part set
// in code is dropped).
func millisRange[T any](key, def string, lo int64, ptr func(*T) *time.Duration) field[T] {
	return inUnit(key, def, time.Millisecond, "milliseconds", lo, 1<<40, ptr)
}

// timerPrecisions are the timer precisions RocketMQ takes, in ms.
var timerPrecisions = []int64{100, 200, 500, 1000}

// timerPrecision reads timerPrecisionMs as RocketMQ's setter does: a
// positive number of milliseconds rounded down to 100, 200, 500 or 1000
// (100 at least), so GET_BROKER_CONFIG reports the precision in use.
func timerPrecision[T any](key, def string, ptr func(*T) *time.Duration) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		v, err := parseInt(raw, 1, 1<<40)
		if err != nil {
			return fmt.Errorf("milliseconds: %w", err)
		}
		p := timerPrecisions[0]
		for _, c := range timerPrecisions[1:] {
			if v >= c {
				p = c
			}
		}
		*ptr(b) = time.Duration(p) * time.Millisecond
		return nil
	}, get: func(b *T) string { return inUnits(*ptr(b), time.Millisecond) }}
}

// micros reads a duration written in microseconds, from 0 to hi, for the
// few settings finer than RocketMQ's milliseconds.
func micros[T any](key, def string, hi int64, ptr func(*T) *time.Duration) field[T] {
	return inUnit(key, def, time.Microsecond, "microseconds", 0, hi, ptr)
}

// seconds reads a positive duration written in seconds (timerMaxDelaySec),
// and reports it in whole seconds.
func seconds[T any](key, def string, ptr func(*T) *time.Duration) field[T] {
	return inUnit(key, def, time.Second, "seconds", 1, 1<<32, ptr)
}

// hours reads a duration written in hours (fileReservedTime), and reports
// it in whole hours.
func hours[T any](key, def string, ptr func(*T) *time.Duration) field[T] {
	return inUnit(key, def, time.Hour, "hours", 0, 1<<20, ptr)
}

// inUnit reads a duration written as a whole number, from lo to hi, of
// unit (named in errors), and reports it in whole units.
func inUnit[T any](key, def string, unit time.Duration, unitName string, lo, hi int64, ptr func(*T) *time.Duration) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		v, err := parseInt(raw, lo, hi)
		if err != nil {
			return fmt.Errorf("%s: %w", unitName, err)
		}
		*ptr(b) = time.Duration(v) * unit
		return nil
	}, get: func(b *T) string { return inUnits(*ptr(b), unit) }}
}

// inUnits writes d as a whole number of unit, the integer text the
// duration setters read.
func inUnits(d, unit time.Duration) string {
	return strconv.FormatInt(int64(d/unit), 10)
}

// hourList reads RocketMQ's deleteWhen: hours of the day separated by ';'.
// It reports them as RocketMQ writes them, two digits each ("04;16").
func hourList[T any](key, def string, ptr func(*T) *[]int) field[T] {
	return field[T]{key: key, def: def, set: func(b *T, raw string) error {
		var out []int
		for _, part := range strings.Split(raw, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			v, err := parseInt(part, 0, 23)
			if err != nil {
				return fmt.Errorf("hour %q: %w", part, err)
			}
			out = append(out, int(v))
		}
		if len(out) == 0 {
			return fmt.Errorf("%q names no hour of the day", raw)
		}
		*ptr(b) = out
		return nil
	}, get: func(b *T) string {
		parts := make([]string, len(*ptr(b)))
		for i, h := range *ptr(b) {
			parts[i] = fmt.Sprintf("%02d", h)
		}
		return strings.Join(parts, ";")
	}}
}
