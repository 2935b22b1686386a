package commitlog

import "context"

// A replication confirm limit (RocketMQ's confirm offset in controller
// mode) bounds what confirmed readers see, beside the flushed offset under
// SyncFlush:
//
//	MinOffset        ConfirmedOffset            MaxOffset (writePos)
//	   |                   |                          |
//	   | record | record | rec|ord | record | record |
//	   |<- dispatched ---->|<-- written, not shown -->|
//	                       ^ min(limit, flushed under SyncFlush, writePos)
//
// A master whose sync state set must all hold a record before consumers
// see it (allAckInSyncStateSet) sets the limit to the lowest offset its
// in-sync slaves acknowledged; a slave sets it to the confirm offset its
// master last sent. The limit may fall mid-record (slaves acknowledge
// every byte they hold): a record that crosses it waits for it. A limit
// below a reader's position holds the reader where it is; nothing already
// read is taken back. ReadUncommitted lifts the limit as it lifts the
// flushed bound.

// noConfirmLimit is the limit's value when none is set.
const noConfirmLimit = -1

// SetConfirmLimit bounds the records confirmed readers (NewConfirmedReader)
// see to those ending at or before off; a negative off lifts the bound.
// Readers waiting for confirmed data wake when it moves. A limit at or
// above zero is also the checkpoint's ConfirmPhyOffset from the next
// checkpoint write, where Checkpoint reads it back after a restart
// (RocketMQ's confirmPhyOffset).
func (l *Log) SetConfirmLimit(off int64) {
	if off < 0 {
		off = noConfirmLimit
	}
	if l.confirmLimit.Swap(off) == off {
		return
	}
	if off >= 0 {
		l.ckMu.Lock()
		l.ck.ConfirmPhyOffset = off
		l.ckMu.Unlock()
	}
	l.confirmMu.Lock()
	ch := l.confirmCh
	l.confirmCh = make(chan struct{})
	l.confirmMu.Unlock()
	close(ch)
}

// ConfirmLimit returns the limit SetConfirmLimit set, or -1 when there is
// none.
func (l *Log) ConfirmLimit() int64 { return l.confirmLimit.Load() }

// LimitedEnd is the write position bounded by the confirm limit when one
// is set and in force (not with Config.ReadUncommitted): how far
// confirmed readers will go once everything written is flushed. It may
// fall inside a record.
func (l *Log) LimitedEnd() int64 {
	end := l.writePos.Load()
	if lim := l.confirmLimit.Load(); lim >= 0 && !l.cfg.ReadUncommitted {
		end = min(end, lim)
	}
	return end
}

// confirmChanged returns a channel closed at the next change of the
// confirm limit.
func (l *Log) confirmChanged() <-chan struct{} {
	l.confirmMu.Lock()
	defer l.confirmMu.Unlock()
	return l.confirmCh
}

// waitConfirmedBeyond blocks until ConfirmedOffset() > offset: while the
// confirm limit holds offset back, until the limit moves; otherwise until
// a record past offset is written (and flushed, under SyncFlush). It
// returns ctx's error when ctx ends and ErrClosed when the log closes
// first.
func (l *Log) waitConfirmedBeyond(ctx context.Context, offset int64) error {
	for {
		changed := l.confirmChanged()
		if l.ConfirmedOffset() > offset {
			return nil
		}
		if lim := l.confirmLimit.Load(); lim >= 0 && lim <= offset && !l.cfg.ReadUncommitted {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-l.stop:
				return ErrClosed
			}
		}
		var err error
		if l.stopsAtFlushed() {
			err = l.waitFlushedBeyond(ctx, offset)
		} else {
			err = l.WaitBeyond(ctx, offset)
		}
		if err != nil {
			return err
		}
		if l.ConfirmedOffset() > offset {
			return nil
		}
		// The limit holds the new records back: wait for it to move.
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.stop:
			return ErrClosed
		}
	}
}
