package remoting

// Request codes (Java RequestCode). The comments say who sends them.

// Producing, consuming, offsets and queries: client to broker.
const (
	SendMessage             int32 = 10  // SEND_MESSAGE: long header names (Go client sends)
	SendMessageV2           int32 = 310 // SEND_MESSAGE_V2: letter header names (Java, ali-ons)
	SendBatchMessage        int32 = 320 // SEND_BATCH_MESSAGE: letter names, batch body
	SendReplyMessage        int32 = 324 // SEND_REPLY_MESSAGE: request/reply
	SendReplyMessageV2      int32 = 325 // SEND_REPLY_MESSAGE_V2
	RecallMessage           int32 = 370 // RECALL_MESSAGE: 5.3 recall of delayed messages
	PullMessage             int32 = 11  // PULL_MESSAGE
	LitePullMessage         int32 = 361 // LITE_PULL_MESSAGE: Java lite-pull consumer
	QueryConsumerOffset     int32 = 14  // QUERY_CONSUMER_OFFSET
	UpdateConsumerOffset    int32 = 15  // UPDATE_CONSUMER_OFFSET
	ConsumerSendMsgBack     int32 = 36  // CONSUMER_SEND_MSG_BACK: retry
	EndTransaction          int32 = 37  // END_TRANSACTION
	GetConsumerListByGroup  int32 = 38  // GET_CONSUMER_LIST_BY_GROUP
	LockBatchMQ             int32 = 41  // LOCK_BATCH_MQ
	UnlockBatchMQ           int32 = 42  // UNLOCK_BATCH_MQ
	HeartBeat               int32 = 34  // HEART_BEAT: brokers only
	UnregisterClient        int32 = 35  // UNREGISTER_CLIENT
	CheckClientConfig       int32 = 46  // CHECK_CLIENT_CONFIG: SQL92 subscriptions
	SearchOffsetByTimestamp int32 = 29  // SEARCH_OFFSET_BY_TIMESTAMP
	GetMaxOffset            int32 = 30  // GET_MAX_OFFSET
	GetMinOffset            int32 = 31  // GET_MIN_OFFSET
	GetEarliestMsgStoretime int32 = 32  // GET_EARLIEST_MSG_STORETIME
	QueryMessage            int32 = 12  // QUERY_MESSAGE: by key or unique key
	ViewMessageByID         int32 = 33  // VIEW_MESSAGE_BY_ID: by physical offset
	QueryBrokerOffset       int32 = 13  // QUERY_BROKER_OFFSET: unused
)

// POP consumption (5.x).
const (
	PopMessage                 int32 = 200050 // POP_MESSAGE
	AckMessage                 int32 = 200051 // ACK_MESSAGE
	BatchAckMessage            int32 = 200151 // BATCH_ACK_MESSAGE
	PeekMessage                int32 = 200052 // PEEK_MESSAGE
	ChangeMessageInvisibleTime int32 = 200053 // CHANGE_MESSAGE_INVISIBLETIME
	Notification               int32 = 200054 // NOTIFICATION
	PollingInfo                int32 = 200055 // POLLING_INFO
	PopRollback                int32 = 200056 // POP_ROLLBACK: admin
	QueryAssignment            int32 = 400    // QUERY_ASSIGNMENT: server-side rebalance
	SetMessageRequestMode      int32 = 401    // SET_MESSAGE_REQUEST_MODE
	GetAllMessageRequestMode   int32 = 402    // GET_ALL_MESSAGE_REQUEST_MODE: admin
)

// Broker to client requests.
const (
	CheckTransactionState       int32 = 39  // CHECK_TRANSACTION_STATE: oneway to one producer
	NotifyConsumerIDsChanged    int32 = 40  // NOTIFY_CONSUMER_IDS_CHANGED: oneway to every consumer of a group
	ResetConsumerClientOffset   int32 = 220 // RESET_CONSUMER_CLIENT_OFFSET: oneway
	GetConsumerStatusFromClient int32 = 221 // GET_CONSUMER_STATUS_FROM_CLIENT: sync
	GetConsumerRunningInfo      int32 = 307 // GET_CONSUMER_RUNNING_INFO: sync
	ConsumeMessageDirectly      int32 = 309 // CONSUME_MESSAGE_DIRECTLY: sync
	PushReplyMessageToClient    int32 = 326 // PUSH_REPLY_MESSAGE_TO_CLIENT: sync
)

