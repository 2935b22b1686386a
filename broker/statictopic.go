package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Static topics (RocketMQ 5's logic queues, RIP-21). A static topic's
// queues, as clients know them, are logic queues; each lives on one
// physical queue of one broker group at a time (its leader item), and the
// items it had before may be on other groups. The broker keeps each
// static topic's TopicQueueMappingDetail in the index database
// (kvindex.TopicQueueMappings), registers its leaders with the name
// servers (topicQueueMappingInfoMap), and turns the requests that name a
// logic queue into requests of the physical queue, as RocketMQ's
// processors' rewriteRequestForStaticTopic do. A request header with
// lo=false names a physical queue (a forwarded request).
//
// A request whose item is on another broker group (a queue that moved:
// its older messages and offsets) is forwarded to that group's master,
// found in the topic's route (cached: masterCache), with lo=false and the
// item's physical queue, as RocketMQ's RpcClient forwards it; a
// forwarding that fails is
// answered SYSTEM_ERROR with the reason, as RocketMQ answers it. The
// forwarding waits on the request's worker, as RocketMQ's processors wait
// on theirs, for at most staticForwardTimeout.
//
// POP requests are not rewritten: RocketMQ 5.3.4's POP, ack, batch ack,
// change of invisible time, peek and notification processors build no
// mapping context, so their queue ids and offsets are physical ones
// (TestStaticTopicPopServesPhysicalQueues).

// staticForwardTimeout bounds a request forwarded to another broker
// group (RocketMQ's forwardTimeout default).
const staticForwardTimeout = 3 * time.Second

// errStaticForward is the failure of a request forwarded to another
// broker group.
var errStaticForward = errors.New("forward a static topic request to another broker group")

// forward sends req with the fields of set over its own, lo=false and
// bname, to the master of item's broker group and returns its answer.
// The master's address comes from b.staticRoutes (a cached route, fetched
// again when stale); a forwarding that fails at a cached address asks
// for the route again and, when the group's master has moved, sends to
// the new one once.
func (b *Broker) forward(ctx context.Context, req *remoting.Command, topic string, item meta.LogicQueueMappingItem, set map[string]string) (*remoting.Command, error) {
	fail := func(err error) (*remoting.Command, error) {
		b.log.Warn().Err(err).Str("topic", topic).Str("broker", item.Bname).Int32("code", req.Code).Msg("static topic request not forwarded")
		return nil, fmt.Errorf("%w %s: %w", errStaticForward, item.Bname, err)
	}
	ext := maps.Clone(req.ExtFields)
	if ext == nil {
		ext = map[string]string{}
	}
	maps.Copy(ext, set)
	ext["lo"], ext["bname"], ext["queueId"] = "false", item.Bname, strconv.Itoa(int(item.QueueID))
	resp, err := b.sendToGroupMaster(ctx, topic, item.Bname, remoting.NewRequest(req.Code, ext, req.Body))
	if err != nil {
		return fail(err)
	}
	return resp, nil
}

// fetchRoute asks a name server for topic's route.
func (b *Broker) fetchRoute(ctx context.Context, topic string) (namesrv.TopicRouteData, error) {
	if !b.register.hasNameServers() {
		return namesrv.TopicRouteData{}, errors.New("no name server to find it")
	}
	return namesrv.FetchRoute(ctx, b.register.pool, b.register.ns.PreferAvailable(), topic, routeTimeout)
}

// sendToGroupMaster sends req to the master of broker group bname, found
// in topic's route as forward finds it (the cached address, asked again
// after a failure there, followed once when the master moved).
func (b *Broker) sendToGroupMaster(ctx context.Context, topic, bname string, req *remoting.Command) (*remoting.Command, error) {
	addr, cached, err := b.staticRoutes.master(ctx, topic, bname, b.fetchRoute)
	if err != nil {
		return nil, err
	}
	pool, err := b.staticLink.get(b.newEscapePool)
	if err != nil {
		return nil, err
	}
	send := func(addr string) (*remoting.Command, error) {
		cctx, cancel := context.WithTimeout(ctx, staticForwardTimeout)
		defer cancel()
		resp, err := pool.Invoke(cctx, addr, req)
		if err != nil {
			pool.CloseAddr(addr)
			b.staticRoutes.forget(bname, addr)
		}
		return resp, err
	}
	resp, err := send(addr)
	if err != nil && cached && ctx.Err() == nil {
		if moved, ferr := b.staticRoutes.refresh(ctx, topic, bname, b.fetchRoute); ferr == nil && moved != addr {
			b.log.Info().Str("topic", topic).Str("broker", bname).Str("from", addr).Str("to", moved).
				Msg("static topic forwarding follows the group's master to its new address")
			addr = moved
			resp, err = send(addr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return resp, nil
}

// forwardedAnswer is the answer to req carrying what resp, another
// group's answer, says.
func forwardedAnswer(req, resp *remoting.Command) *remoting.Command {
	out := remoting.NewResponse(req, resp.Code, resp.Remark)
	out.ExtFields = resp.ExtFields
	out.Body = resp.Body
	return out
}

// forwardOffset forwards an offset request for item and returns the
// offset answered; resp is the answer to give when it is not a success
// with an offset.
func (b *Broker) forwardOffset(ctx context.Context, req *remoting.Command, c *staticCtx, item meta.LogicQueueMappingItem, set map[string]string) (int64, *remoting.Command) {
	resp, err := b.forward(ctx, req, c.detail.Topic, item, set)
	if err != nil {
		return 0, remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if resp.Code != remoting.Success {
		return 0, forwardedAnswer(req, resp)
	}
	off, err := remoting.Header(resp.ExtFields).Int64("offset")
	if err != nil {
		return 0, remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("answer of broker %s: %v", item.Bname, err))
	}
	return off, nil
}

// staticCtx is what a request on a static topic's logic queue finds of
// the topic's mapping (RocketMQ's TopicQueueMappingContext).
type staticCtx struct {
	detail meta.TopicQueueMappingDetail
	// globalID is the logic queue of the request (-1: none).
	globalID int32
	// items are the logic queue's items, oldest first.
	items []meta.LogicQueueMappingItem
}

// leader returns the logic queue's leader item; ok is false when the
// mapping has none.
func (c *staticCtx) leader() (meta.LogicQueueMappingItem, bool) {
	if len(c.items) == 0 {
		return meta.LogicQueueMappingItem{}, false
	}
	return c.items[len(c.items)-1], true
}

// isLeader reports whether this broker group leads the logic queue.
func (c *staticCtx) isLeader() bool {
	l, ok := c.leader()
	return ok && l.Bname == c.detail.Bname
}

// local reports whether item is on this broker group.
func (c *staticCtx) local(item meta.LogicQueueMappingItem) bool { return item.Bname == c.detail.Bname }

// notLeader answers a request on a logic queue this group does not lead,
// with RocketMQ's code and remark.
func (c *staticCtx) notLeader(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, remoting.NotLeaderForQueue,
		fmt.Sprintf("%s-%d does not exit in request process of current broker %s", c.detail.Topic, c.globalID, c.detail.Bname))
}

// staticContext returns the mapping context of a request on logic queue
// queueID of topic, nil when the topic is not static here or the header
// names a physical queue (lo other than true, RocketMQ's forwarded
// requests). With selectOneWhenMiss a negative queue id takes one the
// group hosts (RocketMQ takes its map's first; here the smallest).
func (b *Broker) staticContext(h remoting.Header, topic string, queueID int32, selectOneWhenMiss bool) (*staticCtx, error) {
	if lo, ok := h["lo"]; ok && !strings.EqualFold(lo, "true") {
		return nil, nil
	}
	if b.mappings == nil || !b.isStaticTopic(topic) {
		return nil, nil
	}
	d, ok, err := b.mappings.Get(topic)
	if err != nil || !ok {
		return nil, err
	}
	c := &staticCtx{detail: d, globalID: queueID}
	if queueID < 0 && selectOneWhenMiss && len(d.HostedQueues) > 0 {
		c.globalID = slices.Min(slices.Collect(maps.Keys(d.HostedQueues)))
	}
	if c.globalID >= 0 {
		c.items = d.HostedQueues[c.globalID]
	}
	return c, nil
}

// isStaticTopic reports whether topic has a queue mapping, by the set
// refreshStaticNames keeps.
func (b *Broker) isStaticTopic(topic string) bool {
	names := b.staticNames.Load()
	if names == nil {
		return false
	}
	_, ok := (*names)[topic]
	return ok
}

// refreshStaticNames rebuilds the set of topics with a mapping from the
// mappings table (a handful of static topics, read after each change).
func (b *Broker) refreshStaticNames() error {
	b.staticNamesMu.Lock()
	defer b.staticNamesMu.Unlock()
	names := map[string]struct{}{}
	if err := b.mappings.Each(func(d meta.TopicQueueMappingDetail) bool {
		names[d.Topic] = struct{}{}
		return true
	}); err != nil {
		return fmt.Errorf("list the static topics: %w", err)
	}
	b.staticNames.Store(&names)
	return nil
}

// withFields returns a copy of req whose header has the fields of set
// over req's (req itself is left as it is).
func withFields(req *remoting.Command, set map[string]string) *remoting.Command {
	c := *req
	c.ExtFields = maps.Clone(req.ExtFields)
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	maps.Copy(c.ExtFields, set)
	return &c
}

// staticAware serves a request naming a topic and queue through rewrite
// when the topic is a static topic here, else through next.
func (b *Broker) staticAware(rewrite func(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command,
	next remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		topic, qid, bad := topicQueue(req)
		if bad != nil {
			return next(ctx, conn, req)
		}
		c, err := b.staticContext(remoting.Header(req.ExtFields), topic, qid, false)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		if c == nil {
			return next(ctx, conn, req)
		}
		return rewrite(ctx, conn, req, c, next)
	}
}

// localQueueOffset runs next, an offset request, on physical queue q and
// returns the offset it answered; resp is next's answer when it is not a
// success with an offset.
func localQueueOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command, q int32, next remoting.RespondFunc) (off int64, resp *remoting.Command) {
	resp = next(ctx, conn, withFields(req, map[string]string{"queueId": fmt.Sprint(q), "lo": "false"}))
	if resp == nil || resp.Code != remoting.Success {
		return 0, resp
	}
	off, err := remoting.Header(resp.ExtFields).Int64("offset")
	if err != nil {
		return 0, resp
	}
	return off, nil
}

// staticMaxOffset answers GET_MAX_OFFSET of a logic queue: the newest
// decided item's end, in logic offsets (RocketMQ's AdminBrokerProcessor).
func (b *Broker) staticMaxOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command {
	return b.staticQueueEdge(ctx, conn, req, c, next, true)
}

// staticMinOffset answers GET_MIN_OFFSET of a logic queue: where its
// oldest decided item starts, in logic offsets.
func (b *Broker) staticMinOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command {
	return b.staticQueueEdge(ctx, conn, req, c, next, false)
}

// staticQueueEdge answers GET_MAX_OFFSET (newest) or GET_MIN_OFFSET of a
// logic queue from the item at that edge: the newest decided item, whose
// end counts strictly (an offset past it is its end), or the oldest,
// whose start counts loosely (an offset before it is its start), as
// RocketMQ converts them. next, the physical request's handler, reads a
// local item's queue; another group's item is asked for with its own
// physical queue.
func (b *Broker) staticQueueEdge(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc, newest bool) *remoting.Command {
	if !c.isLeader() {
		return c.notLeader(req)
	}
	logic := int64(0)
	if newest {
		logic = math.MaxInt64
	}
	item, ok := meta.FindLogicQueueMappingItem(c.items, logic, true)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("%s-%d has no item with a decided logic offset", c.detail.Topic, c.globalID))
	}
	var off int64
	var resp *remoting.Command
	switch {
	case !c.local(item):
		// RocketMQ asks another group for the newest item's end with the
		// leader's queue id; the item's is the one of that group.
		off, resp = b.forwardOffset(ctx, req, c, item, nil)
	case newest:
		// As RocketMQ: the leader's queue, here where the newest decided
		// item is.
		leader, _ := c.leader()
		off, resp = localQueueOffset(ctx, conn, req, leader.QueueID, next)
	default:
		off, resp = localQueueOffset(ctx, conn, req, item.QueueID, next)
	}
	if resp != nil {
		return resp
	}
	if newest {
		return offsetResponse(req, item.StaticOffsetStrictly(off))
	}
	return offsetResponse(req, item.StaticOffsetLoosely(off))
}

