package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// Pull request sysFlag bits (RocketMQ's PullSysFlag).
const (
	pullCommitOffset = 1
	pullSuspend      = 2
	pullSubscription = 4
)

// Why a pull was refused with NO_PERMISSION, in the answer's
// forbiddenType field (RocketMQ's ForbiddenType).
const (
	forbiddenBroker       = 1 // BROKER_FORBIDDEN: the broker refuses this kind of pull
	forbiddenGroup        = 2 // GROUP_FORBIDDEN: the group's consumeEnable is off
	forbiddenTopic        = 3 // TOPIC_FORBIDDEN: the topic is not readable
	forbiddenBroadcasting = 4 // BROADCASTING_DISABLE_FORBIDDEN: the group may not consume by broadcast
	forbiddenSubscription = 5 // SUBSCRIPTION_FORBIDDEN: the group is forbidden to read the topic
)

// coldCtrRemark is the remark of the answer to a pull that cold-data
// flow control refuses (RocketMQ's).
const coldCtrRemark = "This consumer group is reading cold data. It has been flow control"

// forbiddenPull gives a NO_PERMISSION pull answer its forbiddenType.
func forbiddenPull(resp *remoting.Command, forbiddenType int32) *remoting.Command {
	resp.ExtFields = map[string]string{}
	remoting.Header(resp.ExtFields).SetInt32("forbiddenType", forbiddenType)
	return resp
}

// pullHeader is PullMessageRequestHeader.
type pullHeader struct {
	group          string
	topic          string
	queueID        int32
	queueOffset    int64
	maxMsgNums     int32
	sysFlag        int32
	commitOffset   int64
	suspendTimeout time.Duration
	subscription   string
	subVersion     int64
	expressionType string
	maxMsgBytes    int32
	// holdUntil is when a held pull's suspension ends (zero until it is
	// first held): a wake-up that finds only messages its filter rejects
	// holds it again, past them, until then.
	holdUntil time.Time
	// coldRerun marks the second run of a pull held back for reading
	// cold data (RocketMQ's _noSuspend_ field): it is not held again.
	coldRerun bool
	// static is set for a pull of a static topic's logic queue: the
	// fields above then name the physical queue (rewriteStaticPull).
	static *staticPull
}

func parsePullHeader(req *remoting.Command) (pullHeader, error) {
	h := remoting.Header(req.ExtFields)
	var p pullHeader
	var err error
	if p.group, err = h.String("consumerGroup"); err != nil {
		return p, err
	}
	if p.topic, err = h.String("topic"); err != nil {
		return p, err
	}
	if p.queueID, err = h.Int32("queueId"); err != nil {
		return p, err
	}
	if p.queueOffset, err = h.Int64("queueOffset"); err != nil {
		return p, err
	}
	if p.maxMsgNums, err = h.Int32("maxMsgNums"); err != nil {
		return p, err
	}
	if p.sysFlag, err = h.Int32("sysFlag"); err != nil {
		return p, err
	}
	if p.commitOffset, err = h.OptInt64("commitOffset", 0); err != nil {
		return p, err
	}
	ms, err := h.OptInt64("suspendTimeoutMillis", 15000)
	if err != nil {
		return p, err
	}
	p.suspendTimeout = time.Duration(ms) * time.Millisecond
	p.subscription = h.OptString("subscription", "")
	if p.subVersion, err = h.OptInt64("subVersion", 0); err != nil {
		return p, err
	}
	p.expressionType = h.OptString("expressionType", exprTag)
	if p.maxMsgBytes, err = h.OptInt32("maxMsgBytes", 0); err != nil {
		return p, err
	}
	return p, nil
}

// processPull answers PULL_MESSAGE and LITE_PULL_MESSAGE; a pull that finds
// nothing and may be suspended is held until a message arrives or its
// suspend timeout passes.
func (b *Broker) processPull(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	p, err := parsePullHeader(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad pull request header: "+err.Error())
	}
	return b.pull(conn, req, p, true)
}

