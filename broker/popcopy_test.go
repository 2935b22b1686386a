package broker

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// putInFlight writes n checkpoints of one message each, on queues 0..n-1,
// into b's POP state.
func putInFlight(t *testing.T, b *testBroker, n int) {
	t.Helper()
	batch := b.db.Pop().NewBatch()
	defer batch.Close()
	now := time.Now().UnixMilli()
	for q := range n {
		ck := kvindex.Checkpoint{Group: "g", Topic: "PC", QueueID: int32(q), CKOffset: 7, PopTime: now, InvisibleTime: 60_000,
			VisibleAt: now + 60_000, Offsets: []int64{7}}
		if err := batch.PutCheckpoint(&ck); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Commit(true); err != nil {
		t.Fatal(err)
	}
}

// A slave copies a POP state many pages long and larger than one answer
// may be, read from one snapshot, and holds exactly its master's; a page
// of a copy that ended is refused; a slave of an earlier version, which
// asks without pages, gets the whole copy in one answer while it fits.
func TestPopStateCopiedInPages(t *testing.T) {
	const page = 2048
	master := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.popCopyPage, b.popCopyMax = page, 8*page })
	slave := startTestBroker(t, nil)
	putInFlight(t, master, 500)
	whole, n, err := master.db.AppendPopState(nil, 1<<30)
	if err != nil || n != 1000 || len(whole) < 20*page {
		t.Fatalf("the master's state: %d keys in %d bytes, %v; want 1,000 keys in more than 20 pages", n, len(whole), err)
	}
	syncSlave(t, slave, master)
	if copied, _, err := slave.db.AppendPopState(nil, 1<<30); err != nil || !bytes.Equal(copied, whole) {
		t.Fatalf("the slave's state (%d bytes, %v) is not the master's (%d bytes)", len(copied), err, len(whole))
	}
	master.popCopies.mu.Lock()
	open := len(master.popCopies.sessions)
	master.popCopies.mu.Unlock()
	if open != 0 {
		t.Fatalf("the master keeps %d copies after the last page", open)
	}

	c := master.client(nil)
	r := call(t, c, remoting.GetPopState, map[string]string{popCopyFieldPaged: "true", popCopyFieldSession: "0123456789abcdef"}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "ended or expired") {
		t.Fatalf("a page of an unknown copy: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.GetPopState, nil, nil); r.Code != remoting.SystemError {
		t.Fatalf("the whole copy, larger than one answer may be, in one answer: %d %s, %d bytes", r.Code, r.Remark, len(r.Body))
	}
	// The slave holds the same state, under the default bound.
	if r := call(t, slave.client(nil), remoting.GetPopState, nil, nil); r.Code != remoting.Success || !bytes.Equal(r.Body, whole) {
		t.Fatalf("the whole copy in one answer: %d %s, %d bytes", r.Code, r.Remark, len(r.Body))
	}
}
