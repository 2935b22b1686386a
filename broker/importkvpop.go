package broker

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/pop"
)

// popMessage names one message in flight of a group: the topic it was
// read from (a pop-retry topic for a retried one), its queue and offset.
type popMessage struct {
	group, topic string
	queueID      int32
	offset       int64
}

// kvPopState is what a first open read of RocketMQ's KV POP records
// (rmqconfig.ReadPopState), for importKVPop: read is false when this
// start did not read them (the config import was done by an earlier
// start, which stopped before the POP import), and importKVPop reads
// them then.
type kvPopState struct {
	records []rmqconfig.PopRecord
	read    bool
}

// importKVPop adds to batch the POP messages in flight of RocketMQ 5's KV
// POP (rmqconfig.ReadPopState: the popState records of the store's
// kvStore/, as this start's config import read them, or read here when
// it did not: read), as pop checkpoints that the pop service revives like
// its own: once a record's deadline has passed, its message, read through
// the ConsumeQueue of the topic the record names at its offset, is
// re-put to the group's pop-retry topic with reconsumeTimes + 1, as
// RocketMQ's KV revive would. kvStore/ itself is left as it is (rocketkv
// never writes there); the mark importRocketMQPop commits with the batch
// keeps it from being read again.
//
// The records of one pop (same group, queue, popTime, invisible time,
// attempts and attemptId) become one checkpoint, its ckOffset their
// smallest offset: the start offset RocketMQ gave the pop's receipt
// handles whenever the pop's first message is still in flight, so that
// clients ack them here with those handles. A message with several
// records (a change of invisible time or a failed revive interrupted
// between writing the new record and deleting the old) keeps the newest;
// one imported from the revive topic already (an exportPopRecord
// interrupted between writing its check-point and deleting the record)
// is not imported twice.
//
// RocketMQ commits a KV pop's consumer offset at the offset it read from
// and keeps where the next pop reads (its pull offset) in memory only (on
// disk too for a light message queue under config v2, and the config
// import made that the group's pop position: importConfig): a queue's
// messages in flight may lie at or past the committed offset. So that a pop here does
// not hand them out a second time beside their revive, the group's pop
// position on each such queue is moved past the last of them when it is
// not already (the committed offset stays: it only follows acks).
//
// A record that does not decode, or a directory that cannot be read,
// fails the import (and the start): messages in flight are never left
// out.
func (b *Broker) importKVPop(batch *kvindex.PopBatch, imported map[popMessage]bool, read kvPopState) error {
	dir := filepath.Join(b.cfg.StorePathRootDir, rmqconfig.KVPopDir)
	records := read.records
	if !read.read {
		var err error
		if records, err = rmqconfig.ReadPopState(b.cfg.StorePathRootDir); err != nil {
			return err
		}
	}
	if len(records) == 0 {
		return nil
	}
	cks, duplicates := kvPopCheckpoints(records, imported)
	next := map[groupQueue]int64{}
	for i := range cks {
		ck := &cks[i]
		if err := batch.PutCheckpoint(ck); err != nil {
			return fmt.Errorf("import the KV POP records of %s on %s/%d from offset %d (popTime %d) of %s: %w",
				ck.Group, ck.Topic, ck.QueueID, ck.CKOffset, ck.PopTime, dir, err)
		}
		q := groupQueue{ck.Group, ck.Topic, ck.QueueID}
		next[q] = max(next[q], ck.Offsets[len(ck.Offsets)-1]+1)
	}
	moved := 0
	for _, q := range slices.SortedFunc(maps.Keys(next), func(a, b groupQueue) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic), cmp.Compare(a.queueID, b.queueID))
	}) {
		pos, ok, err := b.db.Pop().Position(q.group, q.topic, q.queueID)
		if err != nil {
			return err
		}
		committed, has, err := b.offsets.Get(q.group, q.topic, q.queueID)
		if err != nil {
			return err
		}
		// A pop starts at the larger of the position and the committed
		// offset (or at the position alone, or the committed offset alone).
		start := int64(-1)
		if ok {
			start = pos
		}
		if has {
			start = max(start, committed)
		}
		if start >= next[q] {
			continue
		}
		if err := batch.SetPosition(q.group, q.topic, q.queueID, next[q]); err != nil {
			return err
		}
		moved++
	}
	log := b.component("import")
	log.Info().Str("dir", dir).Int("records", len(records)).Int("checkpoints", len(cks)).
		Int("duplicates", duplicates).Int("positionsMoved", moved).
		Msg("imported the POP messages in flight of the RocketMQ store's KV POP RocksDB")
	return nil
}

// kvPopCheckpoints groups KV POP records into pop checkpoints (see
// importKVPop), leaving out the messages imported holds and all but the
// newest record of a message; it returns the checkpoints, in group,
// topic, queue, ckOffset and popTime order, and how many records it left
// out.
func kvPopCheckpoints(records []rmqconfig.PopRecord, imported map[popMessage]bool) ([]kvindex.Checkpoint, int) {
	newest := map[popMessage]rmqconfig.PopRecord{}
	left := 0
	for _, r := range records {
		m := popMessage{r.Group, r.Topic, r.QueueID, r.Offset}
		if imported[m] {
			left++
			continue
		}
		if old, ok := newest[m]; ok {
			left++
			if cmp.Or(cmp.Compare(old.PopTime, r.PopTime), cmp.Compare(old.VisibleAt, r.VisibleAt)) >= 0 {
				continue
			}
		}
		newest[m] = r
	}
	// One pop: its records share these.
	type popKey struct {
		group, topic           string
		queueID                int32
		popTime, invisibleTime int64
		attempts               int32
		attemptID              string
	}
	pops := map[popKey][]rmqconfig.PopRecord{}
	for _, r := range newest {
		k := popKey{r.Group, r.Topic, r.QueueID, r.PopTime, r.InvisibleTime, r.AttemptTimes, r.AttemptID}
		pops[k] = append(pops[k], r)
	}
	var cks []kvindex.Checkpoint
	for _, rs := range pops {
		slices.SortFunc(rs, func(a, b rmqconfig.PopRecord) int { return cmp.Compare(a.Offset, b.Offset) })
		var ck *kvindex.Checkpoint
		for _, r := range rs {
			// A checkpoint spans at most MaxCheckpointSpan offsets (a
			// RocketMQ pop reads far fewer).
			if ck == nil || r.Offset-ck.CKOffset >= kvindex.MaxCheckpointSpan {
				cks = append(cks, kvindex.Checkpoint{Group: r.Group, Topic: r.Topic, QueueID: r.QueueID, CKOffset: r.Offset,
					PopTime: r.PopTime, InvisibleTime: r.InvisibleTime, VisibleAt: r.VisibleAt,
					RetryFlag: pop.RetryFlagOf(r.Topic)[0] - '0', Attempts: r.AttemptTimes})
				ck = &cks[len(cks)-1]
			}
			ck.Offsets = append(ck.Offsets, r.Offset)
		}
	}
	slices.SortFunc(cks, func(a, b kvindex.Checkpoint) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID),
			cmp.Compare(a.CKOffset, b.CKOffset), cmp.Compare(a.PopTime, b.PopTime))
	})
	return cks, left
}