// Admin requests a broker should know.
const (
	UpdateAndCreateTopic                 int32 = 17   // UPDATE_AND_CREATE_TOPIC
	UpdateAndCreateTopicList             int32 = 18   // UPDATE_AND_CREATE_TOPIC_LIST
	DeleteTopicInBroker                  int32 = 215  // DELETE_TOPIC_IN_BROKER
	GetAllTopicConfig                    int32 = 21   // GET_ALL_TOPIC_CONFIG
	GetTopicConfig                       int32 = 351  // GET_TOPIC_CONFIG
	UpdateAndCreateStaticTopic           int32 = 513  // UPDATE_AND_CREATE_STATIC_TOPIC
	GetBrokerRuntimeInfo                 int32 = 28   // GET_BROKER_RUNTIME_INFO
	UpdateBrokerConfig                   int32 = 25   // UPDATE_BROKER_CONFIG
	GetBrokerConfig                      int32 = 26   // GET_BROKER_CONFIG
	UpdateColdDataFlowCtrConfig          int32 = 2001 // UPDATE_COLD_DATA_FLOW_CTR_CONFIG
	RemoveColdDataFlowCtrConfig          int32 = 2002 // REMOVE_COLD_DATA_FLOW_CTR_CONFIG
	GetColdDataFlowCtrInfo               int32 = 2003 // GET_COLD_DATA_FLOW_CTR_INFO
	UpdateAndCreateSubscriptionGroup     int32 = 200  // UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
	UpdateAndCreateSubscriptionGroupList int32 = 225  // UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST
	GetAllSubscriptionGroupConfig        int32 = 201  // GET_ALL_SUBSCRIPTIONGROUP_CONFIG
	DeleteSubscriptionGroup              int32 = 207  // DELETE_SUBSCRIPTIONGROUP
	GetSubscriptionGroupConfig           int32 = 352  // GET_SUBSCRIPTIONGROUP_CONFIG
	GetTopicStatsInfo                    int32 = 202  // GET_TOPIC_STATS_INFO
	GetConsumerConnectionList            int32 = 203  // GET_CONSUMER_CONNECTION_LIST
	GetProducerConnectionList            int32 = 204  // GET_PRODUCER_CONNECTION_LIST
	GetAllProducerInfo                   int32 = 328  // GET_ALL_PRODUCER_INFO (mqadmin producer)
	GetConsumeStats                      int32 = 208  // GET_CONSUME_STATS
	ViewBrokerStatsData                  int32 = 315  // VIEW_BROKER_STATS_DATA: mqadmin statsAll, the dashboard
	GetBrokerConsumeStats                int32 = 317  // GET_BROKER_CONSUME_STATS
	GetAllConsumerOffset                 int32 = 43   // GET_ALL_CONSUMER_OFFSET: slaves, every 60 s
	GetAllDelayOffset                    int32 = 45   // GET_ALL_DELAY_OFFSET: slaves, every 60 s
	GetTimerCheckPoint                   int32 = 60   // GET_TIMER_CHECK_POINT: RocketMQ 5 slaves, every 3 s
	GetTimerMetrics                      int32 = 61   // GET_TIMER_METRICS: RocketMQ 5 slaves, every 60 s
	InvokeBrokerToResetOffset            int32 = 222  // INVOKE_BROKER_TO_RESET_OFFSET
	InvokeBrokerToGetConsumerStatus      int32 = 223  // INVOKE_BROKER_TO_GET_CONSUMER_STATUS
	CloneGroupOffset                     int32 = 314  // CLONE_GROUP_OFFSET (mqadmin cloneGroupOffset)
	QueryCorrectionOffset                int32 = 308  // QUERY_CORRECTION_OFFSET (MQClientAPIImpl.queryCorrectionOffset)
	QueryTopicConsumeByWho               int32 = 300  // QUERY_TOPIC_CONSUME_BY_WHO
	QueryTopicsByConsumer                int32 = 343  // QUERY_TOPICS_BY_CONSUMER
	QuerySubscriptionByConsumer          int32 = 345  // QUERY_SUBSCRIPTION_BY_CONSUMER
	QueryConsumeTimeSpan                 int32 = 303  // QUERY_CONSUME_TIME_SPAN
	GetSystemTopicListFromBroker         int32 = 305  // GET_SYSTEM_TOPIC_LIST_FROM_BROKER
	ResumeCheckHalfMessage               int32 = 323  // RESUME_CHECK_HALF_MESSAGE
	DeleteExpiredCommitLog               int32 = 329  // DELETE_EXPIRED_COMMITLOG (mqadmin deleteExpiredCommitLog)
	SetCommitLogReadMode                 int32 = 2004 // SET_COMMITLOG_READ_MODE (mqadmin setCommitLogReadAheadMode)
	CleanExpiredConsumeQueue             int32 = 306  // CLEAN_EXPIRED_CONSUMEQUEUE (mqadmin cleanExpiredCQ)
	CleanUnusedTopic                     int32 = 316  // CLEAN_UNUSED_TOPIC (mqadmin cleanUnusedTopic)
	ExportRocksDBConfigToJSON            int32 = 355  // EXPORT_ROCKSDB_CONFIG_TO_JSON (mqadmin rocksDBConfigToJson -b / -n -c)
	UpdateAndCreateACLConfig             int32 = 50   // UPDATE_AND_CREATE_ACL_CONFIG (mqadmin updateAclConfig)
	DeleteACLConfig                      int32 = 51   // DELETE_ACL_CONFIG (mqadmin deleteAclConfig)
	GetBrokerClusterACLInfo              int32 = 52   // GET_BROKER_CLUSTER_ACL_INFO (mqadmin clusterAclConfigVersion)
	UpdateGlobalWhiteAddrsConfig         int32 = 53   // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (mqadmin updateGlobalWhiteAddr)
	QueryConsumeQueue                    int32 = 321  // QUERY_CONSUME_QUEUE (mqadmin queryCq)
	CheckRocksdbCqWriteProgress          int32 = 354  // CHECK_ROCKSDB_CQ_WRITE_PROGRESS (mqadmin checkRocksdbCqWriteProgress)
	UpdateAndGetGroupForbidden           int32 = 353  // UPDATE_AND_GET_GROUP_FORBIDDEN (MQAdminExt.updateAndGetGroupReadForbidden)
	AuthCreateUser                       int32 = 3001
	AuthUpdateUser                       int32 = 3002
	AuthDeleteUser                       int32 = 3003
	AuthGetUser                          int32 = 3004
	AuthListUser                         int32 = 3005
	AuthCreateACL                        int32 = 3006
	AuthUpdateACL                        int32 = 3007
	AuthDeleteACL                        int32 = 3008
	AuthGetACL                           int32 = 3009
	AuthListACL                          int32 = 3010
)

