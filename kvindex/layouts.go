package kvindex

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// catchUpBatch is how many entries a catch-up hands to one Put.
const catchUpBatch = 4096

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

// LayoutProgress returns how far the ConsumeQueue layout name (LayoutKV
// or LayoutFile) is recorded complete: every CommitLog record before
// offset has its entry there. ok is false when the store never recorded
// it (the layout was never written by this build).
func (d *DB) LayoutProgress(name string) (offset int64, ok bool, err error) {
	return d.metaInt64(metaCQWritten + name)
}

// rebuildStartName is the meta name of a queue's start in a layout being
// rebuilt.
func rebuildStartName(layout string, st QueueStart) string {
	return metaRebuildStart + layout + "." + strconv.Itoa(int(st.QueueID)) + "." + st.Topic
}

// parseRebuildStart reads a rebuild start: name is its meta name after
// metaRebuildStart ("<layout>.<queueId>.<topic>"), value its queue offset.
func parseRebuildStart(name string, value []byte) (QueueStart, string, error) {
	layout, rest, ok := strings.Cut(name, ".")
	qid, topic, ok2 := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(qid, 10, 32)
	if !ok || !ok2 || layout == "" || topic == "" || err != nil || n < 0 {
		return QueueStart{}, "", fmt.Errorf("rebuild start %q: not <layout>.<queueId>.<topic>: %w", name, ErrBadKey)
	}
	off, err := getInt64(value)
	if err != nil || off < 0 {
		return QueueStart{}, "", fmt.Errorf("rebuild start %q: value %x: %w", name, value, ErrBadKey)
	}
	return QueueStart{Topic: topic, QueueID: int32(n), Offset: off}, layout, nil
}

// recordRebuildStarts records, synced, where the queues of a layout stand
// before its rebuild drops them.
func (d *DB) recordRebuildStarts(layout string, starts []QueueStart) error {
	b := d.pdb.NewBatch()
	defer b.Close()
	for _, st := range starts {
		if err := b.Set(metaKey(rebuildStartName(layout, st)), putInt64(st.Offset), nil); err != nil {
			return fmt.Errorf("record where the %s ConsumeQueue's queues stand: %w", layout, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("record where the %s ConsumeQueue's queues stand: %w", layout, err)
	}
	return nil
}

// rebuildStarts returns the queue starts a rebuild of layout recorded and
// did not complete.
func (d *DB) rebuildStarts(layout string) ([]QueueStart, error) {
	lo := metaKey(metaRebuildStart + layout + ".")
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("read the rebuild starts of the %s ConsumeQueue: %w", layout, err)
	}
	var out []QueueStart
	for it.First(); it.Valid(); it.Next() {
		st, _, err := parseRebuildStart(string(it.Key()[len(metaKey(metaRebuildStart)):]), it.Value())
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("read the rebuild starts of the %s ConsumeQueue: %w", layout, err)
		}
		out = append(out, st)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read the rebuild starts of the %s ConsumeQueue: %w", layout, err)
	}
	return out, nil
}

// completeLayout records, in one synced batch, that layout holds every
// entry below end and drops the starts a rebuild of it recorded.
func (d *DB) completeLayout(layout string, end int64) error {
	b := d.pdb.NewBatch()
	defer b.Close()
	lo := metaKey(metaRebuildStart + layout + ".")
	err := errors.Join(b.Set(metaKey(metaCQWritten+layout), putInt64(end), nil), b.DeleteRange(lo, prefixEnd(lo), nil))
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("record the %s ConsumeQueue complete below %d: %w", layout, end, err)
	}
	return nil
}