// pull runs one pass of a pull. allowSuspend is true on the first pass
// only: it may hold the request and it commits the consumer's offset.
func (b *Broker) pull(conn *remoting.Conn, req *remoting.Command, p pullHeader, allowSuspend bool) *remoting.Command {
	fail := func(code int32, format string, args ...any) *remoting.Command {
		return remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
	}
	if !meta.Readable(b.permission()) {
		return forbiddenPull(fail(remoting.NoPermission, "the broker[%s] pulling message is forbidden", b.announcedHost()), forbiddenBroker)
	}
	if req.Code == remoting.LitePullMessage && !b.current().LitePullMessageEnable {
		return forbiddenPull(fail(remoting.NoPermission, "the broker[%s] for lite pull consumer is forbidden", b.announcedHost()), forbiddenBroker)
	}
	gc, err := b.groupConfig(p.group, true)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if gc.GroupName == "" {
		return fail(remoting.SubscriptionGroupNotExist, "subscription group [%s] does not exist, %s", p.group, faqSuggestion)
	}
	if !gc.ConsumeEnable {
		return forbiddenPull(fail(remoting.NoPermission, "subscription group no permission, %s", p.group), forbiddenGroup)
	}
	deletions := b.db.Pop().TopicDeletions() // before the topic check: see commitOffsetHeld
	tc, ok, err := b.topicConfig(p.topic)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if !ok {
		return fail(remoting.TopicNotExist, "topic[%s] not exist, apply first please! %s", p.topic, faqSuggestion)
	}
	if !meta.Readable(tc.Perm) {
		return forbiddenPull(fail(remoting.NoPermission, "the topic[%s] pulling message is forbidden", p.topic), forbiddenTopic)
	}
	if allowSuspend && p.static == nil {
		// Once, on the first pass: a held pull runs again on the physical
		// queue it was rewritten to.
		if resp, err := b.rewriteStaticPull(conn.Context(), req, &p); err != nil {
			return fail(remoting.SystemError, "%v", err)
		} else if resp != nil {
			return resp
		}
	}
	if p.queueID < 0 || int(p.queueID) >= tc.ReadQueueNums {
		b.noteStaleQueue(p.topic, p.queueID)
		return fail(remoting.InvalidParameter, "queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d] consumer:[%s]",
			p.queueID, p.topic, tc.ReadQueueNums, conn.RemoteAddr())
	}
	// After the group and topic checks, as RocketMQ checks it.
	if b.current().RejectPullConsumerEnable && !sysPullGroup(p.group) && !b.clients.pullerKnown(p.group, conn) {
		return fail(remoting.SubscriptionNotExist, "the consumer's group info not exist, or the pull consumer is rejected by server.%s", faqSuggestion)
	}
	var sub *subscription
	if p.sysFlag&pullSubscription != 0 {
		// RocketMQ's order: an empty expression of a type other than TAG,
		// like a TAG expression that does not split, is a parse failure;
		// any other expression of such a type is refused on a broker
		// without enablePropertyFilter before it is compiled, so that a
		// selector that does not compile gets SYSTEM_ERROR there too.
		if !isTagType(p.expressionType) && p.subscription != "" && !b.current().EnablePropertyFilter {
			b.refusedLog.Warn().Str("group", p.group).Str("topic", p.topic).Str("expressionType", p.expressionType).
				Msg("pull refused: it filters by an expression type other than TAG and enablePropertyFilter is off")
			return fail(remoting.SystemError, "%s%s", unsupportedFilter, p.expressionType)
		}
		sub, err = newSubscription(p.topic, p.subscription, p.expressionType, p.subVersion)
		if err != nil {
			// RocketMQ 5.3.3 compiles a pull's own selector without
			// checking the result (ConsumerFilterManager.build returns
			// null, an assert that production JVMs skip), and so serves a
			// selector that does not compile as no filter at all: every
			// message. This broker refuses it instead, with the code and
			// remark RocketMQ gives an expression it cannot parse, and the
			// reason after it.
			b.refusedLog.Warn().Err(err).Str("group", p.group).Str("topic", p.topic).Str("subscription", p.subscription).
				Msg("pull refused: its subscription does not parse")
			return fail(remoting.SubscriptionParseFailed, "parse the consumer's subscription failed: %v", err)
		}
	} else {
		s, model, known := b.clients.groupSubscription(p.group, p.topic)
		switch {
		case !known:
			return fail(remoting.SubscriptionNotExist, "the consumer's group info not exist, group: %s", p.group)
		case model == modelBroadcasting && !gc.ConsumeBroadcastEnable:
			return forbiddenPull(fail(remoting.NoPermission, "the consumer group[%s] can not consume by broadcast way", p.group), forbiddenBroadcasting)
		}
		// RocketMQ looks at the forbidden table only here, for pulls
		// that do not post their subscription (the Java and Go push
		// consumers' by default).
		if forbidden, err := b.forbidden.readForbidden(p.group, p.topic); err != nil {
			return fail(remoting.SystemError, "%v", err)
		} else if forbidden {
			return forbiddenPull(fail(remoting.NoPermission, "the consumer group[%s] is forbidden for topic[%s]", p.group, p.topic), forbiddenSubscription)
		}
		switch {
		case s == nil:
			return fail(remoting.SubscriptionNotExist, "the consumer's subscription not exist, group: %s topic: %s", p.group, p.topic)
		case s.SubVersion < p.subVersion:
			return fail(remoting.SubscriptionNotLatest, "the consumer's subscription not latest")
		case s.broken != nil:
			return fail(remoting.FilterDataNotExist, "The broker's consumer filter data is not exist!Your expression may be wrong!")
		}
		sub = s
	}
	if sub.isSQL92() && !b.current().EnablePropertyFilter {
		return fail(remoting.SystemError, sqlUnsupported)
	}
	if b.current().FilterSupportRetry && meta.IsRetryTopic(p.topic) {
		group := meta.RetryTopicGroup(p.topic)
		sub = sub.forRetry(func(origin string) *subscription {
			if o, _, _ := b.clients.groupSubscription(group, origin); o.isSQL92() {
				return o
			}
			return nil
		})
	}

	if b.coldReads.limited(p.group) && b.coldAt(p.topic, p.queueID, p.queueOffset) {
		// Cold-data flow control, where RocketMQ's pull processor
		// applies it: before the offset reset and the read.
		ct, known := b.clients.consumeTypeOf(p.group)
		switch {
		case known && ct == consumePassively:
			b.log.Debug().Str("group", p.group).Str("topic", p.topic).Int32("queue", p.queueID).
				Msg("pull of cold data refused: the group is over its cold-read threshold")
			return fail(remoting.SystemBusy, coldCtrRemark)
		case known && ct != consumeActively:
			// A POP group's pull: RocketMQ limits only push and pull
			// consumers.
		case !p.coldRerun:
			// A pull consumer (or a group no heartbeat named, which
			// RocketMQ fails on): held back, then served one message.
			return b.holdColdPull(conn, req, p)
		default:
			p.maxMsgNums = 1
		}
	}
	if off, ok := b.resets.take(p.group, p.topic, p.queueID); ok && b.current().UseServerSideResetOffset {
		// Before the offset the client commits with this pull: that is
		// the offset the reset replaces. A reset assigned before
		// useServerSideResetOffset was turned off is dropped untold, as
		// RocketMQ's pull erases it either way.
		return b.pullResetAnswer(req, p, tc.TopicSysFlag, gc.GroupSysFlag, off)
	}
	r, err := b.getMessages(p.topic, p.queueID, p.queueOffset, int(p.maxMsgNums), int(p.maxMsgBytes), sub)
	if err != nil {
		b.log.Error().Err(err).Str("topic", p.topic).Int32("queue", p.queueID).Msg("pull read failed")
		return fail(remoting.SystemError, "read failed: %v", err)
	}
	b.coldReads.add(p.group, r.coldBytes)
	// A slave takes its consumer offsets from its master; a pull's commit
	// is the master's to store (RocketMQ's slave ignores it too).
	if allowSuspend && p.sysFlag&pullCommitOffset != 0 && p.commitOffset >= 0 && !b.isSlave() {
		if err := b.commitOffsetHeld(p.topic, deletions, func() error {
			_, err := b.commitUnlessReset(p.group, p.topic, p.queueID, func() error {
				return b.offsets.SetLazy(p.group, p.topic, p.queueID, p.commitOffset)
			})
			return err
		}); err != nil {
			b.log.Warn().Err(err).Str("group", p.group).Msg("commit offset on pull")
		}
	}
	b.protectFromSlowReader(p.group, r.lastPhy)
	code := r.status.pullCode(p.queueOffset)
	moved := code == remoting.PullOffsetMoved
	suggest, code := b.suggestBroker(gc, r, code)
	if moved && b.isSlave() {
		// A slave may hold less of the queue than its master (behind in
		// replication, or new): RocketMQ's slave (offsetCheckInSlave
		// false) never moves a consumer's offset, but sends it to the
		// master at once (suggestBroker), from where it was. A moved
		// offset would be stored by the client and consumed again from
		// the master.
		code, r.nextBegin = remoting.PullRetryImmediately, p.queueOffset
	}
	if code == remoting.PullNotFound && allowSuspend && p.sysFlag&pullSuspend != 0 {
		timeout := p.suspendTimeout
		if !b.cfg.LongPollingEnable {
			timeout = b.cfg.ShortPollingTime
		}
		p.holdUntil = time.Now().Add(timeout)
		b.holdPull(conn, req, p, sub, timeout)
		return nil
	}
	if r.status == getNoMatched && !allowSuspend && !p.holdUntil.IsZero() {
		// Woken by messages the filter rejects after all (another tag
		// with one of the subscription's codes, an offset reset, a
		// record whose properties the wake could not read): hold on past them
		// instead of answering PULL_RETRY_IMMEDIATELY to every one (a
		// filtered consumer of a busy topic would poll at its rate). Not
		// once the broker is shutting down: releaseAll answers every pull.
		if left := time.Until(p.holdUntil); left > 0 && !b.holds.released() {
			p.queueOffset = r.nextBegin
			b.holdPull(conn, req, p, sub, left)
			return nil
		}
		if r.nextBegin >= r.maxOffset {
			// The hold ends (time up, or shutdown) over messages the
			// filter rejects only, which did not wake it: the answer is
			// the one a hold woken by each of them and moved past it gets
			// at the end of the queue, PULL_NOT_FOUND there.
			r.status = getOffsetOverflowOne
			code = r.status.pullCode(p.queueOffset)
		}
	}
	b.pulled.note(p.group, p.topic, p.queueID, r.nextBegin) // the consumer gauges' pull offset
	resp := pullResponse(req, code, r.status.String(), r.nextBegin, r.minOffset, r.maxOffset, tc.TopicSysFlag, gc.GroupSysFlag, suggest)
	if code == remoting.Success {
		b.bodies.attach(resp, r.body)
		b.countOut(p.topic, p.group, r.count, len(r.body))
	} else {
		b.stats.Miss()
	}
	p.static.rewriteAnswer(resp)
	return resp
}

