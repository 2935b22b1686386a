package configs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Flush disk types, as RocketMQ spells them in broker.conf.
const (
	AsyncFlush = "ASYNC_FLUSH"
	SyncFlush  = "SYNC_FLUSH"
)

// What durable index writes wait for, selectable with indexWalSync.
const (
	// IndexWALSyncAuto follows flushDiskType (the default): always under
	// SYNC_FLUSH, interval under ASYNC_FLUSH, so the index's writes are as
	// durable as the messages they describe.
	IndexWALSyncAuto = "auto"
	// IndexWALSyncAlways waits for an fdatasync of the index's log.
	IndexWALSyncAlways = "always"
	// IndexWALSyncInterval waits for the log write and syncs the log
	// every indexWalSyncIntervalMillis.
	IndexWALSyncInterval = "interval"
)

// ConsumeQueue layouts selectable with storeType.
const (
	// StoreTypeKV keeps the ConsumeQueue in Pebble (the default).
	StoreTypeKV = "kv"
	// StoreTypeFile keeps RocketMQ's file ConsumeQueue layout.
	StoreTypeFile = "file"
)

// Metrics exporters selectable with metricsExporterType (RocketMQ 5's
// names; its OTLP_GRPC and LOG exporters are not offered).
const (
	// MetricsDisabled exports nothing (the default).
	MetricsDisabled = "DISABLE"
	// MetricsPROM serves Prometheus' /metrics on
	// metricsPromExporterHost:metricsPromExporterPort.
	MetricsPROM = "PROM"
)

