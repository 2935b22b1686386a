package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// Names the benchmark uses on the broker.
const (
	producerGroup = "bench_producer"
	consumerGroup = "bench_consumer"
	benchTag      = "TagA"
)

// createTopic creates (or updates) topic with queues read and write queues
// through UPDATE_AND_CREATE_TOPIC.
func createTopic(ctx context.Context, c *remoting.AddrClient, topic string, queues int) error {
	ext := map[string]string{
		"topic":           topic,
		"readQueueNums":   strconv.Itoa(queues),
		"writeQueueNums":  strconv.Itoa(queues),
		"perm":            "6",
		"topicFilterType": "SINGLE_TAG",
		"topicSysFlag":    "0",
		"order":           "false",
	}
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.UpdateAndCreateTopic, ext, nil))
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("create topic %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	return nil
}

// messageProps are the properties of a benchmark message: its tag, its
// UNIQ_KEY and WAIT=true.
func messageProps(uniq string) string {
	return "TAGS\x01" + benchTag + "\x02UNIQ_KEY\x01" + uniq + "\x02WAIT\x01true\x02"
}

// sendRequest builds one SEND_MESSAGE_V2 request as the Go client sends
// it: letter header names, messageProps.
func sendRequest(topic string, queueID int, body []byte, uniq string, born time.Time) *remoting.Command {
	props := messageProps(uniq)
	ext := map[string]string{
		"a": producerGroup,
		"b": topic,
		"c": "TBW102",
		"d": "4",
		"e": strconv.Itoa(queueID),
		"f": "0",
		"g": strconv.FormatInt(born.UnixMilli(), 10),
		"h": "0",
		"i": props,
		"j": "0",
		"k": "false",
		"m": "false",
	}
	return remoting.NewRequest(remoting.SendMessageV2, ext, body)
}

// Pull request sysFlag bits (RocketMQ's PullSysFlag).
const (
	pullFlagCommitOffset = 1
	pullFlagSuspend      = 2
	pullFlagSubscription = 4
)

// pullRequest builds one PULL_MESSAGE request for up to maxMsgs messages
// from offset, with its own subscription ("*"). With suspend the broker
// holds the request up to suspendFor when there is nothing to read (long
// polling, as a push consumer pulls).
func pullRequest(topic string, queueID int, offset int64, maxMsgs int, suspend bool, suspendFor time.Duration) *remoting.Command {
	flag := pullFlagSubscription
	if suspend {
		flag |= pullFlagSuspend
	}
	ext := map[string]string{
		"consumerGroup":        consumerGroup,
		"topic":                topic,
		"queueId":              strconv.Itoa(queueID),
		"queueOffset":          strconv.FormatInt(offset, 10),
		"maxMsgNums":           strconv.Itoa(maxMsgs),
		"sysFlag":              strconv.Itoa(flag),
		"commitOffset":         "0",
		"suspendTimeoutMillis": strconv.FormatInt(suspendFor.Milliseconds(), 10),
		"subscription":         "*",
		"subVersion":           "0",
		"expressionType":       "TAG",
	}
	return remoting.NewRequest(remoting.PullMessage, ext, nil)
}

// pullResult is the part of a pull response the consumers use.
type pullResult struct {
	code      int32
	nextBegin int64
	msgs      []commitlog.Message
}

// decodePull reads a pull response: its code, next offset and, on SUCCESS,
// the records of the body.
func decodePull(resp *remoting.Command) (pullResult, error) {
	r := pullResult{code: resp.Code}
	switch resp.Code {
	case remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
	default:
		return r, fmt.Errorf("pull: code %d %s", resp.Code, resp.Remark)
	}
	next, err := remoting.Header(resp.ExtFields).Int64("nextBeginOffset")
	if err != nil {
		return r, fmt.Errorf("pull response: %w", err)
	}
	r.nextBegin = next
	if resp.Code != remoting.Success {
		return r, nil
	}
	if r.msgs, err = commitlog.DecodeAll(resp.Body); err != nil {
		return r, fmt.Errorf("decode pulled records: %w", err)
	}
	return r, nil
}
