package configs

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// InertKey is a RocketMQ key of a configuration file that rocketkv accepts
// but that changes nothing: a thread pool size, a switch of a RocketMQ
// mechanism rocketkv does not have. Drop-in broker.conf files carry many;
// they are reported once at info level rather than warned about as
// unknown.
type InertKey struct {
	// Key is the key as RocketMQ spells it.
	Key string
	// Value is the value the file gave it.
	Value string
	// Reason says in one line why the key has no effect in rocketkv.
	Reason string
	// Warning is set when the value asks for something rocketkv does not
	// do and that an operator would want to know about (a path that is
	// not the one used); it is then logged as a warning.
	Warning string
	// Override is set when the key came from an override (a command-line
	// --set, UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG) rather than the
	// file.
	Override bool
}

// UpdateRemark is the remark of a successful configuration update
// (UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG): why the change lasts only
// until restart when it could not be written back to the file (unsaved),
// and each key of the update that has no effect in rocketkv; "" when there
// is nothing to say.
func UpdateRemark(unsaved error, inert []InertKey) string {
	var remarks []string
	if unsaved != nil {
		remarks = append(remarks, fmt.Sprintf("in force, but not written back to the configuration file, so it lasts until restart: %v", unsaved))
	}
	for _, k := range inert {
		remarks = append(remarks, fmt.Sprintf("%s has no effect in rocketkv: %s", k.Key, k.Reason))
	}
	return strings.Join(remarks, "; ")
}

// inert declares an accepted-but-inert key of a configuration struct T:
// its value is checked for type (parse) and otherwise ignored.
type inert[T any] struct {
	key    string
	reason string
	parse  func(raw string) error
	// warn, when set, returns a warning about the value in the light of
	// the whole configuration (after every key and override is set), or
	// "" when there is nothing to warn about.
	warn func(c *T, raw string) string
}

// inertBool is an inert key whose value must be true or false.
func inertBool[T any](key, reason string) inert[T] {
	return inert[T]{key: key, reason: reason, parse: func(raw string) error {
		_, err := parseBool(raw)
		return err
	}}
}

// inertInts are inert integer keys that share a reason.
func inertInts[T any](reason string, keys ...string) []inert[T] {
	out := make([]inert[T], len(keys))
	for i, k := range keys {
		out[i] = inertInt[T](k, reason)
	}
	return out
}

// inertBools are inert boolean keys that share a reason.
func inertBools[T any](reason string, keys ...string) []inert[T] {
	out := make([]inert[T], len(keys))
	for i, k := range keys {
		out[i] = inertBool[T](k, reason)
	}
	return out
}

// inertStrings are inert keys of any text value that share a reason.
func inertStrings[T any](reason string, keys ...string) []inert[T] {
	out := make([]inert[T], len(keys))
	for i, k := range keys {
		out[i] = inert[T]{key: k, reason: reason, parse: func(string) error { return nil }}
	}
	return out
}

// inertInt is an inert key whose value must be an integer (Java's int or
// long).
func inertInt[T any](key, reason string) inert[T] {
	return inert[T]{key: key, reason: reason, parse: func(raw string) error {
		_, err := parseInt(raw, -1<<63, 1<<63-1)
		return err
	}}
}

// inertRootPath is one of the store paths that RocketMQ always derives
// from storePathRootDir (StorePathConfigHelper): RocketMQ's
// MessageStoreConfig has no field for the key, so RocketMQ itself ignores
// it, and rocketkv does the same so that it opens the files RocketMQ
// wrote. A value that names another path is warned about.
func inertRootPath(key, name, reason string) inert[Broker] {
	return inert[Broker]{key: key, reason: reason,
		parse: func(string) error { return nil },
		warn: func(b *Broker, raw string) string {
			want := filepath.Join(b.StorePathRootDir, name)
			if raw == "" || filepath.Clean(raw) == filepath.Clean(want) {
				return ""
			}
			return fmt.Sprintf("%s=%s is not used: RocketMQ never reads this key, and the store's file is %s (storePathRootDir/%s)",
				key, raw, want, name)
		}}
}

