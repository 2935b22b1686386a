package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/timer"
)

// scheduleOffsetGroup is where the scheduler keeps its progress per level.
const scheduleOffsetGroup = meta.ScheduleOffsetGroup

// scheduleConsumerGroup is the group RocketMQ's statistics count the
// scheduler's reads of SCHEDULE_TOPIC_XXXX under (MixAll's
// SCHEDULE_CONSUMER_GROUP).
const scheduleConsumerGroup = "SCHEDULE_CONSUMER"

// toSchedule parks a message with a delay level in SCHEDULE_TOPIC_XXXX,
// queue level-1, remembering its real topic and queue, as RocketMQ's
// CommitLog does at put. The dispatcher gives it the delivery time as tag
// code. The level takes precedence over timer properties, which RocketMQ
// drops from the message it parks so.
func (b *Broker) toSchedule(m *commitlog.Message, level int) {
	level = min(level, len(b.delayLevels))
	m.Properties = commitlog.RewriteProperties(m.Properties, []string{timer.PropDeliverMs, timer.PropDelaySec, timer.PropDelayMs},
		[2]string{propDelay, strconv.Itoa(level)},
		[2]string{commitlog.PropertyRealTopic, m.Topic},
		[2]string{commitlog.PropertyRealQueueID, strconv.Itoa(int(m.QueueID))})
	m.Topic = meta.ScheduleTopic
	m.QueueID = int32(level - 1)
}

// scheduleLoop delivers due delay-level messages to their real topic: for
// each level it reads SCHEDULE_TOPIC_XXXX from the level's offset and
// re-puts every message whose delivery time (the entry's tag code) has
// come. Delivery is at least once: a crash between the re-put and the
// offset commit delivers again.
//
// The levels take turns of at most schedShare messages, and a pass after
// which a level still had due messages is followed at once by the next:
// a backlog in one level (a burst of retries at level 3) delays the
// others by one turn, not by the whole backlog, as RocketMQ's task per
// level does not.
//
// A level whose delivery fails is retried every round (a put that cannot
// succeed, as an escape of a topic no other broker group has, fails 10
// times a second): it is logged the first time, then at most every
// repeatlog.DefaultInterval with the count held back, and once when the
// level delivers again, each level on its own.
func (b *Broker) scheduleLoop(ctx context.Context) {
	fails := b.scheduleFailLogs(b.log, nil)
	periodic.Run(ctx, 100*time.Millisecond, func(ctx context.Context) { b.scheduleRound(ctx, fails) })
}

// scheduleFailLogs returns the limiters of the delay levels' failure
// lines to log, by the clock now (time.Now when nil).
func (b *Broker) scheduleFailLogs(log zerolog.Logger, now func() time.Time) []*repeatlog.Limiter {
	fails := make([]*repeatlog.Limiter, len(b.delayLevels))
	for i := range fails {
		fails[i] = repeatlog.New(log.With().Int("delayLevel", i+1).Logger(), repeatlog.DefaultInterval, now)
	}
	return fails
}

// scheduleRound is one round of scheduleLoop; fails holds each level's
// limiter of failure lines (scheduleFailLogs).
func (b *Broker) scheduleRound(ctx context.Context, fails []*repeatlog.Limiter) {
	for more := true; more && ctx.Err() == nil; {
		more = false
		for level := 1; level <= len(b.delayLevels); level++ {
			left, err := b.deliverLevel(ctx, level)
			switch {
			case err != nil && ctx.Err() == nil:
				fails[level-1].Failed().Err(err).Msg("deliver delayed messages")
			case err == nil:
				fails[level-1].Recovered().Msg("deliver delayed messages: delivering again")
			}
			more = more || (left && err == nil)
		}
	}
}

// defaultScheduleShare is how many messages a delay level delivers in a
// turn before the other levels have theirs (Broker.schedShare).
const defaultScheduleShare = 1024

