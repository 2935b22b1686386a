package broker

import (
	"sync/atomic"
	"time"
)

// stats are the counters GET_BROKER_RUNTIME_INFO reports.
type stats struct {
	putMessages atomic.Int64
	putBytes    atomic.Int64
	getMessages atomic.Int64
	since       time.Time
}

func newStats() *stats { return &stats{since: time.Now()} }

func (s *stats) recordPut(_ string, n int, bytes int64) {
	s.putMessages.Add(int64(n))
	s.putBytes.Add(bytes)
}

func (s *stats) recordGet(n int) { s.getMessages.Add(int64(n)) }
