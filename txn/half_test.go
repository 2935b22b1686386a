package txn

import (
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
)

// A send is a transaction's half when its TRAN_MSG property reads true in
// any case, as Java's Boolean.parseBoolean reads it in RocketMQ's send
// processor, or when its sysFlag says PREPARED; anything else is an
// ordinary message.
func TestIsHalfSend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		props   string
		sysFlag int32
		want    bool
	}{
		{"TRAN_MSG true", "TRAN_MSG\x01true\x02", 0, true},
		{"TRAN_MSG TRUE", "TRAN_MSG\x01TRUE\x02", 0, true},
		{"TRAN_MSG True", "KEYS\x01k\x02TRAN_MSG\x01True\x02", 0, true},
		{"TRAN_MSG false", "TRAN_MSG\x01false\x02", 0, false},
		{"TRAN_MSG yes", "TRAN_MSG\x01yes\x02", 0, false},
		{"TRAN_MSG empty", "TRAN_MSG\x01\x02", 0, false},
		{"no property", "KEYS\x01k\x02", 0, false},
		{"prepared sysFlag", "", commitlog.TransactionPrepared, true},
		{"commit sysFlag", "", commitlog.TransactionCommit, false},
	} {
		if got := IsHalfSend(tc.props, tc.sysFlag); got != tc.want {
			t.Errorf("%s: IsHalfSend = %v, want %v", tc.name, got, tc.want)
		}
	}
}
