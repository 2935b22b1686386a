package broker

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// Request/reply (RocketMQ 4.6's RPC over messages): a requester's message
// carries CORRELATION_ID and REPLY_TO_CLIENT (its client id); the consumer
// that handles it sends a reply, with SEND_REPLY_MESSAGE, to the cluster's
// reply topic; the broker pushes the reply to the requester's connection
// with PUSH_REPLY_MESSAGE_TO_CLIENT and stores it in the reply topic.

// Reply properties (RocketMQ's MessageConst).
const (
	propReplyToClient = "REPLY_TO_CLIENT"
	propPushReplyTime = "PUSH_REPLY_TIME"
)

// replyTopicSuffix makes the cluster's reply topic, <cluster>_REPLY_TOPIC.
const replyTopicSuffix = "_REPLY_TOPIC"

// pushReplyTimeout bounds the wait for a requester's answer to a pushed
// reply (RocketMQ's Broker2Client waits 10 s).
const pushReplyTimeout = 10 * time.Second

// replyTopic is the cluster's reply topic, created at start.
func (b *Broker) replyTopic() string { return b.cfg.BrokerClusterName + replyTopicSuffix }

// processReply answers SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2: the
// checks of a send, then the push to the requester and, with
// storeReplyMessageEnable, the store in the reply topic. The answer is
// SUCCESS only when the requester took the reply, as RocketMQ's.
func (b *Broker) processReply(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h, err := parseSendHeader(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad reply request header: "+err.Error())
	}
	qid, refused := b.checkSend(conn, req, h)
	if refused != nil {
		return refused
	}
	msg := &commitlog.Message{
		Topic: h.topic, QueueID: qid, Flag: h.flag, SysFlag: h.sysFlag, BornTimestamp: h.bornTimestamp,
		BornHost: bornHost(conn), ReconsumeTimes: h.reconsumeTimes, Body: req.Body, Properties: h.properties,
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.Header{}
	rh.Set("MSG_REGION", b.cfg.RegionID)
	rh.SetBool("TRACE_ON", b.cfg.TraceOn)
	if remark := b.pushReply(ctx, h, msg); remark != "" {
		resp.Code, resp.Remark = remoting.SystemError, remark
	} else {
		rh.Set("msgId", "0") // RocketMQ's "avoid client decoding exception" placeholder
		rh.SetInt32("queueId", qid)
		rh.SetInt64("queueOffset", 0)
	}
	if b.cfg.StoreReplyMessageEnable {
		res, err := b.putMessages(ctx, []*commitlog.Message{msg}, true)
		if err != nil {
			b.log.Warn().Err(err).Str("topic", msg.Topic).Msg("store reply message")
		} else {
			rh.Set("msgId", res.MsgIDs[0])
			rh.SetInt32("queueId", qid)
			rh.SetInt64("queueOffset", res.QueueOffset)
		}
	}
	resp.ExtFields = rh
	return resp
}

// pushReply sends a reply to the connection of the client its
// REPLY_TO_CLIENT names and returns "" when the client took it, else why
// not (the reply's answer remark).
func (b *Broker) pushReply(ctx context.Context, h sendHeader, msg *commitlog.Message) string {
	sender, ok := commitlog.LookupProperty(msg.Properties, propReplyToClient)
	if !ok || sender == "" {
		b.log.Warn().Str("topic", msg.Topic).Msg(propReplyToClient + " is missing: the reply cannot be pushed")
		return "reply message properties[" + propReplyToClient + "] is null"
	}
	requester := b.clients.producerConnByClientID(sender)
	if requester == nil {
		remark := "push reply message fail, channel of <" + sender + "> not found."
		b.log.Warn().Str("client", sender).Msg(remark)
		return remark
	}
	props := commitlog.RewriteProperties(msg.Properties, nil,
		[2]string{propPushReplyTime, strconv.FormatInt(time.Now().UnixMilli(), 10)})
	ph := remoting.Header{}
	ph.Set("producerGroup", h.producerGroup)
	ph.Set("topic", h.topic)
	ph.Set("defaultTopic", h.defaultTopic)
	ph.SetInt32("defaultTopicQueueNums", h.defaultTopicQueueNums)
	ph.SetInt32("queueId", msg.QueueID)
	ph.SetInt32("sysFlag", h.sysFlag)
	ph.SetInt64("bornTimestamp", h.bornTimestamp)
	ph.SetInt32("flag", h.flag)
	ph.Set("properties", props)
	ph.SetInt32("reconsumeTimes", h.reconsumeTimes)
	ph.SetBool("unitMode", h.unitMode)
	ph.Set("bornHost", netip.AddrPortFrom(msg.BornHost.Addr().Unmap(), msg.BornHost.Port()).String())
	// The store host's address, as RocketMQ's getHostAddress():
	// never brokerIP1's host name, which Addr announces.
	ph.Set("storeHost", b.hostAddr().String())
	ph.SetInt64("storeTimestamp", time.Now().UnixMilli())
	ctx, cancel := context.WithTimeout(ctx, pushReplyTimeout)
	defer cancel()
	answer, err := requester.Request(ctx, remoting.NewRequest(remoting.PushReplyMessageToClient, ph, msg.Body))
	if err != nil {
		b.log.Warn().Err(err).Str("client", sender).Msg("push reply message")
		return fmt.Sprintf("push reply message to %s fail.", sender)
	}
	if answer.Code != remoting.Success {
		b.log.Warn().Str("client", sender).Int32("code", answer.Code).Str("remark", answer.Remark).Msg("push reply message refused")
		return fmt.Sprintf("push reply message to %s fail.", sender)
	}
	return ""
}