// protectFromSlowReader turns the group's consumption off when a pull or
// pop read at lastPhy, further than consumerFallbehindThreshold behind the
// end of the CommitLog, under disableConsumeIfConsumerReadSlowly
// (RocketMQ's protectBroker, which looks at each group's last read every
// three minutes). This read is still answered; the group's next ones are
// refused until an operator turns it back on.
func (b *Broker) protectFromSlowReader(group string, lastPhy int64) {
	cur := b.current()
	if !cur.DisableConsumeIfConsumerReadSlowly || lastPhy < 0 || b.lmqName(group) {
		return
	}
	behind := b.clog.MaxOffset() - lastPhy
	if behind <= cur.ConsumerFallbehindThreshold {
		return
	}
	gc, err := b.groupConfig(group, false)
	if err != nil || gc.GroupName == "" || !gc.ConsumeEnable {
		return // unreadable, gone, or disabled already
	}
	gc.ConsumeEnable = false
	if err := b.groups.Put(gc); err != nil {
		b.log.Error().Err(err).Str("group", gc.GroupName).Msg("disable a slow consumer group")
		return
	}
	b.log.Warn().Str("group", gc.GroupName).Int64("behindBytes", behind).
		Msg("consumer group reads too far behind the CommitLog (consumerFallbehindThreshold): its consumption is disabled")
}