// Controller requests (RocketMQ 5 controller mode): served by a controller,
// except NOTIFY_BROKER_ROLE_CHANGED, which a controller sends to brokers.
const (
	ControllerAlterSyncStateSet int32 = 1001 // CONTROLLER_ALTER_SYNC_STATE_SET: a master reports its in-sync replicas
	ControllerElectMaster       int32 = 1002 // CONTROLLER_ELECT_MASTER
	ControllerRegisterBroker    int32 = 1003 // CONTROLLER_REGISTER_BROKER
	ControllerGetReplicaInfo    int32 = 1004 // CONTROLLER_GET_REPLICA_INFO
	ControllerGetMetadataInfo   int32 = 1005 // CONTROLLER_GET_METADATA_INFO
	ControllerGetSyncStateData  int32 = 1006 // CONTROLLER_GET_SYNC_STATE_DATA
	GetBrokerEpochCache         int32 = 1007 // GET_BROKER_EPOCH_CACHE: a controller-mode broker's epochs
	NotifyBrokerRoleChanged     int32 = 1008 // NOTIFY_BROKER_ROLE_CHANGED: controller -> broker, oneway
	UpdateControllerConfig      int32 = 1009 // UPDATE_CONTROLLER_CONFIG
	GetControllerConfig         int32 = 1010 // GET_CONTROLLER_CONFIG
	CleanBrokerData             int32 = 1011 // CLEAN_BROKER_DATA
	ControllerGetNextBrokerID   int32 = 1012 // CONTROLLER_GET_NEXT_BROKER_ID
	ControllerApplyBrokerID     int32 = 1013 // CONTROLLER_APPLY_BROKER_ID
)

