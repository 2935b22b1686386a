package kvindex

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
)

// Layout names: the suffix of a layout's progress key and the name in
// log lines.
const (
	// LayoutKV is the ConsumeQueue in this database (CQ).
	LayoutKV = "kv"
	// LayoutFile is a ConsumeQueue outside it (RocketMQ's file layout).
	LayoutFile = "file"
)

// layout is one ConsumeQueue layout the dispatcher writes. The one in the
// database (kv) is written in the dispatch batch, atomically with the
// dispatched offset and its progress; the file one is written before the
// batch and its progress is recorded only after a Flush made it durable.
type layout struct {
	name  string
	store cq.Store
	inDB  bool // the CQ of this database, written in the dispatch batch
}

// progressName is the meta key holding how far the layout is complete.
func (l layout) progressName() string { return metaCQWritten + l.name }

// catchUpBatch is how many entries a catch-up hands to one Put, and
// catchUpMark how many CommitLog bytes it reads between progress marks
// (a crash in the middle resumes from the last mark).
const (
	catchUpBatch = 4096
	catchUpMark  = 64 << 20
)

// layoutProgress returns how far l is known to hold every entry: its
// recorded progress, or, for a store written before progress was
// recorded, what its entries show.
func (d *Dispatcher) layoutProgress(l layout, hadDispatched bool, from int64) (int64, error) {
	v, ok, err := d.opts.DB.metaInt64(l.progressName())
	if err != nil || ok {
		return v, err
	}
	if !hadDispatched {
		// A store never dispatched (new, or an Apache RocketMQ store opened
		// for the first time): dispatch starts at the CommitLog's minimum
		// and writes every layout from there.
		return from, nil
	}
	// Written by a build that did not record progress: RocketMQ's rule,
	// the end of the newest record any of its queues holds.
	end, n, err := newestRecordEnd(l.store)
	if err != nil {
		return 0, fmt.Errorf("find how far the %s ConsumeQueue goes: %w", l.name, err)
	}
	if n == 0 {
		return 0, nil
	}
	if l.name == LayoutFile && d.opts.Log.RecoveryInfo().Abnormal {
		// It may have lost writes its files never flushed; the CommitLog's
		// recovery scan starts early enough to cover them.
		end = min(end, d.opts.Log.RecoveryInfo().FirstScanned)
	}
	return end, nil
}

// newestRecordEnd returns the largest end of a queue's newest entry over
// every queue of s, and how many queues s holds.
func newestRecordEnd(s cq.Store) (end int64, queues int, err error) {
	var qerr error
	err = s.Queues(func(topic string, qid int32) bool {
		queues++
		hi, err := s.MaxOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		lo, err := s.MinOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		if hi <= lo {
			return true
		}
		es, err := s.Get(topic, qid, hi-1, 1)
		if err != nil {
			qerr = err
			return false
		}
		if len(es) == 1 {
			end = max(end, es[0].End())
		}
		return true
	})
	return end, queues, errors.Join(err, qerr)
}

// catchUpLayouts brings every written layout up to from, the dispatched
// offset dispatch resumes at, before dispatch starts: a layout that was
// not written for a while (double-write turned on, or reads switched back
// to a layout that was left behind) or lost unflushed writes in a power
// failure gets the entries of the CommitLog it misses. A layout that
// misses records the CommitLog no longer holds is rebuilt from the
// CommitLog's minimum; queues whose records are all gone then stand
// where a complete layout says.
func (d *Dispatcher) catchUpLayouts(from, minOff int64, hadDispatched bool) error {
	type lagging struct {
		layout
		done int64
	}
	var behind []lagging
	var complete []layout
	for _, l := range d.layouts {
		done, err := d.layoutProgress(l, hadDispatched, from)
		if err != nil {
			return err
		}
		if done >= from {
			complete = append(complete, l)
			continue
		}
		behind = append(behind, lagging{l, done})
	}
	// The most advanced first, so the others can take queue starts from it.
	slices.SortFunc(behind, func(a, b lagging) int { return cmp.Compare(b.done, a.done) })
	for _, l := range behind {
		start := l.done
		if start < minOff {
			if err := d.rebuildLayout(l.layout); err != nil {
				return err
			}
			start = minOff
		}
		d.log.Warn().Str("layout", l.name).Int64("from", start).Int64("to", from).
			Msg("ConsumeQueue layout is behind the dispatched offset; writing what it misses from the CommitLog")
		if err := d.fillLayout(l.layout, start, from); err != nil {
			return err
		}
		// Retention may have run while it was not written.
		if err := l.store.CorrectMin(minOff); err != nil {
			return fmt.Errorf("correct %s ConsumeQueue minima to %d: %w", l.name, minOff, err)
		}
		if len(complete) > 0 {
			if err := seedLayout(l.layout, complete[0]); err != nil {
				return err
			}
		} else if l.done < minOff {
			d.log.Warn().Str("layout", l.name).Msg("no complete ConsumeQueue layout to take queue starts from: queues whose records retention deleted restart at offset 0")
		}
		complete = append(complete, l.layout)
	}
	for _, l := range d.layouts {
		if err := d.opts.DB.setMetaInt64(l.progressName(), from); err != nil {
			return err
		}
	}
	return nil
}

