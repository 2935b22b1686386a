package kvindex

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"
)

// writeStalls counts the times Pebble held writes back (too many memtables
// waiting to be flushed, too many L0 sublevels) and how long in all. Every
// index write, the dispatcher's included, waits during a stall, so each is
// logged.
type writeStalls struct {
	log zerolog.Logger

	mu     sync.Mutex
	began  time.Time // zero when no stall is in progress
	reason string
	count  int64
	total  time.Duration
}

// listener returns the Pebble event listener that feeds the counter.
func (s *writeStalls) listener() *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			s.mu.Lock()
			s.began, s.reason = time.Now(), info.Reason
			s.count++
			s.mu.Unlock()
			s.log.Warn().Str("reason", info.Reason).Msg("index write stall: writes wait for Pebble's flushes or compactions")
		},
		WriteStallEnd: func() {
			s.mu.Lock()
			var d time.Duration
			if !s.began.IsZero() {
				d = time.Since(s.began)
				s.total += d
				s.began = time.Time{}
			}
			reason := s.reason
			s.mu.Unlock()
			s.log.Info().Str("reason", reason).Dur("stalled", d).Msg("index write stall ended")
		},
	}
}

// snapshot returns the stalls so far and their total length, counting a
// stall in progress up to now.
func (s *writeStalls) snapshot() (int64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.total
	if !s.began.IsZero() {
		total += time.Since(s.began)
	}
	return s.count, total
}