// lowerDelayProgress lowers the stored progress off of a delay level to
// its queue's end when it is past it, and returns the progress to use. A
// progress past the end (the parked copies it passed went with a
// CommitLog tail a power failure lost, or a master's progress was copied
// ahead of a slave's log before it was restarted as a master) would skip
// the next messages parked there: RocketMQ's correctDelayOffset lowers it
// too. It is stored at once, before any message is parked.
func (b *Broker) lowerDelayProgress(level int, off int64) (int64, error) {
	qid := int32(level - 1)
	maxOff, err := b.cqs.MaxOffset(meta.ScheduleTopic, qid)
	if err != nil || off <= maxOff {
		return off, err
	}
	b.log.Warn().Int("delayLevel", level).Int64("progress", off).Int64("queueEnd", maxOff).
		Msg("delay level progress past its queue's end; lowered to the end")
	if err := b.offsets.Set(scheduleOffsetGroup, meta.ScheduleTopic, qid, maxOff); err != nil {
		return off, err
	}
	return maxOff, nil
}

// correctDelayProgress lowers every delay level's progress past its
// queue's end (lowerDelayProgress) before the broker takes sends; the
// delivery loop runs only on a broker started as master, so once at start
// covers every way a progress gets ahead.
func (b *Broker) correctDelayProgress() error {
	for level := 1; level <= len(b.delayLevels); level++ {
		off, ok, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, int32(level-1))
		if err == nil && ok {
			_, err = b.lowerDelayProgress(level, off)
		}
		if err != nil {
			return fmt.Errorf("correct the progress of delay level %d: %w", level, err)
		}
	}
	return nil
}

// deliverLevel delivers up to schedShare due messages of one delay level
// and records the level's progress past them; it reports whether due
// messages were left for its next turn. An error part way (a read or a
// put that failed) still records the progress past what was delivered
// before it: those copies are in the log, and the next round would
// deliver them again.
func (b *Broker) deliverLevel(ctx context.Context, level int) (bool, error) {
	qid := int32(level - 1)
	if b.delayTurn != nil {
		b.delayTurn(level)
	}
	off, ok, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, qid)
	if err != nil {
		return false, err
	}
	if minOff, err := b.cqs.MinOffset(meta.ScheduleTopic, qid); err != nil {
		return false, err
	} else if !ok || off < minOff {
		off = minOff
	}
	start := off
	off, stored, left, deliverErr := b.deliverDue(ctx, level, off, b.schedShare)
	if off == start {
		return false, deliverErr
	}
	// The progress is synced: what it moves past must be flushed first
	// (under SYNC_FLUSH), or a machine crash could lose delivered
	// messages whose parked copies are already behind the offset. One
	// wait for the turn, not one per message, and as long as the flush
	// takes: the delivered copies are in the log, and a round that gave
	// up would deliver them again.
	if stored > 0 {
		// A stop begun meanwhile still waits for the flush: cut short,
		// the progress would stay before copies that are in the log, and
		// the next start would deliver them again.
		wctx, release := flushAfterStop(ctx, b.cfg.SyncFlushTimeout)
		err := b.clog.WaitDurable(wctx, stored)
		release()
		if err != nil {
			return false, errors.Join(deliverErr, fmt.Errorf("delay level %d: progress stays at %d: %w", level, start, err))
		}
	}
	// No wait for the slaves, as RocketMQ's schedule service delivers
	// with WAIT=false and records its progress once the put is done:
	// they copy the progress (GET_ALL_DELAY_OFFSET) only as far as its
	// deliveries reached them (slaveDelayOffsets), so a failover loses
	// none.
	if err := b.offsets.Set(scheduleOffsetGroup, meta.ScheduleTopic, qid, off); err != nil {
		return false, errors.Join(deliverErr, err)
	}
	b.delayMarks.add(level, off, stored)
	return left, deliverErr
}

// deliverDue delivers at most limit due messages of a delay level from
// queue offset off on, and returns the offset after the last one it
// handled, the CommitLog end after the last delivery (0 when none) and
// whether it stopped at the limit with the next entry not yet read, with
// the error that stopped it, if any.
func (b *Broker) deliverDue(ctx context.Context, level int, off int64, limit int) (next, stored int64, left bool, err error) {
	qid := int32(level - 1)
	delay := b.delayLevels[level-1].Milliseconds()
	for delivered := 0; ctx.Err() == nil; {
		if delivered >= limit {
			return off, stored, true, nil
		}
		entries, err := b.cqs.Get(meta.ScheduleTopic, qid, off, min(64, limit-delivered))
		if err != nil || len(entries) == 0 {
			return off, stored, false, err
		}
		now := time.Now().UnixMilli()
		for _, e := range entries {
			deliverAt := e.TagsCode
			if deliverAt > now+delay {
				deliverAt = now // a clock step back: RocketMQ treats it as due
			}
			if deliverAt > now {
				return off, stored, false, nil
			}
			end, err := b.deliverScheduled(ctx, e.PhyOffset)
			if err != nil {
				return off, stored, false, err
			}
			stored = max(stored, end)
			off = e.QueueOffset + 1
			delivered++
		}
	}
	return off, stored, false, nil
}

