// Package repeatlog keeps a failure that repeats every round of a retry
// loop from flooding the log. A background loop that retries a put every
// 100 ms (the timer's delivery, a delay level's, the escape of open
// transactions, the escape bridge) would otherwise write ten warnings a
// second for as long as the put cannot succeed (a topic no other broker
// group has, a full disk).
//
// A Limiter lets the first failure through, then at most one line per
// interval while failures go on; each line it lets through carries the
// count of those it held back since the previous one ("suppressed").
// Recovered reports the end of a run of failures once, with the count of
// lines held back since the last one, and the next failure is logged at
// once again.
//
// Usage, in a loop:
//
//	if err := round(ctx); err != nil {
//		fails.Failed().Err(err).Msg("deliver timer messages")
//	} else {
//		fails.Recovered().Msg("deliver timer messages: succeeding again")
//	}
//
// Failed and Recovered return nil, on which every zerolog.Event method
// does nothing, when there is nothing to log. A Limiter is safe for
// concurrent use.
package repeatlog

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DefaultInterval is the least time between two lines of a run of
// failures: at most four lines a minute after the first.
const DefaultInterval = 15 * time.Second

// SuppressedField is the field of a line that counts the failures not
// logged since the previous line.
const SuppressedField = "suppressed"

// Limiter limits the lines of one repeating failure.
type Limiter struct {
	log   zerolog.Logger
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex // guards the fields below
	failing    bool       // a failure came after the last Recovered
	last       time.Time  // when the last line of the run was let through
	suppressed int        // failures held back since that line
}

// New returns a Limiter logging to log at most one failure line per
// interval every (DefaultInterval when not positive), by the clock now
// (time.Now when nil).
func New(log zerolog.Logger, every time.Duration, now func() time.Time) *Limiter {
	if every <= 0 {
		every = DefaultInterval
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{log: log, every: every, now: now}
}

// Failed records a failure and returns a warning to complete and send,
// with the count of the failures held back before it, or nil when the
// last line was less than the interval ago.
func (l *Limiter) Failed() *zerolog.Event {
	return l.failed(l.log.Warn)
}

// FailedError is Failed at the error level, for a failure that loses or
// damages something rather than waits.
func (l *Limiter) FailedError() *zerolog.Event {
	return l.failed(l.log.Error)
}

func (l *Limiter) failed(level func() *zerolog.Event) *zerolog.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	// A clock stepped back behind the last line lets the next one through.
	if since := now.Sub(l.last); l.failing && since < l.every && since >= 0 {
		l.suppressed++
		return nil
	}
	n := l.suppressed
	l.failing, l.last, l.suppressed = true, now, 0
	e := level()
	if n > 0 {
		e = e.Int(SuppressedField, n)
	}
	return e
}

// Recovered ends a run of failures: it returns an info line to complete
// and send, with the count of failures held back since the last line,
// when failures were recorded since the previous Recovered, else nil.
func (l *Limiter) Recovered() *zerolog.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failing {
		return nil
	}
	n := l.suppressed
	l.failing, l.suppressed = false, 0
	e := l.log.Info()
	if n > 0 {
		e = e.Int(SuppressedField, n)
	}
	return e
}
