package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicQueue reads the topic and queueId fields most offset requests carry.
func topicQueue(req *remoting.Command) (string, int32, *remoting.Command) {
	h := remoting.Header(req.ExtFields)
	topic, err := h.String("topic")
	if err != nil {
		return "", 0, remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	qid, err := h.Int32("queueId")
	if err != nil {
		return "", 0, remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return topic, qid, nil
}

func offsetResponse(req *remoting.Command, offset int64) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	h := remoting.Header{}
	h.SetInt64("offset", offset)
	resp.ExtFields = h
	return resp
}

// consumerOffset returns the group's committed offset of the queue as
// the broker's offset table holds it: on a slave, the entry of its own
// pops and orderly acks (pop.Service.SlaveOffset) while it has one, else
// the offset copied from its master or committed on it (0x30). RocketMQ's
// slave has one table that its pops, orderly acks, client commits and the
// master's sync all write, and its QUERY_CONSUMER_OFFSET, consume stats
// and QUERY_CONSUME_TIME_SPAN read it; the slave's pops
// go by the own entry the same way. ok is false when there is neither.
func (b *Broker) consumerOffset(group, topic string, qid int32) (int64, bool, error) {
	if svc := b.popSvc; svc != nil && b.isSlave() {
		off, ok, err := svc.SlaveOffset(group, topic, qid)
		if err != nil || ok {
			return off, ok, err
		}
	}
	return b.offsets.Get(group, topic, qid)
}

// processQueryConsumerOffset answers QUERY_CONSUMER_OFFSET (the slave's
// own entries included: consumerOffset). A group with no
// committed offset on a queue gets QUERY_NOT_FOUND, except (as RocketMQ)
// when the queue still starts at 0 and its first message is recent enough
// to be in memory: then 0, so a new group starts at the beginning of a
// young queue even with CONSUME_FROM_LAST_OFFSET. An empty queue (never
// written) answers 0 too, where RocketMQ answers QUERY_NOT_FOUND: the
// clients start at its end, 0, either way, but ali-ons reports the
// not-found of every fresh group's empty retry queue as a consumer error.
// A request with setZeroIfNotFound=false (RocketMQ brokers send it when
// they forward a query of a static topic's queue) gets QUERY_NOT_FOUND
// whatever the queue, with RocketMQ's own remark for that case.
func (b *Broker) processQueryConsumerOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	group, err := h.String("consumerGroup")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	topic, qid, bad := topicQueue(req)
	if bad != nil {
		return bad
	}
	off, ok, err := b.consumerOffset(group, topic, qid)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if ok && off >= 0 {
		return offsetResponse(req, off)
	}
	if !h.OptBool("setZeroIfNotFound", true) {
		return remoting.NewResponse(req, remoting.QueryNotFound, "Not found, do not set to zero, maybe this group boot first")
	}
	minOff, err1 := b.cqs.MinOffset(topic, qid)
	first, err2 := b.cqs.Get(topic, qid, 0, 1)
	if err1 == nil && err2 == nil && minOff <= 0 && (len(first) == 0 || b.resident(first[0].PhyOffset, first[0].Size)) {
		return offsetResponse(req, 0)
	}
	return remoting.NewResponse(req, remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
}

// inMemory reports whether a CommitLog offset is recent enough to count
// as in the page cache for a pull's suggestion of the broker to pull from
// next, as RocketMQ's getMessage estimates it: within
// accessMessageInMemoryMaxRatio of the machine's memory from the end of
// the log.
func (b *Broker) inMemory(phy int64) bool {
	return b.clog.MaxOffset()-phy <= b.hotBytes
}

// resident reports whether the CommitLog record of size bytes at phy is
// in the page cache, as RocketMQ 5's checkInMemByConsumeOffset asks the
// kernel (mincore) before it starts a new group at a young queue's first
// message: false when the record is gone, true when the kernel cannot
// say (as MappedFile.isLoaded when its call fails).
func (b *Broker) resident(phy int64, size int32) bool {
	v, err := b.clog.Read(phy, size)
	if err != nil {
		return false
	}
	defer v.Release()
	in, err := v.Resident()
	if err != nil {
		b.log.Warn().Err(err).Int64("phyOffset", phy).Msg("page cache residency unknown; taken as resident")
		return true
	}
	return in
}

// physicalMemory returns the machine's memory in bytes (8 GiB when the
// kernel does not say).
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 8 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// processUpdateConsumerOffset answers UPDATE_CONSUMER_OFFSET: the commit is
// durable before the answer (clients mostly send it oneway).
func (b *Broker) processUpdateConsumerOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	group, err := h.String("consumerGroup")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	topic, qid, bad := topicQueue(req)
	if bad != nil {
		return bad
	}
	off, err := h.Int64("commitOffset")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	// As RocketMQ: the group must exist (a commit does not create it; a
	// client's heartbeat or pull does), then the topic.
	if gc, err := b.groupConfig(group, false); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	} else if gc.GroupName == "" {
		return remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, "Group "+group+" not exist!")
	}
	deletions := b.db.Pop().TopicDeletions() // before the topic check: see commitOffsetHeld
	if _, ok, err := b.topicConfig(topic); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	} else if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "Topic "+topic+" not exist!")
	}
	var reset bool
	err = b.commitOffsetHeld(topic, deletions, func() (err error) {
		reset, err = b.commitUnlessReset(group, topic, qid, func() error {
			if svc := b.popSvc; svc != nil && b.isSlave() {
				// The commit replaces the slave's pops' own entry of the
				// queue (one offset table on RocketMQ's slave), in the
				// same write.
				return svc.CommitOffset(group, topic, qid, off)
			}
			return b.offsets.Set(group, topic, qid, off)
		})
		return err
	})
	if errors.Is(err, errTopicDeletedSince) {
		return remoting.NewResponse(req, remoting.TopicNotExist, "Topic "+topic+" not exist!")
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if reset {
		// The client has not pulled since an administrator reset the
		// queue: the offset it commits is the one the reset replaced.
		return remoting.NewResponse(req, remoting.Success, "Offset has been previously reset")
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// errTopicDeletedSince says that the topic of a consumer offset commit
// was deleted after the request found it: nothing was written.
var errTopicDeletedSince = errors.New("the topic was deleted since the request checked it")

// commitOffsetHeld runs commit, a write of a consumer offset of topic,
// under a hold of the topic (kvindex.PopStore.HoldTopic), so that a
// deletion of the topic, which deletes every group's offsets on it,
// never falls between the request's check that the topic exists and its
// write: a commit in flight would leave an offset that a topic created
// again under the name would start its consumers from (past its end, so
// that they skip its first messages). deletions is the store's
// TopicDeletions read before that check; when a deletion ended since, the
// topic is looked up again and, gone, nothing is written and
// errTopicDeletedSince returned.
func (b *Broker) commitOffsetHeld(topic string, deletions uint64, commit func() error) error {
	hold := b.db.Pop().HoldTopic(topic)
	defer hold.Release()
	if gone, err := hold.GoneSince(deletions, b.topicGone); err != nil {
		return err
	} else if gone {
		return errTopicDeletedSince
	}
	return commit()
}

// holdOffsetTopics is commitOffsetHeld for a write of several topics'
// offsets in one batch: it holds every topic of updates (in name order)
// and returns the updates without those of topics deleted since
// deletions, those topics, and the release of the holds, which the caller
// calls once its write is committed.
func (b *Broker) holdOffsetTopics(updates []kvindex.OffsetUpdate, deletions uint64) (kept []kvindex.OffsetUpdate, gone []string, release func(), err error) {
	topics := make([]string, 0, 1)
	for _, u := range updates {
		topics = append(topics, u.Topic)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	holds := make([]kvindex.TopicHold, 0, len(topics))
	release = func() {
		for _, h := range holds {
			h.Release()
		}
	}
	for _, topic := range topics {
		hold := b.db.Pop().HoldTopic(topic)
		holds = append(holds, hold)
		if g, err := hold.GoneSince(deletions, b.topicGone); err != nil {
			release()
			return nil, nil, nil, err
		} else if g {
			gone = append(gone, topic)
		}
	}
	kept = slices.DeleteFunc(slices.Clone(updates), func(u kvindex.OffsetUpdate) bool { return slices.Contains(gone, u.Topic) })
	return kept, gone, release, nil
}

// topicGone reports whether topic does not exist.
func (b *Broker) topicGone(topic string) (bool, error) {
	_, ok, err := b.topicConfig(topic)
	return !ok, err
}

// queueOffsetHandler answers a request naming a topic and queue with the
// offset read reports (GET_MAX_OFFSET, GET_MIN_OFFSET).
func queueOffsetHandler(read func(topic string, queueID int32) (int64, error)) remoting.RespondFunc {
	return func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		topic, qid, bad := topicQueue(req)
		if bad != nil {
			return bad
		}
		off, err := read(topic, qid)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		return offsetResponse(req, off)
	}
}

// processSearchOffset answers SEARCH_OFFSET_BY_TIMESTAMP.
func (b *Broker) processSearchOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, qid, bad := topicQueue(req)
	if bad != nil {
		return bad
	}
	h := remoting.Header(req.ExtFields)
	ts, err := h.Int64("timestamp")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	boundary := cq.Lower
	if strings.EqualFold(h.OptString("boundaryType", "lower"), "upper") {
		boundary = cq.Upper
	}
	off, err := b.cqs.OffsetByTime(topic, qid, ts, boundary)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return offsetResponse(req, off)
}

// processEarliestMsgStoreTime answers GET_EARLIEST_MSG_STORETIME: the store
// time of the queue's first readable message.
func (b *Broker) processEarliestMsgStoreTime(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, qid, bad := topicQueue(req)
	if bad != nil {
		return bad
	}
	minOff, err := b.cqs.MinOffset(topic, qid)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	var ts int64 = -1
	if t, ok, err := b.storeTimeAt(topic, qid, minOff); err == nil && ok {
		ts = t
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.Header{}
	rh.SetInt64("timestamp", ts)
	resp.ExtFields = rh
	return resp
}

// queueRange is the range of a queue: its min offset (a compacted
// topic's first copy when lower, see minOffset) and the offset after its
// last entry.
func (b *Broker) queueRange(topic string, queueID int32) (minOff, maxOff int64, err error) {
	if minOff, err = b.minOffset(topic, queueID); err != nil {
		return 0, 0, fmt.Errorf("min offset of %s/%d: %w", topic, queueID, err)
	}
	if maxOff, err = b.cqs.MaxOffset(topic, queueID); err != nil {
		return 0, 0, fmt.Errorf("max offset of %s/%d: %w", topic, queueID, err)
	}
	return minOff, maxOff, nil
}
