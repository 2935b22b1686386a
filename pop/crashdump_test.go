package pop_test

import (
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// dumpPopState logs the POP state and the non-topic records of a stopped
// store, to diagnose a failed crash test.
func dumpPopState(t *testing.T, dir string) {
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
		if m.Topic != "CrashT" {
			t.Logf("LOG %s/%d@%d %s reconsume %d", m.Topic, m.QueueID, m.QueueOffset, m.Body, m.ReconsumeTimes)
		}
	}
}