// Name server requests.
const (
	PutKVConfig                   int32 = 100 // PUT_KV_CONFIG
	GetKVConfig                   int32 = 101 // GET_KV_CONFIG
	DeleteKVConfig                int32 = 102 // DELETE_KV_CONFIG
	RegisterBroker                int32 = 103 // REGISTER_BROKER: brokers, every 30 s
	UnregisterBroker              int32 = 104 // UNREGISTER_BROKER: brokers at shutdown
	GetRouteInfoByTopic           int32 = 105 // GET_ROUTEINFO_BY_TOPIC: every client
	GetBrokerClusterInfo          int32 = 106 // GET_BROKER_CLUSTER_INFO: admin
	WipeWritePermOfBroker         int32 = 205 // WIPE_WRITE_PERM_OF_BROKER
	GetAllTopicListFromNameServer int32 = 206 // GET_ALL_TOPIC_LIST_FROM_NAMESERVER
	DeleteTopicInNamesrv          int32 = 216 // DELETE_TOPIC_IN_NAMESRV
	RegisterTopicInNamesrv        int32 = 217 // REGISTER_TOPIC_IN_NAMESRV
	GetKVListByNamespace          int32 = 219 // GET_KVLIST_BY_NAMESPACE
	GetTopicsByCluster            int32 = 224 // GET_TOPICS_BY_CLUSTER
	GetSystemTopicListFromNS      int32 = 304 // GET_SYSTEM_TOPIC_LIST_FROM_NS
	GetUnitTopicList              int32 = 311 // GET_UNIT_TOPIC_LIST
	GetHasUnitSubTopicList        int32 = 312 // GET_HAS_UNIT_SUB_TOPIC_LIST
	GetHasUnitSubUnUnitTopicList  int32 = 313 // GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
	UpdateNamesrvConfig           int32 = 318 // UPDATE_NAMESRV_CONFIG
	GetNamesrvConfig              int32 = 319 // GET_NAMESRV_CONFIG
	QueryDataVersion              int32 = 322 // QUERY_DATA_VERSION
	AddWritePermOfBroker          int32 = 327 // ADD_WRITE_PERM_OF_BROKER
	GetBrokerMemberGroup          int32 = 901 // GET_BROKER_MEMBER_GROUP
	BrokerHeartbeat               int32 = 904 // BROKER_HEARTBEAT
	NotifyMinBrokerIDChange       int32 = 905 // NOTIFY_MIN_BROKER_ID_CHANGE
	ExchangeBrokerHAInfo          int32 = 906 // EXCHANGE_BROKER_HA_INFO: a slave asks its master's HA address
	GetBrokerHAStatus             int32 = 907 // GET_BROKER_HA_STATUS: mqadmin haStatus
	ResetMasterFlushOffset        int32 = 908 // RESET_MASTER_FLUSH_OFFSET: mqadmin resetMasterFlushOffset
)

