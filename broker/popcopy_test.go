package broker

import (
	"bytes"
	"context"
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

// A copy whose slave stops asking for pages is closed once idle, without
// another copy starting: its snapshot would keep Pebble from dropping
// what changed since.
func TestAnAbandonedPopStateCopyIsClosed(t *testing.T) {
	master := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) {
		b.popCopyPage = 2048
		// Longer than any pause of a loaded machine while the pages
		// are asked; shortened below to see the copy close.
		b.popCopies.idle = time.Hour
	})
	putInFlight(t, master, 100)
	c := master.client(nil)
	r := call(t, c, remoting.GetPopState, map[string]string{popCopyFieldPaged: "true"}, nil)
	if r.Code != remoting.Success || r.ExtFields[popCopyFieldDone] != "false" {
		t.Fatalf("the first page: %d %s, done %q", r.Code, r.Remark, r.ExtFields[popCopyFieldDone])
	}
	session := r.ExtFields[popCopyFieldSession]
	master.popCopies.mu.Lock()
	served := master.popCopies.sessions[session]
	master.popCopies.mu.Unlock()
	// Each page asked keeps it open: it moves the time the idle time
	// counts from.
	used := func() time.Time {
		master.popCopies.mu.Lock()
		defer master.popCopies.mu.Unlock()
		return served.used
	}
	for range 3 {
		before := used()
		if r := call(t, c, remoting.GetPopState, map[string]string{popCopyFieldPaged: "true", popCopyFieldSession: session}, nil); r.Code != remoting.Success {
			t.Fatalf("a page within the idle time: %d %s", r.Code, r.Remark)
		}
		if after := used(); !after.After(before) {
			t.Fatalf("a page left the copy's last use at %v (was %v)", after, before)
		}
	}
	// No page comes any more: once idle, the copy closes.
	master.popCopies.mu.Lock()
	master.popCopies.idle = 200 * time.Millisecond
	served.timer.Reset(master.popCopies.idle)
	master.popCopies.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		served.mu.Lock()
		closed := served.closed
		served.mu.Unlock()
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an abandoned copy is still open 10 s after its last page")
		}
		time.Sleep(20 * time.Millisecond)
	}
	master.popCopies.mu.Lock()
	open := len(master.popCopies.sessions)
	master.popCopies.mu.Unlock()
	if open != 0 {
		t.Fatalf("%d copies listed after the abandoned one closed", open)
	}
}

// A master whose pages stop growing the copy before its last is refused,
// not asked again forever.
func TestAnEmptyPageBeforeTheLastIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	r := b.db.NewPopStateReader()
	empty, _, _, err := r.Page(nil, 1<<20) // the version byte alone
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.GetPopState, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.ExtFields = map[string]string{popCopyFieldSession: "s", popCopyFieldDone: "false"}
		resp.Body = empty
		_ = conn.Reply(req, resp)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := b.masterConn(ctx, startRemotingServer(t, mux))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := askMasterPopState(ctx, c); err == nil || ctx.Err() != nil {
		t.Fatalf("pages holding nothing: %v (context %v)", err, ctx.Err())
	}
}

// Once the copies are closed for the index's closing, a request that
// outlived the server's shutdown starts none (its snapshot would outlive
// the index).
func TestNoPopStateCopyStartsAfterCloseAll(t *testing.T) {
	b := startTestBroker(t, nil)
	var copies popCopies
	copies.closeAll()
	if _, c, err := copies.start(b.db, time.Now()); err == nil || c != nil {
		t.Fatalf("a copy started after closeAll: %v", err)
	}
}