// rebuildLayout drops every queue of l: it misses records the CommitLog no
// longer holds, so its entries cannot be completed and are written again.
func (d *Dispatcher) rebuildLayout(l layout) error {
	type qk struct {
		topic string
		qid   int32
	}
	var queues []qk
	if err := l.store.Queues(func(topic string, qid int32) bool {
		queues = append(queues, qk{topic, qid})
		return true
	}); err != nil {
		return fmt.Errorf("list the queues of the %s ConsumeQueue: %w", l.name, err)
	}
	if len(queues) > 0 {
		d.log.Warn().Str("layout", l.name).Int("queues", len(queues)).
			Msg("ConsumeQueue layout misses records the CommitLog no longer holds; rebuilding it")
	}
	for _, q := range queues {
		if err := l.store.DeleteQueue(q.topic, q.qid); err != nil {
			return fmt.Errorf("rebuild the %s ConsumeQueue: %w", l.name, err)
		}
	}
	return nil
}

// fillLayout writes to l the entries of the CommitLog records in
// [from, to), and records l's progress every catchUpMark bytes and at the
// end. Hooks and the key index are not run: they are complete up to the
// dispatched offset already.
func (d *Dispatcher) fillLayout(l layout, from, to int64) error {
	r := d.opts.Log.NewReader(from)
	defer r.Close()
	var entries []cq.Dispatch
	mark := from
	put := func() error {
		if len(entries) > 0 {
			if err := l.store.Put(entries); err != nil {
				return fmt.Errorf("write %d entries to the %s ConsumeQueue: %w", len(entries), l.name, err)
			}
			clear(entries)
			entries = entries[:0]
		}
		return nil
	}
	record := func(at int64) error {
		if err := put(); err != nil {
			return err
		}
		if err := l.store.Flush(); err != nil {
			return fmt.Errorf("flush the %s ConsumeQueue: %w", l.name, err)
		}
		mark = at
		return d.opts.DB.setMetaInt64(l.progressName(), at)
	}
	for r.Offset() < to {
		e, err := r.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the CommitLog at %d for the %s ConsumeQueue: %w", r.Offset(), l.name, err)
		}
		m, err := commitlog.DecodeWith(e.Data, d.decode)
		if err != nil {
			return fmt.Errorf("decode record at %d: %w", e.Offset, err)
		}
		if ent, ok := d.entryOf(&m, e); ok {
			entries = append(entries, ent)
		}
		if len(entries) >= catchUpBatch {
			if err := put(); err != nil {
				return err
			}
		}
		if r.Offset()-mark >= catchUpMark && r.Offset() < to {
			if err := record(r.Offset()); err != nil {
				return err
			}
			d.log.Info().Str("layout", l.name).Int64("at", mark).Int64("to", to).Msg("ConsumeQueue catch-up progress")
		}
	}
	return record(to)
}

// seedLayout makes every queue that l lacks and ref holds with offsets
// stand at ref's MaxOffset: its records are all gone from the CommitLog,
// so no entry of it could be written, but its numbering goes on.
func seedLayout(l, ref layout) error {
	type seeder interface {
		SeedStart(topic string, queueID int32, offset int64) error
	}
	var starts []QueueStart
	var qerr error
	err := ref.store.Queues(func(topic string, qid int32) bool {
		hi, err := ref.store.MaxOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		if hi <= 0 {
			return true
		}
		have, err := l.store.MaxOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		if have == 0 {
			starts = append(starts, QueueStart{Topic: topic, QueueID: qid, Offset: hi})
		}
		return true
	})
	if err := errors.Join(err, qerr); err != nil {
		return fmt.Errorf("find queues the %s ConsumeQueue lacks: %w", l.name, err)
	}
	if len(starts) == 0 {
		return nil
	}
	switch s := l.store.(type) {
	case *CQ:
		return s.SeedStarts(starts)
	case seeder:
		for _, st := range starts {
			if err := s.SeedStart(st.Topic, st.QueueID, st.Offset); err != nil {
				return fmt.Errorf("seed %s/%d in the %s ConsumeQueue: %w", st.Topic, st.QueueID, l.name, err)
			}
		}
		return nil
	default:
		return fmt.Errorf("the %s ConsumeQueue lacks %d queues the %s one holds and cannot be given their starts", l.name, len(starts), ref.name)
	}
}

// recordFileProgress flushes the file layouts and records that they hold
// every entry below done (an offset read before the flush: everything
// dispatched below it was written to them before it).
func (d *Dispatcher) recordFileProgress(done int64, opt *pebble.WriteOptions) error {
	for _, l := range d.layouts {
		if l.inDB {
			continue
		}
		if err := l.store.Flush(); err != nil {
			return fmt.Errorf("flush the %s ConsumeQueue: %w", l.name, err)
		}
		if err := d.opts.DB.pdb.Set(metaKey(l.progressName()), putInt64(done), opt); err != nil {
			return fmt.Errorf("record the %s ConsumeQueue's progress: %w", l.name, err)
		}
	}
	return nil
}
