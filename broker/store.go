package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// putMessages appends one message or a batch (same topic and queue) with
// queue offsets assigned at append time, and counts the time it took in
// the put latencies (brokerstats.Stats.PutTook). A put whose caller waits
// for it to be durable afterwards (answerDurable) calls appendMessages
// instead and has the wait counted with it.
func (b *Broker) putMessages(ctx context.Context, msgs []*commitlog.Message, waitFlush bool) (commitlog.AppendResult, error) {
	began := time.Now()
	res, err := b.appendMessages(ctx, msgs, waitFlush)
	b.stats.PutTook(time.Since(began), err != nil)
	return res, err
}

// appendMessages is putMessages without the count of its time.
func (b *Broker) appendMessages(ctx context.Context, msgs []*commitlog.Message, waitFlush bool) (commitlog.AppendResult, error) {
	return b.appendRecords(ctx, msgs, appendOptions{waitFlush: waitFlush, multiDispatch: true})
}

// putOwnRecords is putMessages for the records RocketMQ puts with
// WAIT=false set after their properties string was written, which its
// put does not refuse for a short sync state set (appendOptions.ownRecord):
// the transaction service's own (op messages, halves given up or
// resumed) and the deliveries of delayed and timer messages (and a timer
// message's roll).
func (b *Broker) putOwnRecords(ctx context.Context, msgs []*commitlog.Message, waitFlush bool) (commitlog.AppendResult, error) {
	began := time.Now()
	res, err := b.appendRecords(ctx, msgs, appendOptions{waitFlush: waitFlush, multiDispatch: true, ownRecord: true})
	b.stats.PutTook(time.Since(began), err != nil)
	return res, err
}

// appendBatch is appendMessages for a producer's SEND_BATCH_MESSAGE: its
// messages, even one alone, are not dispatched to the light message
// queues they name, as RocketMQ's batch put gives them no
// INNER_MULTI_QUEUE_OFFSET. Under enabledAppendPropCRC they keep a
// __CRC32# property they carry, as RocketMQ's batch put keeps it
// (commitlog.AppendRequest.ProducerBatch).
func (b *Broker) appendBatch(ctx context.Context, msgs []*commitlog.Message) (commitlog.AppendResult, error) {
	return b.appendRecords(ctx, msgs, appendOptions{producerBatch: true})
}

// appendOptions are how appendRecords puts and counts its messages.
type appendOptions struct {
	// waitFlush waits for the flush and the slaves (Broker.durable).
	waitFlush bool
	// multiDispatch dispatches a single message to the light message
	// queues it names too.
	multiDispatch bool
	// uncounted leaves the messages out of the day totals (countStored):
	// a send-back's copy, which RocketMQ's consumerSendMsgBack counts in
	// none, whether it waits in the schedule topic or is put to a
	// dead-letter topic.
	uncounted bool
	// producerBatch says msgs are a producer's batch (appendBatch).
	producerBatch bool
	// ownRecord says msgs are records of the broker's own that RocketMQ
	// puts with WAIT=false set in the message's property map after its
	// properties string was written (the stored record keeps the WAIT it
	// had): its put does not handle HA for them, so a short sync state
	// set does not refuse them.
	ownRecord bool
}

