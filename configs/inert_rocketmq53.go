package configs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// brokerInertRocketMQ53 lists the rest of the keys RocketMQ 5.3's
// BrokerConfig, MessageStoreConfig and Netty configs declare that
// rocketkv accepts without effect, one reason each: statistics and
// metrics it keeps otherwise, pacing and buffering of mechanisms it does
// without (revive topics, timing wheels, op messages), and settings read
// only behind switches it refuses. Like the keys of brokerInert, ignoring
// any of them cannot change what is stored or delivered; keys whose use would are refused (brokerRefusedRocketMQ53)
// or stay unknown (logged as warnings) until rocketkv has them.
var brokerInertRocketMQ53 = []inert[Broker]{
	inertBool[Broker]("accountStatsEnable", "no per-account statistics log; broker statistics are kept per topic and group (brokerstats)"),
	inertBool[Broker]("accountStatsPrintZeroValues", "no per-account statistics log; broker statistics are kept per topic and group (brokerstats)"),
	inertBool[Broker]("appendAckAsync", "an ack is written to the index and made durable before it is answered; there is no store append to hand to another thread"),
	inertBool[Broker]("appendCkAsync", "POP checkpoints are written to the index and made durable before the answer; there is no store append to hand to another thread"),
	inertBool[Broker]("asyncSendEnable", "a send is answered when its append completes, without a send thread held meanwhile; the answer is the same either way"),
	inertBool[Broker]("autoDeleteUnusedStats", "statistics only: a deleted topic's or group's statistics are always dropped with it"),
	inertInt[Broker]("bitMapLengthConsumeQueueExt", "no consumequeue_ext files; tag and SQL92 filters are evaluated on each entry and message"),
	inertInt[Broker]("broadcastOffsetExpireMaxSecond", "the broker keeps no per-client pull offsets of broadcast consumers to expire; broadcast consumers keep their own offsets"),
	inertInt[Broker]("broadcastOffsetExpireSecond", "the broker keeps no per-client pull offsets of broadcast consumers to expire; broadcast consumers keep their own offsets"),
	inertString[Broker]("brokerConfigPath", "UPDATE_BROKER_CONFIG writes the changes back into the file given with -c"),
	inertInt[Broker]("commercialBaseCount", "no billing counts are computed for send or consume hooks"),
	inertInt[Broker]("commercialSizePerMsg", "no billing counts are computed for send or consume hooks"),
	inertInt[Broker]("compactionCqMappedFileSize", "compacted topics keep their copies in the index (keyspace 0x80), not in compaction log files to size"),
	inertInt[Broker]("compactionMappedFileSize", "compacted topics keep their copies in the index (keyspace 0x80), not in compaction log files to size"),
	inertInt[Broker]("compactionScheduleInternal", "compacted topics are compacted as the dispatcher indexes each message, not by a scheduled pass"),
	inertInt[Broker]("compactionThreadNum", "compacted topics are compacted by the dispatcher as it indexes each message; there are no compaction threads"),
	inertString[Broker]("configManagerVersion", "topics, groups and consumer offsets are kept in the index whatever the version; a RocketMQ store kept with v1 or v2 in RocksDB (config/topics/ and its siblings, config/rdb/) is imported from those databases"),
	inertInt[Broker]("consumerOffsetUpdateVersionStep", "consumer offsets carry no data version: each commit is written to the index, and slaves copy the offsets whatever the version"),
	inertInt[Broker]("correctLogicMinOffsetForceInterval", "ConsumeQueue minimums move with the CommitLog minimum each time retention deletes segments; there is no periodic correction pass"),
	inertInt[Broker]("correctLogicMinOffsetSleepInterval", "ConsumeQueue minimums move with the CommitLog minimum each time retention deletes segments; there is no periodic correction pass to pace"),
	inertInt[Broker]("delayOffsetUpdateVersionStep", "delay-level progress carries no data version: it is written to the index as it advances, and slaves copy it whatever the version"),
	inertInt[Broker]("deleteCommitLogFilesInterval", "a retention pass deletes its expired segments without pausing between them; their files go when their last reader is done"),
	inertInt[Broker]("deleteConsumeQueueFilesInterval", "ConsumeQueue entries and files of deleted segments are dropped as the CommitLog minimum moves, without pausing between queues"),
	inertInt[Broker]("deleteFileBatchMax", "a retention pass deletes at most 10 segments and the next pass goes on; the pace of deletion, not what is kept, differs"),
	inertInt[Broker]("destroyMapedFileIntervalForcibly", "a deleted segment that is still being read is unmapped when its last reader ends; it is never destroyed under a reader"),
	inertBool[Broker]("disableCallbackExecutor", "no Netty client: outgoing connections run on goroutines"),
	inertBool[Broker]("disableNettyWorkerGroup", "no Netty client: outgoing connections run on goroutines"),
	inertBool[Broker]("diskFallRecorded", "consumer fall-behind sizes are not recorded; nothing reads them (no slow-group disabling, no fall-behind statistics)"),
	inertBool[Broker]("enableAutoInSyncReplicas", "a SYNC_MASTER waits for inSyncReplicas-1 slaves as set; it is not lowered to the members its group's member list shows alive"),
	inertBool[Broker]("enableBroadcastOffsetStore", "broadcast consumers keep their own offsets; the broker keeps no copy of them (RocketMQ's serves clients moving between its proxy and the broker)"),
	inertBool[Broker]("enableBuildConsumeQueueConcurrently", "one dispatcher goroutine builds the ConsumeQueue from the CommitLog in batches; there is no concurrent reput to choose"),
	inertBool[Broker]("enableDetailStat", "per-queue statistics (QUEUE_PUT_NUMS, QUEUE_GET_NUMS, ...) are not kept; the topic, group and broker statistics are, whatever the value"),
	inertBool[Broker]("enableFastChannelEventProcess", "a closed connection's producers and consumers are dropped by a scan of the client tables; RocketMQ's switch only changes how it finds them, not the result"),
	inertBool[Broker]("enableLogConsumeQueueRepeatedlyBuildWhenRecover", "a logging switch (RocketMQ 5.3.4): RocketMQ warns, during recovery only with it, of each ConsumeQueue entry built again; rocketkv's dispatcher resumes after the last entries it wrote and logs no such warning"),
	inertBool[Broker]("enableLmqStats", "statistics only: those of light message queues are kept under each queue's own name, and items idle for 25 h are dropped (RocketMQ folds them into %LMQ% when false)"),
	inertBool[Broker]("enableNotifyBeforePopCalculateLag", "the lag metrics are computed without waking held POP requests first; a held POP is answered when a message arrives or its poll time ends either way"),
	inertBool[Broker]("enablePopBatchAck", "POP acks are written to the index directly; there are no ack messages in a revive topic to batch"),
	inertBool[Broker]("enableRegisterProducer", "producers are registered by their heartbeats whatever the value; RocketMQ skips new ones only with rejectTransactionMessage=true, to save memory, which changes only the producer connection lists"),
	inertBool[Broker]("enableScheduleAsyncDeliver", "due delay-level messages are put back into their topics by one goroutine every 100 ms; there is no synchronous or asynchronous delivery to choose"),
	inertBool[Broker]("enableSingleTopicRegister", "a created or changed topic reaches the name servers with the broker's next registration of all its topics, made soon after the change; the routes are the same"),
	inertBool[Broker]("enableSkipLongAwaitingAck", "revive reads due checkpoints from the index by deadline; there are no acks in a revive topic waiting for their checkpoint"),
	inertBool[Broker]("enableSplitRegistration", "the broker registers all its topics in one request (compressed above 1,000 topics); the routes the name servers hold are the same"),
	inertBool[Broker]("estimateAccumulation", "metrics only: the consumer lag counts every message past the committed offset; messages the group's tag or SQL92 filter would skip are not estimated"),
	inertBool[Broker]("flushCommitLogTimed", "the async flusher runs every flushIntervalCommitLog; RocketMQ's false matters only with wakeFlushWhenPutMessage, which rocketkv does not have"),
	inertInt[Broker]("flushConsumeQueueThoroughInterval", "the file ConsumeQueue is flushed completely every flushIntervalConsumeQueue; there are no partial flushes to complete"),
	inertInt[Broker]("flushLeastPagesWhenWarmMapedFile", "new CommitLog segments are prefaulted with madvise 16 MiB ahead of the write position; no zeros are written and flushed while warming"),
	inertInt[Broker]("forwardTimeout", "a static topic's request forwarded to another broker group waits at most 3 s, RocketMQ's default (README, \"Static topics\")"),
	inertBool[Broker]("isBrokerContainer", "RocketMQ reads no such key: it is a field name its configuration dumps print, set only by a broker container"),
	inertBool[Broker]("isInBrokerContainer", "RocketMQ reads no key of this spelling (its setter's key is inBrokerContainer, and BrokerStartup sets it false anyway); configuration dumps print it"),
	inertBool[Broker]("isScanAvailableNameSrv", "RocketMQ reads no key of this spelling (its setter's key is scanAvailableNameSrv); configuration dumps print it"),
	inertBool[Broker]("lockInStrictMode", "orderly-consumer queue locks are taken on the broker asked; locking on a quorum of the group's totalReplicas is not there"),
	inertFloat[Broker]("logicalDiskSpaceCleanForciblyThreshold", "read only when replicasPerDiskPartition is above 1 (brokers sharing one disk); rocketkv cleans by the disk's whole usage (diskMaxUsedSpaceRatio, diskSpaceCleanForciblyRatio)"),
	inertInt[Broker]("mappedFileSizeConsumeQueueExt", "no consumequeue_ext files (enableConsumeQueueExt has no effect); property filters are evaluated on the messages"),
	inertInt[Broker]("mappedFileSizeTimerLog", "timer messages wait as keys of the index ordered by delivery time; there are no timerlog files"),
	inertInt[Broker]("mapperFileSizeBatchConsumeQueue", "topics with queue.type=BatchCQ are refused; there are no batch ConsumeQueue files"),
	inertInt[Broker]("maxAsyncPutMessageRequests", "RocketMQ 5.3 declares it but nothing reads it"),
	inertInt[Broker]("maxChecksumRange", "RocketMQ 5.3 reads it only in a CommitLog checksum method that nothing calls"),
	inertInt[Broker]("maxConsumeQueueScan", "consumer lag metrics count every message past the offsets; filtered lag is not estimated by sampling the ConsumeQueue"),
	inertInt[Broker]("maxFilterMessageSize", "a filtered pull examines up to 4,096 entries and the client pulls again from where it stopped; what is delivered is the same"),
	inertInt[Broker]("maxOffsetMapSize", "compaction finds a key's newest message in the index (keyspace 0x81), not in an offset map held in memory"),
	inertInt[Broker]("maxStatsIdleTimeInMinutes", "statistics items idle for 25 hours are dropped, once their day window is flat; the limit is not configurable (statistics only)"),
	inertInt[Broker]("metricGrpcExporterIntervalInMills", "read only by RocketMQ's OTLP gRPC exporter; rocketkv serves Prometheus only and refuses metricsExporterType=OTLP_GRPC"),
	inertInt[Broker]("metricGrpcExporterTimeOutInMills", "read only by RocketMQ's OTLP gRPC exporter; rocketkv serves Prometheus only and refuses metricsExporterType=OTLP_GRPC"),
	inertInt[Broker]("metricLoggingExporterIntervalInMills", "read only by RocketMQ's LOG metrics exporter; rocketkv serves Prometheus only and refuses metricsExporterType=LOG"),
	inertString[Broker]("metricsGrpcExporterHeader", "read only by RocketMQ's OTLP gRPC exporter; rocketkv serves Prometheus only and refuses metricsExporterType=OTLP_GRPC"),
	inertString[Broker]("metricsGrpcExporterTarget", "read only by RocketMQ's OTLP gRPC exporter; rocketkv serves Prometheus only and refuses metricsExporterType=OTLP_GRPC"),
	inertInt[Broker]("popCkMaxBufferSize", "POP checkpoints are written to the index before the pop is answered; there is no checkpoint buffer to bound"),
	inertInt[Broker]("popCkOffsetMaxQueueSize", "POP checkpoints are written to the index before the pop is answered, and the committed offset follows the smallest offset in flight; there is no in-memory checkpoint queue per queue to bound"),
	inertInt[Broker]("popCkStayBufferTime", "POP checkpoints are written to the index before the pop is answered; none stays in a buffer"),
	inertInt[Broker]("popCkStayBufferTimeOut", "POP checkpoints are written to the index before the pop is answered; none stays in a buffer"),
	inertBool[Broker]("popConsumerFSServiceInit", "rocketkv has one POP service, its state in the index, which always runs and revives; there is no revive-topic service to leave out"),
	inertBool[Broker]("popConsumerKVServiceEnable", "POP state is always kept in rocketkv's index (one checkpoint per pop); there is no choice between revive-topic and RocksDB POP stores. A RocketMQ store whose kvStore/ holds POP records has them imported at first open as checkpoints"),
	inertBool[Broker]("popConsumerKVServiceInit", "POP state is always kept in rocketkv's index; there is no RocksDB POP service to create"),
	inertBool[Broker]("popConsumerKVServiceLog", "no separate POP operation log"),
	inertInt[Broker]("popPollingMapSize", "held pops are bounded by maxPopPollingSize in total and popPollingSize per queue; the polling keys need no bound of their own"),
	inertInt[Broker]("popReviveMaxAttemptTimes", "a revive put that fails is retried with growing backoff until it succeeds; no record is dropped (RocketMQ's KV POP service drops it after this many attempts)"),
	inertInt[Broker]("popReviveMaxReturnSizePerRead", "a revive round handles up to 4,096 due messages and the next starts at once when more are due; the pace, not what is revived, differs"),
	inertBool[Broker]("printChannelGroups", "no log line naming the groups of a closed connection"),
	inertInt[Broker]("printChannelGroupsMinNum", "no log line naming the groups of a closed connection"),
	inertBool[Broker]("putConsumeQueueDataByFileChannel", "the file ConsumeQueue is always written with pwrite (RocketMQ's default); the bytes are the same either way"),
	inertString[Broker]("readOnlyCommitLogStorePaths", "RocketMQ reads it only with several storePathCommitLog directories or a DLedger CommitLog, both refused; the CommitLog is one directory"),
	inertBool[Broker]("realTimeNotifyConsumerChange", "a group's consumers are told at once when its member list changes; RocketMQ's false only delays the notice by up to 15 s"),
	inertBool[Broker]("recheckReputOffsetFromCq", "the index records how far it has dispatched and dispatch resumes from there at every start"),
	inertBool[Broker]("recoverConcurrently", "recovery verifies the CommitLog on one goroutine and rebuilds the index from it; there is no separate ConsumeQueue recovery to run beside it"),
	inertInt[Broker]("reviveAckWaitMs", "acks are applied to their checkpoint in the index at once; there are no ack messages in a revive topic waiting for their checkpoint"),
	inertInt[Broker]("reviveInterval", "revive wakes at the next checkpoint's deadline (at least every 100 ms); there is no fixed revive interval"),
	inertInt[Broker]("reviveMaxSlow", "revive wakes at the next checkpoint's deadline; it does not slow down when idle"),
	inertInt[Broker]("reviveQueueNum", "POP checkpoints live in the index, not spread over revive-topic queues; receipt handles name revive queue 0 (999 for orderly pops), and POP_ROLLBACK writes to queue 0 of a revive topic of 8 queues"),
	inertInt[Broker]("reviveScanTime", "revive reads due checkpoints from the index in deadline order; there is no revive topic to scan"),
	inertString[Broker]("rocketmqHome", "no RocketMQ installation is read; plain_acl.yml is found through plainAclFile or the ROCKETMQ_HOME environment variable"),
	inertInt[Broker]("sampleCountThreshold", "consumer lag metrics count every message past the offsets; filtered lag is not estimated by sampling the ConsumeQueue"),
	inertInt[Broker]("scheduleAsyncDeliverMaxPendingLimit", "one goroutine delivers due delay-level messages in rounds; there is no asynchronous delivery queue to bound"),
	inertInt[Broker]("scheduleAsyncDeliverMaxResendNum2Blocked", "delay-level messages are re-put one at a time and a failed put is retried the next round, never skipped; there is no asynchronous delivery to block or give up"),
	inertBool[Broker]("searchBcqByCacheEnable", "no batch ConsumeQueue (queue.type=BatchCQ is refused); there is no BatchCQ index to search"),
	inertBool[Broker]("skipPreOnline", "RocketMQ's pre-online check runs only when a broker starts isolated (totalReplicas above 1), which rocketkv's never does: it serves and registers as soon as it starts"),
	inertInt[Broker]("spinLockCollisionRetreatOptimalDegree", "the CommitLog append lock is a Go mutex; there is no back-off spin lock to tune"),
	inertInt[Broker]("splitRegistrationSize", "the broker registers its whole topic table in one request (compressed above 1,000 topics); registrations are not split"),
	inertInt[Broker]("subscriptionExpiredTimeout", "subscriptions are known from heartbeats only and go with the connection (channelExpiredTimeout); those seen only in POP requests are not remembered, so there are none to expire"),
	inertString[Broker]("timerCheckMetricsWhen", "rocketkv counts the waiting timer messages per topic from its timer index at each start (GET_TIMER_METRICS, rocketmq_timing_messages), so there is no saved count that could drift and need a check"),
	inertBool[Broker]("timerEnableCheckMetrics", "rocketkv counts the waiting timer messages per topic from its timer index at each start (GET_TIMER_METRICS, rocketmq_timing_messages), so there is no saved count that could drift and need a check"),
	inertBool[Broker]("timerEnableDisruptor", "no timer hand-off queues: one goroutine reads due timer messages back and stores them in their topics"),
	inertBool[Broker]("timerEnableRetryUntilSuccess", "a due timer message whose put fails for the store (disk full, shutting down) is retried every round until stored, as with true; only one that can never be stored is dropped"),
	inertInt[Broker]("timerFlushIntervalMs", "parked timer messages are keys of the index, written durably with it (indexWalSync); there are no timerlog, timerwheel or checkpoint files to flush"),
	inertInt[Broker]("timerMetricSmallThreshold", "rocketkv counts the waiting timer messages per topic from its timer index at each start (GET_TIMER_METRICS, rocketmq_timing_messages), so there is no saved count to revise"),
	inertInt[Broker]("timerProgressLogIntervalMs", "no periodic timer progress log line; delivery failures are logged as they happen"),
	inertBool[Broker]("timerSkipUnknownError", "timer messages are not skipped on errors: a read or put that fails for a passing reason is retried the next round; only a record that is damaged or gone, or that can never be stored, is dropped with a log line"),
	inertBool[Broker]("timerWarmEnable", "RocketMQ 5.3 declares it but nothing reads it"),
	inertInt[Broker]("topicQueueLockNum", "queue offsets are assigned under the CommitLog append lock; there are no per-queue lock stripes to size"),
	inertInt[Broker]("totalReplicas", "the group size of lockInStrictMode's quorum and of RocketMQ's isolated start of an acting-master group, neither of which rocketkv has; a SYNC_MASTER waits for inSyncReplicas"),
	inertInt[Broker]("transactionMetricFlushInterval", "no transaction metrics file (RocketMQ's per-topic counts of transaction messages) is kept to flush"),
	inertInt[Broker]("transactionOpBatchInterval", "how a transaction ended is written to the index at END_TRANSACTION, then one op message per end, unbatched, as RocketMQ 4 writes them"),
	inertInt[Broker]("transactionOpMsgMaxSize", "one op message (RMQ_SYS_TRANS_OP_HALF_TOPIC) per ended transaction, unbatched, as RocketMQ 4 writes them: its body is one queue offset"),
	inertInt[Broker]("travelCqFileNumWhenGetMessage", "a filtered pull examines up to 4,096 entries and the client pulls again from where it stopped; what is delivered is the same"),
	inertBool[Broker]("useABSLock", "the CommitLog append lock is a Go mutex; there is no adaptive spin lock to choose"),
	inertBool[Broker]("useStaticSubscription", "consumer lag metrics cover the groups with a live client and the topics they subscribe to; the topics a group's config names are not consulted"),
	inertBool[Broker]("wakeCommitWhenPutMessage", "appends are written into the mapped segment directly; there is no off-heap write buffer pool to size or commit"),
	{key: "autoMessageVersionOnTopicLen", reason: "records of topics longer than 127 bytes are always written in the V2 format (two-byte topic length), which RocketMQ reads back",
		parse: func(raw string) error { _, err := parseBool(raw); return err },
		warn: func(_ *Broker, raw string) string {
			if v, _ := parseBool(raw); v {
				return ""
			}
			return "autoMessageVersionOnTopicLen=false is not followed: a topic longer than 127 bytes is still written in the V2 format, since the V1 format cannot hold its length"
		}},
	inertInt[Broker]("disappearTimeAfterStart", "RocketMQ holds its POP revive back this long after a start (brokers in a container); rocketkv's revive starts once the broker serves"),
	inertInt[Broker]("replicasPerDiskPartition", "RocketMQ 5.3 reads it nowhere"),
}

