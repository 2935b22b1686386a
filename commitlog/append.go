package commitlog

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// QueueOffsetAssigner hands out ConsumeQueue offsets. The Log calls Assign
// exactly once per successful append that holds at least one record that
// gets a queue offset, under the append lock, after space for the records
// is secured (so the copy that follows cannot fail), with n the number of
// such records. It returns the base offset; the records get base, base+1,
// ... in order. Records whose transaction type is Prepared or Rollback get
// queue offset 0 and are not counted. Assign must not call back into the
// Log.
type QueueOffsetAssigner interface {
	Assign(topic string, queueID int32, n int) int64
}

// AppendRequest is one append: a single message or a batch.
type AppendRequest struct {
	// Message is the message to append, when Batch is empty.
	Message *Message
	// Batch is a batch of messages sharing one topic and queue; they are
	// written contiguously, in one segment, with consecutive queue offsets.
	Batch []*Message
	// Assigner assigns queue offsets. When nil, each message's own
	// QueueOffset is stored as is.
	Assigner QueueOffsetAssigner
	// WaitFlush makes the append wait for its bytes to be flushed under
	// SyncFlush (RocketMQ's WAIT property). It has no effect under
	// AsyncFlush.
	WaitFlush bool
	// MultiDispatch names, for a single message that gets a queue offset,
	// the light message queues (RocketMQ's LMQ, the names of its
	// INNER_MULTI_DISPATCH property) its record is also indexed in, ""
	// standing for a name that is none. Under the append lock the
	// Assigner gives each named queue (queue id 0) its next offset, after
	// the message's own, and the record is written with them in its
	// INNER_MULTI_QUEUE_OFFSET property, comma-separated in the same
	// order ("" for the names that are none), as RocketMQ's append writes
	// it; the dispatcher indexes the record in each queue at its offset.
	// Needs an Assigner.
	MultiDispatch []string
	// ProducerBatch says the messages are a producer's batch
	// (SEND_BATCH_MESSAGE), even one alone: under Config.AppendPropCRC
	// they keep the __CRC32# properties they carry, before the one the
	// log adds, as RocketMQ's batch put keeps them. Every other append
	// is RocketMQ's single-message put, which drops them.
	ProducerBatch bool
}

// Properties of multi-dispatch (RocketMQ's light message queues).
const (
	// PropertyMultiDispatch names the queues a message is also
	// dispatched to, comma-separated (INNER_MULTI_DISPATCH).
	PropertyMultiDispatch = "INNER_MULTI_DISPATCH"
	// PropertyMultiQueueOffset holds the message's offset in each of
	// them, in the same order (INNER_MULTI_QUEUE_OFFSET).
	PropertyMultiQueueOffset = "INNER_MULTI_QUEUE_OFFSET"
	// MultiDispatchSeparator separates the names and the offsets.
	MultiDispatchSeparator = ","
)

// MultiDispatched yields the queues a record's properties dispatch it to
// (PropertyMultiDispatch) with its offset in each (PropertyMultiQueueOffset
// at the same place), -1 where that offset is missing, negative or not a
// number. A record without both properties yields nothing.
func MultiDispatched(props string) iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		names, ok := LookupProperty(props, PropertyMultiDispatch)
		if !ok {
			return
		}
		offsets, ok := LookupProperty(props, PropertyMultiQueueOffset)
		if !ok {
			return
		}
		for names != "" {
			var name, offset string
			name, names, _ = strings.Cut(names, MultiDispatchSeparator)
			offset, offsets, _ = strings.Cut(offsets, MultiDispatchSeparator)
			off, err := strconv.ParseInt(offset, 10, 64)
			if err != nil || off < 0 {
				off = -1
			}
			if !yield(name, off) {
				return
			}
		}
	}
}

// multiQueueOffsets is the PropertyMultiQueueOffset value for names: each
// name's offset from offset (skipped for "" names), joined.
func multiQueueOffsets(names []string, offset func(name string) int64) string {
	var b []byte
	for i, name := range names {
		if i > 0 {
			b = append(b, MultiDispatchSeparator...)
		}
		if name != "" {
			b = strconv.AppendInt(b, offset(name), 10)
		}
	}
	return string(b)
}

// AppendStatus is the outcome of a successful Append.
type AppendStatus int