// brokerInert lists the RocketMQ broker keys rocketkv accepts without
// effect. A key belongs here only if ignoring it cannot change what is
// stored or delivered; a key for a missing feature whose use would matter
// is a notImplemented field instead (fields.go).
var brokerInert = slices.Concat([]inert[Broker]{
	// Java thread pools: rocketkv answers requests on its network event
	// loops and hands slow work to goroutines; there are no per-request
	// pools to size.
	inertInt[Broker]("sendMessageThreadPoolNums", "no per-request-code thread pools; sends run on goroutines"),
	inertInt[Broker]("pullMessageThreadPoolNums", "no per-request-code thread pools; pulls run on goroutines"),
	inertInt[Broker]("processReplyMessageThreadPoolNums", "no per-request-code thread pools; replies run on goroutines"),
	inertInt[Broker]("queryMessageThreadPoolNums", "no per-request-code thread pools; queries run on goroutines"),
	inertInt[Broker]("adminBrokerThreadPoolNums", "no per-request-code thread pools; admin requests run on goroutines"),
	inertInt[Broker]("clientManageThreadPoolNums", "no per-request-code thread pools; client requests run on goroutines"),
	inertInt[Broker]("consumerManageThreadPoolNums", "no per-request-code thread pools; consumer requests run on goroutines"),
	inertInt[Broker]("heartbeatThreadPoolNums", "no per-request-code thread pools; heartbeats run on goroutines"),
	inertInt[Broker]("endTransactionThreadPoolNums", "no per-request-code thread pools; transaction ends run on goroutines"),
	inertInt[Broker]("ackMessageThreadPoolNums", "no per-request-code thread pools; acks run on goroutines"),
	inertInt[Broker]("litePullMessageThreadPoolNums", "no per-request-code thread pools; lite pulls run on goroutines"),
	inertInt[Broker]("loadBalanceProcessorThreadPoolNums", "no per-request-code thread pools; queue assignments run on goroutines"),
	inertInt[Broker]("putMessageFutureThreadPoolNums", "no thread pool completes appends; they complete on the goroutine that made them"),
	inertInt[Broker]("batchDispatchRequestThreadPoolNums", "one dispatcher goroutine writes the index in batches"),
	inertInt[Broker]("recoverThreadPoolNums", "recovery verifies the CommitLog on one goroutine and rebuilds the index from it"),
	inertInt[Broker]("sendThreadPoolQueueCapacity", "only sends waiting for the index queue, at most 4096 of them (runtime info's sendThreadPoolQueueCapacity)"),
	inertInt[Broker]("serverWorkerThreads", "no Netty server: the network event loops are sized by the Go runtime"),
	inertInt[Broker]("serverSelectorThreads", "no Netty server: the network event loops are sized by the Go runtime"),
	inertInt[Broker]("clientWorkerThreads", "no Netty client: outgoing connections run on goroutines"),

	// NettyClientConfig: the broker's connections to name servers (and a
	// slave's to its master) are Go connections with the system's socket
	// settings, dialled within 3 s; each request carries its own timeout.
	inertInt[Broker]("clientCallbackExecutorThreads", "no Netty client: outgoing connections run on goroutines"),
	inertInt[Broker]("clientOnewaySemaphoreValue", "outgoing requests are not bounded by a semaphore"),
	inertInt[Broker]("clientAsyncSemaphoreValue", "outgoing requests are not bounded by a semaphore"),
	inertInt[Broker]("connectTimeoutMillis", "connections are dialled within RocketMQ's default, 3 s, whatever the value (to name servers by the broker's client pool, a slave's to its master), and the name servers are scanned every 3 s for ones that accept connections again"),
	inertInt[Broker]("channelNotActiveInterval", "no Netty client: a closed connection to a name server is dialled again by the next request"),
	inertInt[Broker]("clientChannelMaxIdleTimeSeconds", "connections to name servers are kept open while the broker runs"),
	inertInt[Broker]("clientSocketSndBufSize", "connections to name servers use the system's socket buffers"),
	inertInt[Broker]("clientSocketRcvBufSize", "connections to name servers use the system's socket buffers"),
	inertBool[Broker]("clientPooledByteBufAllocatorEnable", "no Netty client buffers"),
	inertBool[Broker]("clientCloseSocketIfTimeout", "a connection to a name server is kept after a request times out"),
	inertBool[Broker]("scanAvailableNameSrv", "the name servers are scanned every 3 s for ones that accept connections again, whatever the value"),

	// Pull flow control by Netty writability: answers are never dropped.
	inertBool[Broker]("enableNetWorkFlowControl", "pulls are answered whatever the connection's unsent bytes; RocketMQ drops the answer to a pull on a connection Netty reports unwritable"),

	// The way RocketMQ's store does its work, where rocketkv's differs.
	inertBool[Broker]("useReentrantLockWhenPutMessage", "the CommitLog append lock is a Go mutex; there is no spin lock to choose"),
	inertBool[Broker]("transientStorePoolEnable", "appends are written into the mapped segment directly; there is no off-heap write buffer pool"),
	inertBool[Broker]("transferMsgByHeap", "pull responses are built from the CommitLog by the Go runtime; there is no heap or zero-copy choice"),
	inertBool[Broker]("warmMapedFileEnable", "new CommitLog segments are always preallocated and prefaulted"),
	inertInt[Broker]("osPageCacheBusyTimeOutMills", "the append lock is not timed; sends are held back by maxDispatchLagBytes and waitTimeMillsInSendQueue"),
	inertInt[Broker]("maxLmqConsumeQueueNum", "a light message queue costs index entries, not files: rocketkv does not cap how many there are"),
	inertInt[Broker]("redeleteHangedFileInterval", "a deleted segment that is still being read is unmapped when its last reader ends; no file hangs to be deleted again"),
	inertBool[Broker]("enableConsumeQueueExt", "no consumequeue_ext files; property filters are evaluated on the messages"),
	inertInt[Broker]("maxHashSlotNum", "the message key index is kept in Pebble, not in IndexFiles"),
	inertInt[Broker]("maxIndexNum", "the message key index is kept in Pebble, not in IndexFiles"),
	inertInt[Broker]("maxTransferBytesOnMessageInDisk", "pulls are answered with the in-memory limits (maxTransferBytesOnMessageInMemory), however old their messages"),
	inertInt[Broker]("maxTransferCountOnMessageInDisk", "pulls are answered with the in-memory limits (maxTransferCountOnMessageInMemory), however old their messages"),
	inertBool[Broker]("timerInterceptDelayLevel", "RocketMQ 5.3 reads it nowhere"),
	inertInt[Broker]("flushConsumeQueueLeastPages", "the file ConsumeQueue is flushed every flushIntervalConsumeQueue, however little was written"),
	inertBool[Broker]("messageIndexSafe", "the key index is written to Pebble with the ConsumeQueue and recovered with it; there are no IndexFiles to recover"),
	inertBool[Broker]("enablePopBufferMerge", "POP checkpoints are written to the index directly; there is no buffer to merge them in"),
	inertBool[Broker]("enablePopLog", "no separate POP operation log"),
	// RocketMQ 5.3.3 reads offsetCheckInSlave on a SLAVE only
	// (DefaultMessageStore.nextOffsetCorrection and
	// DefaultPullMessageResultHandler): without it a pull outside what the
	// slave holds keeps the requested offset as nextBeginOffset, and a
	// PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY naming the group's
	// broker; with it the slave's own queue bound is nextBeginOffset
	// (still under PULL_RETRY_IMMEDIATELY naming the master on a classic
	// slave, whose composeResponseHeader turns every miss into that: the
	// push consumer takes nextBeginOffset all the same and continues from
	// the slave's bound on the master). The OffsetMovedEvent it builds is
	// only logged: 5.3.3 never calls generateOffsetMovedEvent.
	inertBool[Broker]("offsetCheckInSlave", "a slave always answers a pull outside what it holds with the requested offset as nextBeginOffset, as RocketMQ's slave does with offsetCheckInSlave=false (its default): a slave's queue can start later (a new slave copies from the master's newest segment) or end earlier (replication behind) than the master's, and with true RocketMQ's slave hands its own bound to the consumer, which then skips messages the master holds (the later start) or consumes again what it had (the earlier end); on a master RocketMQ ignores the key too, and 5.3.3 only logs the OffsetMovedEvent it names"),

	// Keys RocketMQ 5.3 itself does not read.
	inertBool[Broker]("highSpeedMode", reasonUnread),
	inertBool[Broker]("debugLockEnable", reasonUnread),
	inertBool[Broker]("commercialEnable", "RocketMQ 5 no longer has this key"),
	inertBool[Broker]("isEnableBatchPush", "RocketMQ does not read this spelling (its key is enableBatchPush, a DLedger setting)"),
	inertInt[Broker]("maxDelayTime", "RocketMQ 5.3's broker reads no such key"),

	// RocketMQ's StorePathConfigHelper derives these from
	// storePathRootDir; no RocketMQ version reads these keys.
	inertRootPath("storeCheckpoint", "checkpoint", "RocketMQ reads no such key and keeps the checkpoint at <storePathRootDir>/checkpoint; so does rocketkv"),
	inertRootPath("abortFile", "abort", "RocketMQ reads no such key and keeps the abort file at <storePathRootDir>/abort; so does rocketkv"),
	inertRootPath("storePathConsumeQueue", "consumequeue", "RocketMQ reads no such key and keeps the file ConsumeQueue in <storePathRootDir>/consumequeue; so does rocketkv"),
	inertRootPath("storePathIndex", "index", "RocketMQ reads no such key and keeps its IndexFiles in <storePathRootDir>/index; rocketkv keeps the key index in Pebble"),
},
	// Thread pools' queues and how long requests may wait in them.
	inertInts[Broker](reasonQueueCapacity, "pullThreadPoolQueueCapacity", "litePullThreadPoolQueueCapacity",
		"replyThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity", "clientManagerThreadPoolQueueCapacity",
		"consumerManagerThreadPoolQueueCapacity", "heartbeatThreadPoolQueueCapacity", "endTransactionPoolQueueCapacity",
		"adminBrokerThreadPoolQueueCapacity", "ackThreadPoolQueueCapacity", "loadBalanceThreadPoolQueueCapacity",
		"putThreadPoolQueueCapacity"),
	inertInts[Broker](reasonQueueWait, "waitTimeMillsInPullQueue", "waitTimeMillsInLitePullQueue",
		"waitTimeMillsInHeartbeatQueue", "waitTimeMillsInTransactionQueue", "waitTimeMillsInAckQueue",
		"waitTimeMillsInAdminBrokerQueue"),
	inertBools[Broker](reasonQueueWait, "brokerFastFailureEnable"),
	// Filter bit maps in the ConsumeQueue's extension files.
	inertInts[Broker](reasonFilterBitMap, "expectConsumerNumUseFilter", "maxErrorRateOfBloomFilter", "filterDataCleanTimeSpan"),
	inertBools[Broker](reasonFilterBitMap, "enableCalcFilterBitMap"),
	// Keys RocketMQ 5.3's BrokerConfig, MessageStoreConfig and
	// NettyClientConfig declare, with getters no class calls.
	inertInts[Broker](reasonUnread, "cleanOfflineBrokerInterval", "cleanSwapedMapInterval",
		"commitLogForceSwapMapInterval", "commitLogSwapMapInterval", "commitLogSwapMapReserveFileNum",
		"dispatchCqCacheNum", "dispatchCqThreads", "flushConsumerOffsetHistoryInterval",
		"logicQueueForceSwapMapInterval", "logicQueueSwapMapInterval", "logicQueueSwapMapReserveFileNum",
		"maxBatchDeleteFilesNum", "maxReconnectIntervalTimeSeconds", "maxRecoveryCommitlogFiles",
		"maxSlaveResendLength", "maxTopicLength", "memTableFlushIntervalMs", "pullBatchMaxMessageCount",
		"putMessageTimeout", "putMsgIndexHightWater", "rocksdbFlushWalFrequency", "rocksdbWalFileRollingThreshold"),
	inertBools[Broker](reasonUnread, "dispatchFromSenderThread", "enableAsyncReput", "enableCleanExpiredOffset",
		"mappedFileSwapEnable", "realTimePersistRocksDBConfig"),
	// Settings of a mechanism whose switch rocketkv refuses (fields.go:
	// enableDLegerCommitLog): with the switch off, RocketMQ does not read
	// them either.
	inertStrings[Broker](reasonDLedger, "dLegerGroup", "dLegerPeers", "dLegerSelfId", "preferredLeaderId",
		"storePathDLedgerCommitLog"),
	inertBools[Broker](reasonDLedger, "enableBatchPush"),
	// RocketMQ's RocksDB store (storeType=defaultRocksDB and its
	// RocksDB-kept offsets and configs).
	inertStrings[Broker](reasonRocksDB, "rocksdbCompressionType", "bottomMostCompressionTypeForConsumeQueueStore"),
	inertInts[Broker](reasonRocksDB, "cleanRocksDBDirtyCQIntervalMin", "statRocksDBCQIntervalSec"),
	inertBools[Broker](reasonRocksDB, "enableRocksDBLog"),
	// The off-heap write buffers of transientStorePoolEnable and the
	// service that commits them into the mapped file.
	inertInts[Broker](reasonTransientPool, "transientStorePoolSize", "commitIntervalCommitLog",
		"commitCommitLogLeastPages", "commitCommitLogThoroughInterval"),
	inertBools[Broker](reasonTransientPool, "fastFailIfNoBufferInStorePool"),
	// Periodic flushes of what rocketkv writes to the index as it changes.
	inertInts[Broker]("consumer offsets are written to the index as they are committed; there is no consumerOffset.json to flush",
		"flushConsumerOffsetInterval"),
	inertInts[Broker]("the delay levels' progress is written to the index as it advances; there is no delayOffset.json to flush",
		"flushDelayOffsetInterval"),
	inertInts[Broker]("one goroutine reads due timer messages back and stores them in their topics; there are no timer thread pools",
		"timerGetMessageThreadNum", "timerPutMessageThreadNum"),
)

