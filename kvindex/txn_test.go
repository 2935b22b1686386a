package kvindex

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// txnBase is the store time of the half messages of the transaction tests.
const txnBase = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z

// testHalf is the half message at phy, with fields derived from phy so
// that a half read back at the wrong key cannot pass for another.
func testHalf(phy int64) TxnHalf {
	return TxnHalf{PhyOffset: phy, QueueOffset: phy / 100, StoreTimestamp: txnBase + phy, NextCheckAt: txnBase + phy + 6000}
}

// addHalves records the halves at phys in one batch, as the dispatcher
// does for the records of one dispatch batch.
func addHalves(t *testing.T, db *DB, phys ...int64) {
	t.Helper()
	b := db.pdb.NewBatch()
	defer b.Close()
	for _, p := range phys {
		if err := db.Transactions().AddHalf(b, testHalf(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// txnOp is one step of a transaction scenario.
type txnOp struct {
	name string
	do   func(t *testing.T, db *DB) error
}

func opAdd(phys ...int64) txnOp {
	return txnOp{fmt.Sprintf("add %v", phys), func(t *testing.T, db *DB) error { addHalves(t, db, phys...); return nil }}
}

func opEnd(phy int64, s TxnState, at int64) txnOp {
	return txnOp{fmt.Sprintf("end %d %v", phy, s), func(_ *testing.T, db *DB) error {
		return db.Transactions().End(phy, TxnEnd{State: s, At: at})
	}}
}

// opCommitted is the dispatcher's commit hook seeing the committed copy of
// the transaction of the half at phy.
func opCommitted(phy int64) txnOp {
	return txnOp{fmt.Sprintf("committed %d", phy), func(_ *testing.T, db *DB) error {
		b := db.pdb.NewBatch()
		defer b.Close()
		if err := db.Transactions().AddCommitted(b, phy, phy+1); err != nil {
			return err
		}
		return b.Commit(pebble.NoSync)
	}}
}

func opCheck(phy int64, checks int32, next int64) txnOp {
	return txnOp{fmt.Sprintf("check %d", phy), func(_ *testing.T, db *DB) error {
		h := testHalf(phy)
		h.Checks, h.NextCheckAt = checks, next
		return db.Transactions().UpdateHalf(h)
	}}
}

func opForget(phy int64) txnOp {
	return txnOp{fmt.Sprintf("forget %d", phy), func(_ *testing.T, db *DB) error { return db.Transactions().ForgetHalf(phy) }}
}

func opDrop(minPhy int64) txnOp {
	return txnOp{fmt.Sprintf("drop below %d", minPhy), func(_ *testing.T, db *DB) error { return db.Transactions().DropBelow(minPhy) }}
}

// txnState lists the transaction keyspaces, one line per key: "half PHY
// q=QUEUEOFFSET stored=+MS next=+MS checks=N" (times relative to txnBase)
// and "end PHY STATE at=MS".
func txnState(t *testing.T, db *DB) []string {
	t.Helper()
	var out []string
	if err := db.Transactions().OpenHalves(func(h TxnHalf) bool {
		out = append(out, fmt.Sprintf("half %d q=%d stored=+%d next=+%d checks=%d",
			h.PhyOffset, h.QueueOffset, h.StoreTimestamp-txnBase, h.NextCheckAt-txnBase, h.Checks))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Scan([]byte{prefixTxnEnd}, func(k, v []byte) bool {
		phy, e, err := decodeTxnEnd(k, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("end %d %v at=%d", phy, e.State, e.At))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPointReads checks that Half and Ended agree with the listing of
// txnState for every offset in phys.
func checkPointReads(t *testing.T, db *DB, state []string, phys []int64) {
	t.Helper()
	for _, p := range phys {
		h, ok, err := db.Transactions().Half(p)
		if err != nil {
			t.Fatalf("half %d: %v", p, err)
		}
		listed := ""
		prefix := fmt.Sprintf("half %d ", p)
		for _, l := range state {
			if strings.HasPrefix(l, prefix) {
				listed = l
			}
		}
		if ok != (listed != "") {
			t.Errorf("Half(%d) ok=%v, listing %q", p, ok, state)
		} else if ok && (h.PhyOffset != p || !strings.HasPrefix(listed, fmt.Sprintf("half %d q=%d stored=+%d next=+%d checks=%d",
			p, h.QueueOffset, h.StoreTimestamp-txnBase, h.NextCheckAt-txnBase, h.Checks))) {
			t.Errorf("Half(%d) = %+v, listed as %q", p, h, listed)
		}

		e, ok, err := db.Transactions().Ended(p)
		if err != nil {
			t.Fatalf("ended %d: %v", p, err)
		}
		listed = ""
		prefix = fmt.Sprintf("end %d ", p)
		for _, l := range state {
			if strings.HasPrefix(l, prefix) {
				listed = l
			}
		}
		if ok != (listed != "") {
			t.Errorf("Ended(%d) ok=%v, listing %q", p, ok, state)
		} else if ok && listed != fmt.Sprintf("end %d %v at=%d", p, e.State, e.At) {
			t.Errorf("Ended(%d) = %+v, listed as %q", p, e, listed)
		}
	}
}

// Each scenario runs its operations on a fresh database and lists the
// transaction keyspaces afterwards; Half and Ended must agree with the
// listing.
func TestTransactions(t *testing.T) {
	cases := []struct {
		name string
		ops  []txnOp
		want []string
	}{{
		name: "halves of one batch are listed in CommitLog order",
		ops:  []txnOp{opAdd(5000, 100, 1<<40, 0)},
		want: []string{
			"half 0 q=0 stored=+0 next=+6000 checks=0",
			"half 100 q=1 stored=+100 next=+6100 checks=0",
			"half 5000 q=50 stored=+5000 next=+11000 checks=0",
			"half 1099511627776 q=10995116277 stored=+1099511627776 next=+1099511633776 checks=0",
		},
	}, {
		name: "end forgets the half and records state and time",
		ops: []txnOp{opAdd(100, 200, 300),
			opEnd(100, TxnCommit, txnBase+1), opEnd(200, TxnRollback, txnBase+2), opEnd(300, TxnDiscarded, txnBase+3)},
		want: []string{
			fmt.Sprintf("end 100 COMMIT_MESSAGE at=%d", txnBase+1),
			fmt.Sprintf("end 200 ROLLBACK_MESSAGE at=%d", txnBase+2),
			fmt.Sprintf("end 300 DISCARDED at=%d", txnBase+3),
		},
	}, {
		name: "end of a half never seen is recorded",
		ops:  []txnOp{opAdd(100), opEnd(700, TxnRollback, 9)},
		want: []string{"half 100 q=1 stored=+100 next=+6100 checks=0", "end 700 ROLLBACK_MESSAGE at=9"},
	}, {
		// The checker deletes the half once it finds the end.
		name: "a committed record marks the commit without a time and leaves the half",
		ops:  []txnOp{opAdd(100, 200), opCommitted(200)},
		want: []string{"half 100 q=1 stored=+100 next=+6100 checks=0", "half 200 q=2 stored=+200 next=+6200 checks=0", "end 200 COMMIT_MESSAGE at=0"},
	}, {
		name: "a check rewrites the check count and next check time",
		ops:  []txnOp{opAdd(100, 200), opCheck(200, 1, txnBase+60_000), opCheck(200, 2, txnBase+120_000)},
		want: []string{"half 100 q=1 stored=+100 next=+6100 checks=0", "half 200 q=2 stored=+200 next=+120000 checks=2"},
	}, {
		name: "forget deletes the half and records no end",
		ops:  []txnOp{opAdd(100, 200), opForget(100), opForget(300)},
		want: []string{"half 200 q=2 stored=+200 next=+6200 checks=0"},
	}, {
		name: "drop below keeps the half and end at the minimum",
		ops: []txnOp{opAdd(0, 99, 100, 101, 5000), opEnd(99, TxnCommit, 1), opEnd(100, TxnRollback, 2), opCommitted(7),
			opCommitted(101), opDrop(100)},
		want: []string{
			"half 101 q=1 stored=+101 next=+6101 checks=0",
			"half 5000 q=50 stored=+5000 next=+11000 checks=0",
			"end 100 ROLLBACK_MESSAGE at=2",
			"end 101 COMMIT_MESSAGE at=0",
		},
	}, {
		name: "drop below the first offset keeps everything",
		ops:  []txnOp{opAdd(0, 1), opEnd(0, TxnCommit, 1), opDrop(0)},
		want: []string{"half 1 q=0 stored=+1 next=+6001 checks=0", "end 0 COMMIT_MESSAGE at=1"},
	}, {
		name: "drop below a negative offset keeps everything",
		ops:  []txnOp{opAdd(0, 1, 1<<40), opEnd(0, TxnCommit, 1), opDrop(-1)},
		want: []string{
			"half 1 q=0 stored=+1 next=+6001 checks=0",
			"half 1099511627776 q=10995116277 stored=+1099511627776 next=+1099511633776 checks=0",
			"end 0 COMMIT_MESSAGE at=1",
		},
	}, {
		name: "drop below past the last offset keeps nothing",
		ops:  []txnOp{opAdd(10, 20), opEnd(10, TxnCommit, 1), opDrop(21)},
		want: nil,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openTestDB(t)
			for _, op := range c.ops {
				if err := op.do(t, db); err != nil {
					t.Fatalf("%s: %v", op.name, err)
				}
			}
			got := txnState(t, db)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("after %v:\n got %q\nwant %q", c.ops, got, c.want)
			}
			checkPointReads(t, db, got, []int64{0, 1, 7, 10, 20, 99, 100, 101, 200, 300, 700, 5000, 1 << 40})
		})
	}
}

func (o txnOp) String() string { return o.name }

// DropBelow deletes nothing outside the two transaction keyspaces, even
// keys right next to them.
func TestTxnDropBelowKeepsOtherKeyspaces(t *testing.T) {
	db := openTestDB(t)
	addHalves(t, db, 10)
	if err := db.Transactions().End(20, TxnEnd{State: TxnCommit}); err != nil {
		t.Fatal(err)
	}
	neighbours := [][]byte{{prefixTxnHalf - 1}, {prefixTxnHalf - 1, 0xff, 0xff}, {prefixTxnEnd + 1}, {prefixTxnEnd + 1, 0}}
	for _, k := range neighbours {
		if err := db.pdb.Set(k, []byte("x"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Transactions().DropBelow(1 << 40); err != nil {
		t.Fatal(err)
	}
	if got := txnState(t, db); got != nil {
		t.Errorf("transactions left: %q", got)
	}
	for _, k := range neighbours {
		if v, err := db.get(k); err != nil || string(v) != "x" {
			t.Errorf("key %x next to the transaction keyspaces: %q %v", k, v, err)
		}
	}
}

// A half added to a batch is seen only once the batch commits.
func TestTxnAddHalfIsPartOfTheBatch(t *testing.T) {
	db := openTestDB(t)
	tx := db.Transactions()
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := tx.AddHalf(b, testHalf(100)); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddCommitted(b, 100, 200); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tx.Half(100); ok || err != nil {
		t.Fatalf("half visible before its batch commits: %v %v", ok, err)
	}
	if _, ok, err := tx.Ended(100); ok || err != nil {
		t.Fatalf("commit visible before its batch commits: %v %v", ok, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := tx.Half(100); !ok || err != nil || h != testHalf(100) {
		t.Fatalf("half after commit: %+v %v %v", h, ok, err)
	}
	if e, ok, err := tx.Ended(100); !ok || err != nil || e != (TxnEnd{State: TxnCommit, By: 200}) {
		t.Fatalf("end after commit: %+v %v %v", e, ok, err)
	}
}

// OpenHalves stops when its function returns false.
func TestTxnOpenHalvesStops(t *testing.T) {
	db := openTestDB(t)
	addHalves(t, db, 3, 1, 2)
	var seen []int64
	if err := db.Transactions().OpenHalves(func(h TxnHalf) bool {
		seen = append(seen, h.PhyOffset)
		return len(seen) < 2
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, []int64{1, 2}) {
		t.Errorf("halves seen %v, want [1 2]", seen)
	}
}

// A malformed half stops OpenHalves with an error wrapping ErrBadKey; Half
// and Ended report malformed values the same way.
func TestTxnMalformedValues(t *testing.T) {
	db := openTestDB(t)
	addHalves(t, db, 1, 3)
	if err := db.pdb.Set(txnKey(prefixTxnHalf, 2), make([]byte, txnHalfValueLen-1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set(txnKey(prefixTxnEnd, 2), make([]byte, txnEndValueLen+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	err := db.Transactions().OpenHalves(func(h TxnHalf) bool { seen = append(seen, h.PhyOffset); return true })
	if !errors.Is(err, ErrBadKey) || !reflect.DeepEqual(seen, []int64{1}) {
		t.Errorf("OpenHalves over a malformed half: saw %v, error %v", seen, err)
	}
	if _, ok, err := db.Transactions().Half(2); ok || !errors.Is(err, ErrBadKey) {
		t.Errorf("Half of a malformed value: %v %v", ok, err)
	}
	if _, ok, err := db.Transactions().Ended(2); ok || !errors.Is(err, ErrBadKey) {
		t.Errorf("Ended of a malformed value: %v %v", ok, err)
	}
}

// An end survives closing and reopening the database, and the half it
// ended stays deleted.
func TestTxnEndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	addHalves(t, db, 100, 200)
	if err := db.Transactions().End(100, TxnEnd{State: TxnRollback, At: txnBase}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDBAt(t, dir)
	want := []string{"half 200 q=2 stored=+200 next=+6200 checks=0", fmt.Sprintf("end 100 ROLLBACK_MESSAGE at=%d", txnBase)}
	got := txnState(t, db)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after reopen:\n got %q\nwant %q", got, want)
	}
	checkPointReads(t, db, got, []int64{100, 200})
}

// End is synced: it survives a crash that loses every write not synced,
// which a check (not synced) does not, unless Sync follows it.
func TestTxnEndSurvivesCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openDBOn(t, fs)
	addHalves(t, db, 100, 200, 300)
	if err := db.Transactions().End(100, TxnEnd{State: TxnCommit, At: txnBase}); err != nil {
		t.Fatal(err)
	}
	if err := db.Transactions().UpdateHalf(TxnHalf{PhyOffset: 200, QueueOffset: 2, StoreTimestamp: txnBase + 200, Checks: 1, NextCheckAt: txnBase + 9000}); err != nil {
		t.Fatal(err)
	}
	if err := db.Transactions().Sync(); err != nil {
		t.Fatal(err)
	}
	if err := db.Transactions().UpdateHalf(TxnHalf{PhyOffset: 300, Checks: 1, NextCheckAt: txnBase + 1}); err != nil {
		t.Fatal(err)
	}
	after := openDBOn(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	want := []string{
		"half 200 q=2 stored=+200 next=+9000 checks=1",
		"half 300 q=3 stored=+300 next=+6300 checks=0",
		fmt.Sprintf("end 100 COMMIT_MESSAGE at=%d", txnBase),
	}
	if got := txnState(t, after); !reflect.DeepEqual(got, want) {
		t.Errorf("after a crash:\n got %q\nwant %q", got, want)
	}
}

// DecodeKey turns every key the transaction API writes into its record,
// with the text form kvdump prints.
func TestDecodeTxnKeyspaces(t *testing.T) {
	db := openTestDB(t)
	tx := db.Transactions()
	half := TxnHalf{PhyOffset: 4096, QueueOffset: 7, StoreTimestamp: txnBase, NextCheckAt: txnBase + 61_000, Checks: 3}
	b := db.pdb.NewBatch()
	if err := tx.AddHalf(b, half); err != nil {
		t.Fatal(err)
	}
	// A commit the dispatcher learnt from a committed record has no time.
	if err := tx.AddCommitted(b, 3, 4); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for phy, e := range map[int64]TxnEnd{1: {State: TxnRollback, At: txnBase}, 2: {State: TxnDiscarded, At: txnBase}, 4096: {State: TxnCommit, At: txnBase + 5}} {
		if err := tx.End(phy, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.UpdateHalf(TxnHalf{PhyOffset: 8192, QueueOffset: 8, StoreTimestamp: txnBase, NextCheckAt: txnBase, Checks: 1}); err != nil {
		t.Fatal(err)
	}
	// A state a later version may add is shown by number.
	if err := db.pdb.Set(txnKey(prefixTxnEnd, 5), encodeTxnEnd(TxnEnd{State: 7, At: txnBase}), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	type decoded struct {
		rec  Record
		text string
	}
	want := []decoded{
		{TxnHalfRecord{TxnHalf{PhyOffset: 8192, QueueOffset: 8, StoreTimestamp: txnBase, NextCheckAt: txnBase, Checks: 1}},
			"phyOffset=8192 queueOffset=8 storeTime=2026-01-01T00:00:00.000Z checks=1 nextCheck=2026-01-01T00:00:00.000Z"},
		{TxnEndRecord{HalfPhyOffset: 1, State: "ROLLBACK_MESSAGE", At: txnBase},
			"halfPhyOffset=1 state=ROLLBACK_MESSAGE at=2026-01-01T00:00:00.000Z"},
		{TxnEndRecord{HalfPhyOffset: 2, State: "DISCARDED", At: txnBase},
			"halfPhyOffset=2 state=DISCARDED at=2026-01-01T00:00:00.000Z"},
		{TxnEndRecord{HalfPhyOffset: 3, State: "COMMIT_MESSAGE", By: 4},
			"halfPhyOffset=3 state=COMMIT_MESSAGE at=- by=4"},
		{TxnEndRecord{HalfPhyOffset: 5, State: "TxnState(7)", At: txnBase},
			"halfPhyOffset=5 state=TxnState(7) at=2026-01-01T00:00:00.000Z"},
		{TxnEndRecord{HalfPhyOffset: 4096, State: "COMMIT_MESSAGE", At: txnBase + 5},
			"halfPhyOffset=4096 state=COMMIT_MESSAGE at=2026-01-01T00:00:00.005Z"},
	}
	var got []decoded
	for _, ks := range txnKeyspaces() {
		if err := db.Scan([]byte{ks.Prefix}, func(k, v []byte) bool {
			r, err := DecodeKey(k, v)
			if err != nil {
				t.Fatalf("key %x: %v", k, err)
			}
			if r.Keyspace() != ks {
				t.Errorf("key %x: keyspace %+v, want %+v", k, r.Keyspace(), ks)
			}
			got = append(got, decoded{r, r.String()})
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %d records, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].rec, want[i].rec) {
			t.Errorf("record %d: %#v, want %#v", i, got[i].rec, want[i].rec)
		}
		if got[i].text != want[i].text {
			t.Errorf("record %d text:\n got %s\nwant %s", i, got[i].text, want[i].text)
		}
	}
}

// The transaction keyspaces are listed with the others, in prefix order.
func TestTxnKeyspacesListed(t *testing.T) {
	ks := Keyspaces()
	for i := 1; i < len(ks); i++ {
		if ks[i].Prefix <= ks[i-1].Prefix {
			t.Errorf("keyspace %v listed after %v", ks[i], ks[i-1])
		}
	}
	for p, name := range map[byte]string{0x60: "txn-half", 0x61: "txn-end"} {
		if k, ok := KeyspaceOf(p); !ok || k.Name != name || k.Derivable {
			t.Errorf("KeyspaceOf(%#02x) = %+v %v, want %s, not derivable", p, k, ok, name)
		}
	}
}

// rocketMQOps lists the half-queue offsets of the 0x62 keyspace in key
// order, as they decode for kvdump.
func rocketMQOps(t *testing.T, db *DB) []int64 {
	t.Helper()
	var offs []int64
	if err := db.Scan([]byte{prefixTxnOp}, func(k, v []byte) bool {
		r, err := DecodeKey(k, v)
		if err != nil {
			t.Fatalf("key %x: %v", k, err)
		}
		op, ok := r.(TxnOpRecord)
		if !ok {
			t.Fatalf("key %x decoded as %#v", k, r)
		}
		if want := fmt.Sprintf("halfQueueOffset=%d opPhyOffset=%d", op.HalfQueueOffset, 1000+op.HalfQueueOffset); r.String() != want {
			t.Errorf("key %x: text %q, want %q", k, r.String(), want)
		}
		offs = append(offs, op.HalfQueueOffset)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return offs
}

// The op messages of a migrated RocketMQ store end the halves they list,
// once the dispatcher's batch commits; a negative offset ends nothing
// and writes no key (as a uint64 it would be the keyspace's last key).
func TestTxnRocketMQOps(t *testing.T) {
	db := openTestDB(t)
	tx := db.Transactions()
	// addOps adds the offsets in one batch; before it commits, none of
	// the offsets in unseen reads as ended.
	addOps := func(unseen []int64, offs ...int64) {
		t.Helper()
		b := db.pdb.NewBatch()
		defer b.Close()
		for _, off := range offs {
			if err := tx.AddRocketMQOp(b, off, 1000+off); err != nil {
				t.Fatal(err)
			}
		}
		for _, off := range unseen {
			if ended, err := tx.RocketMQOpEnded(off, -1); ended || err != nil {
				t.Fatalf("op for %d visible before its batch commits: %v %v", off, ended, err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	addOps([]int64{0, 1203, 1204}, 1203, 1204, 0, -1, math.MinInt64)
	want := []int64{0, 1203, 1204}
	if got := rocketMQOps(t, db); !reflect.DeepEqual(got, want) {
		t.Fatalf("op keys %v, want %v", got, want)
	}
	for off, want := range map[int64]bool{0: true, 1203: true, 1204: true, 1: false, 1202: false, 1205: false, math.MaxInt64: false} {
		if ended, err := tx.RocketMQOpEnded(off, -1); ended != want || err != nil {
			t.Errorf("RocketMQOpEnded(%d) = %v %v, want %v", off, ended, err, want)
		}
	}

	// Only an op stored after the half ends it: one stored before is
	// about an older half of the offset.
	for after, want := range map[int64]bool{-1: true, 0: true, 2202: true, 2203: false, 5000: false} {
		if ended, err := tx.RocketMQOpEnded(1203, after); ended != want || err != nil {
			t.Errorf("RocketMQOpEnded(1203, %d) with the op at 2203 = %v %v, want %v", after, ended, err, want)
		}
	}

	// A record dispatched again rewrites the same keys.
	addOps(nil, 1204, 1203)
	if got := rocketMQOps(t, db); !reflect.DeepEqual(got, want) {
		t.Errorf("op keys after re-dispatch %v, want %v", got, want)
	}

	// A negative offset is never ended, even with a key at its bits.
	if err := db.pdb.Set(txnKey(prefixTxnOp, -1), []byte{1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{-1, math.MinInt64} {
		if ended, err := tx.RocketMQOpEnded(off, -1); ended || err != nil {
			t.Errorf("RocketMQOpEnded(%d) = %v %v, want false", off, ended, err)
		}
	}
	if err := db.pdb.Delete(txnKey(prefixTxnOp, -1), pebble.Sync); err != nil {
		t.Fatal(err)
	}

	// Keyed by half-queue offset, the keys outlive CommitLog retention.
	if err := tx.DropBelow(1 << 40); err != nil {
		t.Fatal(err)
	}
	if got := rocketMQOps(t, db); !reflect.DeepEqual(got, want) {
		t.Errorf("op keys after DropBelow %v, want %v", got, want)
	}
	// DropOpsBelow bounds them by the half queue's minimum; a bound of 0
	// or less drops nothing.
	for _, bound := range []int64{0, -1, math.MinInt64} {
		if err := tx.DropOpsBelow(bound); err != nil {
			t.Fatal(err)
		}
	}
	if got := rocketMQOps(t, db); !reflect.DeepEqual(got, want) {
		t.Errorf("op keys after DropOpsBelow(0 or less) %v, want %v", got, want)
	}
	if err := tx.DropOpsBelow(1204); err != nil {
		t.Fatal(err)
	}
	if got := rocketMQOps(t, db); !reflect.DeepEqual(got, []int64{1204}) {
		t.Errorf("op keys after DropOpsBelow(1204) %v, want [1204]", got)
	}
	if k, ok := KeyspaceOf(prefixTxnOp); !ok || k.Name != "txn-rocketmq-op" || !k.Derivable {
		t.Errorf("KeyspaceOf(0x62) = %+v %v, want txn-rocketmq-op, derivable", k, ok)
	}
}

// RocketMQ's check progress is the consumer offset of CID_RMQ_SYS_TRANS on
// RMQ_SYS_TRANS_HALF_TOPIC queue 0, and only that offset.
func TestTxnRocketMQCheckProgress(t *testing.T) {
	db := openTestDB(t)
	tx := db.Transactions()
	if p, ok, err := tx.RocketMQCheckProgress(); p != 0 || ok || err != nil {
		t.Fatalf("progress of a store RocketMQ never checked: %d %v %v", p, ok, err)
	}
	offsets := db.ConsumerOffsets()
	for _, o := range []OffsetUpdate{
		{Group: "CID_RMQ_SYS_TRANS", Topic: "RMQ_SYS_TRANS_HALF_TOPIC", QueueID: 1, Offset: 11},
		{Group: "CID_RMQ_SYS_TRANS", Topic: "RMQ_SYS_TRANS_OP_HALF_TOPIC", QueueID: 0, Offset: 12},
		{Group: "CID_OTHER", Topic: "RMQ_SYS_TRANS_HALF_TOPIC", QueueID: 0, Offset: 13},
	} {
		if err := offsets.Set(o.Group, o.Topic, o.QueueID, o.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok, err := tx.RocketMQCheckProgress(); p != 0 || ok || err != nil {
		t.Fatalf("progress from other groups, topics or queues: %d %v %v", p, ok, err)
	}
	if err := offsets.Set("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0, 1205); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := tx.RocketMQCheckProgress(); p != 1205 || !ok || err != nil {
		t.Errorf("progress %d %v %v, want 1205", p, ok, err)
	}
}

// A cut of the CommitLog's tail (DropAbove) opens again a transaction
// whose commit recorded a message past the cut, and leaves given up one
// whose copy in TRANS_CHECK_MAX_TIME_TOPIC was past it: a give-up needs no
// record to stand, the copy only carries the count a late commit takes.
func TestTxnDropAboveReopensALostCommitButNotALostGiveUp(t *testing.T) {
	db := openTestDB(t)
	addHalves(t, db, 100, 200)
	for phy, e := range map[int64]TxnEnd{
		100: {State: TxnCommit, At: txnBase, By: 5000},
		200: {State: TxnDiscarded, At: txnBase, By: 5100},
	} {
		if err := db.Transactions().End(phy, e); err != nil {
			t.Fatal(err)
		}
	}
	halves := map[int64]TxnHalf{100: testHalf(100), 200: testHalf(200)}
	opened, err := db.Transactions().DropAbove(4096, 10, func(phy int64) (TxnHalf, bool, error) {
		h, ok := halves[phy]
		return h, ok, nil
	})
	if err != nil || opened != 1 {
		t.Fatalf("DropAbove: %d opened, %v; want the commit's transaction opened", opened, err)
	}
	if _, ended, err := db.Transactions().Ended(100); err != nil || ended {
		t.Errorf("the commit whose message the cut lost: ended %v, %v; want open", ended, err)
	}
	if _, open, err := db.Transactions().Half(100); err != nil || !open {
		t.Errorf("the commit whose message the cut lost: half open %v, %v; want open again", open, err)
	}
	e, ended, err := db.Transactions().Ended(200)
	if err != nil || !ended || e.State != TxnDiscarded || e.By != 5100 {
		t.Errorf("the give-up whose copy the cut lost: %+v ended %v, %v; want it still given up", e, ended, err)
	}
}