const (
	// PutOK: the records are in the log (and flushed if that was asked).
	PutOK AppendStatus = iota
	// FlushDiskTimeout: the records are in the log, but the group commit
	// did not confirm them within SyncFlushTimeout (or the context ended
	// first). They stay in the log.
	FlushDiskTimeout
	// FlushSlaveTimeout: the records are in the log, but not enough
	// slaves acknowledged them within slaveTimeout. The Log never sets
	// it; the broker's replication does.
	FlushSlaveTimeout
)

// String returns RocketMQ's name of the status.
func (s AppendStatus) String() string {
	switch s {
	case PutOK:
		return "PUT_OK"
	case FlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case FlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	}
	return fmt.Sprintf("AppendStatus(%d)", int(s))
}

// Pos locates one record.
type Pos struct {
	Offset int64
	Size   int32
}

// AppendResult describes a successful append.
type AppendResult struct {
	Status AppendStatus
	// PhyOffset is the offset of the first record.
	PhyOffset int64
	// WroteBytes is the total size of the records.
	WroteBytes int64
	// QueueOffset is the base queue offset (of the first record that got
	// one; 0 if none did).
	QueueOffset int64
	// MsgIDs are the offset message ids, one per record.
	MsgIDs []string
	// StoreTimestamp is the one store timestamp of all the records.
	StoreTimestamp int64
	// Records locates each record.
	Records []Pos
}

// appendScratch is the per-append encoding buffer, pooled.
type appendScratch struct {
	buf  []byte
	offs []int // start of each record in buf
	one  [1]*Message
}

