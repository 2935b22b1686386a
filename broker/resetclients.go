package broker

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// clientResetMinVersion is the first client version that takes
// RESET_CONSUMER_CLIENT_OFFSET: RocketMQ's MQVersion V3_0_7_SNAPSHOT
// (ordinal 28).
const clientResetMinVersion = 28

// languageCPP is the language name of a C++ client: an admin request sent
// as one (mqadmin resetOffsetByTime -c in RocketMQ 4) has the offsets
// pushed to the consumers as a list (ResetOffsetBodyForC).
const languageCPP = "CPP"

// clientResetRequest is the part of an INVOKE_BROKER_TO_RESET_OFFSET
// header a reset through the clients reads: queueId and offset are not
// among it (every write queue is reset, by time).
type clientResetRequest struct {
	topic, group string
	// timestamp is a store time in ms, or -1 for the end of each queue.
	timestamp int64
	// force moves a queue to the time's offset even when the group has
	// consumed less of it; without it such a queue keeps its offset.
	force bool
}

func parseClientResetRequest(req *remoting.Command) (clientResetRequest, error) {
	h := remoting.Header(req.ExtFields)
	var r clientResetRequest
	var err error
	if r.topic, err = h.String("topic"); err != nil {
		return r, err
	}
	if r.group, err = h.String("group"); err != nil {
		return r, err
	}
	if r.timestamp, err = h.Int64("timestamp"); err != nil {
		return r, err
	}
	r.force = h.OptBool("isForce", false)
	return r, nil
}

// errGroupHasNoOffset is a queue of the topic the group has no committed
// offset for: RocketMQ 4's reset refuses the whole topic then.
var errGroupHasNoOffset = errors.New("the group has no committed offset for a queue of the topic")

// resetOffsetThroughClients answers INVOKE_BROKER_TO_RESET_OFFSET with
// useServerSideResetOffset=false, as RocketMQ's Broker2Client.resetOffset
// does: it works out each write queue's offset at the request's time (the
// end of the queue for -1, 0 for a time it finds no offset for), keeps
// the group's committed offset instead where that is not past it unless
// isForce, and pushes the table oneway to every online consumer of the
// group (RESET_CONSUMER_CLIENT_OFFSET), which take it as their own and
// commit it. The broker's committed offsets are not touched, and no
// reset waits for a pull; queueId and offset of the request are not read.
// The answer is the table, or CONSUMER_NOT_ONLINE when no consumer of the
// group is connected, or SYSTEM_ERROR when one of them is older than
// 3.0.7 (then no client is sent anything: RocketMQ stops at the first such
// client it meets, having sent to those before it in its table's order).
//
// A slave answers it too, as RocketMQ's: its clients are told, and its
// offsets are its master's either way.
func (b *Broker) resetOffsetThroughClients(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	refuse := func(code int32, remark string) *remoting.Command {
		b.log.Warn().Int32("code", code).Str("remark", remark).Stringer("by", conn.RemoteAddr()).Msg("consumer offset reset through the clients refused")
		return remoting.NewResponse(req, code, remark)
	}
	r, err := parseClientResetRequest(req)
	if err != nil {
		return refuse(remoting.SystemError, "bad reset offset request header: "+err.Error())
	}
	tc, ok, err := b.topicConfig(r.topic)
	if err != nil {
		return refuse(remoting.SystemError, err.Error())
	}
	if !ok {
		return refuse(remoting.TopicNotExist, "[reset-offset] reset offset failed, no topic in this broker. topic="+r.topic)
	}
	table, err := b.clientResetTable(r, tc.WriteQueueNums)
	if errors.Is(err, errGroupHasNoOffset) {
		return refuse(remoting.SystemError, fmt.Sprintf("THe consumer group <%s> not exist", r.group))
	}
	if err != nil {
		b.log.Error().Err(err).Str("group", r.group).Str("topic", r.topic).Msg("reset offset failed")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	clients := b.clients.consumerChannels(r.group)
	if len(clients) == 0 {
		return refuse(remoting.ConsumerNotOnline, fmt.Sprintf("Consumer not online, so can not reset offset, Group: %s Topic: %s Timestamp: %d",
			r.group, r.topic, r.timestamp))
	}
	for _, c := range clients {
		if c.version < clientResetMinVersion {
			return refuse(remoting.SystemError, "the client does not support this feature. version="+remoting.VersionName(int(c.version)))
		}
	}
	// The header RocketMQ builds for the clients: its queueId and isForce
	// are the header's defaults, not the request's.
	body := adminbody.EncodeResetOffset(table)
	if req.Language == languageCPP {
		body = adminbody.EncodeResetOffsetForC(table)
	}
	push := remoting.NewRequest(remoting.ResetConsumerClientOffset, map[string]string{
		"topic": r.topic, "group": r.group, "timestamp": strconv.FormatInt(r.timestamp, 10),
		"queueId": "-1", "isForce": "false",
	}, body)
	for _, c := range clients {
		if err := c.conn.Oneway(push); err != nil {
			// As RocketMQ: a client that cannot be told is logged and
			// the others still are; the answer is the same.
			b.log.Error().Err(err).Str("group", r.group).Str("topic", r.topic).Str("clientId", c.clientID).
				Msg("reset offset: the client could not be told")
			continue
		}
		b.log.Info().Str("group", r.group).Str("topic", r.topic).Str("clientId", c.clientID).Msg("reset offset pushed to the client")
	}
	b.log.Info().Str("group", r.group).Str("topic", r.topic).Int64("timestamp", r.timestamp).Bool("force", r.force).
		Stringer("by", conn.RemoteAddr()).Int("queues", len(table)).Int("clients", len(clients)).Msg("consumer offsets reset through the clients")
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeResetOffset(table)
	return resp
}

// clientResetTable computes the offsets a reset through the clients
// sends for queues 0 to queues-1 of the topic (its write queues, as
// RocketMQ counts them).
func (b *Broker) clientResetTable(r clientResetRequest, queues int) (map[adminbody.MessageQueue]int64, error) {
	table := make(map[adminbody.MessageQueue]int64, queues)
	for q := int32(0); q < int32(queues); q++ {
		committed, ok, err := b.offsets.Get(r.group, r.topic, q)
		if err != nil {
			return nil, fmt.Errorf("committed offset of %s on %s/%d: %w", r.group, r.topic, q, err)
		}
		if !ok {
			return nil, fmt.Errorf("%s/%d: %w", r.topic, q, errGroupHasNoOffset)
		}
		var at int64
		if r.timestamp == -1 {
			at, err = b.cqs.MaxOffset(r.topic, q)
		} else {
			at, err = b.cqs.OffsetByTime(r.topic, q, r.timestamp, cq.Lower)
		}
		if err != nil {
			return nil, fmt.Errorf("offset of %s/%d at %d: %w", r.topic, q, r.timestamp, err)
		}
		if at < 0 {
			b.log.Warn().Str("topic", r.topic).Int32("queue", q).Int64("offset", at).Msg("reset offset is invalid; 0 sent")
			at = 0
		}
		off := committed
		if r.force || at < committed {
			off = at
		}
		table[adminbody.MessageQueue{BrokerName: b.cfg.BrokerName, QueueID: q, Topic: r.topic}] = off
	}
	return table, nil
}