// staticEarliestStoreTime answers GET_EARLIEST_MSG_STORETIME of a logic
// queue: the store time of its oldest decided item's first message.
// (RocketMQ forwards the request to that item's group, itself included,
// with the logic queue id left in; here the item's physical queue is
// read.)
func (b *Broker) staticEarliestStoreTime(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command {
	if !c.isLeader() {
		return c.notLeader(req)
	}
	item, ok := meta.FindLogicQueueMappingItem(c.items, 0, true)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("%s-%d has no item with a decided logic offset", c.detail.Topic, c.globalID))
	}
	if !c.local(item) {
		resp, err := b.forward(ctx, req, c.detail.Topic, item, nil)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		return forwardedAnswer(req, resp)
	}
	return next(ctx, conn, withFields(req, map[string]string{"queueId": fmt.Sprint(item.QueueID), "lo": "false"}))
}

// staticSearchOffset answers SEARCH_OFFSET_BY_TIMESTAMP of a logic queue:
// the first decided item, oldest first, whose queue has an offset for the
// time above 0, in logic offsets; -1 when none has.
func (b *Broker) staticSearchOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command {
	if !c.isLeader() {
		return c.notLeader(req)
	}
	offset := int64(-1)
	for _, item := range c.items {
		if !item.LogicOffsetDecided() {
			continue
		}
		if !c.local(item) {
			// As RocketMQ: another group's offset counts when it falls in
			// the item, and the search goes on.
			off, resp := b.forwardOffset(ctx, req, c, item, nil)
			if resp != nil {
				return resp
			}
			if off >= 0 && !(item.EndDecided() && off >= item.EndOffset) {
				offset = item.StaticOffsetStrictly(off)
			}
			continue
		}
		off, resp := localQueueOffset(ctx, conn, req, item.QueueID, next)
		if resp != nil {
			return resp
		}
		if off > 0 {
			offset = item.StaticOffsetStrictly(off)
			break
		}
	}
	return offsetResponse(req, offset)
}

