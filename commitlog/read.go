package commitlog

import (
	"context"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// View is a read-only window on mapped log bytes. Its Data stays valid
// until Release, even if retention deletes the segment meanwhile (the
// segment is unmapped and its file removed after the last release). Do not
// write to Data, and do not use it after Release.
type View struct {
	// Offset is the log offset of Data[0].
	Offset int64
	// Data aliases the segment mapping.
	Data []byte
	seg  *segment
}

// Release gives the view's segment reference back. It is idempotent, and
// a nil View releases nothing.
func (v *View) Release() {
	if v != nil && v.seg != nil {
		v.seg.release()
		v.seg = nil
		v.Data = nil
	}
}

// Resident reports whether every page of the view's bytes is in the page
// cache, as mincore(2) tells: what RocketMQ 5 asks of a message with
// SelectMappedBufferResult.isInMem (MappedByteBuffer's isLoaded), to
// decide whether a new consumer group starts at the beginning of a young
// queue. An error is the system call's.
func (v *View) Resident() (bool, error) {
	if v == nil || v.seg == nil || len(v.Data) == 0 {
		return false, fmt.Errorf("residency of a released or empty view")
	}
	rel := v.Offset - v.seg.start
	lo, hi := rel&^(osPageSize-1), rel+int64(len(v.Data))
	vec := make([]byte, (hi-lo+osPageSize-1)/osPageSize)
	if err := mincore(v.seg.data[lo:hi], vec); err != nil {
		return false, fmt.Errorf("mincore of [%d, %d) in segment %s: %w", v.Offset, v.Offset+int64(len(v.Data)), v.seg.path, err)
	}
	for _, b := range vec {
		if b&1 == 0 {
			return false, nil
		}
	}
	return true, nil
}

// mincore fills vec with a byte per page of b (page-aligned), bit 0 set
// for a page in memory. golang.org/x/sys/unix has no wrapper for it.
func mincore(b, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// Read returns a view of [offset, offset+size). The range must lie within
// [MinOffset, MaxOffset) and inside one segment, else ErrOffsetOutOfRange.
// It allocates the View.
func (l *Log) Read(offset int64, size int32) (*View, error) {
	if l.closedFlag.Load() {
		return nil, ErrClosed
	}
	if size <= 0 {
		return nil, fmt.Errorf("read %d bytes at %d: %w", size, offset, ErrOffsetOutOfRange)
	}
	if offset+int64(size) > l.writePos.Load() {
		return nil, fmt.Errorf("read [%d, %d) past the end %d: %w", offset, offset+int64(size), l.writePos.Load(), ErrOffsetOutOfRange)
	}
	s := l.acquireSegment(offset)
	if s == nil {
		return nil, fmt.Errorf("read at %d below the first offset %d: %w", offset, l.MinOffset(), ErrOffsetOutOfRange)
	}
	rel := offset - s.start
	if rel+int64(size) > s.size {
		s.release()
		return nil, fmt.Errorf("read [%d, %d) crosses the end of segment %s: %w", offset, offset+int64(size), s.path, ErrOffsetOutOfRange)
	}
	return &View{Offset: offset, Data: s.data[rel : rel+int64(size) : rel+int64(size)], seg: s}, nil
}

// ReadRecord returns a view of the record at offset, taking its size from
// the record header. A blank filler gives an error wrapping ErrBlank, a
// position that is not a record start may give ErrBadMagic or ErrCorrupt.
func (l *Log) ReadRecord(offset int64) (*View, error) {
	if l.closedFlag.Load() {
		return nil, ErrClosed
	}
	end := l.writePos.Load()
	if offset+blankFillerLength > end {
		return nil, fmt.Errorf("read record at %d past the end %d: %w", offset, end, ErrOffsetOutOfRange)
	}
	s := l.acquireSegment(offset)
	if s == nil {
		return nil, fmt.Errorf("read record at %d below the first offset %d: %w", offset, l.MinOffset(), ErrOffsetOutOfRange)
	}
	rel := offset - s.start
	size, err := RecordSize(s.data[rel:])
	if err != nil {
		s.release()
		return nil, fmt.Errorf("read record at %d: %w", offset, err)
	}
	if size < minRecordV1V4V4 || rel+int64(size) > s.size || offset+int64(size) > end {
		s.release()
		return nil, fmt.Errorf("read record at %d: %w: size %d", offset, ErrCorrupt, size)
	}
	return &View{Offset: offset, Data: s.data[rel : rel+int64(size) : rel+int64(size)], seg: s}, nil
}

// Entry is one record yielded by a Reader.
type Entry struct {
	// Offset is the record's log offset.
	Offset int64
	// Size is its length.
	Size int32
	// Data is the record (Decode it for the fields). It aliases the
	// mapping and is valid until the next call to Next or Close.
	Data []byte
}

// Reader tails the log in order, for the dispatcher. It skips blank
// fillers into the next segment. A Reader is not safe for concurrent use;
// several Readers may run at once.
type Reader struct {
	l   *Log
	off int64
	seg *segment // held reference, or nil
	// confirmed: the Reader ends at ConfirmedOffset, not at the write
	// position.
	confirmed bool
	// crossEnd is the end of the record at off when the confirmed end
	// last cut through it (Wait waits for the whole record), else 0.
	crossEnd int64
}

// NewReader returns a Reader positioned at from, which must be a record
// start (for example an offset a previous Reader returned, or MinOffset).
// It reads up to the write position.
func (l *Log) NewReader(from int64) *Reader { return &Reader{l: l, off: from} }

// NewConfirmedReader is NewReader for a reader that must only see
// records up to ConfirmedOffset: the dispatcher, so that what consumers
// are shown under SyncFlush is on disk, and in controller mode held by
// the replicas the confirm limit stands for (SetConfirmLimit).
func (l *Log) NewConfirmedReader(from int64) *Reader {
	return &Reader{l: l, off: from, confirmed: true}
}

// ConfirmedOffset is the end of the records confirmed readers see
// (RocketMQ's confirm offset): the write position, or less: under
// SyncFlush the flushed offset, and the confirm limit when one is set;
// with Config.ReadUncommitted always the write position. It may fall
// inside a record (a confirm limit from a slave's acknowledgement):
// confirmed readers stop before a record that crosses it.
func (l *Log) ConfirmedOffset() int64 { return l.confirmedBelow(l.writePos.Load()) }

// confirmedBelow is ConfirmedOffset for the write position end: a reader
// that checks records against a write position it read must bound them by
// the confirmed end of that same read (a later read may be further on).
func (l *Log) confirmedBelow(end int64) int64 {
	if l.cfg.ReadUncommitted {
		return end
	}
	if l.cfg.FlushType == SyncFlush {
		end = min(end, l.flushedPos.Load())
	}
	if lim := l.confirmLimit.Load(); lim >= 0 {
		end = min(end, lim)
	}
	return end
}

// stopsAtFlushed reports whether confirmed readers stop at the flushed
// offset.
func (l *Log) stopsAtFlushed() bool {
	return l.cfg.FlushType == SyncFlush && !l.cfg.ReadUncommitted
}

// Offset returns the offset of the next record the Reader will yield.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the next record. At the write position it returns
// ErrNoMoreData (call Wait, then Next again). Below MinOffset it returns
// ErrOffsetOutOfRange; on a damaged position ErrCorrupt or ErrBadMagic.
// Next does not allocate.
func (r *Reader) Next() (Entry, error) {
	l := r.l
	for {
		if l.closedFlag.Load() {
			return Entry{}, ErrClosed
		}
		written := l.writePos.Load()
		end := written
		if r.confirmed {
			end = l.confirmedBelow(written)
		}
		if r.off >= end {
			return Entry{}, ErrNoMoreData
		}
		if r.seg == nil || r.off < r.seg.start || r.off >= r.seg.end() {
			if r.seg != nil {
				r.seg.release()
				r.seg = nil
			}
			r.seg = l.acquireSegment(r.off)
			if r.seg == nil {
				if r.off < l.MinOffset() {
					return Entry{}, fmt.Errorf("reader at %d below the first offset %d: %w", r.off, l.MinOffset(), ErrOffsetOutOfRange)
				}
				// A gap between segments (tolerated in existing stores):
				// continue at the next segment.
				next, ok := l.nextSegmentStart(r.off)
				if !ok {
					return Entry{}, fmt.Errorf("reader at %d: no segment holds it: %w", r.off, ErrOffsetOutOfRange)
				}
				r.off = next
				continue
			}
		}
		s := r.seg
		rel := r.off - s.start
		if rel+blankFillerLength > s.size {
			r.off = s.end()
			continue
		}
		size, err := RecordSize(s.data[rel:])
		if err == ErrBlank {
			r.off = s.end()
			continue
		}
		if err != nil {
			return Entry{}, fmt.Errorf("reader at %d: %w", r.off, err)
		}
		if size < minRecordV1V4V4 || rel+int64(size) > s.size || r.off+int64(size) > written {
			return Entry{}, fmt.Errorf("reader at %d: %w: size %d", r.off, ErrCorrupt, size)
		}
		if r.off+int64(size) > end {
			// A whole record the confirmed end cuts through: it is shown
			// when the end passes it.
			r.crossEnd = r.off + int64(size)
			return Entry{}, ErrNoMoreData
		}
		r.crossEnd = 0
		e := Entry{Offset: r.off, Size: size, Data: s.data[rel : rel+int64(size) : rel+int64(size)]}
		r.off += int64(size)
		return e, nil
	}
}

// Wait blocks until there is data past the Reader's offset (for a
// confirmed Reader, confirmed data), ctx ends or the log closes
// (ErrClosed).
func (r *Reader) Wait(ctx context.Context) error {
	if r.confirmed {
		if r.crossEnd > r.off {
			return r.l.waitConfirmedBeyond(ctx, r.crossEnd-1)
		}
		return r.l.waitConfirmedBeyond(ctx, r.off)
	}
	return r.l.WaitBeyond(ctx, r.off)
}

// waitFlushedBeyond blocks until ConfirmedOffset() > offset under
// SyncFlush: until a record past offset is written, then until it is
// flushed (WaitDurable, which logs a flush slower than syncFlushTimeout
// and reports a failed one). It returns ctx's error when ctx ends and
// ErrClosed when the log closes first.
func (l *Log) waitFlushedBeyond(ctx context.Context, offset int64) error {
	if err := l.WaitBeyond(ctx, offset); err != nil {
		return err
	}
	return l.WaitDurable(ctx, offset+1)
}

// Close releases the Reader's segment reference. The last Entry's Data is
// invalid afterwards.
func (r *Reader) Close() {
	if r.seg != nil {
		r.seg.release()
		r.seg = nil
	}
}

// WaitBeyond blocks until MaxOffset() > offset, ctx ends (its error) or the
// log closes (ErrClosed). It does not poll: appends wake it.
func (l *Log) WaitBeyond(ctx context.Context, offset int64) error {
	for {
		if l.writePos.Load() > offset {
			return nil
		}
		if l.closedFlag.Load() {
			return ErrClosed
		}
		p := l.appendCh.Load()
		if p == nil {
			ch := make(chan struct{})
			if !l.appendCh.CompareAndSwap(nil, &ch) {
				continue
			}
			p = &ch
		}
		if l.writePos.Load() > offset {
			return nil
		}
		select {
		case <-*p:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.stop:
			return ErrClosed
		}
	}
}

// Notify returns a channel that receives a value (without blocking the
// appender; at most one is buffered) after appends. Several appends may
// collapse into one notification. The channel is never closed; it stays
// registered for the life of the Log.
func (l *Log) Notify() <-chan struct{} {
	ch := make(chan struct{}, 1)
	l.notifyMu.Lock()
	defer l.notifyMu.Unlock()
	var subs []chan struct{}
	if p := l.notify.Load(); p != nil {
		subs = append(subs, *p...)
	}
	subs = append(subs, ch)
	l.notify.Store(&subs)
	return ch
}

// wakeTailers wakes WaitBeyond callers and Notify subscribers after an
// append. It does not allocate.
func (l *Log) wakeTailers() {
	if p := l.appendCh.Load(); p != nil && l.appendCh.CompareAndSwap(p, nil) {
		close(*p)
	}
	if p := l.notify.Load(); p != nil {
		for _, ch := range *p {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