// Broker is the whole configuration of one broker process. Field names
// follow RocketMQ's BrokerConfig and MessageStoreConfig; the key each field
// is read from is listed in the field table (fields.go) and documented with
// its default in configs/broker.yaml.
type Broker struct {
	// Identity and cluster membership.
	BrokerClusterName string
	BrokerName        string
	BrokerID          int64
	BrokerIP1         string
	ListenPort        int
	// BindAddress is the address the listeners (listenPort, the fast
	// channel) bind; "0.0.0.0" (the default) is every interface.
	BindAddress      string
	NamesrvAddr      string
	BrokerRole       string
	BrokerPermission int
	RegionID         string
	TraceOn          bool
	// StoreReplyMessageEnable stores request/reply replies in the reply
	// topic besides pushing them to the requester.
	StoreReplyMessageEnable bool

	// Master-slave replication (RocketMQ's classic HA).
	FastListenPort          int
	BrokerIP2               string
	HAListenPort            int
	HAMasterAddress         string
	HASendHeartbeatInterval time.Duration
	HAHousekeepingInterval  time.Duration
	HATransferBatchSize     int
	HAMaxGapNotInSync       int64
	// HAFlowControlEnable caps what each slave is sent per second at
	// MaxHATransferByteInSecond.
	HAFlowControlEnable       bool
	MaxHATransferByteInSecond int64
	SlaveTimeout              time.Duration
	InSyncReplicas            int
	MinInSyncReplicas         int
	SlaveReadEnable           bool
	// EnableSlaveActingMaster registers the broker with
	// enableActingMaster and, on a slave, follows its group's members
	// (asked every SyncBrokerMemberGroupPeriod, and
	// NOTIFY_MIN_BROKER_ID_CHANGE): the slave of the smallest id in a
	// group without its master is its acting master. Both heartbeat every
	// BrokerHeartbeatInterval and register with BrokerNotActiveTimeout as
	// heartbeatTimeoutMillis.
	EnableSlaveActingMaster bool
	// CompatibleWithOldNameSrv (RocketMQ's default true) has a broker
	// under EnableSlaveActingMaster use the requests a RocketMQ 4.x name
	// server serves: it heartbeats with a oneway QUERY_DATA_VERSION
	// carrying its topics' data version and reads its group's members
	// from the route of rmq_sys_SYNC_BROKER_MEMBER_<brokerName>. False,
	// it sends RocketMQ 5's BROKER_HEARTBEAT and GET_BROKER_MEMBER_GROUP.
	CompatibleWithOldNameSrv bool
	// SyncMasterFlushOffsetWhenStartup has a slave whose checkpoint holds
	// no masterFlushedOffset (0) take its master's: from an
	// EXCHANGE_BROKER_HA_INFO that names the master's HA address, and,
	// under EnableSlaveActingMaster, by asking the master with one when
	// NOTIFY_MIN_BROKER_ID_CHANGE says it is back (RocketMQ's
	// onMasterOnline). The value is kept in the checkpoint and shown by
	// haStatus; as in RocketMQ, nothing else reads it.
	SyncMasterFlushOffsetWhenStartup bool
	// EnableRemoteEscape has an acting master send the messages of its
	// special services to another group's master (RocketMQ's
	// EscapeBridge); without it they are refused.
	EnableRemoteEscape          bool
	SyncBrokerMemberGroupPeriod time.Duration
	BrokerHeartbeatInterval     time.Duration
	BrokerNotActiveTimeout      time.Duration
	SendHeartbeatTimeout        time.Duration
	// EnableControllerMode has the broker take its broker id and its role
	// from a controller (RocketMQ 5's controller mode): brokerId and
	// brokerRole in the file are ignored, the broker registers with the
	// controllers at ControllerAddr and is restarted in place as master
	// or slave when the controller elects (broker.Supervisor).
	EnableControllerMode bool
	// ControllerAddr is the controllers' addresses, separated by ';'
	// (a host name resolved to its addresses under
	// FetchControllerAddrByDNSLookup).
	ControllerAddr                 string
	FetchControllerAddrByDNSLookup bool
	// SyncBrokerMetadataPeriod is how often the broker asks the
	// controller for its group's master (GET_REPLICA_INFO);
	// CheckSyncStateSetPeriod how often a master checks which slaves
	// are in sync; SyncControllerMetadataPeriod how often the broker
	// asks which controller leads (GET_METADATA_INFO).
	SyncBrokerMetadataPeriod     time.Duration
	CheckSyncStateSetPeriod      time.Duration
	SyncControllerMetadataPeriod time.Duration
	// ControllerHeartBeatTimeout is the heartbeat timeout the broker
	// tells the controller (controllerHeartBeatTimeoutMills): silent that
	// long, it is taken for dead.
	ControllerHeartBeatTimeout time.Duration
	// BrokerElectionPriority is sent with each heartbeat: the lower, the
	// likelier the controller elects the broker.
	BrokerElectionPriority int
	// AllAckInSyncStateSet makes a controller-mode master's sends wait
	// for every broker of its sync state set.
	AllAckInSyncStateSet bool
	// HAMaxTimeSlaveNotCatchup is how long a slave of a controller-mode
	// master's sync state set may stay behind before the master proposes
	// it out (AutoSwitch HA).
	HAMaxTimeSlaveNotCatchup time.Duration
	// SyncFromLastFile makes an empty controller-mode slave ask its
	// master for its newest segment only; AsyncLearner makes it a
	// learner the master never puts in the sync state set.
	SyncFromLastFile bool
	AsyncLearner     bool
	// StorePathEpochFile and StorePathBrokerIdentity are the epoch file
	// and the broker identity file ("" for epochFileCheckpoint and
	// brokerIdentity in storePathRootDir, RocketMQ's defaults).
	StorePathEpochFile      string
	StorePathBrokerIdentity string
	// AccessMessageInMemoryMaxRatio is the share (%) of the machine's
	// memory from the end of the CommitLog taken to be in the page cache:
	// pulls of older messages are sent to a slave under SlaveReadEnable.
	AccessMessageInMemoryMaxRatio int
	// DisableConsumeIfConsumerReadSlowly turns a group's consumption off
	// when one of its pulls reads further than ConsumerFallbehindThreshold
	// bytes behind the end of the CommitLog.
	DisableConsumeIfConsumerReadSlowly bool
	ConsumerFallbehindThreshold        int64
	// ColdDataFlowControlEnable turns on RocketMQ 5's cold-data read flow
	// control: the bytes each consumer group pulls from outside the page
	// cache are counted, and a group past CgColdReadThreshold (or any
	// group while all of them together are past GlobalColdReadThreshold)
	// has its pulls of cold messages refused SYSTEM_BUSY (push consumers)
	// or held for a while and then served one message at a time (pull
	// consumers). The counts start again every 5 s.
	ColdDataFlowControlEnable bool
	// CgColdReadThreshold is a group's cold-read budget in bytes per
	// period, unless an administrator set one for the group
	// (updateColdDataFlowCtrGroupConfig).
	CgColdReadThreshold int64
	// GlobalColdReadThreshold is the budget of all groups together.
	GlobalColdReadThreshold int64
	// ColdCtrStrategyEnable lets the broker raise the budget of groups
	// that reach it (by half) and lower the highest budgets (by a fifth,
	// down to CgColdReadThreshold) while the broker as a whole reads too
	// much cold data; UsePIDColdCtrStrategy chooses a PID controller
	// aiming at 80% of GlobalColdReadThreshold to decide when (else the
	// simple rule: raise always, lower while over the global budget).
	ColdCtrStrategyEnable bool
	UsePIDColdCtrStrategy bool
	// AccessMessageInMemoryHotRatio is the share (%) of the machine's
	// memory from the end of the CommitLog that cold-data flow control
	// takes as hot: a read that starts further behind the end is in the
	// cold area (RocketMQ's checkInColdAreaByCommitOffset). A pull of
	// such a message is the one a limited group is refused or held on.
	AccessMessageInMemoryHotRatio int
	// ColdDataScanEnable makes a read in the cold area count as cold
	// only when a scan of the CommitLog's page-cache residency (mincore(2)
	// every TimerColdDataCheckInterval) last found the first page of the
	// read's group of SampleSteps pages out of the page cache; false
	// counts every read in the cold area as cold.
	ColdDataScanEnable bool
	// SampleSteps is how many pages the scan judges by the first of them
	// (0 or below: 32), read at start.
	SampleSteps int
	// TimerColdDataCheckInterval is the period of the scan.
	TimerColdDataCheckInterval time.Duration

	// Topics and groups.
	AutoCreateTopicEnable bool
	// ClusterTopicEnable and BrokerTopicEnable make the topics named after
	// the cluster and the broker readable and writable (they are always
	// inheritable: templates of topics created on send).
	ClusterTopicEnable          bool
	BrokerTopicEnable           bool
	AutoCreateSubscriptionGroup bool
	// EnableCreateSysGroup creates a CID_RMQ_SYS_ group on first use even
	// with AutoCreateSubscriptionGroup off (enableCreateSysGroup).
	EnableCreateSysGroup bool
	// ConfigBlackList names, ';'-separated, keys UPDATE_BROKER_CONFIG may
	// not change, on top of configBlackList, brokerConfigPath and
	// rocketmqHome.
	ConfigBlackList string
	// ValidateSystemTopicWhenUpdateTopic refuses topic creation, update
	// and deletion by admin requests for every system topic; off, only
	// those whose configuration the broker owns are refused.
	ValidateSystemTopicWhenUpdateTopic bool
	// EnableMixedMessageType lets admin requests give a topic the MIXED
	// message type.
	EnableMixedMessageType bool
	// EnableSplitMetadata answers GET_ALL_TOPIC_CONFIG and
	// GET_ALL_SUBSCRIPTIONGROUP_CONFIG a page at a time when the request
	// asks for one (topicSeq/groupSeq, maxTopicNum/maxGroupNum,
	// dataVersion: RocketMQ 5.3.4's clients do); off, or to a request
	// that asks none, the whole table. SplitMetadataSize caps a page.
	EnableSplitMetadata   bool
	SplitMetadataSize     int
	DefaultTopicQueueNums int
	// MaxTransferCountOnMessageInMemory and
	// MaxTransferBytesOnMessageInMemory bound one pull's answer (the
	// first message always goes, whatever its size).
	MaxTransferCountOnMessageInMemory int
	MaxTransferBytesOnMessageInMemory int
	// NotifyConsumerIdsChangedEnable sends NOTIFY_CONSUMER_IDS_CHANGED to
	// a group's consumers when its membership changes (each group can
	// also turn it off in its own configuration).
	NotifyConsumerIdsChangedEnable bool
	// MessageDelayLevel lists the delays of the delay levels 1, 2, ...
	// (RocketMQ's syntax: "1s 5s 10s 30s 1m ... 2h", units s, m, h, d).
	MessageDelayLevel string
	// TraceTopicEnable creates MsgTraceTopicName (one queue) at start, for
	// clients that send message traces to it.
	TraceTopicEnable  bool
	MsgTraceTopicName string

	// Name server registration.
	RegisterNameServerPeriod time.Duration
	RegisterBrokerTimeout    time.Duration
	CompressedRegister       bool
	// ForceRegister sends the topics with every periodic registration;
	// false asks the name servers for their data version first (see
	// broker.yaml).
	ForceRegister bool

	// Finding the name servers (RocketMQ's BrokerController and
	// BrokerOuterAPI). Without NamesrvAddr and with
	// FetchNamesrvAddrByAddressServer, the list is asked of the HTTP
	// address server that RmqAddressServerDomain and
	// RmqAddressServerSubGroup name (namesrv.AddressServerURL), every
	// FetchNamesrvAddrInterval. With NamesrvAddr and
	// FetchNameSrvAddrByDnsLookup, each of its hosts stands for every
	// address it resolves to, resolved again every
	// UpdateNameServerAddrPeriod. Both periods are any integer of
	// milliseconds when unused, positive when used.
	FetchNamesrvAddrByAddressServer bool
	FetchNamesrvAddrInterval        time.Duration
	RmqAddressServerDomain          string
	RmqAddressServerSubGroup        string
	FetchNameSrvAddrByDnsLookup     bool
	UpdateNameServerAddrPeriod      time.Duration

	// ReconnectForGoAway is enableReconnectForGoAway (RocketMQ's
	// NettyClientConfig): a request of the broker's to a name server or
	// to its master answered GO_AWAY is sent once more on a new
	// connection to it (remoting.ClientOptions.ReconnectForGoAway, asked
	// at each GO_AWAY; UPDATE_BROKER_CONFIG changes it while the broker
	// runs).
	ReconnectForGoAway bool

	// SlaveSyncInterval is how often a slave copies its master's topics,
	// groups, consumer and delay offsets and request modes
	// (slaveSyncIntervalMillis, rocketkv's own key; RocketMQ's fixed 60 s).
	// Topics and groups are also copied as soon as a replicated message
	// names a topic the slave has no config for.
	SlaveSyncInterval time.Duration

	// Consumption.
	LongPollingEnable bool
	// LitePullMessageEnable serves LITE_PULL_MESSAGE (the lite pull
	// consumers'); false refuses it with NO_PERMISSION, BROKER_FORBIDDEN.
	LitePullMessageEnable bool
	// RejectPullConsumerEnable keeps pull consumers out: their heartbeats
	// register nothing and their pulls are answered SUBSCRIPTION_NOT_EXIST,
	// RocketMQ's own groups excepted.
	RejectPullConsumerEnable bool
	// UseServerSideResetOffset makes INVOKE_BROKER_TO_RESET_OFFSET move the
	// group's committed offsets and tell each pull consumer at its next
	// pull (RocketMQ 5's way, the default); false answers it as RocketMQ 4
	// did: the offsets are computed and pushed to the group's online
	// clients (RESET_CONSUMER_CLIENT_OFFSET), which commit them
	// themselves. Read by each request.
	UseServerSideResetOffset bool
	// InitPopOffsetByCheckMsgInMem makes a group's first pop of a queue
	// with ConsumeInitMode.MAX (what RocketMQ 5's gRPC proxy sends) start
	// at 0 instead of the last message while the queue's first message is
	// still in memory.
	InitPopOffsetByCheckMsgInMem bool
	ShortPollingTime             time.Duration
	ChannelExpiredTimeout        time.Duration // heartbeat expiry of producers and consumers
	// DefaultMessageRequestMode is the request mode (PULL or POP) that
	// QUERY_ASSIGNMENT gives a group and topic no SET_MESSAGE_REQUEST_MODE
	// named, and DefaultPopShareQueueNum its popShareQueueNum when POP.
	DefaultMessageRequestMode string
	DefaultPopShareQueueNum   int
	// ServerLoadBalancerEnable makes QUERY_ASSIGNMENT divide a topic's
	// queues among the group's clients; off, every client is given every
	// queue.
	ServerLoadBalancerEnable bool
	// LoadBalancePollNameServerInterval is how long QUERY_ASSIGNMENT uses a
	// topic's route from the name servers before asking for it again.
	LoadBalancePollNameServerInterval time.Duration
	// EnablePropertyFilter serves SQL92 subscriptions (filter package).
	EnablePropertyFilter bool
	// FilterSupportRetry makes a pull of a group's %RETRY% topic by a
	// SQL92 subscription evaluate, for each message, the group's SQL92
	// subscription to the topic the message was first sent to (its
	// RETRY_TOPIC property) instead of the retry subscription's own
	// expression, as RocketMQ's ExpressionForRetryMessageFilter does.
	FilterSupportRetry bool
	// RecallMessageEnable serves RECALL_MESSAGE; a broker that is not
	// writable serves it only with AllowRecallWhenBrokerNotWriteable.
	RecallMessageEnable bool
	// StartAcceptSendRequestTimeStamp (ms since the epoch) refuses sends,
	// replies and recalls until then.
	StartAcceptSendRequestTimeStamp   int64
	AllowRecallWhenBrokerNotWriteable bool

	// ClearRetryTopicWhenDeleteTopic makes DELETE_TOPIC_IN_BROKER also
	// delete the pop-retry topics (V1 and V2) of the groups with offsets
	// on the topic, as RocketMQ 5.3 does by default.
	ClearRetryTopicWhenDeleteTopic bool

	// POP consumption.
	EnableRetryTopicV2                 bool
	RetrieveMessageFromPopRetryTopicV1 bool
	// EnableNotifyAfterPopOrderLockRelease wakes the pops held on an
	// orderly queue when its batch is acknowledged or its lock runs out.
	EnableNotifyAfterPopOrderLockRelease bool
	// PopResponseReturnActualRetryTopic answers pops with pop-retry
	// messages under their own topic, without POP_CK.
	PopResponseReturnActualRetryTopic bool
	// SkipWhenCKRePutReachMaxTimes drops a message whose revive failed 17
	// times instead of retrying it every 2 h for ever.
	SkipWhenCKRePutReachMaxTimes bool
	// PopReviveStageAhead turns POP's staged revive on (rocketkv's own
	// key, ms; 0 off): when the messages coming due within it would take
	// revive longer to re-put than the time left, they are copied to the
	// pop-retry topic ahead of their deadline and handed out from it on
	// (pop.Config.StageAhead).
	PopReviveStageAhead time.Duration
	// EnablePopMessageThreshold makes a non-orderly pop skip a queue of
	// which the group has more than PopInflightMessageThreshold messages
	// in flight (popped, neither acknowledged nor revived yet).
	EnablePopMessageThreshold   bool
	PopInflightMessageThreshold int64
	// PopFromRetryProbability is the percent of a group's pops that read
	// its pop-retry topics before the topic (popFromRetryProbability).
	PopFromRetryProbability int
	PopPollingSize          int
	MaxPopPollingSize       int
	// PopLongPollingForceNotifyInterval: a held POP whose filter rejects
	// the new messages of its queue is woken all the same when one of
	// them is at a queue offset whose successor is a multiple of this
	// (RocketMQ's force notify), so its consumer's offset moves past
	// what it skips. 0 or less: never.
	PopLongPollingForceNotifyInterval int64

	// Transactions (RocketMQ's BrokerConfig keys).
	// RejectTransactionMessage refuses half messages (NO_PERMISSION).
	RejectTransactionMessage bool
	// TransactionTimeOut is how old an open half message must be before
	// its producer group is asked about it.
	TransactionTimeOut time.Duration
	// TransactionCheckInterval is the time between two checks of one
	// open half message.
	TransactionCheckInterval time.Duration
	// TransactionCheckMax is how many checks an open half gets before it
	// is given up (stored in TRANS_CHECK_MAX_TIME_TOPIC) in the pass of
	// the last one; 0 or less gives it one, as on RocketMQ.
	TransactionCheckMax int

	// Timer messages (RocketMQ 5's TIMER_DELIVER_MS, TIMER_DELAY_SEC,
	// TIMER_DELAY_MS).
	// EnableCompaction keeps the newest message of each key of the topics
	// whose cleanup.policy is COMPACTION past CommitLog retention, and
	// serves their pulls from those copies (RocketMQ's compaction store);
	// when false such topics are retained by age like any other.
	EnableCompaction bool

	// TimerWheelEnable accepts timer messages; when false they are refused.
	TimerWheelEnable bool
	// TimerStopDequeue stops the delivery of due timer messages until it
	// is turned off again.
	TimerStopDequeue bool
	// TimerStopEnqueue holds back the timer messages parked from then on:
	// they stay in rmq_sys_wheel_timer undelivered until it is turned off
	// again (those parked before are delivered when due).
	TimerStopEnqueue bool
	// EnableScheduleMessageStats counts each delivery of a delayed
	// message as RocketMQ does: a put of its topic (statistics and
	// metrics) and a get of SCHEDULE_TOPIC_XXXX by SCHEDULE_CONSUMER;
	// when false, neither is counted.
	EnableScheduleMessageStats bool
	// TimerPrecision is timerPrecisionMs: delivery times are rounded down
	// to it. It is 100, 200, 500 or 1000 ms: as RocketMQ's setter, the
	// loader rounds another value down to one of those (100 at least).
	TimerPrecision time.Duration
	// TimerMaxDelay is timerMaxDelaySec: timer messages due later are
	// refused.
	TimerMaxDelay time.Duration
	// TimerRollWindowSlot is timerRollWindowSlot (in slots of
	// TimerPrecision; default two days' worth): a timer message due
	// further ahead of its store time is parked again (rolled) within
	// that window, so CommitLog retention keeps a copy until it is due.
	TimerRollWindowSlot int
	// TimerCongestNumEachSlot is timerCongestNumEachSlot: a timer send is
	// refused when more than this many timer messages are indexed in its
	// delivery slot (a precision's span of time), always from twice as
	// many, at random between (RocketMQ's TimerMessageStore.isReject).
	// The default, 2^31-1, refuses none.
	TimerCongestNumEachSlot int

	// Store.
	StorePathRootDir string
	// StorePathCommitLog is the directory of the CommitLog segments as
	// configured; empty means <StorePathRootDir>/commitlog. CommitLogDir
	// resolves it.
	StorePathCommitLog string
	StoreType          string
	// CQDoubleWrite is rocksdbCQDoubleWriteEnable: both ConsumeQueue
	// layouts are written (Pebble and RocketMQ's consumequeue/ files);
	// StoreType picks the one that serves reads.
	CQDoubleWrite bool
	// FlushIntervalConsumeQueue is how often the file ConsumeQueue is
	// flushed (flushIntervalConsumeQueue).
	FlushIntervalConsumeQueue  time.Duration
	MappedFileSizeCommitLog    int64
	MappedFileSizeConsumeQueue int64
	FlushDiskType              string
	FlushIntervalCommitLog     time.Duration
	FlushCommitLogLeastPages   int
	FlushCommitLogThorough     time.Duration
	// WakeFlushWhenPutMessage wakes the async flusher at every put.
	WakeFlushWhenPutMessage bool
	SyncFlushTimeout        time.Duration
	// ReadUnCommitted lets consumers see, under SYNC_FLUSH, messages not
	// flushed yet (readUnCommitted; default false: the index follows the
	// flushed offset, as RocketMQ's reput follows its confirm offset).
	ReadUnCommitted       bool
	MaxMessageSize        int
	FileReservedTime      time.Duration
	DeleteWhen            []int
	DiskMaxUsedSpaceRatio int
	// CleanFileForciblyEnable lets retention delete the oldest segments
	// before their fileReservedTime when the disk is nearly full.
	CleanFileForciblyEnable bool
	// DiskSpaceCleanForciblyRatio is the disk use (%) above which that
	// forced deletion starts (RocketMQ's key, 85).
	DiskSpaceCleanForciblyRatio int
	// DiskSpaceWarningLevelRatio is the disk use (%) above which sends
	// are refused with SERVICE_NOT_AVAILABLE until retention frees space
	// (RocketMQ's key, 90).
	DiskSpaceWarningLevelRatio int
	CleanResourceInterval      time.Duration
	CheckCRCOnRecover          bool
	// EnabledAppendPropCRC ends every record the broker appends with a
	// __CRC32# property holding the CRC of the record's other bytes
	// (RocketMQ's key, false; commitlog.Config.AppendPropCRC). Read at
	// start.
	EnabledAppendPropCRC bool
	// ForceVerifyPropCRC makes recovery (with CheckCRCOnRecover) verify
	// the __CRC32# property of each record instead of its body CRC; a
	// record without one ends the log, as in RocketMQ (its key, false;
	// commitlog.Config.ForceVerifyPropCRC). Read at start.
	ForceVerifyPropCRC bool
	// DataReadAheadEnable leaves the kernel's read-ahead on for the
	// CommitLog segments no longer written; false advises them for random
	// reads (RocketMQ's key, true; SET_COMMITLOG_READ_MODE changes it).
	DataReadAheadEnable bool
	// MessageIndexEnable indexes every message's KEYS and UNIQ_KEY for
	// QUERY_MESSAGE (RocketMQ's key of the same name).
	MessageIndexEnable bool
	// MaxMsgsNumBatch caps the messages a query by key returns, whatever
	// the request's maxNum.
	MaxMsgsNumBatch int
	// DefaultQueryMaxNum is the maxNum of a query by unique key (the
	// clients' lookup by message id), whatever the request says.
	DefaultQueryMaxNum int
	// EnableLMQ serves light message queues (RocketMQ's enableLmq): topics
	// and groups named %LMQ%... exist without a config, with one queue.
	EnableLMQ bool
	// EnableMultiDispatch dispatches a message also into the light
	// message queues its INNER_MULTI_DISPATCH property names (RocketMQ's
	// enableMultiDispatch; with EnableLMQ).
	EnableMultiDispatch bool
	// IndexCheckpointDir is where index checkpoints for kvdump go; empty
	// means <StorePathRootDir>/checkpoints. A request may only name a
	// directory inside it.
	IndexCheckpointDir string
	// DispatchBatchInterval is the least time between two dispatch
	// batches while messages keep arriving (kvindex.DispatcherOptions'
	// BatchInterval); 0 dispatches each as soon as it can.
	DispatchBatchInterval time.Duration
	// MaxDispatchLagBytes bounds how far the CommitLog may run ahead of
	// the index: a send waits while dispatch is further behind (0: no
	// bound).
	MaxDispatchLagBytes int64
	// WaitTimeMillsInSendQueue is the longest a send waits for dispatch
	// to come within MaxDispatchLagBytes before it is answered
	// SYSTEM_BUSY.
	WaitTimeMillsInSendQueue time.Duration
	// IndexWALSync is what a durable index write (pop, ack, offset
	// commit, config change) waits for, as configured; IndexWALSyncMode
	// resolves IndexWALSyncAuto. IndexWALSyncAlways, an fdatasync
	// of the index's write-ahead log; IndexWALSyncInterval, the log write
	// only (it survives a crash of the process), the log being synced
	// every IndexWALSyncInterval.
	IndexWALSync string
	// IndexWALSyncInterval is the log's sync period under
	// IndexWALSyncInterval.
	IndexWALSyncInterval time.Duration

	// Memory bounds of per-queue and per-topic state.
	TopicConfigCacheSize  int
	QueueOffsetCacheSize  int
	ConsumeQueueCacheSize int
	// IndexBlockCacheMiB is the index's block cache in MiB: table blocks
	// kept in memory, on top of its memtables.
	IndexBlockCacheMiB int
	// GCPercent is the Go garbage collector's target (GOGC) the broker
	// binary sets unless the GOGC environment variable is set.
	GCPercent int
	// GoMaxProcs is the Go scheduler's processor count (GOMAXPROCS) the
	// broker binary sets unless the GOMAXPROCS environment variable is
	// set; 0 is one more than the CPUs Go would use.
	GoMaxProcs int
	// MemoryLimitMiB is the Go runtime's soft memory limit (GOMEMLIMIT)
	// in MiB the broker binary sets unless the GOMEMLIMIT environment
	// variable is set; 0 sets none. Near it the collector runs as often
	// as it must, whatever GCPercent says.
	MemoryLimitMiB int

	// Metrics: MetricsExporterType is MetricsDisabled or MetricsPROM; the
	// exporter listens on MetricsPromExporterHost (brokerIP1 when empty)
	// and MetricsPromExporterPort; MetricsLabel adds "key:value,..."
	// constant labels to every series.
	MetricsExporterType     string
	MetricsPromExporterHost string
	MetricsPromExporterPort int
	MetricsLabel            string
	// EnableStatsMetrics, EnableRequestMetrics, EnableConnectionMetrics,
	// EnableTransactionMetrics, EnableRemotingMetrics and
	// EnableMessageStoreMetrics serve their families of metrics (RocketMQ
	// 5.3's switches; see metrics.Families).
	EnableStatsMetrics        bool
	EnableRequestMetrics      bool
	EnableConnectionMetrics   bool
	EnableTransactionMetrics  bool
	EnableRemotingMetrics     bool
	EnableMessageStoreMetrics bool
	// EnablePopMetrics serves RocketMQ's POP metrics (rocketmq_pop_*:
	// the revive counters and gauges); false leaves them out and the pop,
	// ack and revive paths count nothing, as RocketMQ's PopMetricsManager
	// then keeps no-op counters. Read at start, as RocketMQ reads it.
	EnablePopMetrics bool
	// MetricsInDelta adds the label aggregation="delta" to every series,
	// as RocketMQ's metrics manager does whatever the exporter (its OTLP
	// exporter also reports deltas then; Prometheus counters stay
	// cumulative).
	MetricsInDelta bool
	// EnableLagAndDlqMetrics adds the consumer gauges (lag, in flight,
	// ready, queueing latency).
	EnableLagAndDlqMetrics bool
	// MetricsNameUnitSuffix (rocketkv's own key) serves the metric names
	// of RocketMQ 5.1.4 and later, a declared unit appended
	// (rocketmq_rpc_latency_milliseconds); false serves the bare names
	// of RocketMQ 5.0 to 5.1.3 (rocketmq_rpc_latency). Fixed at start.
	MetricsNameUnitSuffix bool
	// MetricsOtelCardinalityLimit caps the series of each metric fed per
	// topic or group (metrics.Sources.CardinalityLimit): the label sets
	// past it are counted in the metric's overflow series. With the
	// exporter on, a limit <= 0 stops the start, as it stops RocketMQ's
	// (OTel refuses it).
	MetricsOtelCardinalityLimit int

	// AclEnable turns on RocketMQ's plain access control (ACL 1.0): every
	// request is checked against the accounts of PlainAclFile.
	AclEnable bool
	// PlainAclFile is the plain_acl.yml read when AclEnable is set; empty
	// means $ROCKETMQ_HOME/conf/plain_acl.yml, where RocketMQ reads it.
	PlainAclFile string

	// Auth is RocketMQ 5.3's access control (ACL 2.0).
	Auth Auth

	// TLS is the listener's TLS (RocketMQ's tls.server.* keys).
	TLS TLS
	// ProxyProtocol says which connections of the listeners may open with
	// a PROXY protocol header.
	ProxyProtocol ProxyProtocol
	// Listener is the listeners' idle timeout and socket buffers.
	Listener Listener
	// TLSEnable is tls.enable: whether the broker dials the name servers
	// and the controllers (and the other brokers of its inner requests)
	// with TLS. "true" or "false"; empty (the default) follows RocketMQ:
	// TLS when tls.server.mode is enforcing.
	TLSEnable string

	// Logging.
	LogLevel  string
	LogFormat string
	// Log is where the log lines go: standard error, or a rolled file
	// (broker.log) in Log.Dir (see LogFile for the directory in force).
	Log LogFile
	// IsolateLogEnable puts the log file in a directory of the broker's
	// own under Log.Dir, <brokerName>_<brokerId>.
	IsolateLogEnable bool
}

