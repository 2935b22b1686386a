package broker

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/rocketkv/rocketkv/remoting"
)

// processHeartbeat answers HEART_BEAT: it registers the client's producer
// and consumer groups. The response carries the broker's version, which
// clients record, and the ext fields of RocketMQ 5's heartbeat V2: the
// broker supports it, and whether the client must send its
// subscriptions again (see clientManager.heartbeat).
func (b *Broker) processHeartbeat(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb heartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("malformed heartbeat")
		return remoting.NewResponse(req, remoting.SystemError, "malformed heartbeat body: "+err.Error())
	}
	subChange, err := b.clients.heartbeat(conn, &hb, req.Language, req.Version)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{fieldSupportHeartbeatV2: "true", fieldSubChange: strconv.FormatBool(subChange)}
	return resp
}

// processUnregisterClient answers UNREGISTER_CLIENT.
func (b *Broker) processUnregisterClient(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	id, err := h.String("clientID")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.clients.unregister(conn, id, h.OptString("producerGroup", ""), h.OptString("consumerGroup", ""))
	return remoting.NewResponse(req, remoting.Success, "")
}

// processConsumerList answers GET_CONSUMER_LIST_BY_GROUP.
func (b *Broker) processConsumerList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, err := remoting.Header(req.ExtFields).String("consumerGroup")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	ids := b.clients.consumerIDs(group)
	if len(ids) == 0 {
		return remoting.NewResponse(req, remoting.SystemError, "no consumer for this group, "+group)
	}
	body, err := json.Marshal(struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// lockBatchBody is LockBatchRequestBody / UnlockBatchRequestBody.
type lockBatchBody struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	OnlyThisBrkr  bool           `json:"onlyThisBroker"`
	MQSet         []messageQueue `json:"mqSet"`
}

// processLockBatch answers LOCK_BATCH_MQ with the queues the client holds.
func (b *Broker) processLockBatch(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body lockBatchBody
	if err := json.Unmarshal(req.Body, &body); err != nil || body.ConsumerGroup == "" || body.ClientID == "" {
		return remoting.NewResponse(req, remoting.SystemError, "malformed lock batch body")
	}
	locked := b.locks.tryLock(body.ConsumerGroup, body.ClientID, body.MQSet)
	out, err := json.Marshal(struct {
		LockOKMQSet []messageQueue `json:"lockOKMQSet"`
	}{locked})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = out
	return resp
}

// processUnlockBatch answers UNLOCK_BATCH_MQ.
func (b *Broker) processUnlockBatch(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body lockBatchBody
	if err := json.Unmarshal(req.Body, &body); err != nil || body.ConsumerGroup == "" {
		return remoting.NewResponse(req, remoting.SystemError, "malformed unlock batch body")
	}
	b.locks.unlock(body.ConsumerGroup, body.ClientID, body.MQSet)
	return remoting.NewResponse(req, remoting.Success, "")
}

// processCheckClientConfig answers CHECK_CLIENT_CONFIG, which the Java
// push consumer sends to every broker before it starts with a SQL92
// subscription: SUCCESS for a TAG subscription (or none), SYSTEM_ERROR
// when the broker does not serve SQL92 (enablePropertyFilter off),
// SUBSCRIPTION_PARSE_FAILED with the parser's message when the expression
// does not compile.
func (b *Broker) processCheckClientConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body struct {
		ClientID         string            `json:"clientId"`
		Group            string            `json:"group"`
		SubscriptionData *subscriptionData `json:"subscriptionData"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("CHECK_CLIENT_CONFIG refused: bad body")
		return remoting.NewResponse(req, remoting.SystemError, "bad CHECK_CLIENT_CONFIG body: "+err.Error())
	}
	sd := body.SubscriptionData
	if sd == nil || isTagType(sd.ExpressionType) {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if !b.current().EnablePropertyFilter {
		return remoting.NewResponse(req, remoting.SystemError, unsupportedFilter+sd.ExpressionType)
	}
	if _, err := newSubscription(sd.Topic, sd.SubString, sd.ExpressionType, 0); err != nil {
		b.log.Warn().Err(err).Str("client", body.ClientID).Str("group", body.Group).Msg("client filters by an expression that does not compile")
		return remoting.NewResponse(req, remoting.SubscriptionParseFailed, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}