// staticQueryConsumerOffset answers QUERY_CONSUMER_OFFSET of a logic
// queue: a queue that never moved is its physical queue; else the group's
// offset of the newest item that has one, in logic offsets
// (ConsumerManageProcessor's double read).
func (b *Broker) staticQueryConsumerOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command {
	if !c.isLeader() {
		return c.notLeader(req)
	}
	leader, _ := c.leader()
	if len(c.items) == 1 && c.items[0].LogicOffset == 0 {
		off, resp := localQueueOffset(ctx, conn, req, leader.QueueID, next)
		if resp != nil {
			return resp
		}
		return offsetResponse(req, leader.StaticOffsetStrictly(off))
	}
	group, err := remoting.Header(req.ExtFields).String("consumerGroup")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	for i := len(c.items) - 1; i >= 0; i-- {
		item := c.items[i]
		if !c.local(item) {
			resp, err := b.forward(ctx, req, c.detail.Topic, item, map[string]string{"setZeroIfNotFound": "false"})
			switch {
			case err != nil:
				return remoting.NewResponse(req, remoting.SystemError, err.Error())
			case resp.Code == remoting.QueryNotFound:
				continue
			case resp.Code != remoting.Success:
				return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("Unknown response code %d", resp.Code))
			}
			off, err := remoting.Header(resp.ExtFields).Int64("offset")
			if err != nil {
				return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("answer of broker %s: %v", item.Bname, err))
			}
			return offsetResponse(req, item.StaticOffsetStrictly(off))
		}
		off, ok, err := b.consumerOffset(group, c.detail.Topic, item.QueueID)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		if ok && off >= 0 {
			return offsetResponse(req, item.StaticOffsetStrictly(off))
		}
	}
	return remoting.NewResponse(req, remoting.QueryNotFound, "Not found, maybe this group consumer boot first")
}