// appendRecords appends msgs as opts says. A controller-mode master
// with fewer brokers in its sync state set than minInSyncReplicas refuses
// the puts that wait for replication (errInSyncReplicasNotEnough), as
// RocketMQ's CommitLog put does, whoever puts (but the records of
// opts.ownRecord); a producer's batch is checked by its send, whose header
// says whether it waits.
func (b *Broker) appendRecords(ctx context.Context, msgs []*commitlog.Message, opts appendOptions) (commitlog.AppendResult, error) {
	waitFlush, multiDispatch := opts.waitFlush, opts.multiDispatch
	first := msgs[0]
	if !opts.producerBatch && !opts.ownRecord && b.inSyncReplicasShort() && waitsForReplicas(msgs) {
		return commitlog.AppendResult{}, fmt.Errorf("put to %s/%d: %w", first.Topic, first.QueueID, errInSyncReplicasNotEnough)
	}
	if b.beforePut != nil {
		if err := b.beforePut(msgs); err != nil {
			return commitlog.AppendResult{}, fmt.Errorf("put to %s/%d: %w", first.Topic, first.QueueID, err)
		}
	}
	if err := b.qoffsets.Acquire(first.Topic, first.QueueID); err != nil {
		return commitlog.AppendResult{}, fmt.Errorf("put to %s/%d: %w", first.Topic, first.QueueID, err)
	}
	defer b.qoffsets.Release(first.Topic, first.QueueID)
	// The flush is waited for with the slaves (durable), not by Append:
	// slaveTimeout counts from the append, as the flush's timeout does.
	req := commitlog.AppendRequest{Assigner: b.qoffsets, ProducerBatch: opts.producerBatch}
	switch {
	case len(msgs) == 1 && multiDispatch:
		req.Message = first
		lmqs, err := b.acquireLMQs(first)
		if err != nil {
			return commitlog.AppendResult{}, fmt.Errorf("put to %s/%d: %w", first.Topic, first.QueueID, err)
		}
		defer b.releaseLMQs(lmqs)
		req.MultiDispatch = lmqs
	case len(msgs) == 1:
		req.Message = first
	default:
		req.Batch = msgs
	}
	res, err := b.clog.Append(ctx, req)
	if err != nil {
		b.log.Warn().Err(err).Str("topic", first.Topic).Int32("queue", first.QueueID).Msg("append failed")
		return res, err
	}
	b.countStored(msgs, res.WroteBytes, !opts.uncounted)
	if waitFlush {
		res = b.durable(ctx, res)
	}
	return res, nil
}

// checkLMQNames refuses a message to topic whose INNER_MULTI_DISPATCH
// names a light message queue it cannot be dispatched to (meta.ValidLMQ), under
// enableLmq and enableMultiDispatch, when the topic allows them: such a name would become an index key and, in
// double-write, a directory. A send checks before it parks the message
// (a delayed, timer or half message is dispatched only when delivered or
// committed, where a refusal would lose it).
func (b *Broker) checkLMQNames(topic, props string) error {
	for _, name := range b.multiDispatchNames(topic, props) {
		if meta.IsLMQ(name) && !meta.ValidLMQ(name) {
			return fmt.Errorf("%w: light message queue %q in %s: at most 255 bytes of UTF-8 without '/' or control characters",
				commitlog.ErrInvalidAppend, name, commitlog.PropertyMultiDispatch)
		}
	}
	return nil
}

// multiDispatchNames returns the names a message to topic lists in
// INNER_MULTI_DISPATCH, or nil when it names none or is not dispatched to
// light message queues (enableLmq, enableMultiDispatch, a topic that
// allows them).
func (b *Broker) multiDispatchNames(topic, props string) []string {
	if !b.cfg.EnableLMQ || !b.cfg.EnableMultiDispatch || !meta.TopicAllowsLMQ(topic) {
		return nil
	}
	names, ok := commitlog.LookupProperty(props, commitlog.PropertyMultiDispatch)
	if !ok || names == "" {
		return nil
	}
	return strings.Split(names, commitlog.MultiDispatchSeparator)
}

