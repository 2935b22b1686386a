package adminbody

import (
	"encoding/json"
	"fmt"
)

// ConsumerRunningInfo is a client's answer to GET_CONSUMER_RUNNING_INFO
// (RocketMQ's ConsumerRunningInfo), which a broker relays to the admin
// tool: the client's properties, subscriptions, the state of each queue
// it pulls (mqTable) or pops (mqPopTable), its rates per topic and, when
// asked for, its threads' stacks. mqTable and mqPopTable are keyed by
// MessageQueue objects in fastjson's form (see the package comment).
type ConsumerRunningInfo struct {
	// Properties are the client's settings (PROP_CONSUME_TYPE,
	// PROP_CONSUMEORDERLY, PROP_CONSUMER_START_TIMESTAMP, ...), each
	// value as text: a JSON string's content, any other value's JSON.
	Properties       map[string]string
	SubscriptionSet  []SubscriptionData
	MQTable          map[MessageQueue]ProcessQueueInfo
	MQPopTable       map[MessageQueue]PopProcessQueueInfo
	StatusTable      map[string]ConsumeStatus
	UserConsumerInfo map[string]string
	// Jstack is the stacks' text; nil when the client sent none.
	Jstack *string
}

// ProcessQueueInfo is the state of one queue a push consumer pulls
// (RocketMQ's ProcessQueueInfo); times are ms since the epoch.
type ProcessQueueInfo struct {
	CommitOffset            int64 `json:"commitOffset"`
	CachedMsgMinOffset      int64 `json:"cachedMsgMinOffset"`
	CachedMsgMaxOffset      int64 `json:"cachedMsgMaxOffset"`
	CachedMsgCount          int32 `json:"cachedMsgCount"`
	CachedMsgSizeInMiB      int32 `json:"cachedMsgSizeInMiB"`
	TransactionMsgMinOffset int64 `json:"transactionMsgMinOffset"`
	TransactionMsgMaxOffset int64 `json:"transactionMsgMaxOffset"`
	TransactionMsgCount     int32 `json:"transactionMsgCount"`
	Locked                  bool  `json:"locked"`
	TryUnlockTimes          int64 `json:"tryUnlockTimes"`
	LastLockTimestamp       int64 `json:"lastLockTimestamp"`
	Droped                  bool  `json:"droped"`
	LastPullTimestamp       int64 `json:"lastPullTimestamp"`
	LastConsumeTimestamp    int64 `json:"lastConsumeTimestamp"`
}

// PopProcessQueueInfo is the state of one queue a consumer pops
// (RocketMQ's PopProcessQueueInfo).
type PopProcessQueueInfo struct {
	WaitAckCount     int32 `json:"waitAckCount"`
	Droped           bool  `json:"droped"`
	LastPopTimestamp int64 `json:"lastPopTimestamp"`
}

// ConsumeStatus is a client's rates for one topic (RocketMQ's
// ConsumeStatus): RTs in ms, TPS per second, failures in the last hour.
type ConsumeStatus struct {
	PullRT            float64 `json:"pullRT"`
	PullTPS           float64 `json:"pullTPS"`
	ConsumeRT         float64 `json:"consumeRT"`
	ConsumeOKTPS      float64 `json:"consumeOKTPS"`
	ConsumeFailedTPS  float64 `json:"consumeFailedTPS"`
	ConsumeFailedMsgs int64   `json:"consumeFailedMsgs"`
}

// DecodeConsumerRunningInfo reads a ConsumerRunningInfo body; properties
// it does not know are skipped.
func DecodeConsumerRunningInfo(body []byte) (ConsumerRunningInfo, error) {
	var info ConsumerRunningInfo
	err := decodeBody(body, "ConsumerRunningInfo", func(name string, v []byte) error {
		var err error
		switch name {
		case "properties":
			info.Properties, err = textMap(v)
		case "subscriptionSet":
			err = json.Unmarshal(v, &info.SubscriptionSet)
		case "mqTable":
			info.MQTable, err = decodeTable[ProcessQueueInfo](v)
		case "mqPopTable":
			info.MQPopTable, err = decodeTable[PopProcessQueueInfo](v)
		case "statusTable":
			err = json.Unmarshal(v, &info.StatusTable)
		case "userConsumerInfo":
			err = json.Unmarshal(v, &info.UserConsumerInfo)
		case "jstack":
			err = json.Unmarshal(v, &info.Jstack)
		}
		return err
	})
	return info, err
}

// textMap reads an object of string keys, each value as text: a string's
// content, any other value's JSON (fastjson writes a Java Properties'
// non-string values, numbers and enums, as they are).
func textMap(data []byte) (map[string]string, error) {
	ms, err := Members(data)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		var k string
		if err := json.Unmarshal(m.Key, &k); err != nil {
			return nil, fmt.Errorf("key %.40q is not a string", m.Key)
		}
		var s string
		if err := json.Unmarshal(m.Value, &s); err == nil {
			out[k] = s
			continue
		}
		out[k] = string(m.Value)
	}
	return out, nil
}
