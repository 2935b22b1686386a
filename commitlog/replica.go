package commitlog

import (
	"errors"
	"fmt"
)

// Replication moves a master's CommitLog bytes to its slaves unchanged, in
// pieces cut at arbitrary byte positions (RocketMQ's HA transfer). The
// master reads them with ReadStream; a replica (Config.Replica) writes
// them with AppendReplica at the same offsets. A replica has two ends:
//
//	          MaxOffset (writePos)       ReplicaOffset
//	              |                          |
//	... record | record | record | rec|ord...|
//	              ^ readers, dispatch, flush   ^ what the master has sent
//
// MaxOffset stays on a record boundary, so readers, the dispatcher and the
// flusher see whole records only; ReplicaOffset is what the replica
// reports to its master (RocketMQ's slave reports every byte it holds) and
// where the next piece must start. The unfinished record's first 8 bytes
// (its size and magic) stay out of the mapping until its last byte came,
// and every record a piece completes gets its size and magic after the
// rest of it, so a slave killed at any moment leaves only whole records
// before the first zero size. A piece never crosses a segment end:
// the master sends a segment's tail, blank filler included, before the
// next segment's first byte, and segment sizes must agree.

// ReadStream returns a view of the log bytes from offset to the readable
// end of the segment holding it, at most max bytes: what a master sends a
// slave next. Past the end of the log it returns a View with no Data (nil
// error). Below MinOffset, or in a gap between segments, it returns an
// error wrapping ErrOffsetOutOfRange. Release the View.
func (l *Log) ReadStream(offset int64, max int) (*View, error) {
	return l.readRaw(offset, max, l.writePos.Load())
}

