package broker

import (
	"errors"
	"fmt"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// openCompaction returns the compaction store of db over the topics its
// configs make compacted, read before the dispatcher starts.
func openCompaction(db *kvindex.DB) (*kvindex.Compaction, error) {
	topics, err := db.Topics(1)
	if err != nil {
		return nil, fmt.Errorf("read the topics for compaction: %w", err)
	}
	var compacted []meta.TopicConfig
	if err := topics.Each(func(tc meta.TopicConfig) bool {
		if tc.Compacted() {
			compacted = append(compacted, tc)
		}
		return true
	}); err != nil {
		return nil, fmt.Errorf("read the topics for compaction: %w", err)
	}
	return kvindex.NewCompaction(db, compacted), nil
}

// compactionRetention returns the CommitLog's OnMinOffsetChange callback
// that drops the copies of compacted topics kept only while their records
// were in the CommitLog. The dispatcher is quiesced meanwhile: a batch
// making a newer message of a tombstone's key the newest must not commit
// between the read of the key's entry and its deletion. It holds disp and
// the compaction store itself: the cleaner calling it runs until the
// CommitLog closes, after the broker has let go of its dispatcher.
func (b *Broker) compactionRetention(disp *kvindex.Dispatcher) func(newMin int64) {
	c, log := b.compaction, b.log
	return func(newMin int64) {
		if err := disp.Quiesced(func() error { return c.DropBelow(newMin) }); err != nil {
			log.Warn().Err(err).Int64("minOffset", newMin).Msg("drop the copies of compacted topics below the CommitLog minimum")
		}
	}
}

// compactionTopicsChanged tells the compaction store which of the stored
// topic configs ask for compaction now, and returns those that became
// compacted.
func (b *Broker) compactionTopicsChanged(cfgs []meta.TopicConfig) []meta.TopicConfig {
	if b.compaction == nil {
		return nil
	}
	var became []meta.TopicConfig
	for _, tc := range cfgs {
		if b.compaction.TopicChanged(tc.TopicName, tc.Compacted()) {
			became = append(became, tc)
		}
	}
	return became
}

// backfillCompaction copies the records of a topic that became compacted
// that the dispatcher indexed before: a slave learns that a topic of its
// master is compacted at its next sync, and its dispatcher indexed the
// topic's records as any topic's until then. The dispatcher is quiesced
// meanwhile, so nothing it indexes is copied twice or out of order.
func (b *Broker) backfillCompaction(tc meta.TopicConfig) error {
	const chunk = 256
	return b.disp.Quiesced(func() error {
		for q := range int32(tc.QueueCount()) {
			from, err := b.cqs.MinOffset(tc.TopicName, q)
			if err != nil {
				return err
			}
			for {
				entries, err := b.cqs.Get(tc.TopicName, q, from, chunk)
				if err != nil {
					return fmt.Errorf("read %s/%d for compaction: %w", tc.TopicName, q, err)
				}
				if len(entries) == 0 {
					break
				}
				recs := make([][]byte, 0, len(entries))
				for _, e := range entries {
					v, err := b.clog.Read(e.PhyOffset, e.Size)
					if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
						continue // deleted by retention
					}
					if err != nil {
						return fmt.Errorf("copy %s/%d@%d for compaction: %w", tc.TopicName, q, e.QueueOffset, err)
					}
					recs = append(recs, append([]byte(nil), v.Data...))
					v.Release()
				}
				if err := b.compaction.CopyRecords(recs); err != nil {
					return fmt.Errorf("copy %s/%d for compaction: %w", tc.TopicName, q, err)
				}
				from = entries[len(entries)-1].QueueOffset + 1
			}
		}
		return nil
	})
}

// dropCompactedTopic stops the copies of a deleted topic and deletes
// those it has.
func (b *Broker) dropCompactedTopic(topic string) error {
	if b.compaction == nil {
		return nil
	}
	b.compaction.TopicChanged(topic, false)
	return b.compaction.DropTopic(topic)
}

// getCompacted is getMessages for a compacted topic: it reads the copies
// the compaction store keeps instead of the ConsumeQueue, as RocketMQ's
// compaction store answers getMessage. Queue offsets stay those the
// messages were stored with; an offset whose message was compacted away
// reads on from the next copy, and one below the first copy from the
// first. The queue's maximum is the ConsumeQueue's, its minimum
// minOffset's. Records are shown as every read shows them
// (kvindex.AppendShown).
func (b *Broker) getCompacted(topic string, queueID int32, offset int64, maxNums, maxBytes int, filter *subscription) (getResult, error) {
	r := getResult{lastPhy: -1}
	var err error
	if r.maxOffset, err = b.cqs.MaxOffset(topic, queueID); err != nil {
		return r, err
	}
	if r.minOffset, err = b.minOffset(topic, queueID); err != nil {
		return r, err
	}
	if r.outOfBounds(offset, false) {
		return r, nil
	}
	maxNums, maxBytes = b.transferLimits(maxNums, maxBytes)
	next, scanned := offset, 0
	err = b.compaction.Read(topic, queueID, offset, func(off int64, rec []byte, m *commitlog.Message) bool {
		if off >= r.maxOffset || scanned >= maxScanEntries || r.count >= maxNums || (r.count > 0 && len(r.body)+len(rec) > maxBytes) {
			return false
		}
		scanned++
		next, r.lastPhy = off+1, m.PhyOffset
		if filter.matchesProperties(m.Properties) {
			if r.body == nil {
				r.body = b.bodies.get(min(maxBytes, len(rec)*maxNums))
			}
			r.body = kvindex.AppendShown(r.body, rec) // no POP revive's own property
			r.count++
		}
		return true
	})
	if err != nil {
		return r, err
	}
	if r.count == 0 && scanned == 0 {
		// Nothing kept from offset to the queue's end: every message
		// there was superseded.
		next = r.maxOffset
	}
	r.nextBegin = next
	switch {
	case r.count > 0:
		r.status = getFound
	default:
		r.status = getNoMatched
	}
	return r, nil
}

// minOffset answers GET_MIN_OFFSET: the ConsumeQueue's minimum, or for a
// compacted topic the first copy's when lower, so that a consumer that
// seeks to the beginning (RocketMQ's example of a compacted topic) reads
// every key retention would have taken away.
func (b *Broker) minOffset(topic string, queueID int32) (int64, error) {
	minOff, err := b.cqs.MinOffset(topic, queueID)
	if err != nil {
		return minOff, err
	}
	return b.compaction.QueueMin(topic, queueID, minOff)
}
