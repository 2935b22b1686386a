package kvindex

import (
	"errors"
	"fmt"

	"github.com/rocketkv/rocketkv/cq"
)

// A replica's CommitLog is written by its master, whose ConsumeQueue can
// change in ways the log does not carry: a topic deleted and created
// again numbers its queues from 0 anew, while the replica still holds
// the old topic's entries. Put keeps an entry below a queue's end as
// already there (a range dispatched again), so on the replica the new
// topic's messages would never be indexed: a consumer of the slave, or
// of the slave once promoted, would get the deleted messages and never
// the ones its master acknowledged.
//
// A record dispatched again names the very record the entry at its queue
// offset names, or an earlier one; a queue's entries are in CommitLog
// order. So an entry below its queue's end whose record lies past the
// record of the queue's last entry starts the queue anew: every entry
// the queue holds is of records appended before it, the old topic's.
// With DispatcherOptions.Replica the dispatcher then indexes the records
// before it, drops the queue from every layout and goes on from that
// record, which starts the queue again at its offset (the master's). A
// queue that gets no record of the new topic keeps the old entries: what
// was deleted on the master stays readable there until then, unless the
// replica copied its master's topic table while the topic was gone
// (DeleteReplicaTopic, replicatopic.go). Before the
// drop the dispatcher tells DispatcherOptions.QueueRestarted, where the
// broker drops the consumer offsets and pop state of the old queue, and
// drops the queue's copies of a compacted topic, as the master's deletion
// of the topic dropped them.
//
// Every layout written is looked at, and a layout that catches up from
// the CommitLog alone (fillLayout) drops the queue at the restart as
// well (putLayout). So a crash in between is safe
// (TestReplicaQueueRestartSurvivesSIGKILL): a start whose dispatch
// resumes at the record finds the queue gone and indexes the record; a
// layout that catches up from an earlier point fills the queue with the
// old numbering again, and dispatch meets the restart there again.
//
//	log:     ... T/0@3 (old) ... | T/0@0 (new) T/0@1 ...
//	                              ^ restart: T/0 dropped, then indexed anew

// queueRestart is a record whose entry starts its queue anew.
type queueRestart struct {
	topic   string
	queueID int32
	offset  int64 // the entry's queue offset
	phy     int64 // its record's CommitLog offset
	end     int64 // the queue's end before it
	lastPhy int64 // the record of the queue's last entry
}

// errStopBeforeRestart ends a batch that holds a queueRestart after its
// first record, written nowhere: the records before it are read again on
// their own (Dispatcher.stopAt).
var errStopBeforeRestart = errors.New("a queue restarts within the dispatch batch")

// errQueueRestarted ends a batch that begins with a queueRestart, written
// nowhere, after the queue was dropped: it is read again.
var errQueueRestarted = errors.New("a queue restarted at the dispatch batch's first record")

// findRestart returns the first entry of entries (in CommitLog order) that
// starts its queue anew in any of the layouts written, if any: after a
// crash one layout may have the queue dropped and another, which caught
// up from an earlier point, the old entries again.
func (d *Dispatcher) findRestart(entries []cq.Dispatch) (queueRestart, bool, error) {
	first, at := queueRestart{}, -1
	for _, l := range d.layouts {
		r, i, found, err := findRestartIn(l.store, entries)
		if err != nil {
			return queueRestart{}, false, err
		}
		if found && (at < 0 || i < at) {
			first, at = r, i
		}
	}
	return first, at >= 0, nil
}

// findRestartIn returns the first entry of entries (in CommitLog order)
// that starts its queue anew in st, if any, and its index in entries. It
// reads each queue's end, and the last entry of a queue one of entries
// lies below.
func findRestartIn(st cq.Store, entries []cq.Dispatch) (queueRestart, int, bool, error) {
	type queueState struct {
		end     int64
		lastPhy int64 // -1: not read yet
	}
	queues := map[qkey]*queueState{}
	for i := range entries {
		e := &entries[i]
		q := queueIDOf(e.Topic, e.QueueID)
		s := queues[q]
		if s == nil {
			end, err := st.MaxOffset(e.Topic, e.QueueID)
			if err != nil {
				return queueRestart{}, 0, false, fmt.Errorf("look for a restarted queue: %w", err)
			}
			s = &queueState{end: end, lastPhy: -1}
			queues[q] = s
		}
		if e.Entry.QueueOffset >= s.end {
			// Put stores it at the end (an entry above the end too).
			s.end++
			s.lastPhy = e.Entry.PhyOffset
			continue
		}
		if s.lastPhy < 0 {
			last, err := st.Get(e.Topic, e.QueueID, s.end-1, 1)
			if err != nil {
				return queueRestart{}, 0, false, fmt.Errorf("look for a restarted queue: %w", err)
			}
			if len(last) == 0 {
				// No entry to compare with (the queue emptied by
				// retention): keep Put's rule.
				continue
			}
			s.lastPhy = last[0].PhyOffset
		}
		if e.Entry.PhyOffset > s.lastPhy {
			return queueRestart{topic: e.Topic, queueID: e.QueueID, offset: e.Entry.QueueOffset,
				phy: e.Entry.PhyOffset, end: s.end, lastPhy: s.lastPhy}, i, true, nil
		}
	}
	return queueRestart{}, 0, false, nil
}

