package broker

import (
	"context"
	"math"
	"time"

	"github.com/rs/zerolog"
)

// catchUpLogEvery is how often a start that indexes a long CommitLog tail
// (the first open of a moved RocketMQ store, a store whose index was
// removed, a crash with much undispatched) says how far it has come.
const catchUpLogEvery = 10 * time.Second

// catchUpReportFrom is the tail, in bytes, past which a start reports its
// dispatch at all: below it the dispatch takes well under a second.
const catchUpReportFrom = 64 << 20

// dispatchProgress is the start's dispatch of the CommitLog tail: from
// where it began, to the log's end when it began, and when.
type dispatchProgress struct {
	from, to int64
	began    time.Time
}

// event adds the progress at dispatched, at now, to a log event: the
// bytes done and to do, the share done, the rate since the start, and the
// time left at that rate.
func (p dispatchProgress) event(e *zerolog.Event, dispatched int64, now time.Time) *zerolog.Event {
	done := max(0, dispatched-p.from)
	total := max(0, p.to-p.from)
	e = e.Int64("dispatchedBytes", done).Int64("tailBytes", total).Int64("dispatchedTo", dispatched)
	if total > 0 {
		e = e.Float64("percent", math.Round(float64(min(done, total))*1000/float64(total))/10)
	}
	elapsed := now.Sub(p.began)
	e = e.Dur("elapsed", elapsed.Round(time.Millisecond))
	if elapsed <= 0 || done == 0 {
		return e
	}
	rate := float64(done) / elapsed.Seconds() // bytes a second
	e = e.Float64("mibPerSecond", math.Round(rate*10/(1<<20))/10)
	if left := total - done; left > 0 {
		e = e.Dur("left", time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second))
	}
	return e
}

// catchUpDispatch waits until the dispatcher has indexed everything in the
// CommitLog, as the start must before it serves. A tail of more than
// catchUpReportFrom bytes is logged when the wait begins, every
// catchUpLogEvery while it lasts, and when it ends, so an operator whose
// broker indexes a moved RocketMQ store of hundreds of GiB sees it working
// and how long it has left.
func (b *Broker) catchUpDispatch(ctx context.Context) error {
	p := dispatchProgress{from: b.disp.Dispatched(), to: b.clog.MaxOffset(), began: time.Now()}
	from := int64(catchUpReportFrom)
	if b.catchUpFrom > 0 {
		from = b.catchUpFrom
	}
	if p.to-p.from <= from {
		return b.disp.CatchUp(ctx)
	}
	b.log.Info().Int64("tailBytes", p.to-p.from).Int64("from", p.from).Int64("logEnd", p.to).
		Msg("indexing the CommitLog tail before serving")
	done := make(chan error, 1)
	go func() { done <- b.disp.CatchUp(ctx) }()
	every := catchUpLogEvery
	if b.catchUpEvery > 0 {
		every = b.catchUpEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				p.event(b.log.Info(), b.disp.Dispatched(), time.Now()).Msg("indexed the CommitLog tail")
			}
			return err
		case now := <-tick.C:
			p.event(b.log.Info(), b.disp.Dispatched(), now).Msg("indexing the CommitLog tail")
		}
	}
}