// Reasons shared by several of brokerInert's keys.
const (
	// reasonQueueCapacity: 10,000 is remoting.DefaultQueueSize, the
	// broker's worker queue.
	reasonQueueCapacity = "no per-request-code queues; requests wait for a worker in one queue of 10,000 (SYSTEM_BUSY when full)"
	reasonQueueWait     = "only sends waiting for the index expire (waitTimeMillsInSendQueue); other requests are not expired in a queue"
	reasonFilterBitMap  = "no consume-queue bit maps of filter results: tag and SQL92 filters are evaluated on each entry and message"
	reasonUnread        = "RocketMQ 5.3 declares it but nothing reads it"
	reasonDLedger       = "a DLedger CommitLog setting; rocketkv refuses enableDLegerCommitLog and replicates with classic master-slave HA"
	reasonRocksDB       = "a setting of RocketMQ's RocksDB store; rocketkv's index is Pebble, set by the index* keys"
	reasonTransientPool = "appends are written into the mapped segment directly; there is no off-heap write buffer pool to size or commit"
)

// namesrvInert lists the RocketMQ name server keys (NamesrvConfig and its
// Netty settings) that rocketkv's name server accepts without effect.
var namesrvInert = []inert[Namesrv]{
	inertInt[Namesrv]("defaultThreadPoolNums", "no thread pools; requests run on goroutines"),
	inertInt[Namesrv]("clientRequestThreadPoolNums", "no thread pools; route queries run on goroutines"),
	inertInt[Namesrv]("serverWorkerThreads", "no Netty server: the network event loops are sized by the Go runtime"),
	inertInt[Namesrv]("serverSelectorThreads", "no Netty server: the network event loops are sized by the Go runtime"),
	inert[Namesrv]{key: "rocketmqHome", reason: "no RocketMQ installation is read; kvConfigPath and the -c file are given directly", parse: func(string) error { return nil }},
	inert[Namesrv]{key: "configStorePath", reason: "UPDATE_NAMESRV_CONFIG writes the changes back into the file given with -c", parse: func(string) error { return nil }},
	inertBool[Namesrv]("clusterTest", "RocketMQ's test mode, which answers every request code as a route request and asks the productEnvName environment's name servers for topics it does not know, is not there; routes come from this name server's brokers"),
	inertInt[Namesrv]("clientRequestThreadPoolQueueCapacity", "no thread pools; requests waiting for a worker are bounded by one queue (SYSTEM_BUSY when full)"),
	inertInt[Namesrv]("defaultThreadPoolQueueCapacity", "no thread pools; requests waiting for a worker are bounded by one queue (SYSTEM_BUSY when full)"),
	inertInt[Namesrv]("unRegisterBrokerQueueCapacity", "unregistrations are applied as they arrive; there is no queue to size"),
	inert[Namesrv]{key: "productEnvName", reason: "it names the environment RocketMQ's clusterTest mode asks for routes, which is not there", parse: func(string) error { return nil }},
}

