package grpcproxy

import (
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
