package autoswitch

import (
	"slices"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// limits records the values a Server or Client gives ConfirmLimit.
type limits struct {
	mu   sync.Mutex
	seen []int64
}

func (l *limits) add(v int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, v)
}

func (l *limits) last() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) == 0 {
		return -2
	}
	return l.seen[len(l.seen)-1]
}

// A master with allAckInSyncStateSet and a member not connected yet
// limits reads at the stored confirm offset from its start, moves the
// limit with the slave's acknowledgements, and lifts it when it is alone
// in the set; without allAckInSyncStateSet it never limits. The slave
// limits its own reads at the confirm offset each transfer carries, and
// reports the stored one before the first.
func TestConfirmLimitFollowsTheSyncStateSet(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 100, 0)
	stored := ml.MaxOffset() / 2
	var ml2 limits
	m := startMaster(t, ml, mEpochs, func(c *ServerConfig) {
		c.AllAckInSyncStateSet = true
		c.SyncStateSet = []int64{1, 2}
		c.StoredConfirmOffset = stored
		c.ConfirmLimit = ml2.add
	})
	if got := ml2.last(); got != stored {
		t.Fatalf("limit at start with the set's slave not connected: %d, want the stored %d", got, stored)
	}
	if got := m.srv.ConfirmOffset(); got != stored {
		t.Fatalf("ConfirmOffset at start %d, want the stored %d", got, stored)
	}

	rl := openLog(t, logConfig(t.TempDir(), true))
	rEpochs := openEpochs(t, t.TempDir())
	if err := BecomeSlave(rEpochs, 1); err != nil {
		t.Fatal(err)
	}
	var sl limits
	startSlaveWith(t, m.srv.Addr().String(), 2, rl, rEpochs, func(c *ClientConfig) {
		c.StoredConfirmOffset = 7
		c.ConfirmLimit = sl.add
	})
	end := ml.MaxOffset()
	waitFor(t, "the master's limit to reach its end", func() bool { return ml2.last() == end })
	waitFor(t, "the slave's limit to reach the master's confirm offset", func() bool { return sl.last() == end })
	appendN(t, ml, 100, 10, 0)
	waitFor(t, "the limit to follow the slave", func() bool { return ml2.last() == ml.MaxOffset() })

	m.srv.SetSyncStateSet([]int64{1})
	if got := ml2.last(); got != -1 {
		t.Fatalf("limit with the master alone in the set: %d, want none (-1)", got)
	}
	ml2.mu.Lock()
	seen := slices.Clone(ml2.seen)
	ml2.mu.Unlock()
	for i := 1; i < len(seen); i++ {
		if seen[i] == seen[i-1] {
			t.Fatalf("the same limit given twice in a row: %v", seen)
		}
	}

	var none limits
	startMaster(t, ml, mEpochs, func(c *ServerConfig) {
		c.SyncStateSet = []int64{1, 2}
		c.StoredConfirmOffset = stored
		c.ConfirmLimit = none.add
	})
	if got := none.last(); got != -1 {
		t.Fatalf("limit without allAckInSyncStateSet: %d, want none (-1)", got)
	}
}

// A slave reports its stored confirm offset before the first transfer.
func TestClientReportsTheStoredConfirmOffset(t *testing.T) {
	c := NewClient(ClientConfig{StoredConfirmOffset: 42})
	if got := c.ConfirmOffset(); got != 42 {
		t.Fatalf("ConfirmOffset before a transfer %d, want the stored 42", got)
	}
	if got := NewClient(ClientConfig{StoredConfirmOffset: -5}).ConfirmOffset(); got != -1 {
		t.Fatalf("ConfirmOffset with no stored one %d, want -1", got)
	}
}

// A stored confirm offset of 0 is one (RocketMQ's recovery keeps a
// checkpoint's 0 as its confirm offset, at least the CommitLog's first
// offset): a master with allAckInSyncStateSet and a member not connected
// shows none of its records until the set acknowledges them, as the
// broker held them at start, rather than all of them. Negative is none.
func TestStoredConfirmOffsetZeroHolds(t *testing.T) {
	ml := openLog(t, logConfig(t.TempDir(), false))
	mEpochs := openEpochs(t, t.TempDir())
	if err := BecomeMaster(mEpochs, 1, ml.MaxOffset(), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	appendN(t, ml, 0, 10, 0)
	var got limits
	m := startMaster(t, ml, mEpochs, func(c *ServerConfig) {
		c.AllAckInSyncStateSet = true
		c.SyncStateSet = []int64{1, 2}
		c.StoredConfirmOffset = 0
		c.ConfirmLimit = got.add
	})
	if l := got.last(); l != 0 {
		t.Fatalf("limit at start with a stored 0 and the set's slave not connected: %d, want 0", l)
	}
	if c := m.srv.ConfirmOffset(); c != 0 {
		t.Fatalf("ConfirmOffset at start %d, want the stored 0", c)
	}
	var none limits
	startMaster(t, ml, mEpochs, func(c *ServerConfig) {
		c.AllAckInSyncStateSet = true
		c.SyncStateSet = []int64{1, 2}
		c.StoredConfirmOffset = -1
		c.ConfirmLimit = none.add
	})
	if l := none.last(); l != ml.MaxOffset() {
		t.Fatalf("limit at start with no stored confirm offset: %d, want the end %d", l, ml.MaxOffset())
	}
}
