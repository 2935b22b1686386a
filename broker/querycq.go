package broker

import (
	"context"
	"fmt"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// maxQueryCQUnits bounds one QUERY_CONSUME_QUEUE answer (RocketMQ has no
// bound; mqadmin asks for 10 by default).
const maxQueryCQUnits = 10000

// processQueryConsumeQueue answers QUERY_CONSUME_QUEUE (mqadmin queryCq):
// count ConsumeQueue units of a queue from index, its bounds and, with a
// consumerGroup, that group's subscription of the topic. It reads the
// Pebble ConsumeQueue as RocketMQ's reads its file one, so the same tool
// inspects either.
func (b *Broker) processQueryConsumeQueue(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	topic, qid, index, count := r.String("topic"), r.Int32("queueId"), r.Int64("index"), r.Int32("count")
	group := r.OptString("consumerGroup", "")
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	tc, ok, err := b.topics.get(topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok || qid < 0 || int(qid) >= max(tc.ReadQueueNums, tc.WriteQueueNums) {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("%d@%s is not exist!", qid, topic))
	}
	lo, hi, err := b.queueRange(topic, qid)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if index < lo || index >= hi {
		return remoting.NewResponse(req, remoting.Success, fmt.Sprintf("Index %d of %d@%s is not exist!", index, qid, topic))
	}
	body := adminbody.QueryConsumeQueue{MaxQueueIndex: hi, MinQueueIndex: lo, QueueData: []adminbody.ConsumeQueueData{}}
	if group != "" {
		if sub, _, known := b.clients.groupSubscription(group, topic); known && sub != nil {
			info := sub.info()
			body.SubscriptionData = &info
			body.FilterData = "null" // no SQL92 filter data for tag subscriptions
		} else {
			body.FilterData = fmt.Sprintf("%s@%s is not online!", group, topic)
		}
	}
	entries, err := b.cqs.Get(topic, qid, index, int(min(max(count, 0), maxQueryCQUnits)))
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	for _, e := range entries {
		body.QueueData = append(body.QueueData, adminbody.ConsumeQueueData{PhysicOffset: e.PhyOffset, PhysicSize: e.Size, TagsCode: e.TagsCode})
	}
	return jsonResponse(req, body)
}
