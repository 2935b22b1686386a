package autoswitch

import (
	"context"
	"fmt"
	"time"

	"github.com/rocketkv/rocketkv/ha"
)

// write answers the slave's handshakes and streams the CommitLog to it
// from where its first report asks, one epoch at a time.
func (s *Server) write(ctx context.Context, c *slave) {
	var (
		buf       []byte
		lastWrite = time.Now()
		epoch     EpochEntry // the epoch of the next transfer's bytes
	)
	for ctx.Err() == nil {
		c.mu.Lock()
		state, due, request, next, fromLast := c.state, c.handshakeDue, c.request, c.next, c.fromLastFile
		c.handshakeDue = false
		c.mu.Unlock()

		if due {
			h := MasterHandshake{MaxOffset: s.cfg.Log.MaxOffset(), LastEpoch: s.cfg.Epochs.LastEpoch(), Entries: s.cfg.Epochs.Entries()}
			if len(h.Entries) > MaxHandshakeEntries {
				s.log.Warn().Int("entries", len(h.Entries)).Msg("more epoch entries than a handshake carries; sending the newest")
			}
			if err := s.send(c, AppendMasterHandshake(buf[:0], h), nil); err != nil {
				s.drop(c, err)
				return
			}
			lastWrite = time.Now()
			s.log.Info().Str("slave", c.addr).Int64("maxOffset", h.MaxOffset).Int32("lastEpoch", h.LastEpoch).
				Int("epochs", len(h.Entries)).Msg("handshake answered")
		}
		if state == StateHandshake || request < 0 {
			select {
			case <-ctx.Done():
			case <-c.wake:
			}
			continue
		}

		if next < 0 {
			next = request
			if request == 0 {
				// A slave with nothing starts at a segment's start: the
				// newest (syncFromLastFile) or the first.
				if fromLast {
					end := s.cfg.Log.MaxOffset()
					next = end - end%s.cfg.Log.SegmentSize()
				} else {
					next = s.cfg.Log.MinOffset()
				}
			}
			e, ok := s.cfg.Epochs.EntryByOffset(next)
			if first, fok := s.cfg.Epochs.FirstEntry(); !ok && fok && next < first.StartOffset {
				// Records older than the epoch file (a store that ran
				// before controller mode): the first epoch labels them.
				// RocketMQ's master finds no epoch there and sends
				// nothing, ever.
				e, ok = first, true
			}
			if !ok {
				err := fmt.Errorf("no epoch entry holds offset %d, where the slave asks to start (epochs %v)", next, s.cfg.Epochs.Entries())
				s.log.Error().Err(err).Str("slave", c.addr).Msg("cannot transfer to the slave")
				s.drop(c, err)
				return
			}
			epoch = e
			c.mu.Lock()
			if c.state != StateTransfer || c.request != request || c.next >= 0 {
				c.mu.Unlock() // a new handshake came: start over
				continue
			}
			c.next = next
			c.mu.Unlock()
			s.log.Info().Str("slave", c.addr).Int64("from", next).Int32("epoch", e.Epoch).Msg("transferring the CommitLog to the slave")
		}
		if epoch.EndOffset == NoEnd {
			// The master may have begun a new epoch since.
			if e, ok := s.cfg.Epochs.Entry(epoch.Epoch); ok {
				epoch = e
			}
		}
		if next >= epoch.EndOffset {
			e, ok := s.cfg.Epochs.NextEntry(epoch.Epoch)
			if !ok {
				err := fmt.Errorf("no epoch after %d (which ends at %d) in the epoch file", epoch.Epoch, epoch.EndOffset)
				s.log.Error().Err(err).Str("slave", c.addr).Msg("cannot transfer to the slave")
				s.drop(c, err)
				return
			}
			epoch = e
			continue
		}
		size := s.cfg.TransferBatchSize
		if epoch.EndOffset != NoEnd {
			// A transfer never crosses an epoch's end.
			size = int(min(int64(size), epoch.EndOffset-next))
		}
		v, err := s.cfg.Log.ReadStream(next, size)
		if err != nil {
			s.drop(c, fmt.Errorf("read the CommitLog at %d for the slave (retention may have deleted it): %w", next, err))
			return
		}
		if len(v.Data) == 0 {
			v.Release()
			s.mu.Lock()
			s.caughtUpLocked(c.idLoad(), s.cfg.Now())
			s.mu.Unlock()
			if time.Since(lastWrite) >= s.cfg.HeartbeatInterval {
				h := s.header(next, 0, epoch)
				if err := s.send(c, AppendTransferHeader(buf[:0], h), nil); err != nil {
					s.drop(c, err)
					return
				}
				lastWrite = time.Now()
			}
			wctx, cancel := context.WithTimeout(ctx, max(s.cfg.HeartbeatInterval-time.Since(lastWrite), time.Millisecond))
			done := make(chan struct{})
			go func() {
				// A new handshake must not wait for the next record. The
				// wake is taken, not put back: the loop's top sees the
				// handshake (handshakeDue), and a wake put back would be
				// taken here again at once, the writer of an idle slave
				// then reading the log in a loop for good (a wake left
				// from the handshake, whose first report's wake can land
				// after the writer saw the report, did that).
				defer close(done)
				select {
				case <-c.wake:
					cancel()
				case <-wctx.Done():
				}
			}()
			_ = s.cfg.Log.WaitBeyond(wctx, next)
			cancel()
			<-done
			continue
		}
		c.mu.Lock()
		c.lastMax, c.lastTransfer = s.cfg.Log.MaxOffset(), s.cfg.Now()
		if c.state != StateTransfer || c.next != next {
			c.mu.Unlock() // a new handshake came: start over
			v.Release()
			continue
		}
		c.next = next + int64(len(v.Data))
		c.mu.Unlock()
		h := s.header(next, len(v.Data), epoch)
		buf = AppendTransferHeader(buf[:0], h)
		err = s.send(c, buf, v.Data)
		c.flow.Add(len(v.Data))
		next += int64(len(v.Data))
		v.Release()
		if err != nil {
			s.drop(c, err)
			return
		}
		lastWrite = time.Now()
	}
}

func (c *slave) idLoad() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// header is the transfer header of size bytes at offset in epoch e.
func (s *Server) header(offset int64, size int, e EpochEntry) TransferHeader {
	return TransferHeader{BodySize: int32(size), Offset: offset, Epoch: e.Epoch, EpochStartOffset: e.StartOffset, ConfirmOffset: s.ConfirmOffset()}
}

// send writes one frame within the housekeeping interval.
func (s *Server) send(c *slave, header, body []byte) error {
	return ha.WriteToSlave(c.conn, s.cfg.HousekeepingInterval, header, body)
}