// Append appends one message or a batch.
//
// The records are encoded outside the append lock. Under it, Append picks
// the position, rolls to a new segment if the records plus the 8-byte
// filler reserve do not fit in the active one (writing the filler; a batch
// moves whole), calls the Assigner, sets the physical offsets and one store
// timestamp, copies the bytes into the mapping and publishes the new end
// atomically, so readers never see a partial record.
//
// Allocations: the result's MsgIDs (slice and strings) and Records; the
// encoding buffer is pooled, a sync-flush wait uses a pooled timer, and
// each group commit allocates one channel shared by all its waiters.
// Under Config.AppendPropCRC the records' CRC properties are computed
// under the lock, after the offsets and the store time (a CRC-32 pass
// over each record), and a message that carries a __CRC32# property of
// its own has its properties copied without it; with AppendPropCRC off
// (the default) the cost is a test of the setting per record.
//
// Errors (nothing was appended): ErrInvalidAppend, ErrMessageTooLarge,
// ErrPropertiesTooLarge, ErrTopicTooLong, ErrDiskFull, ErrStoreFull,
// ErrMapFailed, ErrClosed, or ctx's error if ctx is done on entry. When
// the records are in the log the error is nil; Status then says whether a
// requested flush was confirmed.
func (l *Log) Append(ctx context.Context, req AppendRequest) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, err
	}
	if l.storeFull.Load() {
		return AppendResult{}, l.storeFullError()
	}
	sc := l.scratch.Get().(*appendScratch)
	defer l.scratch.Put(sc)
	msgs := req.Batch
	if len(msgs) == 0 {
		if req.Message == nil {
			return AppendResult{}, fmt.Errorf("append: %w: no message", ErrInvalidAppend)
		}
		sc.one[0] = req.Message
		msgs = sc.one[:]
		defer func() { sc.one[0] = nil }()
	}
	// A multi-dispatched message is encoded here with the largest
	// offsets it could get: the checks of size pass for its real
	// encoding, which replaces this one under the lock, and the space it
	// needs there is at most this one's.
	var multi Message
	if len(req.MultiDispatch) > 0 {
		if len(msgs) != 1 || msgs[0] == nil || req.Assigner == nil || !hasQueueOffset(msgs[0].SysFlag) {
			return AppendResult{}, fmt.Errorf("append: %w: multi-dispatch needs a single message with a queue offset and an assigner", ErrInvalidAppend)
		}
		multi = *msgs[0]
		// Without WAIT, as RocketMQ's LMQ dispatch stores such a message.
		multi.Properties = RewriteProperties(multi.Properties, []string{PropertyWait}, [2]string{PropertyMultiQueueOffset,
			multiQueueOffsets(req.MultiDispatch, func(string) int64 { return math.MaxInt64 })})
		msgs = []*Message{&multi}
	}
	if err := l.encode(sc, msgs, req.ProducerBatch); err != nil {
		return AppendResult{}, err
	}
	total := int64(len(sc.buf))
	if total+blankFillerLength > l.segSize {
		return AppendResult{}, fmt.Errorf("append: %w: %d bytes of records, segments hold %d", ErrMessageTooLarge, total, l.segSize-blankFillerLength)
	}
	first := msgs[0]
	n := 0
	for _, m := range msgs {
		if hasQueueOffset(m.SysFlag) {
			n++
		}
	}

	if l.cfg.Replica {
		return AppendResult{}, ErrReplica
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return AppendResult{}, ErrClosed
	}
	if !l.activeAllocated {
		if err := l.allocateActive(); err != nil {
			l.mu.Unlock()
			return AppendResult{}, fmt.Errorf("append: %w", err)
		}
		l.activeAllocated = true
	}
	seg := l.activeSegment()
	pos := l.writePos.Load()
	if seg == nil || total+blankFillerLength > seg.end()-pos {
		var err error
		seg, err = l.rollLocked(seg, pos)
		if err != nil {
			l.mu.Unlock()
			return AppendResult{}, err
		}
		pos = seg.start
	}
	var base int64
	if n > 0 && req.Assigner != nil {
		base = req.Assigner.Assign(first.Topic, first.QueueID, n)
	}
	if len(req.MultiDispatch) > 0 {
		multi.Properties = RewriteProperties(first.Properties, nil, [2]string{PropertyMultiQueueOffset,
			multiQueueOffsets(req.MultiDispatch, func(name string) int64 { return req.Assigner.Assign(name, 0, 1) })})
		if err := l.encode(sc, msgs, req.ProducerBatch); err != nil {
			// Cannot happen: the encoding before the lock passed the same
			// checks with a longer property.
			l.mu.Unlock()
			return AppendResult{}, fmt.Errorf("append: [BUG] re-encoding a multi-dispatched message: %w", err)
		}
		total = int64(len(sc.buf))
	}
	ts := l.cfg.Now().UnixMilli()
	qo := base
	for i, off := range sc.offs {
		rec := sc.buf[off:]
		if req.Assigner != nil {
			if hasQueueOffset(msgs[i].SysFlag) {
				PatchQueueOffset(rec, qo)
				qo++
			} else {
				PatchQueueOffset(rec, 0)
			}
		}
		PatchPhyOffset(rec, pos+int64(off))
		PatchStoreTimestamp(rec, ts)
		if l.cfg.AppendPropCRC {
			// Last: the CRC covers the offsets and the store time.
			putPropCRC(rec[:binary.BigEndian.Uint32(rec)])
		}
	}
	writeHeadersLast(seg.data[pos-seg.start:], sc.buf, sc.offs)
	end := pos + total
	l.lastStoreTS.Store(ts) // before the end: see flushTo
	l.writePos.Store(end)
	l.mu.Unlock()

	l.wakeTailers()
	l.kickPrefaulter(end)
	res := AppendResult{
		Status:         PutOK,
		PhyOffset:      pos,
		WroteBytes:     total,
		StoreTimestamp: ts,
		MsgIDs:         make([]string, len(sc.offs)),
		Records:        make([]Pos, len(sc.offs)),
	}
	if req.Assigner != nil {
		if n > 0 {
			res.QueueOffset = base
		}
	} else {
		res.QueueOffset = first.QueueOffset
	}
	for i, off := range sc.offs {
		rec := sc.buf[off:]
		res.Records[i] = Pos{Offset: pos + int64(off), Size: int32(binary.BigEndian.Uint32(rec))}
		res.MsgIDs[i] = MessageID(l.storeHostOf(msgs[i]), pos+int64(off))
	}
	if l.cfg.FlushType == SyncFlush {
		l.kickFlusher()
		if req.WaitFlush && !l.waitFlushed(ctx, end) {
			res.Status = FlushDiskTimeout
		}
	} else if l.cfg.WakeFlushOnAppend {
		l.kickFlusher()
	}
	return res, nil
}

// hasQueueOffset reports whether a record of this sysFlag gets a queue
// offset (not a prepared or rolled-back transaction record).
func hasQueueOffset(sysFlag int32) bool {
	t := TransactionType(sysFlag)
	return t != TransactionPrepared && t != TransactionRollback
}

// storeHostOf returns the store host written for m.
func (l *Log) storeHostOf(m *Message) netip.AddrPort {
	if l.cfg.StoreHost.IsValid() {
		return l.cfg.StoreHost
	}
	return m.StoreHost
}