// staticUpdateConsumerOffset answers UPDATE_CONSUMER_OFFSET of a logic
// queue: the offset is stored on the physical queue of the item holding
// it, as a physical offset.
func (b *Broker) staticUpdateConsumerOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command, c *staticCtx, next remoting.RespondFunc) *remoting.Command {
	if !c.isLeader() {
		return c.notLeader(req)
	}
	off, err := remoting.Header(req.ExtFields).Int64("commitOffset")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	item, ok := meta.FindLogicQueueMappingItem(c.items, off, true)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("%s-%d has no item with a decided logic offset", c.detail.Topic, c.globalID))
	}
	set := map[string]string{"queueId": fmt.Sprint(item.QueueID), "lo": "false", "commitOffset": fmt.Sprint(item.PhysicalOffset(off))}
	if !c.local(item) {
		resp, err := b.forward(ctx, req, c.detail.Topic, item, set)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		return forwardedAnswer(req, resp)
	}
	return next(ctx, conn, withFields(req, set))
}

// staticSend is what a send to a static topic's logic queue keeps for its
// answer: the logic queue and the leader item it was stored through.
type staticSend struct {
	globalID int32
	leader   meta.LogicQueueMappingItem
}

// answer returns the queue id and offset a send answers: the logic ones
// for a static topic (RocketMQ's rewriteResponseForStaticTopic).
func (s *staticSend) answer(queueID int32, offset int64) (int32, int64) {
	if s == nil {
		return queueID, offset
	}
	return s.globalID, s.leader.StaticOffsetLoosely(offset)
}

