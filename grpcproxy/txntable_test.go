package grpcproxy

import (
	"strconv"
	"testing"
	"time"
)

// The transaction table forgets the half message remembered longest ago
// when full, hands each one out once, and never one kept past txnKeep.
func TestTxnTable(t *testing.T) {
	tt := newTxnTable(3)
	now := time.Now()
	for i, id := range []string{"a", "b", "c", "d"} {
		tt.put("G", id, txnData{tranStateTableOffset: int64(i), at: now})
	}
	if _, ok := tt.take("G", "a"); ok {
		t.Error("the oldest half message of a full table was kept")
	}
	if d, ok := tt.take("G", "d"); !ok || d.tranStateTableOffset != 3 {
		t.Errorf("take d = %+v %v, want offset 3", d, ok)
	}
	if _, ok := tt.take("G", "d"); ok {
		t.Error("a half message was handed out twice")
	}
	if _, ok := tt.take("H", "b"); ok {
		t.Error("another group's transaction id matched")
	}
	tt.put("G", "old", txnData{at: now.Add(-txnKeep - time.Minute)})
	if _, ok := tt.take("G", "old"); ok {
		t.Error("a half message older than txnKeep was handed out")
	}
}

// BenchmarkTxnTablePut measures remembering a half message in a table
// kept from filling (each put after a take) and in a full one (txnMax
// entries, each put evicting the oldest), beside the baseline of what a
// put into a full table cost before the table was an LRU: a scan of
// txnMax entries for the expired and the oldest.
func BenchmarkTxnTablePut(b *testing.B) {
	now := time.Now()
	b.Run("not-full", func(b *testing.B) {
		tt := newTxnTable(txnMax)
		tt.put("G", strconv.Itoa(txnMax-1), txnData{at: now})
		b.ResetTimer()
		for i := range b.N {
			tt.take("G", strconv.Itoa(txnMax+i-1))
			tt.put("G", strconv.Itoa(txnMax+i), txnData{at: now})
		}
	})
	b.Run("full", func(b *testing.B) {
		tt := newTxnTable(txnMax)
		for i := range txnMax {
			tt.put("G", strconv.Itoa(i), txnData{at: now})
		}
		b.ResetTimer()
		for i := range b.N {
			tt.put("G", strconv.Itoa(txnMax+i), txnData{at: now})
		}
	})
	b.Run("baseline-scan", func(b *testing.B) {
		m := make(map[string]txnData, txnMax)
		for i := range txnMax {
			m[txnKey("G", strconv.Itoa(i))] = txnData{at: now.Add(time.Duration(i))}
		}
		b.ResetTimer()
		for range b.N {
			oldest, at := "", now.Add(time.Hour)
			for k, v := range m {
				if time.Since(v.at) > txnKeep {
					delete(m, k)
				} else if v.at.Before(at) {
					oldest, at = k, v.at
				}
			}
			if oldest == "" {
				b.Fatal("no oldest entry")
			}
		}
	})
}