// suggestBroker returns the broker id a pull's answer tells the consumer to
// pull from next (suggestWhichBrokerId) and the answer's code, as
// RocketMQ's pull processor decides them (composeResponseHeader). Without
// slaveReadEnable it is always the master. With it, a consumer reading
// records older than the page cache holds (accessMessageInMemoryMaxRatio)
// is sent to the group's whichBrokerWhenConsumeSlowly, one keeping up to
// the group's brokerId. A slave sends every consumer not reading old
// records back to the master, and one it had nothing for at once
// (PULL_RETRY_IMMEDIATELY, which clients follow without a pause) when
// its name servers name a master.
//
// While they name none (the master stopped or lost, and the name servers
// dropped it), RocketMQ's classic slave, whose minBrokerIdInGroup stays
// 0 without enableSlaveActingMaster, answers PULL_RETRY_IMMEDIATELY all
// the same; rocketkv's holds the pull as a master does and answers
// PULL_NOT_FOUND, still naming the master. RocketMQ's answer makes a push
// consumer spin: its route has no broker 0, so findBrokerAddressInSubscribe
// falls back to the first broker of the group, this slave, and the client
// pulls it again at once (PULL_RETRY_IMMEDIATELY is NO_MATCHED_MSG to it,
// executePullRequestImmediately), a request per round trip on every queue
// for as long as the master is down, none of which can find a message a
// slave without a master never receives. Held, the consumer costs a
// request per suspend timeout instead, and is answered at once when its
// queue's end moves.
func (b *Broker) suggestBroker(gc meta.SubscriptionGroupConfig, r getResult, code int32) (int64, int32) {
	suggest := namesrv.MasterID
	slaveRead := b.current().SlaveReadEnable
	if !slaveRead && !b.isSlave() {
		return suggest, code // the common case: nothing to work out
	}
	behind := r.lastPhy >= 0 && !b.inMemory(r.lastPhy)
	if slaveRead {
		suggest = gc.BrokerID
		if behind {
			suggest = gc.WhichBrokerWhenConsumeSlowly
		}
	}
	if b.isSlave() && !behind {
		suggest = namesrv.MasterID
		if code != remoting.Success && b.masterAddr() != "" && !b.actingMaster() {
			code = remoting.PullRetryImmediately
		}
	}
	return suggest, code
}