// rewriteStaticSend turns a send to a static topic's logic queue into one
// to its leader's physical queue; resp refuses a send to a queue this
// group does not lead.
func (b *Broker) rewriteStaticSend(req *remoting.Command, h *sendHeader) (*remoting.Command, error) {
	c, err := b.staticContext(remoting.Header(req.ExtFields), h.topic, h.queueID, true)
	if err != nil || c == nil {
		return nil, err
	}
	if !c.isLeader() {
		return c.notLeader(req), nil
	}
	leader, _ := c.leader()
	h.static = &staticSend{globalID: c.globalID, leader: leader}
	h.queueID = leader.QueueID
	return nil, nil
}

// staticPull is what a pull of a static topic's logic queue keeps for its
// answer (RocketMQ's TopicQueueMappingContext with its current item).
type staticPull struct {
	ctx *staticCtx
	// current is the item the pull reads.
	current meta.LogicQueueMappingItem
	// logicOffset is the offset the consumer asked for.
	logicOffset int64
}

// rewriteStaticPull turns a pull of a static topic's logic queue into one
// of the physical queue of the item holding the offset. resp refuses one
// this group cannot serve.
func (b *Broker) rewriteStaticPull(ctx context.Context, req *remoting.Command, p *pullHeader) (*remoting.Command, error) {
	c, err := b.staticContext(remoting.Header(req.ExtFields), p.topic, p.queueID, false)
	if err != nil || c == nil {
		return nil, err
	}
	if !c.isLeader() {
		return remoting.NewResponse(req, remoting.NotLeaderForQueue,
			fmt.Sprintf("%s-%d cannot find mapping item in request process of current broker %s", c.detail.Topic, c.globalID, c.detail.Bname)), nil
	}
	item, ok := meta.FindLogicQueueMappingItem(c.items, p.queueOffset, true)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("%s-%d has no item with a decided logic offset", c.detail.Topic, c.globalID)), nil
	}
	p.static = &staticPull{ctx: c, current: item, logicOffset: p.queueOffset}
	p.queueID = item.QueueID
	p.queueOffset = item.PhysicalOffset(p.queueOffset)
	if item.EndDecided() {
		p.maxMsgNums = int32(min(item.EndOffset-item.StartOffset, int64(p.maxMsgNums)))
	}
	if !c.local(item) {
		// Read from the group that holds the item, neither held there
		// nor committing (RocketMQ clears both flags).
		resp, err := b.forward(ctx, req, c.detail.Topic, item, map[string]string{
			"queueOffset": strconv.FormatInt(p.queueOffset, 10), "maxMsgNums": strconv.Itoa(int(p.maxMsgNums)),
			"sysFlag": strconv.Itoa(int(p.sysFlag &^ (pullSuspend | pullCommitOffset))),
		})
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error()), nil
		}
		out := forwardedAnswer(req, resp)
		p.static.rewriteAnswer(out)
		return out, nil
	}
	// The commit offset rides along as a logic offset: stored on the
	// physical queue only when it falls in the item read (else RocketMQ's
	// forwarded pull drops it too).
	if p.sysFlag&pullCommitOffset != 0 {
		if ci, ok := meta.FindLogicQueueMappingItem(c.items, p.commitOffset, true); ok && ci.Gen == item.Gen {
			p.commitOffset = item.PhysicalOffset(p.commitOffset)
		} else {
			p.sysFlag &^= pullCommitOffset
		}
	}
	return nil, nil
}

