package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

// delayMark is a delay level's progress as the scheduler recorded it,
// with the CommitLog end below which every copy it delivered before that
// progress lies.
type delayMark struct{ off, end int64 }

// maxDelayMarks bounds the marks kept per level: past it the older half
// is thinned (every other mark goes), so a slave far behind gets an older
// progress than it could, never a later one.
const maxDelayMarks = 64

// delayMarks are the delay levels' recent progress, each with the end of
// the deliveries it passed: a master records its progress as soon as a
// delivery is stored, not once its slaves hold it (RocketMQ's schedule
// service delivers with WAIT=false), and answers a slave's
// GET_ALL_DELAY_OFFSET with, per level, the latest progress whose
// deliveries that slave already holds (Broker.slaveDelayOffsets). A slave
// promoted with a copied progress then never skips a delivery it lacks.
// The schedule loop adds; the request goroutines read.
type delayMarks struct {
	mu sync.Mutex
	// floor is the CommitLog end when the marks began (the master's
	// start): what was delivered before lies below it.
	floor  int64
	levels map[int][]delayMark // by level, off and end ascending
}

// reset starts the marks over at a master's start: each level's stored
// progress (after correctDelayProgress) with the CommitLog end then.
func (d *delayMarks) reset(floor int64, progress map[int]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.floor = floor
	d.levels = make(map[int][]delayMark, len(progress))
	for level, off := range progress {
		d.levels[level] = []delayMark{{off: off, end: floor}}
	}
}

// add records a level's new progress off, past deliveries ending at
// stored (0 when the round stored none: its messages were dropped or
// escaped).
func (d *delayMarks) add(level int, off, stored int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.levels == nil {
		d.levels = map[int][]delayMark{}
	}
	marks := d.levels[level]
	end := max(stored, d.floor)
	if n := len(marks); n > 0 {
		end = max(end, marks[n-1].end)
		if marks[n-1].end == end {
			// Same deliveries held: the later progress replaces it.
			marks[n-1].off = off
			return
		}
	}
	marks = append(marks, delayMark{off: off, end: end})
	if len(marks) > maxDelayMarks {
		marks = thinMarks(marks)
	}
	d.levels[level] = marks
}

// thinMarks drops every other mark of the older half of marks (the
// first kept), in place.
func thinMarks(marks []delayMark) []delayMark {
	half := len(marks) / 2
	out := marks[:0]
	for i, m := range marks {
		if i >= half || i%2 == 0 {
			out = append(out, m)
		}
	}
	return out
}

// oldest returns a level's earliest recorded progress; ok is false when
// it has none.
func (d *delayMarks) oldest(level int) (off int64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if marks := d.levels[level]; len(marks) > 0 {
		return marks[0].off, true
	}
	return 0, false
}

// heldBy returns a level's latest recorded progress whose deliveries lie
// below held; ok is false when none does.
func (d *delayMarks) heldBy(level int, held int64) (off int64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	marks := d.levels[level]
	for i := len(marks) - 1; i >= 0; i-- {
		if marks[i].end <= held {
			return marks[i].off, true
		}
	}
	return 0, false
}

// timerMarkLevel holds, among the delay marks, the timer's read time
// (the lastReadTimeMs of GET_TIMER_CHECK_POINT) with the CommitLog end
// below which its deliveries lie (delay levels start at 1).
const timerMarkLevel = 0

// startDelayMarks starts a master's delay marks at its start: each
// level's stored progress, and under timerWheelEnable the timer's read
// time, with the CommitLog's end then.
func (b *Broker) startDelayMarks(ctx context.Context) error {
	end := b.clog.MaxOffset()
	levels, err := rmqconfig.StoreDelayOffsets(ctx, b.db)
	if err != nil {
		return fmt.Errorf("read the delay levels' progress: %w", err)
	}
	b.delayMarks.reset(end, levels)
	if b.cfg.TimerWheelEnable {
		ms, err := b.timers.DeliveredBefore(time.Now())
		if err != nil {
			return fmt.Errorf("read the timer's read time: %w", err)
		}
		b.delayMarks.add(timerMarkLevel, ms, end)
	}
	return nil
}

// slaveTimerReadTime bounds readMs, the time before which this master
// delivered its timer messages, for a slave whose CommitLog reaches held
// (askerHolds): a RocketMQ slave, promoted, resumes its timer at the read
// time it copied (GET_TIMER_CHECK_POINT), so it must hold what was
// delivered before it. Each answer is noted as a mark; the latest mark
// the slave holds is answered, or the earliest one kept when it holds
// none (a slave behind even that is not bounded further).
func (b *Broker) slaveTimerReadTime(readMs, held int64) int64 {
	end := b.clog.MaxOffset() // after readMs: what was delivered before it lies below
	b.delayMarks.add(timerMarkLevel, readMs, end)
	if held >= end {
		return readMs
	}
	if ms, ok := b.delayMarks.heldBy(timerMarkLevel, held); ok {
		return min(ms, readMs)
	}
	if ms, ok := b.delayMarks.oldest(timerMarkLevel); ok {
		return min(ms, readMs)
	}
	return readMs
}