// topicsDeleted returns the recorded topic deletions, dropping those at or
// below minOff (no record of them is left to put back, and a layout that
// has not caught up past them is rebuilt anyway) and moving back to end
// those past the CommitLog's end (end, recovered after a crash, is below
// a deletion recorded before it: every record left below end came before
// the deletion, and those appended from end on are the topic's again).
func (d *DB) topicsDeleted(minOff, end int64) (map[string]int64, error) {
	lo := metaKey(metaTopicDeleted)
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("read topic deletions: %w", err)
	}
	out := map[string]int64{}
	b := d.pdb.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		at, err := getInt64(it.Value())
		if err != nil {
			key := append([]byte(nil), it.Key()...) // Close invalidates it
			_ = it.Close()
			return nil, fmt.Errorf("read topic deletion %q: %w", key, err)
		}
		if at <= minOff {
			if err := b.Delete(append([]byte(nil), it.Key()...), nil); err != nil {
				_ = it.Close()
				return nil, err
			}
			continue
		}
		if at > end {
			at = end
			if err := b.Set(append([]byte(nil), it.Key()...), putInt64(at), nil); err != nil {
				_ = it.Close()
				return nil, err
			}
		}
		out[string(it.Key()[len(lo):])] = at
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read topic deletions: %w", err)
	}
	if b.Empty() {
		return out, nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("forget old topic deletions: %w", err)
	}
	return out, nil
}