// acquireLMQs returns the light message queues a message is dispatched to
// as well (commitlog.AppendRequest.MultiDispatch: "" for names that are
// none), each acquired in the queue offset table, or nil: under
// enableLmq and enableMultiDispatch, for a message that gets a queue
// offset, of a topic that allows it, whose INNER_MULTI_DISPATCH names at
// least one. A name it cannot be dispatched to (checkLMQNames refuses
// sends of one; a delayed message a RocketMQ store parked may hold one) is
// skipped with a log line, as RocketMQ skips the names it cannot dispatch
// to: the message still reaches its topic. releaseLMQs undoes the
// acquisitions.
func (b *Broker) acquireLMQs(m *commitlog.Message) ([]string, error) {
	switch commitlog.TransactionType(m.SysFlag) {
	case commitlog.TransactionPrepared, commitlog.TransactionRollback:
		return nil, nil
	}
	lmqs := b.multiDispatchNames(m.Topic, m.Properties)
	found := false
	for i, name := range lmqs {
		if !meta.IsLMQ(name) {
			lmqs[i] = ""
			continue
		}
		if !meta.ValidLMQ(name) {
			b.log.Warn().Str("topic", m.Topic).Str("lmq", name).
				Msg("light message queue name has '/' or a control character, or is too long: the message is not dispatched to it")
			lmqs[i] = ""
			continue
		}
		if err := b.qoffsets.Acquire(name, 0); err != nil {
			b.releaseLMQs(lmqs[:i])
			return nil, err
		}
		found = true
	}
	if !found {
		return nil, nil
	}
	return lmqs, nil
}

// releaseLMQs releases the queues acquireLMQs acquired.
func (b *Broker) releaseLMQs(lmqs []string) {
	for _, name := range lmqs {
		if name != "" {
			b.qoffsets.Release(name, 0)
		}
	}
}

// Pull read limits.
const (
	// maxScanEntries bounds the entries one pull examines when a filter
	// skips most of them; the client pulls again from nextBeginOffset.
	maxScanEntries = 4096
)

// getStatus is RocketMQ's GetMessageStatus, the outcome of a read.
type getStatus int

const (
	getFound getStatus = iota
	getNoMatched
	getNoMessageInQueue
	getOffsetTooSmall
	getOffsetOverflowOne
	getOffsetOverflowBadly
	getOffsetFoundNull
)

var getStatusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL",
	"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL"}

func (s getStatus) String() string { return getStatusNames[s] }

// pullCode maps a read status to the pull response code (RocketMQ's
// PullMessageProcessor). requested is the offset the client asked for.
func (s getStatus) pullCode(requested int64) int32 {
	switch s {
	case getFound:
		return remoting.Success
	case getNoMatched:
		return remoting.PullRetryImmediately
	case getNoMessageInQueue:
		if requested != 0 {
			return remoting.PullOffsetMoved
		}
		return remoting.PullNotFound
	case getOffsetTooSmall, getOffsetOverflowBadly:
		return remoting.PullOffsetMoved
	default:
		return remoting.PullNotFound
	}
}

// getResult is what a read returns: the records back to back (the pull
// response body) and the queue's state.
type getResult struct {
	status    getStatus
	body      []byte
	count     int
	nextBegin int64
	minOffset int64
	maxOffset int64
	// lastPhy is the CommitLog offset of the last entry read, filtered
	// out or not, and -1 when none was: how far behind the log's end the
	// reader is (RocketMQ's maxPhyOffsetPulling).
	lastPhy int64
	// coldBytes is the size of the records read that count as cold
	// (readCold), counted under coldDataFlowControlEnable only (RocketMQ's
	// coldDataSum): records the tag code filters out are not read, and
	// not counted.
	coldBytes int64
}