// deliverScheduled re-puts one parked message to its real topic and queue
// without waiting for its flush, and returns the CommitLog offset after
// it (0 when there was nothing to deliver).
func (b *Broker) deliverScheduled(ctx context.Context, phy int64) (int64, error) {
	_, m, ok, err := b.readRecord(phy)
	if commitlog.NoRecordAt(err) {
		// A damaged record stays damaged: waiting on it would hold
		// back every later message of the level.
		b.log.Error().Err(err).Int64("phy", phy).Msg("delayed message unreadable; dropped")
		return 0, nil
	}
	if err != nil || !ok {
		return 0, err // a record gone with retention is skipped
	}
	topic, qid, ok := commitlog.RealDestination(m.Properties)
	if !ok {
		b.log.Warn().Int64("phy", phy).Msg("delayed message without REAL_TOPIC/REAL_QID dropped")
		return 0, nil
	}
	// DELAY, REAL_TOPIC and REAL_QID stay, as RocketMQ's schedule service
	// stores the properties string the message was parked with (it clears
	// them from the message's map only). Timer properties go: a parked
	// message holds none, but one parked before toSchedule dropped them.
	out := &commitlog.Message{
		Topic: topic, QueueID: qid, Flag: m.Flag, SysFlag: m.SysFlag,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes,
		Body:       m.Body,
		Properties: commitlog.RewriteProperties(m.Properties, []string{timer.PropDeliverMs, timer.PropDelaySec, timer.PropDelayMs}),
	}
	if b.isSlave() {
		return 0, b.escapeScheduled(ctx, out)
	}
	// RocketMQ's messageTimeUp sets WAIT=false once the properties string
	// is written: its put neither refuses the delivery for a sync state
	// set below minInSyncReplicas nor waits for its flush or slaves (the
	// level's progress waits for the flush here, deliverLevel, and is
	// copied by slaves only as far as they hold the deliveries).
	res, err := b.putOwnRecords(ctx, []*commitlog.Message{out}, false)
	if commitlog.Unstorable(err) {
		b.log.Error().Err(err).Int64("phy", phy).Str("topic", topic).Msg("delayed message can never be stored in its topic; dropped")
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// RocketMQ's schedule service counts the delivery as a put of the
	// message's topic, of type delay, and as a get of the schedule topic
	// by SCHEDULE_CONSUMER, unless enableScheduleMessageStats is off.
	if b.cfg.EnableScheduleMessageStats {
		b.countInAs(topic, metrics.TypeDelay, 1, res.WroteBytes)
		b.stats.ScheduleGot(scheduleConsumerGroup, meta.ScheduleTopic, 1, res.WroteBytes)
	}
	return res.PhyOffset + res.WroteBytes, nil
}

// escapeScheduled sends a due delayed message of an acting master (only
// then does a slave run the delay levels) to another group's master
// through the escape bridge, as RocketMQ's ScheduleMessageService puts it
// through its EscapeBridge: without DELAY, which its messageTimeUp clears
// from the property map a remote send carries (REAL_TOPIC and REAL_QID
// stay). Nothing is written locally, so the level's progress waits for no
// flush; a failed send stops the level's turn there, and the next round
// sends it again. Counted as a local delivery is.
func (b *Broker) escapeScheduled(ctx context.Context, out *commitlog.Message) error {
	out.Properties = commitlog.RewriteProperties(out.Properties, []string{propDelay})
	if err := b.escape.put(ctx, out); err != nil {
		return fmt.Errorf("deliver a delayed message of %s: %w", out.Topic, err)
	}
	if b.cfg.EnableScheduleMessageStats {
		b.countInAs(out.Topic, metrics.TypeDelay, 1, 0)
		b.stats.ScheduleGot(scheduleConsumerGroup, meta.ScheduleTopic, 1, 0)
	}
	return nil
}