// LogFile is where the broker's log lines go: Log, its directory
// <brokerName>_<brokerId> under logDir with isolateLogEnable, as
// RocketMQ's BrokerStartup names the directory of each broker's logs
// (brokerLogDir) so that brokers of one host keep apart. (RocketMQ 5.3's
// logback appends that name to rocketmqlogs without a separator; here it
// is a directory under logDir.)
func (b *Broker) LogFile() LogFile {
	l := b.Log
	if b.IsolateLogEnable && l.Dir != "" {
		l.Dir = filepath.Join(l.Dir, b.BrokerName+"_"+strconv.FormatInt(b.BrokerID, 10))
	}
	return l
}

// DefaultStoreRoot is RocketMQ's default store root, ~/store.
func DefaultStoreRoot() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "store"
	}
	return filepath.Join(home, "store")
}

// CommitLogDir is the directory of the CommitLog segments: storePathCommitLog,
// or when it is not set <storePathRootDir>/commitlog, as RocketMQ's
// MessageStoreConfig.getStorePathCommitLog. The lock, abort and checkpoint
// files stay in storePathRootDir either way.
func (b *Broker) CommitLogDir() string {
	if b.StorePathCommitLog != "" {
		return b.StorePathCommitLog
	}
	return filepath.Join(b.StorePathRootDir, "commitlog")
}