// encode encodes msgs into sc after validating the request. Under
// Config.AppendPropCRC each record gets room for its CRC property, and
// the messages' own __CRC32# properties are dropped unless they are a
// producer's batch.
func (l *Log) encode(sc *appendScratch, msgs []*Message, producerBatch bool) error {
	sc.buf = sc.buf[:0]
	sc.offs = sc.offs[:0]
	first := msgs[0]
	bodies := 0
	for _, m := range msgs {
		if m == nil {
			return fmt.Errorf("append: %w: nil message", ErrInvalidAppend)
		}
		if m.Topic != first.Topic || m.QueueID != first.QueueID {
			return fmt.Errorf("append: %w: batch mixes %s/%d and %s/%d", ErrInvalidAppend, first.Topic, first.QueueID, m.Topic, m.QueueID)
		}
		bodies += len(m.Body)
		if bodies > l.cfg.MaxMessageSize {
			return fmt.Errorf("append: %w: body bytes %d exceed %d", ErrMessageTooLarge, bodies, l.cfg.MaxMessageSize)
		}
	}
	for _, m := range msgs {
		mc := *m
		mc.StoreHost = l.storeHostOf(m)
		if l.cfg.AppendPropCRC && !producerBatch {
			mc.Properties = dropPropCRC(mc.Properties)
		}
		off := len(sc.buf)
		b, err := appendRecord(sc.buf, &mc, l.cfg.AppendPropCRC)
		if err != nil {
			return fmt.Errorf("append: encode: %w", err)
		}
		sc.buf = b
		sc.offs = append(sc.offs, off)
	}
	return nil
}

// rollLocked makes a new active segment starting where cur ends (or at pos
// when there is no segment) and writes the blank filler into cur. The new
// segment is secured before anything is written, so on failure the log is
// unchanged. Caller holds mu.
func (l *Log) rollLocked(cur *segment, pos int64) (*segment, error) {
	next := pos
	if cur != nil {
		next = cur.end()
	}
	seg, err := l.newSegmentLocked(next)
	if err != nil {
		return nil, err
	}
	if cur != nil {
		if rem := cur.end() - pos; rem >= blankFillerLength {
			b := cur.data[pos-cur.start:]
			binary.BigEndian.PutUint32(b, uint32(rem))
			binary.BigEndian.PutUint32(b[4:], BlankMagic)
		}
	}
	l.addSegmentLocked(seg)
	l.writePos.Store(seg.start)
	return seg, nil
}

// newSegmentLocked returns a mapped, allocated segment starting at next:
// the preallocated one when it starts there, else a new file. Nothing is
// added to the segment list. Caller holds mu.
func (l *Log) newSegmentLocked(next int64) (*segment, error) {
	var seg *segment
	if p := l.pending; p != nil {
		<-p.done
		l.pending = nil
		if p.start == next && p.err == nil {
			seg = p.seg
		} else if p.seg != nil {
			p.seg.deleted.Store(true)
			p.seg.release()
		}
	}
	if seg == nil {
		var err error
		seg, err = createSegment(l.fs, &l.log, l.segDir, next, l.segSize)
		if err != nil {
			l.log.Error().Err(err).Int64("offset", next).Msg("cannot create a new segment; append refused")
			return nil, fmt.Errorf("append: %w", err)
		}
	}
	return seg, nil
}

// addSegmentLocked makes seg the active segment and starts preallocating
// the one after it. Caller holds mu.
func (l *Log) addSegmentLocked(seg *segment) {
	if prev := l.activeSegment(); prev != nil {
		l.adviseSealed(prev)
	}
	l.adviseActive(seg, 0)
	l.segsMu.Lock()
	l.segs = append(l.segs, seg)
	if len(l.segs) == 1 {
		l.minOffset.Store(seg.start)
	}
	l.segsMu.Unlock()
	l.log.Debug().Int64("offset", seg.start).Msg("rolled to a new segment")
	l.startPreallocLocked()
}

// adviseActive gives a sync-flush log's active segment small pages from
// its write position on (see segment.adviseSmallPages). An async-flush log
// keeps the large folios: its flushes cover whole folios anyway, and small
// pages halved its append rate in BenchmarkAppend/async. A failed advice
// costs only disk bandwidth, so it is logged, not returned.
func (l *Log) adviseActive(s *segment, from int64) {
	if l.cfg.FlushType != SyncFlush {
		return
	}
	if err := s.adviseSmallPages(from); err != nil {
		l.log.Warn().Err(err).Msg("the active segment keeps large pages; sync flushes may write more than they must")
	}
}