// getMessages reads up to maxNums messages of a queue from offset that pass
// filter, following RocketMQ's DefaultMessageStore.getMessage rules. The
// time it takes counts in getMessageEntireTimeMax.
func (b *Broker) getMessages(topic string, queueID int32, offset int64, maxNums, maxBytes int, filter *subscription) (getResult, error) {
	defer b.stats.GetTook(time.Now()) // getMessageEntireTimeMax
	if b.compaction.Compacts(topic) {
		return b.getCompacted(topic, queueID, offset, maxNums, maxBytes, filter)
	}
	r := getResult{lastPhy: -1}
	var err error
	if r.minOffset, err = b.cqs.MinOffset(topic, queueID); err != nil {
		return r, err
	}
	if r.maxOffset, err = b.cqs.MaxOffset(topic, queueID); err != nil {
		return r, err
	}
	if r.outOfBounds(offset, true) {
		return r, nil
	}
	maxNums, maxBytes = b.transferLimits(maxNums, maxBytes)
	// A POP revive's own property is no reader's (kvindex.AppendShown).
	shown := kvindex.HoldsRevived(topic)
	cur := b.current()
	next := offset
	scanned := 0
	full := false // maxNums or maxBytes reached: the batch ends before next
	for !full && r.count < maxNums && next < r.maxOffset && scanned < maxScanEntries {
		want := min(max(2*(maxNums-r.count), 32), maxScanEntries-scanned)
		entries, err := b.cqs.Get(topic, queueID, next, want)
		if err != nil {
			return r, err
		}
		if len(entries) == 0 {
			break // a hole: nothing readable at next
		}
		for _, e := range entries {
			if r.count >= maxNums || (r.count > 0 && len(r.body)+int(e.Size) > maxBytes) {
				full = true
				break
			}
			scanned++
			next = e.QueueOffset + 1
			r.lastPhy = e.PhyOffset
			if !filter.matchesCode(e.TagsCode) {
				continue
			}
			v, err := b.clog.Read(e.PhyOffset, e.Size)
			if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
				continue // deleted by retention meanwhile
			}
			if err != nil {
				return r, fmt.Errorf("read %s/%d@%d at %d: %w", topic, queueID, e.QueueOffset, e.PhyOffset, err)
			}
			if cur.ColdDataFlowControlEnable {
				b.countCold(&r, v, cur)
			}
			rec := v.Data
			if filter.matchesRecord(rec) {
				if r.body == nil {
					// Room for the records the queue held from here when
					// the read began (a consumer at its end gets one or
					// two), up to maxNums of this size; append grows it
					// for larger or later ones (the ConsumeQueue may have
					// grown since, so the count is at least one).
					n := max(1, min(int64(maxNums), r.maxOffset-e.QueueOffset))
					r.body = b.bodies.get(int(min(int64(maxBytes), int64(e.Size)*n)))
				}
				if shown {
					r.body = kvindex.AppendShown(r.body, rec)
				} else {
					r.body = append(r.body, rec...)
				}
				r.count++
			}
			v.Release()
		}
		if len(entries) < want {
			break
		}
	}
	r.nextBegin = next
	switch {
	case r.count > 0:
		r.status = getFound
	case next == offset:
		r.status = getOffsetFoundNull
	default:
		r.status = getNoMatched
	}
	return r, nil
}

// outOfBounds sets r's status and next offset for a read from offset
// outside the queue's [minOffset, maxOffset) and reports whether it was;
// with belowMin false an offset below the minimum reads on from it.
func (r *getResult) outOfBounds(offset int64, belowMin bool) bool {
	switch {
	case r.maxOffset == 0:
		r.status, r.nextBegin = getNoMessageInQueue, 0
	case belowMin && offset < r.minOffset:
		r.status, r.nextBegin = getOffsetTooSmall, r.minOffset
	case offset == r.maxOffset:
		r.status, r.nextBegin = getOffsetOverflowOne, offset
	case offset > r.maxOffset:
		r.status, r.nextBegin = getOffsetOverflowBadly, r.maxOffset
	default:
		return false
	}
	return true
}

// transferLimits bounds a read's message count and bytes by RocketMQ's
// maxTransferCountOnMessageInMemory and maxTransferBytesOnMessageInMemory
// (rocketkv does not tell memory from disk: its reads are of the mapped
// CommitLog either way).
func (b *Broker) transferLimits(maxNums, maxBytes int) (int, int) {
	maxNums = min(max(maxNums, 1), b.cfg.MaxTransferCountOnMessageInMemory)
	if maxBytes <= 0 || maxBytes > b.cfg.MaxTransferBytesOnMessageInMemory {
		maxBytes = b.cfg.MaxTransferBytesOnMessageInMemory
	}
	return maxNums, maxBytes
}