// Response codes (Java ResponseCode and RemotingSysResponseCode).
const (
	Success                    int32 = 0   // SUCCESS
	SystemError                int32 = 1   // SYSTEM_ERROR: generic failure, bad header
	SystemBusy                 int32 = 2   // SYSTEM_BUSY: flow control, worker pool full
	RequestCodeNotSupported    int32 = 3   // REQUEST_CODE_NOT_SUPPORTED
	TransactionFailed          int32 = 4   // TRANSACTION_FAILED
	FlushDiskTimeout           int32 = 10  // FLUSH_DISK_TIMEOUT: stored, flush timed out
	SlaveNotAvailable          int32 = 11  // SLAVE_NOT_AVAILABLE
	FlushSlaveTimeout          int32 = 12  // FLUSH_SLAVE_TIMEOUT
	MessageIllegal             int32 = 13  // MESSAGE_ILLEGAL
	ServiceNotAvailable        int32 = 14  // SERVICE_NOT_AVAILABLE: store unavailable, disk full
	VersionNotSupported        int32 = 15  // VERSION_NOT_SUPPORTED
	NoPermission               int32 = 16  // NO_PERMISSION
	TopicNotExist              int32 = 17  // TOPIC_NOT_EXIST
	TopicExistAlready          int32 = 18  // TOPIC_EXIST_ALREADY
	PullNotFound               int32 = 19  // PULL_NOT_FOUND
	PullRetryImmediately       int32 = 20  // PULL_RETRY_IMMEDIATELY
	PullOffsetMoved            int32 = 21  // PULL_OFFSET_MOVED
	QueryNotFound              int32 = 22  // QUERY_NOT_FOUND
	SubscriptionParseFailed    int32 = 23  // SUBSCRIPTION_PARSE_FAILED
	SubscriptionNotExist       int32 = 24  // SUBSCRIPTION_NOT_EXIST
	SubscriptionNotLatest      int32 = 25  // SUBSCRIPTION_NOT_LATEST
	SubscriptionGroupNotExist  int32 = 26  // SUBSCRIPTION_GROUP_NOT_EXIST
	FilterDataNotExist         int32 = 27  // FILTER_DATA_NOT_EXIST
	FilterDataNotLatest        int32 = 28  // FILTER_DATA_NOT_LATEST
	InvalidParameter           int32 = 29  // INVALID_PARAMETER
	TransactionShouldCommit    int32 = 200 // TRANSACTION_SHOULD_COMMIT: legacy
	TransactionShouldRollback  int32 = 201 // TRANSACTION_SHOULD_ROLLBACK: legacy
	TransactionStateUnknow     int32 = 202 // TRANSACTION_STATE_UNKNOW (sic): legacy
	TransactionStateGroupWrong int32 = 203 // TRANSACTION_STATE_GROUP_WRONG: legacy
	NoBuyerID                  int32 = 204 // NO_BUYER_ID
	NotInCurrentUnit           int32 = 205 // NOT_IN_CURRENT_UNIT
	ConsumerNotOnline          int32 = 206 // CONSUMER_NOT_ONLINE
	ConsumeMsgTimeout          int32 = 207 // CONSUME_MSG_TIMEOUT
	NoMessage                  int32 = 208 // NO_MESSAGE: POP ack out of range
	PollingFull                int32 = 209 // POLLING_FULL
	PollingTimeout             int32 = 210 // POLLING_TIMEOUT
	BrokerNotExist             int32 = 211 // BROKER_NOT_EXIST
	// The plain ACL's failures share their numbers with the three above.
	UpdateAndCreateACLConfigFailed     int32 = 209 // UPDATE_AND_CREATE_ACL_CONFIG_FAILED
	DeleteACLConfigFailed              int32 = 210 // DELETE_ACL_CONFIG_FAILED
	UpdateGlobalWhiteAddrsConfigFailed int32 = 211 // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
	BrokerDispatchNotComplete          int32 = 212 // BROKER_DISPATCH_NOT_COMPLETE
	BroadcastConsumption               int32 = 213 // BROADCAST_CONSUMPTION
	FlowControl                        int32 = 215 // FLOW_CONTROL
	NotLeaderForQueue                  int32 = 501 // NOT_LEADER_FOR_QUEUE: static topics
	IllegalOperation                   int32 = 604 // ILLEGAL_OPERATION
	GoAway                             int32 = 1500

	ControllerFencedMasterEpoch          int32 = 2000
	ControllerFencedSyncStateSetEpoch    int32 = 2001
	ControllerInvalidMaster              int32 = 2002
	ControllerInvalidReplicas            int32 = 2003
	ControllerMasterNotAvailable         int32 = 2004
	ControllerInvalidRequest             int32 = 2005
	ControllerBrokerNotAlive             int32 = 2006
	ControllerNotLeader                  int32 = 2007
	ControllerBrokerMetadataNotExist     int32 = 2008
	ControllerInvalidCleanBrokerMetadata int32 = 2009
	ControllerBrokerNeedToBeRegistered   int32 = 2010
	ControllerMasterStillExist           int32 = 2011
	ControllerElectMasterFailed          int32 = 2012
	ControllerAlterSyncStateSetFailed    int32 = 2013
	ControllerBrokerIDInvalid            int32 = 2014
	ControllerJRaftInternalError         int32 = 2015
	ControllerBrokerLiveInfoNotExists    int32 = 2016
	UserNotExist                         int32 = 3001  // USER_NOT_EXIST: ACL 2.0
	PolicyNotExist                       int32 = 3002  // POLICY_NOT_EXIST: ACL 2.0
	RPCUnknown                           int32 = -1000 // client side only
	RPCAddrIsNull                        int32 = -1002 // client side only
	RPCSendToChannelFailed               int32 = -1004 // client side only
	RPCTimeOut                           int32 = -1006 // client side only
)
