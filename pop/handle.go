package pop

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
)

// Retry flags: the kind of topic a popped message was read from, as the
// handle's fifth field and the first part of every header entry carry it.
const (
	// FlagNormal marks the requested topic itself.
	FlagNormal = "0"
	// FlagRetryV1 marks a V1 pop-retry topic, %RETRY%<group>_<topic>.
	FlagRetryV1 = "1"
	// FlagRetryV2 marks a V2 pop-retry topic, %RETRY%<group>+<topic>.
	FlagRetryV2 = "2"
)

// OrderReviveQueue is the reviveQid of orderly pops (RocketMQ's
// POP_ORDER_REVIVE_QUEUE); non-orderly pops report 0 in KV mode.
const OrderReviveQueue = 999

// RetryTopicV1 returns the V1 pop-retry topic of a group and topic.
func RetryTopicV1(topic, group string) string {
	return meta.RetryGroupTopicPrefix + group + "_" + topic
}

// RetryTopicV2 returns the V2 pop-retry topic of a group and topic.
func RetryTopicV2(topic, group string) string {
	return meta.RetryGroupTopicPrefix + group + "+" + topic
}

// RetryOrigin returns the topic whose pop-retry topic (V1 or V2) of group
// retryTopic is, and false when it is none (the group's own %RETRY%group,
// or another group's).
func RetryOrigin(retryTopic, group string) (string, bool) {
	rest, ok := strings.CutPrefix(retryTopic, meta.RetryGroupTopicPrefix+group)
	if !ok || len(rest) < 2 || (rest[0] != '_' && rest[0] != '+') {
		return "", false
	}
	return rest[1:], true
}

// RetryFlagOf returns the retry flag of a topic name: FlagRetryV2 for a V2
// pop-retry topic (a %RETRY% name with a '+'), FlagRetryV1 for any other
// %RETRY% name, FlagNormal otherwise (RocketMQ's ExtraInfoUtil.getRetry).
func RetryFlagOf(topic string) string {
	if !meta.IsRetryTopic(topic) {
		return FlagNormal
	}
	if strings.Contains(topic[len(meta.RetryGroupTopicPrefix):], "+") {
		return FlagRetryV2
	}
	return FlagRetryV1
}

// ErrBadRetryFlag is returned by RealTopic for a flag other than 0, 1, 2.
var ErrBadRetryFlag = errors.New("pop: retry flag is not 0, 1 or 2")

// RealTopic returns the topic a handle's message lives in: topic itself for
// FlagNormal, or the group's pop-retry topic of topic.
func RealTopic(topic, group, flag string) (string, error) {
	switch flag {
	case FlagNormal:
		return topic, nil
	case FlagRetryV1:
		return RetryTopicV1(topic, group), nil
	case FlagRetryV2:
		return RetryTopicV2(topic, group), nil
	}
	return "", fmt.Errorf("%w: %q", ErrBadRetryFlag, flag)
}

// Handle is a popped message's receipt handle: the value of its POP_CK
// property and the extraInfo of ack and change-invisible-time requests.
// On the wire it is eight fields separated by single spaces:
//
//	ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId msgQueueOffset
//
// for example "5 1700000000000 60000 0 0 broker-a 3 7": the pop read queue 3
// from offset 5 at popTime, the message is offset 7, and it is invisible
// for 60 s.
type Handle struct {
	CKOffset      int64
	PopTime       int64
	InvisibleTime int64
	ReviveQID     int32
	RetryFlag     string
	BrokerName    string
	QueueID       int32
	QueueOffset   int64
}

// String encodes the handle (RocketMQ's ExtraInfoUtil.buildExtraInfo).
func (h Handle) String() string {
	b := make([]byte, 0, 64+len(h.BrokerName))
	b = strconv.AppendInt(b, h.CKOffset, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.PopTime, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.InvisibleTime, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(h.ReviveQID), 10)
	b = append(b, ' ')
	b = append(b, h.RetryFlag...)
	b = append(b, ' ')
	b = append(b, h.BrokerName...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(h.QueueID), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.QueueOffset, 10)
	return string(b)
}

// Orderly reports whether the handle comes from an orderly pop.
func (h Handle) Orderly() bool { return h.ReviveQID == OrderReviveQueue }

// ErrBadHandle is returned by ParseHandle for text that is not a handle.
var ErrBadHandle = errors.New("pop: malformed receipt handle")

// ParseHandle decodes a handle. Like RocketMQ it reads the fields it needs
// by position: at least the first four must be present and numeric; the
// others are read when present (a 7-field handle, RocketMQ's older form,
// has no message offset and QueueOffset is -1). The gRPC proxy's 9th field
// is ignored.
func ParseHandle(s string) (Handle, error) {
	h := Handle{RetryFlag: FlagNormal, QueueID: -1, QueueOffset: -1}
	f := strings.Split(s, " ")
	if len(f) < 4 {
		return h, fmt.Errorf("%w: %q has %d fields", ErrBadHandle, s, len(f))
	}
	num := func(i int, bits int) (int64, error) {
		v, err := strconv.ParseInt(f[i], 10, bits)
		if err != nil {
			return 0, fmt.Errorf("%w: field %d of %q is not a number", ErrBadHandle, i, s)
		}
		return v, nil
	}
	var err error
	if h.CKOffset, err = num(0, 64); err != nil {
		return h, err
	}
	if h.PopTime, err = num(1, 64); err != nil {
		return h, err
	}
	if h.InvisibleTime, err = num(2, 64); err != nil {
		return h, err
	}
	q, err := num(3, 32)
	if err != nil {
		return h, err
	}
	h.ReviveQID = int32(q)
	if len(f) > 4 {
		h.RetryFlag = f[4]
	}
	if len(f) > 5 {
		h.BrokerName = f[5]
	}
	if len(f) > 6 {
		v, err := num(6, 32)
		if err != nil {
			return h, err
		}
		h.QueueID = int32(v)
	}
	if len(f) > 7 {
		if h.QueueOffset, err = num(7, 64); err != nil {
			return h, err
		}
	}
	return h, nil
}
