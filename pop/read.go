package pop

import (
	"errors"
	"fmt"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// maxReadScan bounds the entries one queue read examines when a filter
// skips most of them: a pop's offsets then fit one checkpoint.
const maxReadScan = kvindex.MaxCheckpointSpan

// readResult is what one queue read found.
type readResult struct {
	// from is the offset the read started at after clamping to the
	// queue's range.
	from    int64
	offsets []int64
	// records are the messages' records, nil where a record was not read
	// (no filter needs it: the caller reads it through entries later).
	records [][]byte
	entries []cq.Entry
	// next is the offset after the last examined entry.
	next     int64
	min, max int64
	// bytes is the size of the messages' records.
	bytes int
	// lastPhy is the CommitLog offset of the last examined entry, -1 when
	// none was (how far behind the log's end the reader is).
	lastPhy int64
}

// readQueue reads up to n messages of a queue from offset that pass f,
// and stops before a message that would take their records past maxBytes
// (the first is always taken). An offset outside the queue's range is
// moved into it (RocketMQ commits the corrected offset). Records are
// copies. With lazy and no filter the records are not read (only their
// entries).
func (s *Service) readQueue(topic string, queueID int32, offset int64, n, maxBytes int, f Filter, lazy bool) (readResult, error) {
	if s.cfg.Compaction.Compacts(topic) {
		return s.readCompacted(topic, queueID, offset, n, maxBytes, f)
	}
	r := readResult{lastPhy: -1}
	var err error
	if r.min, err = s.cfg.CQ.MinOffset(topic, queueID); err != nil {
		return r, fmt.Errorf("min offset of %s/%d: %w", topic, queueID, err)
	}
	if r.max, err = s.cfg.CQ.MaxOffset(topic, queueID); err != nil {
		return r, fmt.Errorf("max offset of %s/%d: %w", topic, queueID, err)
	}
	offset = min(max(offset, r.min), r.max)
	r.from, r.next = offset, offset
	if want := int(min(int64(n), r.max-offset)); want > 0 {
		// Sized once: appended one entry at a time, each slice was
		// allocated six times per 32-message pop (3.5 % of a pop+ack
		// broker's CPU went to those allocations).
		r.offsets = make([]int64, 0, want)
		r.records = make([][]byte, 0, want)
		r.entries = make([]cq.Entry, 0, want)
	}
	scanned := 0
	full := false // the next message would pass maxBytes
	for !full && len(r.offsets) < n && r.next < r.max && scanned < maxReadScan {
		want := n - len(r.offsets)
		if f != nil {
			// A filter skips entries: read ahead.
			want = max(2*want, 32)
		}
		want = min(want, maxReadScan-scanned)
		entries, err := s.cfg.CQ.Get(topic, queueID, r.next, want)
		if err != nil {
			return r, fmt.Errorf("read %s/%d@%d: %w", topic, queueID, r.next, err)
		}
		if len(entries) == 0 {
			break
		}
		for _, e := range entries {
			// Never past the end read above, even if the store returns
			// more (cq.Store.Get promises it does not): the position
			// recorded is then at most what MaxOffset says from now on,
			// so no later pop clamps it back and hands these out again.
			if len(r.offsets) >= n || e.QueueOffset >= r.max {
				break
			}
			if len(r.offsets) > 0 && r.bytes+int(e.Size) > maxBytes && (f == nil || f.MatchesCode(e.TagsCode)) {
				full = true // left for the next pop
				break
			}
			scanned++
			r.next = e.QueueOffset + 1
			r.lastPhy = e.PhyOffset
			if f == nil && lazy {
				r.offsets = append(r.offsets, e.QueueOffset)
				r.records = append(r.records, nil)
				r.entries = append(r.entries, e)
				r.bytes += int(e.Size)
				continue
			}
			if f != nil && !f.MatchesCode(e.TagsCode) {
				continue
			}
			v, err := s.cfg.Log.Read(e.PhyOffset, e.Size)
			if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
				continue // deleted by retention meanwhile
			}
			if err != nil {
				return r, fmt.Errorf("read %s/%d@%d at %d: %w", topic, queueID, e.QueueOffset, e.PhyOffset, err)
			}
			if f == nil || f.MatchesRecord(v.Data) {
				r.offsets = append(r.offsets, e.QueueOffset)
				r.records = append(r.records, append([]byte(nil), v.Data...))
				r.entries = append(r.entries, e)
				r.bytes += len(v.Data)
			}
			v.Release()
		}
		if len(entries) < want {
			break
		}
	}
	return r, nil
}

// noteCutQueue logs a read of a master's pop that readQueue moved below
// pos, the group's start on the queue (known: recorded, not derived),
// because the queue now ends there: its tail was cut (a CommitLog that
// lost records at a power failure, a truncation). The pop then records
// the queue's end as the group's start, as RocketMQ commits a corrected
// offset, and the messages put there next are read.
func (s *Service) noteCutQueue(group string, src source, pos int64, known bool, r *readResult) {
	if !known || r.from >= pos {
		return
	}
	s.log.Warn().Str("group", group).Str("topic", src.topic).Int32("queue", src.queueID).
		Int64("position", pos).Int64("queueEnd", r.max).
		Msg("pop: the queue ends below the group's pop position; the position moves back to its end")
}