// pullResetAnswer answers a pull of a queue whose offset an administrator
// reset since the client's last pull: PULL_OFFSET_MOVED with the new
// offset as nextBeginOffset, as RocketMQ answers its OFFSET_RESET status.
// Clients drop what they hold of the queue and continue from there.
func (b *Broker) pullResetAnswer(req *remoting.Command, p pullHeader, topicSysFlag, groupSysFlag int, offset int64) *remoting.Command {
	minOff, maxOff, err := b.queueRange(p.topic, p.queueID)
	if err != nil {
		b.resets.restore(p.group, p.topic, p.queueID, offset) // not told: the next pull is
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.log.Info().Str("group", p.group).Str("topic", p.topic).Int32("queue", p.queueID).Int64("from", p.queueOffset).
		Int64("to", offset).Msg("pull told of an offset reset")
	return pullResponse(req, remoting.PullOffsetMoved, fmt.Sprintf("the queue was reset to start from %d", offset),
		offset, minOff, maxOff, topicSysFlag, groupSysFlag, namesrv.MasterID)
}

// pullResponse is a PULL_MESSAGE answer with its header fields; suggest is
// the broker id to pull from next.
func pullResponse(req *remoting.Command, code int32, remark string, next, minOff, maxOff int64, topicSysFlag, groupSysFlag int, suggest int64) *remoting.Command {
	resp := remoting.NewResponse(req, code, remark)
	rh := remoting.Header{}
	rh.SetInt64("nextBeginOffset", next)
	rh.SetInt64("minOffset", minOff)
	rh.SetInt64("maxOffset", maxOff)
	rh.SetInt64("suggestWhichBrokerId", suggest)
	rh.SetInt32("topicSysFlag", int32(topicSysFlag))
	rh.SetInt32("groupSysFlag", int32(groupSysFlag))
	resp.ExtFields = rh
	return resp
}

// holdPull suspends a pull at p.queueOffset for at most timeout; it is
// served again (without suspension) when a message sub may take is
// dispatched to the queue, or the time is up.
func (b *Broker) holdPull(conn *remoting.Conn, req *remoting.Command, p pullHeader, sub *subscription, timeout time.Duration) {
	b.holds.hold(p.topic, p.queueID, timeout, b.heldMatch(sub.arrivalMatch()),
		func() bool {
			maxOff, err := b.cqs.MaxOffset(p.topic, p.queueID)
			return err == nil && maxOff > p.queueOffset
		},
		func() {
			rerunHeld(conn, req, func() *remoting.Command { return b.pull(conn, req, p, false) })
		})
}

// holdColdPull holds back a pull consumer's pull of cold data (RocketMQ's
// suspendColdDataReadRequest): it is run again, for one message and
// without committing its offset or being held for long polling, once
// coldPullHolds lets it go. A pull that finds the hold queue full (or
// the broker stopping) is answered SYSTEM_BUSY at once.
func (b *Broker) holdColdPull(conn *remoting.Conn, req *remoting.Command, p pullHeader) *remoting.Command {
	p.coldRerun = true
	held := b.coldHolds.hold(func() {
		rerunHeld(conn, req, func() *remoting.Command { return b.pull(conn, req, p, false) })
	})
	if !held {
		b.log.Warn().Str("group", p.group).Str("topic", p.topic).Int32("queue", p.queueID).
			Msg("pull of cold data refused: the queue of held cold pulls is full or the broker is stopping")
		return remoting.NewResponse(req, remoting.SystemBusy, coldCtrRemark)
	}
	return nil
}