// ReadReplica returns a view of the bytes a replica holds from offset to
// ReplicaOffset (an unfinished record's received bytes included) or the
// end of the segment holding offset, at most limit bytes: what a slave
// compares with its master's bytes when it reconnects. At or past
// ReplicaOffset it returns a View with no Data; below MinOffset an error
// wrapping ErrOffsetOutOfRange. Only the goroutine that calls
// AppendReplica may call it. Release the View.
func (l *Log) ReadReplica(offset int64, limit int) (*View, error) {
	v, err := l.readRaw(offset, limit, l.ReplicaOffset())
	if err != nil || len(v.Data) == 0 {
		return v, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	wp, h := l.writePos.Load(), l.held
	end := v.Offset + int64(len(v.Data))
	if h.n == 0 || end <= wp || v.Offset >= wp+int64(h.n) {
		return v, nil
	}
	// The unfinished record's first bytes are held, not mapped: a copy
	// with them in place.
	data := append([]byte(nil), v.Data...)
	v.Release()
	for x := max(v.Offset, wp); x < min(end, wp+int64(h.n)); x++ {
		data[x-v.Offset] = h.b[x-wp]
	}
	return &View{Offset: offset, Data: data}, nil
}

// readRaw returns a view of the bytes from offset up to end or the end of
// the segment holding offset, at most max.
func (l *Log) readRaw(offset int64, max int, end int64) (*View, error) {
	if l.closedFlag.Load() {
		return nil, ErrClosed
	}
	if offset >= end {
		return &View{Offset: offset}, nil
	}
	s := l.acquireSegment(offset)
	if s == nil {
		return nil, fmt.Errorf("read the log from %d: no segment holds it (first offset %d): %w", offset, l.MinOffset(), ErrOffsetOutOfRange)
	}
	// A segment behind the active one is readable to its end (its blank
	// filler and the bytes after it included).
	n := min(min(s.end(), end)-offset, int64(max))
	rel := offset - s.start
	return &View{Offset: offset, Data: s.data[rel : rel+n : rel+n], seg: s}, nil
}

// ReplicaOffset returns the end of the bytes a replica holds: MaxOffset
// plus a record a piece has cut short. On a log that is not a replica it
// is MaxOffset.
func (l *Log) ReplicaOffset() int64 {
	if !l.cfg.Replica {
		return l.writePos.Load()
	}
	return l.replicaPos.Load()
}

// AppendReplica writes data, which a master read at offset off with
// ReadStream, into the replica at the same offset, and moves MaxOffset
// over the records it completes. An empty replica starts at off, which
// must then be a segment start (the master sends a new slave its newest
// segment); otherwise off must be ReplicaOffset (ErrReplicaGap).
//
// A piece must not cross a segment end (ErrCorrupt; it starts the next
// segment once the previous one is whole, blank filler included).
// A piece that does not parse as the continuation of the log (a bad magic
// code, a record past its segment's end, a physical offset field that is
// not the record's position: the master's segment size differs, or the
// logs diverged) is refused with an error wrapping ErrCorrupt, and the
// bytes of an unfinished record are dropped (zeroed): ReplicaOffset falls
// back to MaxOffset, where the master must resume.
func (l *Log) AppendReplica(off int64, data []byte) error {
	if !l.cfg.Replica {
		return ErrNotReplica
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	seg := l.activeSegment()
	rp := l.replicaPos.Load()
	if seg == nil {
		if off%l.segSize != 0 {
			return fmt.Errorf("replicate into an empty log at %d: %w: the first piece must start a segment of %d bytes", off, ErrReplicaGap, l.segSize)
		}
		var err error
		if seg, err = l.newSegmentLocked(off); err != nil {
			return err
		}
		l.addSegmentLocked(seg)
		l.writePos.Store(off)
		rp = off
	} else if off != rp {
		return fmt.Errorf("replicate %d bytes at %d: %w: the replica ends at %d", len(data), off, ErrReplicaGap, rp)
	}
	if !l.activeAllocated {
		if err := l.allocateActive(); err != nil {
			return fmt.Errorf("replicate: %w", err)
		}
		l.activeAllocated = true
	}
	wp := l.writePos.Load()
	if len(data) > 0 && rp == seg.end() {
		if wp != rp {
			return fmt.Errorf("replicate %d bytes at %d: %w: the record at %d is unfinished in the segment before", len(data), off, ErrCorrupt, wp)
		}
		next, err := l.newSegmentLocked(rp)
		if err != nil {
			return err
		}
		l.addSegmentLocked(next)
		seg = next
	}
	if rp+int64(len(data)) > seg.end() {
		// RocketMQ's master never sends one (its slave refuses it too):
		// taking it would leave a new segment active behind an end that
		// a refusal moves back into the one before.
		return fmt.Errorf("replicate %d bytes at %d: %w: the piece crosses the segment end at %d", len(data), off, ErrCorrupt, seg.end())
	}
	p := replicaPiece{seg: seg, wp: wp, rp: rp, data: data, held: l.held}
	wp, ts, err := p.apply(l.hints.note)
	if err == nil {
		l.held = p.heldAt(wp)
	}
	rp += int64(len(data))
	l.replicaPos.Store(rp)
	if ts > 0 {
		l.lastStoreTS.Store(ts) // before the end: see flushTo
	}
	moved := wp > l.writePos.Load()
	l.writePos.Store(wp)
	if err != nil {
		// The refused bytes go: a clean Close must leave zeros after the
		// end, or the next Open reads them as a damaged tail.
		l.zeroReplicaTailLocked()
		l.log.Error().Err(err).Int64("offset", wp).Msg("replicated bytes refused; the master must resend from here")
	}
	if moved {
		l.wakeTailers()
		l.kickPrefaulter(rp)
		if l.cfg.FlushType == SyncFlush {
			l.kickFlusher()
		}
	}
	return err
}

// heldHeader is the first bytes (size and magic: blankFillerLength) of
// the record or segment tail at a replica's MaxOffset that a piece cut
// short. They stay out of the mapping until the record's last byte came,
// so a slave killed mid-record leaves zeros where the record's size
// belongs: recovery reads the log's end there, never a record whose
// lengths and body CRC hold while its properties end in zeros.
type heldHeader struct {
	b [blankFillerLength]byte
	n int
}

// replicaPiece places one piece a master sent (data, at the replica's
// end rp) into the active segment seg, whose records are whole up to wp
// (the unit at wp, when wp < rp, has its first held.n bytes in held).
type replicaPiece struct {
	seg  *segment
	wp   int64
	rp   int64
	data []byte
	held heldHeader
}

// end is where the piece ends.
func (p *replicaPiece) end() int64 { return p.rp + int64(len(p.data)) }

// byteAt returns the byte at log offset x (wp <= x < end()): from held,
// the piece or the mapping.
func (p *replicaPiece) byteAt(x int64) byte {
	switch {
	case x >= p.rp:
		return p.data[x-p.rp]
	case x-p.wp < int64(p.held.n):
		return p.held.b[x-p.wp]
	default:
		return p.seg.data[x-p.seg.start]
	}
}

// headerEnd is where the header window of a unit starting at pos ends:
// blankFillerLength bytes, or fewer at the segment's end.
func (p *replicaPiece) headerEnd(pos int64) int64 {
	return min(pos+blankFillerLength, p.seg.end())
}

// apply walks the units (records, a blank filler, the few bytes at a
// segment's end too small for one) from wp through the piece, once. It
// writes every unit whose last byte the piece brings into the mapping
// (unitAt has checked its size and magic; put writes its header last),
// checks each record (Check, its physical offset field), passes its start
// to note and keeps its store timestamp, then copies the rest of the piece
// but the header window of the unit left unfinished (heldAt keeps those
// bytes). It returns the start of that unit (end() when none), the store
// timestamp of the last record passed, and for bytes that cannot continue
// a log an error wrapping ErrCorrupt or ErrBadMagic, with the start of the
// unit they belong to: the caller zeroes what the piece left from there.
func (p *replicaPiece) apply(note func(int64)) (int64, int64, error) {
	end := p.end()
	pos, ts := p.wp, int64(0)
	for pos < end && p.headerEnd(pos) <= end {
		to, record, err := p.unitAt(pos)
		if err != nil {
			return pos, ts, err
		}
		if to > end {
			break
		}
		p.put(pos, to)
		if record {
			rec := p.seg.data[pos-p.seg.start : to-p.seg.start]
			if _, err := Check(rec, false); err != nil {
				return pos, ts, fmt.Errorf("replica at %d: %w", pos, err)
			}
			if off := recordPhyOffset(rec); off != pos {
				return pos, ts, fmt.Errorf("replica at %d: %w: physical offset field %d (the logs diverged)", pos, ErrCorrupt, off)
			}
			ts = recordStoreTimestamp(rec)
			note(pos)
		}
		pos = to
	}
	if pos < end {
		p.copyRange(max(p.rp, p.headerEnd(pos)), end)
	}
	return pos, ts, nil
}

// unitAt reads the size and magic of the unit at pos, whose header window
// has arrived, and returns where the unit ends and whether it is a
// record (not a blank filler or the bytes at a segment's end too small
// for one). A size or magic that cannot continue a log (a bad magic code,
// a record past its segment's end, a filler not running to it: the
// master's segment size differs, or the logs diverged) is an error
// wrapping ErrBadMagic or ErrCorrupt.
func (p *replicaPiece) unitAt(pos int64) (int64, bool, error) {
	segEnd := p.seg.end()
	if segEnd-pos < blankFillerLength {
		// Too little room for anything: the segment is done once the
		// master has sent its last byte.
		return segEnd, false, nil
	}
	var hdr [blankFillerLength]byte
	if pos >= p.rp {
		copy(hdr[:], p.data[pos-p.rp:])
	} else {
		for i := range hdr {
			hdr[i] = p.byteAt(pos + int64(i))
		}
	}
	n, err := RecordSize(hdr[:])
	switch {
	case errors.Is(err, ErrBlank):
		if int64(n) != segEnd-pos {
			return pos, false, fmt.Errorf("replica at %d: %w: blank filler of %d bytes where the segment has %d left (is mappedFileSizeCommitLog the master's?)",
				pos, ErrCorrupt, n, segEnd-pos)
		}
		return segEnd, false, nil
	case err != nil:
		return pos, false, fmt.Errorf("replica at %d: %w", pos, err)
	case n < minRecordV1V4V4 || pos+int64(n) > segEnd:
		return pos, false, fmt.Errorf("replica at %d: %w: record of %d bytes in a segment with %d left (is mappedFileSizeCommitLog the master's?)",
			pos, ErrCorrupt, n, segEnd-pos)
	}
	return pos + int64(n), true, nil
}

// put writes the unit [pos, to), whose last byte the piece brings, into
// the mapping: the piece's bytes past its header window first (those
// before rp are there already), then the header window, from held if the
// unit began before the piece. A slave killed in between holds zeros
// where the unit's size belongs.
func (p *replicaPiece) put(pos, to int64) {
	hdrEnd := p.headerEnd(pos)
	p.copyRange(max(p.rp, hdrEnd), to)
	if pos >= p.rp {
		p.copyRange(pos, hdrEnd)
		return
	}
	for x := pos; x < hdrEnd; x++ {
		p.seg.data[x-p.seg.start] = p.byteAt(x)
	}
}

// copyRange copies the piece's bytes [from, to) (rp <= from) into the
// mapping; nothing when to <= from.
func (p *replicaPiece) copyRange(from, to int64) {
	if from < to {
		copy(p.seg.data[from-p.seg.start:to-p.seg.start], p.data[from-p.rp:to-p.rp])
	}
}

// heldAt returns the header bytes of the unfinished unit at tail that
// arrived (none when tail is the piece's end).
func (p *replicaPiece) heldAt(tail int64) heldHeader {
	var h heldHeader
	for x := tail; x < min(p.headerEnd(tail), p.end()); x++ {
		h.b[h.n] = p.byteAt(x)
		h.n++
	}
	return h
}

// DiscardUnfinished drops the bytes of an unfinished record a replica
// holds past MaxOffset, so that ReplicaOffset is MaxOffset again: a slave
// that is about to compare its log with a new master's (the AutoSwitch
// handshake) keeps whole records only, and the master sends the record
// again. Only the goroutine that calls AppendReplica may call it; on a
// log that is not a replica it does nothing.
func (l *Log) DiscardUnfinished() {
	if !l.cfg.Replica {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.zeroReplicaTailLocked()
}

// zeroReplicaTailLocked clears the bytes of an unfinished record past
// MaxOffset, so that a clean shutdown leaves zeros after the end (normal
// recovery reads anything else as damage). Caller holds mu.
func (l *Log) zeroReplicaTailLocked() {
	wp, rp := l.writePos.Load(), l.replicaPos.Load()
	for wp < rp {
		l.segsMu.RLock()
		s := l.findSegmentLocked(wp)
		l.segsMu.RUnlock()
		if s == nil {
			break
		}
		stop := min(rp, s.end())
		clear(s.data[wp-s.start : stop-s.start])
		wp = stop
	}
	l.held = heldHeader{}
	l.replicaPos.Store(l.writePos.Load())
}

// RecordStart returns the start of the record, or segment blank filler,
// that holds offset, walking the records of offset's segment from the
// last record start below it that recovery or replication noted (one
// every 16 KiB of the last 128 MiB), else from the segment's start. An
// offset at or past MaxOffset gives MaxOffset (a
// replica's unfinished record starts there). Below MinOffset it returns
// an error wrapping ErrOffsetOutOfRange; bytes that do not parse as
// records give ErrBadMagic or ErrCorrupt.
func (l *Log) RecordStart(offset int64) (int64, error) {
	return l.recordStart(offset, false)
}

// MessageStart is RecordStart, but an offset in a segment's blank filler
// (or in the few bytes after the last record where no filler fits) gives
// the start of the last message before it in the segment: a filler says
// nothing of which log it belongs to, as any two logs with a record ending
// at the same offset have the same filler there. A segment holding no
// message before its filler gives the filler's start.
func (l *Log) MessageStart(offset int64) (int64, error) {
	return l.recordStart(offset, true)
}

func (l *Log) recordStart(offset int64, messageOnly bool) (int64, error) {
	if l.closedFlag.Load() {
		return 0, ErrClosed
	}
	end := l.writePos.Load()
	if offset >= end {
		return end, nil
	}
	s := l.acquireSegment(offset)
	if s == nil {
		return 0, fmt.Errorf("record start of %d: below the first offset %d: %w", offset, l.MinOffset(), ErrOffsetOutOfRange)
	}
	defer s.release()
	pos, prev := s.start, int64(-1)
	if h, ok := l.hints.before(offset); ok && h > pos {
		pos = h
	}
	atFiller := func() (int64, error) {
		switch {
		case !messageOnly:
			return pos, nil
		case prev >= 0:
			return prev, nil
		case pos > s.start:
			// Walked from a hint at the filler: walk to the message before it.
			return l.recordStart(pos-1, true)
		}
		return pos, nil
	}
	for {
		rel := pos - s.start
		if rel+blankFillerLength > s.size {
			return atFiller() // the bytes too few for a filler at a segment's end
		}
		n, err := RecordSize(s.data[rel:])
		if errors.Is(err, ErrBlank) {
			return atFiller()
		}
		if err != nil {
			return 0, fmt.Errorf("record start of %d: record at %d: %w", offset, pos, err)
		}
		if n <= 0 {
			return 0, fmt.Errorf("record start of %d: record at %d: %w: size %d", offset, pos, ErrCorrupt, n)
		}
		if pos+int64(n) > offset {
			return pos, nil
		}
		prev = pos
		pos += int64(n)
	}
}