// namesrvClientInert are RocketMQ's NettyClientConfig keys, which its name
// server reads for the connections of its embedded controller and of its
// NOTIFY_MIN_BROKER_ID_CHANGE notices: rocketkv's name server sends those
// notices (and its embedded controller its role-change notices) with its
// own settings.
var namesrvClientInert = slices.Concat(
	inertInts[Namesrv](namesrvClientSetting, "channelNotActiveInterval", "clientAsyncSemaphoreValue", "clientCallbackExecutorThreads",
		"clientChannelMaxIdleTimeSeconds", "clientOnewaySemaphoreValue", "clientSocketRcvBufSize", "clientSocketSndBufSize",
		"clientWorkerThreads", "connectTimeoutMillis", "maxReconnectIntervalTimeSeconds"),
	inertBools[Namesrv](namesrvClientSetting, "clientCloseSocketIfTimeout", "clientPooledByteBufAllocatorEnable", "disableCallbackExecutor",
		"disableNettyWorkerGroup", "enableReconnectForGoAway", "isScanAvailableNameSrv", "scanAvailableNameSrv"),
	inertStrings[Namesrv](namesrvClientSetting, "socksProxyConfig"),
)

// namesrvClientSetting is the reason of namesrvClientInert's keys.
const namesrvClientSetting = "a client connection setting (NettyClientConfig), read by RocketMQ's name server for its embedded controller and its NOTIFY_MIN_BROKER_ID_CHANGE notices; rocketkv's name server sends those notices, and its embedded controller its NOTIFY_BROKER_ROLE_CHANGED notices, with its own settings (over TLS as tls.enable says)"
