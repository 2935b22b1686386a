package broker

import (
	"strconv"
	"testing"
	"time"
)

// A slave copies its master's CommitLog, not its index. How the master's
// transactions ended reaches it with the log: the committed message ends
// its half, and the op message written for every end ends the rolled-back
// one. Promoted, it asks the producer about the open transaction only.
func TestPromotedSlaveKnowsWhichTransactionsEnded(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	c := master.client(nil)
	born := time.Now().UnixMilli()
	committed := sendHalf(t, c, "TxF", 0, "UNIQ-F-C", "committed", "", born)
	rolledBack := sendHalf(t, c, "TxF", 0, "UNIQ-F-R", "rolled back", "", born)
	open := sendHalf(t, c, "TxF", 0, "UNIQ-F-O", "open", "", born)
	master.caughtUp()
	if r := endTxn(t, c, committed, "pg", 8, false); r.Code != 0 {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if r := endTxn(t, c, rolledBack, "pg", 12, false); r.Code != 0 {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master) // the topic configs

	// The master is lost; the slave is restarted on its store as the
	// master, checking transactions older than 100 ms.
	master.stop()
	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(map[string]string{"transactionTimeOut": "100", "transactionCheckInterval": "100"}))
	var rec checkRecorder
	producer := promoted.client(rec.handle)
	heartbeat(t, producer, heartbeatBody("10.0.0.9@1", "pg", "", nil))
	// A pass checks the due halves in CommitLog order: the two that
	// ended come before the open one, so once the open one is asked
	// about, they would have been too.
	openPhy := strconv.FormatInt(open.phy, 10)
	waitFor(t, "a check of the open transaction", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, chk := range rec.checks {
			if chk.ExtFields["commitLogOffset"] == openPhy {
				return true
			}
		}
		return false
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, chk := range rec.checks {
		if off := chk.ExtFields["commitLogOffset"]; off != openPhy {
			t.Errorf("the promoted slave asked about the transaction of the half at %s, which its master ended (committed at %d, rolled back at %d)",
				off, committed.phy, rolledBack.phy)
		}
	}
	if got := pullAll(t, promoted, producer, "TxF", 0); len(got) != 1 || string(got[0].Body) != "committed" {
		t.Fatalf("the promoted slave's TxF/0 holds %d messages, want the committed one", len(got))
	}
}