// brokerRefusedRocketMQ53 are RocketMQ 5.3 switches of behaviour rocketkv
// does not have and whose use would change what is stored or delivered:
// the broker refuses to start with them set (true, or any value of
// messageStorePlugIn).
var brokerRefusedRocketMQ53 = []field[Broker]{
	notImplemented[Broker]("duplicationEnable", "there is no duplication mode: every append gets this broker's queue offsets and store time"),
	notSet[Broker]("messageStorePlugIn", "rocketkv loads no message store plug-ins (Java classes)"),
	onlyValues[Broker]("socksProxyConfig", []string{"{}", ""}, "the broker dials name servers and masters directly, through no SOCKS proxy"),
}

// onlyValues is a text key rocketkv refuses any value of but those in ok,
// the first of which is its default.
func onlyValues[T any](key string, ok []string, why string) field[T] {
	return field[T]{key: key, def: ok[0], set: func(_ *T, raw string) error {
		if !slices.Contains(ok, strings.TrimSpace(raw)) {
			return fmt.Errorf("%q: %s", raw, why)
		}
		return nil
	}, get: func(*T) string { return ok[0] }}
}

// notSet is a text key rocketkv refuses any value of but the empty one.
func notSet[T any](key, why string) field[T] {
	return field[T]{key: key, def: "", set: func(_ *T, raw string) error {
		if raw != "" {
			return fmt.Errorf("%q: %s", raw, why)
		}
		return nil
	}, get: func(*T) string { return "" }}
}

// inertString is an inert key of any text value.
func inertString[T any](key, reason string) inert[T] {
	return inertStrings[T](reason, key)[0]
}

// inertFloat is an inert key whose value must be a number (Java's
// double).
func inertFloat[T any](key, reason string) inert[T] {
	return inert[T]{key: key, reason: reason, parse: func(raw string) error {
		if _, err := strconv.ParseFloat(raw, 64); err != nil {
			return fmt.Errorf("%q is not a number", raw)
		}
		return nil
	}}
}