// rewriteStaticPullAnswer turns a pull answer's physical offsets into
// logic ones and sets its offsetDelta (RocketMQ's PullMessageProcessor
// rewriteResponseForStaticTopic); for an answer other than a success, it
// also decides the code as RocketMQ does at the items' edges.
func (s *staticPull) rewriteAnswer(resp *remoting.Command) {
	if s == nil || resp == nil {
		return
	}
	h := remoting.Header(resp.ExtFields)
	next, err1 := h.Int64("nextBeginOffset")
	minOff, err2 := h.Int64("minOffset")
	maxOff, err3 := h.Int64("maxOffset")
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	c := s.ctx
	leader, _ := c.leader()
	earliest, _ := meta.FindLogicQueueMappingItem(c.items, 0, true)
	current := s.current
	requested := current.PhysicalOffset(s.logicOffset)
	code := resp.Code
	if code != remoting.Success {
		revised := false
		if leader.Gen == current.Gen {
			switch {
			case requested > maxOff:
				if code == remoting.PullOffsetMoved {
					next = maxOff
				}
			case requested < minOff:
				next, code = minOff, remoting.PullRetryImmediately
			}
		}
		if earliest.Gen == current.Gen {
			switch {
			case requested < minOff:
				next, code = minOff, remoting.PullOffsetMoved
			case requested >= maxOff:
				if n, ok := meta.FindNextItem(c.items, current.Gen, true); ok {
					revised, current = true, n
					next, minOff, maxOff = n.StartOffset, n.StartOffset, n.StartOffset
					code = remoting.PullRetryImmediately
				} else {
					code = remoting.PullNotFound
				}
			}
		}
		if !revised && leader.Gen != current.Gen && earliest.Gen != current.Gen {
			switch {
			case requested < minOff:
				next, code = minOff, remoting.PullRetryImmediately
			case requested >= maxOff:
				if n, ok := meta.FindNextItem(c.items, current.Gen, true); ok {
					current = n
					next, minOff, maxOff = n.StartOffset, n.StartOffset, n.StartOffset
					code = remoting.PullRetryImmediately
				} else {
					code = remoting.PullNotFound
				}
			}
		}
	}
	if current.EndDecided() && next >= current.EndOffset {
		next = current.EndOffset
	}
	h.SetInt64("nextBeginOffset", current.StaticOffsetStrictly(next))
	h.SetInt64("minOffset", current.StaticOffsetStrictly(max(current.StartOffset, minOff)))
	h.SetInt64("maxOffset", max(current.StaticOffsetStrictly(maxOff), c.detail.MaxOffsetFromMapping(c.globalID)))
	h.SetInt64("offsetDelta", current.OffsetDelta())
	if code != resp.Code {
		resp.Code = code
		resp.Remark = ""
		resp.Body = nil
	}
}