// IndexWALSyncMode is the IndexWALSync in force: IndexWALSyncAlways or
// IndexWALSyncInterval, with IndexWALSyncAuto resolved from FlushDiskType.
func (b *Broker) IndexWALSyncMode() string {
	if b.IndexWALSync != IndexWALSyncAuto {
		return b.IndexWALSync
	}
	if b.FlushDiskType == SyncFlush {
		return IndexWALSyncAlways
	}
	return IndexWALSyncInterval
}

// Settings returns every key's current value as text, under its canonical
// name (not an alias): what GET_BROKER_CONFIG reports. It is written from
// the fields when called, so it holds for a configuration built or changed
// in code as for one loaded, and each value parses back to the field's
// value (durations in the key's whole units).
func (b *Broker) Settings() map[string]string { return brokerSchema.settings(b) }

// ChangedKeys lists the keys whose values differ between b and next,
// secrets included (Settings reports them masked, so their texts match).
func (b *Broker) ChangedKeys(next *Broker) []string { return brokerSchema.changed(b, next) }

// DialNamesrvTLS reports whether the broker dials the name servers (and
// the controllers, through the same client as RocketMQ's BrokerOuterAPI)
// with TLS: tls.enable, or when it is empty, whether tls.server.mode is
// enforcing.
func (b *Broker) DialNamesrvTLS() bool { return DialTLS(b.TLSEnable, b.TLS.Mode) }