// putLayout writes entries to one layout as dispatch would: under
// Replica, a queue that restarts among them is dropped after the entries
// before its restart are written, and the rest follow. A layout that
// catches up from the CommitLog alone (fillLayout, no hooks, no batch of
// the index to split) needs no more: the records stay in order.
func (d *Dispatcher) putLayout(l layout, entries []cq.Dispatch) error {
	for d.opts.Replica && len(entries) > 0 {
		r, i, found, err := findRestartIn(l.store, entries)
		if err != nil {
			return err
		}
		if !found {
			break
		}
		if err := l.store.Put(entries[:i]); err != nil {
			return err
		}
		if err := l.drop(r); err != nil {
			return err
		}
		d.log.Warn().Str("layout", l.name).Str("topic", r.topic).Int32("queue", r.queueID).Int64("offset", r.offset).
			Int64("phy", r.phy).Msg("a replicated record starts its queue anew in a ConsumeQueue catching up: the queue's old entries are dropped")
		entries = entries[i:]
	}
	return l.store.Put(entries)
}

// checkRestart is dispatchBatch's look for a restarted queue, before it
// writes anything: nil when the batch is to be written as it is.
// batchStart is the CommitLog offset the batch began at.
func (d *Dispatcher) checkRestart(entries []cq.Dispatch, batchStart int64) error {
	r, found, err := d.findRestart(entries)
	if err != nil || !found {
		return err
	}
	if r == d.lastRestart {
		// The queue was dropped for this very record and still lies
		// past it: dropping it again would not help. Keep Put's rule.
		d.log.Error().Str("topic", r.topic).Int32("queue", r.queueID).Int64("offset", r.offset).Int64("phy", r.phy).
			Msg("a queue dropped to start anew still holds entries past the record starting it; the record is not indexed")
		return nil
	}
	if r.phy > batchStart {
		d.stopAt = r.phy
		return errStopBeforeRestart
	}
	if hook := d.opts.QueueRestarted; hook != nil {
		// Before the drop: after it, a start would not meet the restart
		// again.
		if err := hook(r.topic, r.queueID); err != nil {
			return fmt.Errorf("queue %s/%d restarted at %d by the record at %d: %w", r.topic, r.queueID, r.offset, r.phy, err)
		}
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	if err := d.dropQueue(d.layouts, r.topic, r.queueID, func(l layout) error { return l.drop(r) }); err != nil {
		return err
	}
	d.lastRestart, d.stopAt = r, 0
	d.step(StepQueueRestarted)
	d.log.Warn().Str("topic", r.topic).Int32("queue", r.queueID).Int64("offset", r.offset).Int64("phy", r.phy).
		Int64("end", r.end).Int64("lastPhy", r.lastPhy).
		Msg("a replicated record starts its queue anew below the queue's end (the topic was deleted and created again on the master): the queue's old entries are dropped")
	return errQueueRestarted
}

// dropQueue drops one queue of topic from layouts (dropEntries deletes
// its entries from one): its compacted copies first, so that a crash
// after them leaves the entries, which meet the drop again, then its
// entries, then its cached offsets. The caller holds writeMu, as the
// batches' copies are written under it.
func (d *Dispatcher) dropQueue(layouts []layout, topic string, queueID int32, dropEntries func(layout) error) error {
	if c := d.opts.Compaction; c != nil {
		if err := c.DropQueue(topic, queueID); err != nil {
			return err
		}
	}
	for _, l := range layouts {
		if err := dropEntries(l); err != nil {
			return err
		}
	}
	if d.opts.Offsets != nil {
		d.opts.Offsets.Forget(topic, queueID)
	}
	return nil
}

// drop deletes from l the queue r restarts.
func (l layout) drop(r queueRestart) error {
	if err := l.store.DeleteQueue(r.topic, r.queueID); err != nil {
		return fmt.Errorf("drop %s/%d, restarted at %d by the record at %d, from the %s ConsumeQueue: %w",
			r.topic, r.queueID, r.offset, r.phy, l.name, err)
	}
	return nil
}