// traceRead logs, at debug level, a master's plain pop read of one queue: where
// it started (pos, from startOffset; known: recorded, not derived) and
// from what, the pop position and committed offset as they stand under
// the queue's lock, and what the read found and takes. With the read's
// next offset it is the whole story of the group's position on the
// queue, which a duplicate delivery needs told (the crash tests keep
// their child broker's debug log for that).
func (s *Service) traceRead(group string, src source, popTime, pos int64, known bool, r *readResult) {
	e := s.log.Debug()
	if !e.Enabled() {
		return
	}
	position, hasPosition, perr := s.store.Position(group, src.topic, src.queueID)
	committed, hasCommitted, cerr := s.cfg.Offsets.Get(group, src.topic, src.queueID)
	if err := errors.Join(perr, cerr); err != nil {
		e = e.AnErr("stateErr", err)
	}
	first, last := int64(-1), int64(-1)
	if len(r.offsets) > 0 {
		first, last = r.offsets[0], r.offsets[len(r.offsets)-1]
	}
	e.Str("group", group).Str("topic", src.topic).Int32("queue", src.queueID).Int64("popTime", popTime).
		Int64("start", pos).Bool("known", known).
		Int64("position", position).Bool("hasPosition", hasPosition).
		Int64("committed", committed).Bool("hasCommitted", hasCommitted).
		Int64("from", r.from).Int64("next", r.next).Int64("min", r.min).Int64("max", r.max).
		Int("taken", len(r.offsets)).Int64("first", first).Int64("last", last).
		Msg("pop: read a queue")
}

// readCompacted is readQueue for a compacted topic: it reads the copies
// the compaction store keeps (records always read), stepping over the
// offsets compacted away. The offsets it examines span at most
// maxReadScan, so that a pop's offsets fit one checkpoint.
func (s *Service) readCompacted(topic string, queueID int32, offset int64, n, maxBytes int, f Filter) (readResult, error) {
	r := readResult{lastPhy: -1}
	var err error
	if r.min, err = s.minOffset(topic, queueID); err != nil {
		return r, err
	}
	if r.max, err = s.cfg.CQ.MaxOffset(topic, queueID); err != nil {
		return r, fmt.Errorf("max offset of %s/%d: %w", topic, queueID, err)
	}
	offset = min(max(offset, r.min), r.max)
	r.from, r.next = offset, offset
	end := min(r.max, offset+maxReadScan)
	complete := true // every copy up to end was examined
	err = s.cfg.Compaction.Read(topic, queueID, offset, func(off int64, rec []byte, m *commitlog.Message) bool {
		if off >= end {
			return false
		}
		if len(r.offsets) >= n {
			complete = false
			return false
		}
		tag, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags)
		code := commitlog.TagsCode(tag)
		matches := f == nil || (f.MatchesCode(code) && f.MatchesRecord(rec))
		if matches && len(r.offsets) > 0 && r.bytes+len(rec) > maxBytes {
			complete = false // left for the next pop
			return false
		}
		r.next, r.lastPhy = off+1, m.PhyOffset
		if !matches {
			return true
		}
		r.bytes += len(rec)
		r.offsets = append(r.offsets, off)
		r.records = append(r.records, append([]byte(nil), rec...))
		r.entries = append(r.entries, cq.Entry{QueueOffset: off, PhyOffset: m.PhyOffset, Size: int32(len(rec)),
			TagsCode: code, StoreTimestamp: m.StoreTimestamp})
		return true
	})
	if err != nil {
		return r, err
	}
	if complete {
		r.next = end // what lies between the last copy and end was compacted away
	}
	return r, nil
}

// minOffset is the queue's first offset: the ConsumeQueue's, or for a
// compacted topic its first copy's when lower (Compaction.QueueMin).
func (s *Service) minOffset(topic string, queueID int32) (int64, error) {
	minOff, err := s.cfg.CQ.MinOffset(topic, queueID)
	if err != nil {
		return minOff, fmt.Errorf("min offset of %s/%d: %w", topic, queueID, err)
	}
	return s.cfg.Compaction.QueueMin(topic, queueID, minOff)
}

// readMessage returns the message at a queue offset and the view of the
// CommitLog its byte fields alias (see readAt); ok is false when it is
// gone (retention) or was never there.
func (s *Service) readMessage(topic string, queueID int32, offset int64) (commitlog.Message, *commitlog.View, bool, error) {
	entries, err := s.cfg.CQ.Get(topic, queueID, offset, 1)
	if err != nil {
		return commitlog.Message{}, nil, false, fmt.Errorf("read %s/%d@%d: %w", topic, queueID, offset, err)
	}
	if len(entries) == 0 || entries[0].QueueOffset != offset {
		return commitlog.Message{}, nil, false, nil
	}
	return s.readAt(topic, queueID, entries[0])
}

// readAt reads and decodes the message a ConsumeQueue entry points at; ok
// is false when retention deleted it. The message's body aliases the
// returned view of the CommitLog, which the caller releases once it no
// longer uses the message (a revive, after putting its copy).
func (s *Service) readAt(topic string, queueID int32, e cq.Entry) (commitlog.Message, *commitlog.View, bool, error) {
	offset := e.QueueOffset
	v, err := s.cfg.Log.Read(e.PhyOffset, e.Size)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return commitlog.Message{}, nil, false, nil
	}
	if err != nil {
		return commitlog.Message{}, nil, false, fmt.Errorf("read %s/%d@%d: %w", topic, queueID, offset, err)
	}
	m, err := commitlog.Decode(v.Data)
	if err != nil {
		v.Release()
		return commitlog.Message{}, nil, false, fmt.Errorf("decode %s/%d@%d: %w: %w", topic, queueID, offset, errUndecodable, err)
	}
	return m, v, true, nil
}

// errUndecodable marks a record readAt read but could not decode.
var errUndecodable = errors.New("record cannot be decoded")