// processUpdateStaticTopic answers UPDATE_AND_CREATE_STATIC_TOPIC (513,
// mqadmin updateStaticTopic): the topic's config from the header (as
// UPDATE_AND_CREATE_TOPIC's) and its mapping detail from the body,
// checked and merged over the one held as RocketMQ's
// TopicQueueMappingManager does (meta.MergeTopicQueueMapping; force, a
// header field, skips the checks of epoch and items). The detail must be
// of this broker group and the header's topic, and its logic queues
// below its totalQueues; the physical queues of its items on this group
// below the topic's queue count (RocketMQ's tool checks the last two).
// The SUCCESS waits for a registration, which carries the mapping.
func (b *Broker) processUpdateStaticTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) (*remoting.Command, bool) {
	h := remoting.Header(req.ExtFields)
	fail := func(code int32, format string, args ...any) (*remoting.Command, bool) {
		remark := fmt.Sprintf(format, args...)
		b.log.Warn().Str("topic", h.OptString("topic", "")).Str("reason", remark).Msg("update static topic refused")
		return remoting.NewResponse(req, code, remark), false
	}
	topic, err := h.String("topic")
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if remark := validateTopicName(topic); remark != "" {
		return fail(remoting.InvalidParameter, "%s", remark)
	}
	if remark := b.systemTopicRefusal(topic); remark != "" {
		return fail(remoting.InvalidParameter, "%s", remark)
	}
	detail, err := meta.DecodeTopicQueueMappingDetail(req.Body)
	if err != nil {
		return fail(remoting.SystemError, "decode the static topic mapping of %s: %v", topic, err)
	}
	r, err1 := h.Int32("readQueueNums")
	w, err2 := h.Int32("writeQueueNums")
	perm, err3 := h.Int32("perm")
	sys, err4 := h.OptInt32("topicSysFlag", 0)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if !validQueueNums(int(r), int(w)) {
		return fail(remoting.InvalidParameter, "queue numbers %d/%d out of range [0, %d]", r, w, maxTopicQueueNums)
	}
	switch {
	case detail.Bname != b.cfg.BrokerName:
		return fail(remoting.SystemError, "the mapping is of broker %s, not of this broker %s", detail.Bname, b.cfg.BrokerName)
	case detail.Topic != topic:
		return fail(remoting.SystemError, "the mapping is of topic %s, not of %s", detail.Topic, topic)
	case detail.TotalQueues < 0:
		return fail(remoting.SystemError, "the mapping's total queue number %d is negative", detail.TotalQueues)
	}
	for id, items := range detail.HostedQueues {
		if id < 0 || id >= detail.TotalQueues {
			return fail(remoting.SystemError, "logic queue %d is out of the mapping's total queue number %d", id, detail.TotalQueues)
		}
		for _, it := range items {
			if it.Bname == b.cfg.BrokerName && it.QueueID >= max(r, w) {
				return fail(remoting.SystemError, "logic queue %d: the physical queue id %d is overflow the queues (%d) of %s", id, it.QueueID, max(r, w), topic)
			}
		}
	}
	tc := meta.NewTopicConfig(topic, int(r))
	tc.WriteQueueNums, tc.Perm, tc.TopicSysFlag = int(w), int(perm), int(sys)
	tc.TopicFilterType = h.OptString("topicFilterType", meta.SingleTag)
	force := h.OptBool("force", false)

	b.mappingMu.Lock()
	defer b.mappingMu.Unlock()
	old, had, err := b.mappings.Get(topic)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	var oldp *meta.TopicQueueMappingDetail
	if had {
		oldp = &old
	}
	merged, err := meta.MergeTopicQueueMapping(oldp, detail, force)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if _, refusal, err := b.topics.createOrUpdate([]meta.TopicConfig{tc}); err != nil || refusal != "" {
		return fail(remoting.SystemError, "%s", cmpOr(refusal, err))
	}
	if err := b.mappings.Put(merged); err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if err := b.refreshStaticNames(); err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	// The registration carries the mapping with the topics' data version:
	// a new one makes the name servers take it.
	if err := b.topics.table.Touch(); err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	b.log.Info().Str("topic", topic).Int64("epoch", merged.Epoch).Int32("totalQueues", merged.TotalQueues).
		Int("hostedQueues", len(merged.HostedQueues)).Bool("force", force).Msg("static topic created or updated")
	return remoting.NewResponse(req, remoting.Success, ""), true
}