// clampProgress moves every layout's recorded progress, written this run
// or not, back to the CommitLog's end: past it lie records the log lost.
func (d *Dispatcher) clampProgress(end int64) error {
	for _, name := range []string{LayoutKV, LayoutFile} {
		v, ok, err := d.opts.DB.metaInt64(metaCQWritten + name)
		if err != nil {
			return err
		}
		if ok && v > end {
			if err := d.opts.DB.setMetaInt64(metaCQWritten+name, end); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUpLayouts brings every written layout up to from, the dispatched
// offset dispatch resumes at, before dispatch starts: a layout that was
// not written for a while (double-write turned on, or reads switched back
// to a layout that was left behind) or lost unflushed writes in a power
// failure gets the entries of the CommitLog it misses, without the topics
// deleted meanwhile. A layout that misses records the CommitLog no longer
// holds is rebuilt from the CommitLog's minimum; its queues whose records
// are all gone then stand where a complete layout says (or, with none, at
// least where they stood in it). deleted are the recorded topic
// deletions (DB.topicsDeleted).
func (d *Dispatcher) catchUpLayouts(from, minOff, end int64, hadDispatched bool, deleted map[string]int64) error {
	if err := d.clampProgress(end); err != nil {
		return err
	}
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
		// Entries past where it was complete may be of records the log
		// lost since.
		if err := l.store.Truncate(start); err != nil {
			return fmt.Errorf("cut the %s ConsumeQueue at %d: %w", l.name, start, err)
		}
		var own []QueueStart
		if start < minOff {
			var err error
			if own, err = d.rebuildLayout(l.layout); err != nil {
				return err
			}
			if d.opts.AfterRebuildDrop != nil {
				d.opts.AfterRebuildDrop(l.name)
			}
			start = minOff
		} else {
			for topic, at := range deleted {
				// Deleted when the layout held nothing past at: dropping
				// the topic loses none of the entries written after it.
				if at >= l.done {
					if err := l.store.DeleteTopic(topic); err != nil {
						return fmt.Errorf("drop deleted topic %s from the %s ConsumeQueue: %w", topic, l.name, err)
					}
				}
			}
		}
		d.log.Warn().Str("layout", l.name).Int64("from", start).Int64("to", from).
			Msg("ConsumeQueue layout is behind the dispatched offset; writing what it misses from the CommitLog")
		if err := d.fillLayout(l.layout, start, from, newDeletedTopics(deleted, start).withQueues(d.queueBegins), l.done < minOff); err != nil {
			return err
		}
		// Retention may have run while it was not written.
		if err := l.store.CorrectMin(minOff); err != nil {
			return fmt.Errorf("correct %s ConsumeQueue minima to %d: %w", l.name, minOff, err)
		}
		if l.done < minOff {
			if err := d.seedRebuilt(l.layout, complete, own, from, minOff); err != nil {
				return err
			}
		}
		// Seeds and minima reach the disk before the layout is called
		// complete.
		if err := l.store.Flush(); err != nil {
			return fmt.Errorf("flush the %s ConsumeQueue: %w", l.name, err)
		}
		complete = append(complete, l.layout)
	}
	for _, l := range d.layouts {
		if err := d.opts.DB.completeLayout(l.name, from); err != nil {
			return err
		}
	}
	return nil
}

// seedRebuilt gives the queues of a rebuilt layout whose records are all
// gone their numbering back: from a layout complete up to from (written
// this run), or from the other layout when this run does not write it and
// its recorded progress reaches past the CommitLog's minimum, else from
// where they stood in the layout before it was rebuilt (own).
func (d *Dispatcher) seedRebuilt(l layout, complete []layout, own []QueueStart, from, minOff int64) error {
	if len(complete) > 0 {
		return seedLayout(l, complete[0].store, complete[0].name)
	}
	other := LayoutKV
	if l.inDB {
		other = LayoutFile
	}
	v, ok, err := d.opts.DB.metaInt64(metaCQWritten + other)
	if err != nil {
		return err
	}
	switch {
	case !ok || v < minOff:
	case !l.inDB:
		return seedLayout(l, d.opts.DB.ConsumeQueue(0), "kv (not written this run)")
	case d.opts.OpenFileLayout != nil && len(d.files) == 0:
		files, err := d.opts.OpenFileLayout()
		if err != nil {
			return fmt.Errorf("open the file ConsumeQueue for the numbering of the rebuilt kv one: %w", err)
		}
		err = seedLayout(l, files, "file (not written this run)")
		return errors.Join(err, files.Close())
	}
	if len(own) > 0 {
		d.log.Warn().Str("layout", l.name).Int("queues", len(own)).
			Msg("no complete ConsumeQueue layout to take queue numbering from: queues whose records are all gone keep where they stood in this one; messages that came and went while it was not written are not counted")
	}
	return seedStarts(l, own)
}

// rebuildLayout drops every queue of l: it misses records the CommitLog no
// longer holds, so its entries cannot be completed and are written again.
// It returns where each queue stood, for seeding when no other layout
// knows.
func (d *Dispatcher) rebuildLayout(l layout) ([]QueueStart, error) {
	// A rebuild interrupted by a crash recorded where the queues stood
	// before it dropped them; what it wrote since stands as far or
	// further.
	prior, err := d.opts.DB.rebuildStarts(l.name)
	if err != nil {
		return nil, err
	}
	at := make(map[QueueStart]int, len(prior))
	queues := prior
	for i, st := range prior {
		at[QueueStart{Topic: st.Topic, QueueID: st.QueueID}] = i
	}
	var qerr error
	if err := l.store.Queues(func(topic string, qid int32) bool {
		hi, err := l.store.MaxOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		if i, ok := at[QueueStart{Topic: topic, QueueID: qid}]; ok {
			queues[i].Offset = max(queues[i].Offset, hi)
			return true
		}
		queues = append(queues, QueueStart{Topic: topic, QueueID: qid, Offset: hi})
		return true
	}); err != nil || qerr != nil {
		return nil, fmt.Errorf("list the queues of the %s ConsumeQueue: %w", l.name, errors.Join(err, qerr))
	}
	if len(queues) > 0 {
		d.log.Warn().Str("layout", l.name).Int("queues", len(queues)).Int("fromInterruptedRebuild", len(prior)).
			Msg("ConsumeQueue layout misses records the CommitLog no longer holds; rebuilding it")
	}
	// Recorded before the queues are dropped, so a crash from here on
	// still knows where they stood.
	if err := d.opts.DB.recordRebuildStarts(l.name, queues); err != nil {
		return nil, err
	}
	if kv, ok := l.store.(*CQ); ok {
		if err := kv.DeleteAll(); err != nil {
			return nil, fmt.Errorf("rebuild the %s ConsumeQueue: %w", l.name, err)
		}
		return queues, nil
	}
	dropped := map[string]bool{}
	for _, q := range queues {
		if dropped[q.Topic] {
			continue
		}
		dropped[q.Topic] = true
		if err := l.store.DeleteTopic(q.Topic); err != nil {
			return nil, fmt.Errorf("rebuild the %s ConsumeQueue: %w", l.name, err)
		}
	}
	return queues, nil
}

// fillLayout writes to l the entries of the CommitLog records in
// [from, to), leaving out the records of deleted topics below their
// deletion, and records l's progress every CatchUpMarkBytes and at the
// end (a rebuild only at the end: it is not resumable before its seeds are
// written). Hooks and the key index are not run: they are complete up to
// the dispatched offset already.
func (d *Dispatcher) fillLayout(l layout, from, to int64, deleted *deletedTopics, rebuild bool) error {
	r := d.opts.Log.NewReader(from)
	defer r.Close()
	var entries []cq.Dispatch
	mark := from
	put := func() error {
		if len(entries) > 0 {
			if err := d.putLayout(l, entries); err != nil {
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
		n := len(entries)
		entries = deleted.filter(d.entriesOf(entries, &m, e), n)
		if len(entries) >= catchUpBatch {
			if err := put(); err != nil {
				return err
			}
		}
		if !rebuild && r.Offset()-mark >= d.opts.CatchUpMarkBytes && r.Offset() < to {
			if err := record(r.Offset()); err != nil {
				return err
			}
			d.log.Info().Str("layout", l.name).Int64("at", mark).Int64("to", to).Msg("ConsumeQueue catch-up progress")
		}
	}
	if r.Offset() < to {
		return fmt.Errorf("the CommitLog ends at %d, before %d, while writing the %s ConsumeQueue", r.Offset(), to, l.name)
	}
	if rebuild {
		return put()
	}
	return record(to)
}

// seedLayout makes every queue that l lacks and ref holds with offsets
// stand at ref's MaxOffset: its records are all gone from the CommitLog,
// so no entry of it could be written, but its numbering goes on.
func seedLayout(l layout, ref cq.Store, refName string) error {
	var starts []QueueStart
	var qerr error
	err := ref.Queues(func(topic string, qid int32) bool {
		hi, err := ref.MaxOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		if hi > 0 {
			starts = append(starts, QueueStart{Topic: topic, QueueID: qid, Offset: hi})
		}
		return true
	})
	if err := errors.Join(err, qerr); err != nil {
		return fmt.Errorf("read the queues of the %s ConsumeQueue: %w", refName, err)
	}
	return seedStarts(l, starts)
}

// seedStarts makes each queue of starts that l lacks (MaxOffset 0) stand
// at its offset.
func seedStarts(l layout, starts []QueueStart) error {
	type seeder interface {
		SeedStart(topic string, queueID int32, offset int64) error
	}
	var lacking []QueueStart
	for _, st := range starts {
		have, err := l.store.MaxOffset(st.Topic, st.QueueID)
		if err != nil {
			return fmt.Errorf("find queues the %s ConsumeQueue lacks: %w", l.name, err)
		}
		if have == 0 && st.Offset > 0 {
			lacking = append(lacking, st)
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	switch s := l.store.(type) {
	case *CQ:
		return s.SeedStarts(lacking)
	case seeder:
		for _, st := range lacking {
			if err := s.SeedStart(st.Topic, st.QueueID, st.Offset); err != nil {
				return fmt.Errorf("seed %s/%d in the %s ConsumeQueue: %w", st.Topic, st.QueueID, l.name, err)
			}
		}
		return nil
	default:
		return fmt.Errorf("the %s ConsumeQueue lacks %d queues whose records are gone and cannot be given their starts", l.name, len(lacking))
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
