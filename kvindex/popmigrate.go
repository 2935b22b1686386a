package kvindex

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// migratePopCheckpoints rewrites the per-message in-flight records of a
// schema-2 store (0x50, with their ack index 0x51) as checkpoints (0x55,
// 0x56), records schema version 3 and syncs, all in one batch: a crash
// leaves either the old layout at version 2 or the new one at version 3.
//
// The records of one pop of one queue (the same group, topic, queue,
// ckOffset and popTime) become one checkpoint. Their deadlines differ
// only after a failed revive of some of them; the checkpoint takes the
// earliest deadline and the most attempts, so a message is at worst
// re-delivered early, never late or lost. A record that does not decode,
// or of a negative queue offset, names no message that could be
// re-delivered; it is logged with its key and dropped with the keyspace. It returns how many records it moved and
// how many it dropped.
func (d *DB) migratePopCheckpoints() (moved, dropped int, err error) {
	type name struct {
		group, topic      string
		queueID           int32
		ckOffset, popTime int64
	}
	cks := map[name]*Checkpoint{}
	err = d.Scan([]byte{prefixPopInFlight}, func(k, v []byte) bool {
		r, err := decodePopInFlight(k, v)
		if err != nil {
			d.log.Warn().Hex("key", k).Int("valueBytes", len(v)).
				Msg("schema upgrade: in-flight record does not decode; dropped")
			dropped++
			return true
		}
		// One that decodes with a negative offset (none that this code
		// wrote) names no message either, and no checkpoint can hold it:
		// refusing it would keep the broker from starting.
		if r.QueueOffset < 0 {
			d.log.Warn().Hex("key", k).Int64("queueOffset", r.QueueOffset).
				Msg("schema upgrade: in-flight record of a negative queue offset; dropped")
			dropped++
			return true
		}
		moved++
		key := name{r.Group, r.Topic, r.QueueID, r.CKOffset, r.PopTime}
		c, ok := cks[key]
		if !ok {
			c = &Checkpoint{Group: r.Group, Topic: r.Topic, QueueID: r.QueueID, CKOffset: r.CKOffset, PopTime: r.PopTime,
				InvisibleTime: r.InvisibleTime, VisibleAt: r.VisibleAt, RetryFlag: r.RetryFlag, Attempts: r.Attempts}
			cks[key] = c
		}
		c.VisibleAt = min(c.VisibleAt, r.VisibleAt)
		c.Attempts = max(c.Attempts, r.Attempts)
		c.Offsets = append(c.Offsets, r.QueueOffset)
		return true
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read in-flight records: %w", err)
	}
	b := d.Pop().NewBatch()
	defer b.Close()
	for _, c := range cks {
		slices.SortFunc(c.Offsets, cmp.Compare)
		c.Offsets = slices.Compact(c.Offsets)
		// A record outside [ckOffset, ckOffset+MaxCheckpointSpan), or of a
		// negative ckOffset (none that this code wrote), cannot share its
		// pop's checkpoint: it gets one of its own, which revive
		// re-delivers at its deadline.
		var fit []int64
		for _, off := range c.Offsets {
			if c.CKOffset >= 0 && off >= c.CKOffset && off-c.CKOffset < MaxCheckpointSpan {
				fit = append(fit, off)
				continue
			}
			single := *c
			single.CKOffset, single.Offsets = off, []int64{off}
			if err := b.PutCheckpoint(&single); err != nil {
				return 0, 0, err
			}
		}
		if c.Offsets = fit; len(fit) > 0 {
			if err := b.PutCheckpoint(c); err != nil {
				return 0, 0, err
			}
		}
	}
	for _, p := range []byte{prefixPopInFlight, prefixPopAckIndex} {
		if err := b.b.DeleteRange([]byte{p}, []byte{p + 1}, nil); err != nil {
			return 0, 0, fmt.Errorf("delete keyspace %#x: %w", p, err)
		}
	}
	if err := b.b.Set(metaKey(metaSchema), schemaValue(), nil); err != nil {
		return 0, 0, err
	}
	if err := b.b.Commit(pebble.Sync); err != nil {
		return 0, 0, fmt.Errorf("commit checkpoints: %w", err)
	}
	return moved, dropped, nil
}