// cmpOr is refusal, or err's text when refusal is empty.
func cmpOr(refusal string, err error) string {
	if refusal != "" || err == nil {
		return refusal
	}
	return err.Error()
}

// staticMappingInfos returns the mapping info of every static topic among
// topics, as the broker registers them (topicQueueMappingInfoMap).
func (b *Broker) staticMappingInfos(topics func(string) bool) (map[string][]byte, error) {
	if b.mappings == nil {
		return nil, nil
	}
	var infos map[string][]byte
	var encErr error
	err := b.mappings.Each(func(d meta.TopicQueueMappingDetail) bool {
		if !topics(d.Topic) {
			return true
		}
		raw, err := d.MappingInfoJSON()
		if err != nil {
			encErr = err
			return false
		}
		if infos == nil {
			infos = map[string][]byte{}
		}
		infos[d.Topic] = raw
		return true
	})
	return infos, errors.Join(err, encErr)
}

// applyMasterMappings replaces the static topics' mappings with the
// master's (the topicQueueMappingDetailMap of its GET_ALL_TOPIC_CONFIG
// answer) when the master's mappingDataVersion differs from ours, as
// RocketMQ's SlaveSynchronize.syncTopicConfig does. An answer without the
// map (an older master) changes nothing.
func (b *Broker) applyMasterMappings(body []byte) error {
	var wrapper struct {
		Details map[string]json.RawMessage `json:"topicQueueMappingDetailMap"`
		Version *meta.DataVersion          `json:"mappingDataVersion"`
	}
	if err := adminbody.UnmarshalFastjson(body, &wrapper); err != nil {
		return fmt.Errorf("the master's static topic mappings: %w", err)
	}
	if wrapper.Details == nil {
		return nil
	}
	var version meta.DataVersion
	if wrapper.Version != nil {
		version = *wrapper.Version
		if sameVersion(b.mappings.Version(), version) {
			return nil
		}
	}
	details := make([]meta.TopicQueueMappingDetail, 0, len(wrapper.Details))
	for topic, raw := range wrapper.Details {
		d, err := meta.DecodeTopicQueueMappingDetail(raw)
		if err != nil {
			return fmt.Errorf("the master's static topic mapping of %s: %w", topic, err)
		}
		details = append(details, d)
	}
	removed, err := b.mappings.Replace(details, version)
	if err != nil {
		return fmt.Errorf("copy the master's static topic mappings: %w", err)
	}
	if err := b.refreshStaticNames(); err != nil {
		return err
	}
	b.log.Debug().Int("mappings", len(details)).Int("removed", len(removed)).Msg("static topic mappings copied from the master")
	return nil
}
