package broker

// Property names the broker reads or writes (RocketMQ's MessageConst).
const (
	propTags              = "TAGS"
	propKeys              = "KEYS"
	propUniqKey           = "UNIQ_KEY"
	propWait              = "WAIT"
	propDelay             = "DELAY"
	propCluster           = "CLUSTER"
	propMsgRegion         = "MSG_REGION"
	propTraceOn           = "TRACE_ON"
	propRetryTopic        = "RETRY_TOPIC"
	propReconsumeTime     = "RECONSUME_TIME"
	propMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	propPopCK             = "POP_CK"
	propDLQOriginTopic    = "DLQ_ORIGIN_TOPIC"
)
