package txn

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// A half born longer than fileReservedTime ago is given up without a
// check, as RocketMQ's checker gives it up (needSkip, then the discard
// listener): stored in TRANS_CHECK_MAX_TIME_TOPIC with its real topic and
// its check count plus one (RocketMQ counts the check before it finds the
// half too old), its transaction ended as discarded so no pass asks again.
// fileReservedTime is read as in force at each pass, and bounds a long
// immunity.
func TestAHalfOlderThanFileReservedTimeIsGivenUpWithoutACheck(t *testing.T) {
	var reserved atomic.Int64
	reserved.Store(int64(time.Hour))
	f := newFixture(t, Config{Timeout: 6 * time.Second, CheckInterval: 20 * time.Minute, CheckMax: 100,
		FileReservedTime: func() time.Duration { return time.Duration(reserved.Load()) }})
	start := f.now
	old := f.sendHalfBorn("OLD", "", start.Add(-time.Hour-time.Millisecond))
	edge := f.sendHalfBorn("EDGE", "", start.Add(-time.Hour))
	young := f.sendHalf("YOUNG", "")
	immune := f.sendHalf("IMMUNE", "CHECK_IMMUNITY_TIME_IN_SECONDS\x017200\x02")
	if o, _ := f.open(immune.PhyOffset); o.NextCheckAt != immune.BornTimestamp+time.Hour.Milliseconds()+1 {
		t.Fatalf("a half immune for 2 h is first looked at %d ms after its born time, want when it is 1 h old (fileReservedTime)",
			o.NextCheckAt-immune.BornTimestamp)
	}

	// The one born 1 h and 1 ms ago is too old; the one born 1 h ago
	// exactly is not (RocketMQ's age > fileReservedTime).
	if st := f.pass(); st != (PassStats{Expired: 1, Checked: 1}) {
		t.Fatalf("first pass %+v, want the old half given up and the one 1 h old checked", st)
	}
	if _, open := f.open(old.PhyOffset); open {
		t.Fatal("the half older than fileReservedTime is still open")
	}
	if e, ended, _ := f.db.Transactions().Ended(old.PhyOffset); !ended || e.State != kvindex.TxnDiscarded {
		t.Fatalf("the expired transaction ended %+v (%v), want discarded", e, ended)
	}
	for _, c := range f.asked {
		if c.MsgID == "OLD" {
			t.Fatal("the producer was asked about a half older than fileReservedTime")
		}
	}
	copies := f.store.putsIn(meta.TransCheckMaxTopic)
	if len(copies) != 1 {
		t.Fatalf("%d copies in %s, want 1", len(copies), meta.TransCheckMaxTopic)
	}
	c := copies[0]
	checks, _ := commitlog.LookupProperty(c.Properties, PropCheckTimes)
	topic, qid, _ := commitlog.RealDestination(c.Properties)
	if uniq, _ := commitlog.LookupProperty(c.Properties, propUniqKey); uniq != "OLD" || checks != "1" || topic != "T" || qid != 1 ||
		c.QueueID != 0 || string(c.Body) != "b-OLD" || c.BornTimestamp != old.BornTimestamp {
		t.Fatalf("copy %+v (TRANSACTION_CHECK_TIMES %q, real %s/%d), want the half with its real topic and count 1", c, checks, topic, qid)
	}

	// The one born 1 h ago is given up at its next check, 20 min later,
	// with its count plus one; the young one is checked at 6 s and
	// 20 min, and at 40 min a fileReservedTime lowered to 0 gives it up.
	f.now = start.Add(6*time.Second + time.Millisecond)
	if st := f.pass(); st != (PassStats{Checked: 1}) {
		t.Fatalf("pass at 6 s: %+v", st)
	}
	f.now = start.Add(20*time.Minute + 6*time.Second + time.Millisecond)
	if st := f.pass(); st != (PassStats{Checked: 1, Expired: 1}) {
		t.Fatalf("pass at 20 min: %+v", st)
	}
	reserved.Store(0)
	f.now = start.Add(40*time.Minute + 6*time.Second + time.Millisecond)
	if st := f.pass(); st != (PassStats{Expired: 1}) {
		t.Fatalf("pass at 40 min with fileReservedTime 0: %+v, want the young half given up", st)
	}
	for _, c := range f.store.putsIn(meta.TransCheckMaxTopic)[1:] {
		uniq, _ := commitlog.LookupProperty(c.Properties, propUniqKey)
		checks, _ := commitlog.LookupProperty(c.Properties, PropCheckTimes)
		if want := map[string]string{"EDGE": "2", "YOUNG": "3"}[uniq]; checks != want {
			t.Errorf("copy of %s carries TRANSACTION_CHECK_TIMES %q, want %q (its checks, plus one)", uniq, checks, want)
		}
	}
	for _, h := range []*commitlog.Message{edge, young} {
		if _, open := f.open(h.PhyOffset); open {
			t.Errorf("half %d still open", h.PhyOffset)
		}
	}

	// The immune one is due when 1 h old, and given up then (fileReservedTime
	// back at 1 h), never asked.
	reserved.Store(int64(time.Hour))
	f.now = start.Add(time.Hour)
	if st := f.pass(); st != (PassStats{}) {
		t.Fatalf("pass at 1 h: %+v, want nothing", st)
	}
	f.now = start.Add(time.Hour + time.Millisecond)
	if st := f.pass(); st != (PassStats{Expired: 1}) {
		t.Fatalf("pass at 1 h 1 ms: %+v, want the immune half given up", st)
	}
	if n := f.askedCount(); n != 3 {
		t.Fatalf("asked %d times, want 3", n)
	}
	f.now = start.Add(10 * time.Hour)
	if st := f.pass(); st != (PassStats{}) {
		t.Fatalf("a pass after every half was given up: %+v", st)
	}
}