// readRecord returns a copy of the record at a CommitLog offset, or ok
// false when there is none there (outside the log). Bytes at phy that are
// not a record are an error (see commitlog.NoRecordAt).
func (b *Broker) readRecord(phy int64) ([]byte, commitlog.Message, bool, error) {
	v, err := b.clog.ReadRecord(phy)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return nil, commitlog.Message{}, false, nil
	}
	if err != nil {
		return nil, commitlog.Message{}, false, err
	}
	defer v.Release()
	rec := append([]byte(nil), v.Data...)
	m, err := commitlog.Decode(rec)
	if err != nil {
		return nil, commitlog.Message{}, false, nil
	}
	return rec, m, true, nil
}

// readClientRecord is readRecord for an offset a client sent: no record
// starting there is "not found", not an error.
func (b *Broker) readClientRecord(phy int64) ([]byte, commitlog.Message, bool, error) {
	rec, m, ok, err := b.readRecord(phy)
	if commitlog.NoRecordAt(err) {
		return nil, commitlog.Message{}, false, nil
	}
	return rec, m, ok, err
}

// countCold adds v's size to r.coldBytes when the record is cold
// (readCold).
func (b *Broker) countCold(r *getResult, v *commitlog.View, cur *configs.Broker) {
	if b.readCold(v.Offset, cur) {
		r.coldBytes += int64(len(v.Data))
	}
}

// readCold reports whether a read at CommitLog offset phy counts as a
// read of cold data, as RocketMQ's CommitLog marks a read not in cache
// (isDataInPageCache): a record within accessMessageInMemoryHotRatio of
// the memory from the end of the log is not (inColdArea); one further
// behind is, under coldDataScanEnable=false by that distance alone, and
// under true only when the last page-cache scan found the page that
// starts its group of sampleSteps pages out of the page cache
// (coldScan.inCache). The check takes no system call.
func (b *Broker) readCold(phy int64, cur *configs.Broker) bool {
	if !b.inColdArea(phy, cur) {
		return false
	}
	if !cur.ColdDataScanEnable {
		return true
	}
	return !b.coldScan.inCache(phy)
}

// inColdArea reports whether a read at CommitLog offset phy is in the
// cold area: further behind the end of the log than
// accessMessageInMemoryHotRatio % of the machine's memory (RocketMQ's
// checkInColdAreaByCommitOffset).
func (b *Broker) inColdArea(phy int64, cur *configs.Broker) bool {
	return b.clog.MaxOffset()-phy > coldAreaBytes(b.memBytes, cur.AccessMessageInMemoryHotRatio)
}

// coldAreaBytes is ratio % of mem, the hot share's size in bytes, computed
// as RocketMQ does (a double product cast to a long: truncated toward
// zero, saturated at the long's bounds). A negative ratio makes every
// read cold, one above 100 a share larger than the memory.
func coldAreaBytes(mem int64, ratio int) int64 {
	f := float64(mem) * (float64(ratio) / 100.0)
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// coldAt reports whether the message at offset in the queue is in the
// cold area (inColdArea), the first one a pull from there would read:
// RocketMQ's isMsgInColdArea, which judges by that distance alone,
// whatever coldDataScanEnable says. No message there is not cold; one
// whose record retention deleted is (its distance is the log's).
func (b *Broker) coldAt(topic string, queueID int32, offset int64) bool {
	entries, err := b.cqs.Get(topic, queueID, offset, 1)
	if err != nil {
		b.log.Warn().Err(err).Str("topic", topic).Int32("queue", queueID).Int64("offset", offset).
			Msg("cold-data check of a pull: the queue could not be read; the pull is not held back as cold")
		return false
	}
	if len(entries) == 0 {
		return false
	}
	return b.inColdArea(entries[0].PhyOffset, b.current())
}
