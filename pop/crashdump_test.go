package pop_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
)

// dumpPopState logs the POP state of a stopped store and its CommitLog
// records, to diagnose a failed crash test: the records with one of the
// given bodies, or, when none is given, those not of the load's topic
// (revived copies).
func dumpPopState(t *testing.T, dir, topic string, bodies []string) {
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(dir, kvindex.DirName), ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Log(err)
		return
	}
	defer db.Close()
	n := 0
	_ = db.Pop().EachInFlight(func(r kvindex.InFlight) bool { n++; t.Logf("inflight %+v", r); return n < 20 })
	for _, ks := range []byte{kvindex.PrefixPopPosition, kvindex.PrefixConsumerOffset} {
		_ = db.Scan([]byte{ks}, func(k, v []byte) bool {
			r, _ := kvindex.DecodeKey(k, v)
			t.Log(r)
			return true
		})
	}
	_ = db.QueueRanges("", func(q kvindex.QueueRange) bool { t.Logf("range %+v", q); return true })
	cqs := db.ConsumeQueue(0)
	l, err := commitlog.OpenReadOnly(dir)
	if err != nil {
		t.Log(err)
		return
	}
	defer l.Close()
	it := l.NewIterator(0)
	for {
		e, err := it.Next()
		if err != nil {
			t.Logf("log end: %v", err)
			break
		}
		m, _ := commitlog.Decode(e.Data)
		if len(bodies) > 0 && slices.Contains(bodies, string(m.Body)) || len(bodies) == 0 && m.Topic != topic {
			// A staged copy names when it may go out; the index entry at
			// the record's queue offset should point back at it.
			visibleAt, _ := commitlog.LookupProperty(m.Properties, pop.PropertyVisibleAt)
			index := "no index entry"
			if es, err := cqs.Get(m.Topic, m.QueueID, m.QueueOffset, 1); err != nil {
				index = err.Error()
			} else if len(es) == 1 {
				index = fmt.Sprintf("index entry at %d (%d bytes)", es[0].PhyOffset, es[0].Size)
			}
			t.Logf("LOG %s/%d@%d %s reconsume %d at %d stored %d visibleAt %q, %s", m.Topic, m.QueueID, m.QueueOffset,
				m.Body, m.ReconsumeTimes, e.Offset, m.StoreTimestamp, visibleAt, index)
		}
	}
}