// adviseSealed gives a segment no longer written the read advice in
// force: random reads (SetRandomReads), or the kernel's read-ahead, which
// undoes adviseActive (a sync-flush log's active segment has small
// pages; an async-flush log's needs nothing undone unless told to read
// at random before).
func (l *Log) adviseSealed(s *segment) {
	var err error
	switch {
	case l.randomReads.Load():
		err = s.adviseSmallPages(0)
	case l.cfg.FlushType == SyncFlush || l.randomReadsSet.Load():
		err = s.adviseNormal()
	}
	if err != nil {
		l.log.Warn().Err(err).Bool("randomReads", l.randomReads.Load()).Msg("a sealed segment keeps its earlier read advice")
	}
}

// adviseSealedSegments gives every segment but the active one the read
// advice in force.
func (l *Log) adviseSealedSegments() {
	l.segsMu.RLock()
	segs := l.segs[:max(len(l.segs)-1, 0)]
	for _, s := range segs {
		l.adviseSealed(s)
	}
	l.segsMu.RUnlock()
}

// SetRandomReads changes Config.RandomReads for the segments no longer
// written, those there are and those to come (RocketMQ's
// SET_COMMITLOG_READ_MODE). The segment being written keeps its advice:
// its pages are the ones in memory.
func (l *Log) SetRandomReads(random bool) {
	l.mu.Lock() // no roll seals a segment meanwhile
	defer l.mu.Unlock()
	l.randomReads.Store(random)
	l.randomReadsSet.Store(true)
	l.adviseSealedSegments()
}

// prealloc is a segment being created in the background.
type prealloc struct {
	start int64
	done  chan struct{}
	seg   *segment
	err   error
}

// startPreallocLocked starts creating the segment after the active one in
// the background (like RocketMQ's AllocateMappedFileService), unless that
// is already under way. It runs after every roll (not at Open, so that
// Open leaves the directory as recovery made it). Caller holds mu.
func (l *Log) startPreallocLocked() {
	if l.closed || l.pending != nil {
		return
	}
	l.segsMu.RLock()
	n := len(l.segs)
	var next int64
	if n > 0 {
		next = l.segs[n-1].end()
	}
	l.segsMu.RUnlock()
	if n == 0 {
		return
	}
	p := &prealloc{start: next, done: make(chan struct{})}
	l.pending = p
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(p.done)
		p.seg, p.err = createSegment(l.fs, &l.log, l.segDir, p.start, l.segSize)
		if p.err != nil {
			l.log.Warn().Err(p.err).Int64("offset", p.start).Msg("preallocating the next segment failed; will retry at roll time")
		}
	}()
}

// waitPrealloc waits for the background preallocation, if any (tests).
func (l *Log) waitPrealloc() {
	l.mu.Lock()
	p := l.pending
	l.mu.Unlock()
	if p != nil {
		<-p.done
	}
}

// writeHeadersLast copies the records of buf, starting at offs, to dst
// in the order of writeSpans: each one's size and magic after the rest of
// them, so that a copy a crash (a SIGKILL mid-copy) cuts short leaves a
// record whose size is zero, which recovery takes for the log's end,
// never a record whose lengths, offsets and body CRC hold while its
// properties end in zeros.
func writeHeadersLast(dst, buf []byte, offs []int) {
	for sp := range writeSpans(offs, len(buf)) {
		copy(dst[sp[0]:sp[1]], buf[sp[0]:sp[1]])
	}
}

// writeSpans yields the byte ranges [from, to) of records starting at
// offs in a buffer of size total, in the order they are written: every
// record's bytes past its first 8, then every record's first 8 (its size
// and magic). It allocates nothing: it runs on every append.
func writeSpans(offs []int, total int) iter.Seq[[2]int] {
	return func(yield func([2]int) bool) {
		for i, off := range offs {
			end := total
			if i+1 < len(offs) {
				end = offs[i+1]
			}
			if !yield([2]int{off + 8, end}) {
				return
			}
		}
		for _, off := range offs {
			if !yield([2]int{off, off + 8}) {
				return
			}
		}
	}
}