// A half carrying TRANSACTION_CHECK_TIMES (one Apache RocketMQ stored
// again after a check, in a store migrated from it) starts from that
// count, as RocketMQ's checker reads it: 13 of 15 leaves two checks, 15 is
// given up at the first pass whatever its age, and a value that is no
// number counts -1 (RocketMQ's getInt), so sixteen checks.
func TestAHalfsCheckCountStartsFromItsCheckTimesProperty(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15})
	start := f.now
	halves := map[string]*commitlog.Message{}
	for uniq, v := range map[string]string{"C13": "13", "C15": "15", "CX": "x", "C0": "0"} {
		halves[uniq] = f.sendHalf(uniq, PropCheckTimes+"\x01"+v+"\x02")
	}
	checks := map[string]int{}
	discardedAt := map[string]int{}
	for pass := 0; pass < 20; pass++ {
		f.now = start.Add(6*time.Second + time.Millisecond + time.Duration(pass)*30*time.Second)
		if pass == 0 {
			// Before any is due: the one at 15 is given up all the same.
			f.now = start
		}
		f.mu.Lock()
		f.asked = f.asked[:0]
		f.mu.Unlock()
		f.pass()
		for _, c := range f.asked {
			checks[c.MsgID]++
		}
		for uniq, h := range halves {
			if _, ok := discardedAt[uniq]; ok {
				continue
			}
			if e, ended, _ := f.db.Transactions().Ended(h.PhyOffset); ended && e.State == kvindex.TxnDiscarded {
				discardedAt[uniq] = pass
			}
		}
	}
	want := map[string]int{"C13": 2, "C15": 0, "CX": 16, "C0": 15}
	for uniq, n := range want {
		if checks[uniq] != n {
			t.Errorf("%s: %d checks, want %d", uniq, checks[uniq], n)
		}
		if _, ok := discardedAt[uniq]; !ok {
			t.Errorf("%s: never given up", uniq)
		}
	}
	if discardedAt["C15"] != 0 {
		t.Errorf("the half at 15 checks was given up at pass %d, want the first", discardedAt["C15"])
	}
}
