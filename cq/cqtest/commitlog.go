package cqtest

import (
	"errors"
	"fmt"
	"sync"
)

// ErrNoRecord is returned by CommitLog.StoreTime when no record of that size
// starts at that offset: it was never added, retention removed it (below
// Min) or truncation did (at or after End).
var ErrNoRecord = errors.New("cqtest: no record at that CommitLog offset")

// CommitLog is the suite's stand-in for the CommitLog. It remembers the size
// and store time of every record the suite dispatches, so that a layout that
// keeps no store timestamps (the file layout) can look them up the way the
// broker's CommitLog lookup will, and it follows retention (SetMin) and
// truncation (Truncate) like the real log.
//
// It is safe for concurrent use.
type CommitLog struct {
	mu   sync.Mutex
	recs map[int64]logRecord
	min  int64
	end  int64
}

type logRecord struct {
	size      int32
	storeTime int64
}

// NewCommitLog returns an empty log.
func NewCommitLog() *CommitLog {
	return &CommitLog{recs: make(map[int64]logRecord)}
}

// Add records that a record of size bytes stored at storeTime starts at phy,
// replacing whatever was there (a record re-appended after truncation).
func (l *CommitLog) Add(phy int64, size int32, storeTime int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs[phy] = logRecord{size: size, storeTime: storeTime}
	if e := phy + int64(size); e > l.end {
		l.end = e
	}
}

// StoreTime returns the store time of the record of the given size at phy.
// It has the signature of filecq's Options.StoreTime.
func (l *CommitLog) StoreTime(phy int64, size int32) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.recs[phy]
	if !ok || phy < l.min || r.size != size {
		return 0, fmt.Errorf("store time of record %d (%d bytes): %w", phy, size, ErrNoRecord)
	}
	return r.storeTime, nil
}

// SetMin moves the log's minimum offset to min, as retention does when it
// deletes the oldest segments; records below it are gone. The minimum never
// moves back.
func (l *CommitLog) SetMin(min int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if min <= l.min {
		return
	}
	l.min = min
	for phy := range l.recs {
		if phy < min {
			delete(l.recs, phy)
		}
	}
}

// Truncate drops every record starting at or after end, as CommitLog
// recovery does with a torn tail; End becomes end if it was beyond it.
func (l *CommitLog) Truncate(end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for phy := range l.recs {
		if phy >= end {
			delete(l.recs, phy)
		}
	}
	if end < l.end {
		l.end = end
	}
}

// Min returns the log's minimum offset (0 until SetMin moves it).
func (l *CommitLog) Min() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.min
}

// End returns the offset just past the newest record.
func (l *CommitLog) End() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}