// DefaultBroker returns the configuration a broker runs with when no key is
// set. The values are RocketMQ's defaults unless the field table says
// otherwise.
func DefaultBroker() Broker { return brokerSchema.defaults() }

// ListenAddr is the address a listener of the broker on port binds:
// bindAddress and port, with 0.0.0.0 standing for every interface.
func (b *Broker) ListenAddr(port int) string { return listenAddr(b.BindAddress, port) }

// BlackListed reports the keys of props UPDATE_BROKER_CONFIG must refuse:
// configBlackList, brokerConfigPath and rocketmqHome, which RocketMQ never
// lets it change, plus those configBlackList names. Keys are compared by
// the key they set (any case, aliases, surrounding white space), as the
// update reads them: RocketMQ compares exactly, but it also sets only a
// key spelled exactly, so no other spelling gets past its list.
func (b *Broker) BlackListed(props map[string]string) []string {
	return blackListed(props, []string{"configBlackList", "brokerConfigPath", "rocketmqHome"}, b.ConfigBlackList,
		keyNorm(brokerSchema.canonical))
}

// keyNorm compares configuration keys by the key they set, or, for a key
// of no field, without regard to case and surrounding white space.
func keyNorm(canonical func(string) (string, bool)) func(string) string {
	return func(k string) string {
		if c, ok := canonical(k); ok {
			return c
		}
		return strings.ToLower(strings.TrimSpace(k))
	}
}
