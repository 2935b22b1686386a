package commitlog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A confirm limit holds a confirmed reader at the limit, also inside a
// record (the record waits for the whole of it to be confirmed), Wait
// returns when the limit moves past the record, and lifting the limit
// shows the rest; a plain reader is not bound.
func TestConfirmLimitHoldsConfirmedReaders(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	l := mustOpen(t, cfg)
	defer l.Close()
	var recs []AppendResult
	for i := range 3 {
		recs = append(recs, mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 100)}))
	}
	end1 := recs[0].PhyOffset + int64(recs[0].WroteBytes)
	// Inside the second record: only the first is confirmed.
	l.SetConfirmLimit(end1 + 10)
	if got := l.ConfirmedOffset(); got != end1+10 {
		t.Fatalf("ConfirmedOffset %d, want the limit %d", got, end1+10)
	}
	r := l.NewConfirmedReader(0)
	defer r.Close()
	if e, err := r.Next(); err != nil || e.Offset != recs[0].PhyOffset {
		t.Fatalf("first record: %+v, %v", e, err)
	}
	if e, err := r.Next(); !errors.Is(err, ErrNoMoreData) {
		t.Fatalf("record crossing the limit: %+v, %v; want ErrNoMoreData (not ErrCorrupt)", e, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := r.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the limit cuts the record: %v, want the deadline", err)
	}
	plain := l.NewReader(0)
	defer plain.Close()
	for i := range recs {
		if e, err := plain.Next(); err != nil || e.Offset != recs[i].PhyOffset {
			t.Fatalf("plain reader record %d: %+v, %v", i, e, err)
		}
	}

	waited := make(chan error, 1)
	go func() { waited <- r.Wait(context.Background()) }()
	// A move that still cuts the record must not wake the reader for
	// nothing it can read.
	l.SetConfirmLimit(end1 + 20)
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) with the record still cut by the limit", err)
	case <-time.After(50 * time.Millisecond):
	}
	end2 := recs[1].PhyOffset + int64(recs[1].WroteBytes)
	l.SetConfirmLimit(end2)
	if err := <-waited; err != nil {
		t.Fatalf("Wait after the limit passed the record: %v", err)
	}
	if e, err := r.Next(); err != nil || e.Offset != recs[1].PhyOffset {
		t.Fatalf("second record after the limit moved: %+v, %v", e, err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrNoMoreData) {
		t.Fatalf("third record under the limit: %v, want ErrNoMoreData", err)
	}
	l.SetConfirmLimit(-1)
	if got, want := l.ConfirmedOffset(), l.MaxOffset(); got != want {
		t.Fatalf("ConfirmedOffset without a limit %d, want the end %d", got, want)
	}
	if err := r.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after the limit was lifted: %v", err)
	}
	if e, err := r.Next(); err != nil || e.Offset != recs[2].PhyOffset {
		t.Fatalf("third record without a limit: %+v, %v", e, err)
	}
}

// A reader waiting at the confirmed end under a limit above it waits for
// appends, then for the limit when the new record is past it; a limit
// lowered below a reader holds it without taking back what it read.
func TestConfirmLimitAboveTheEndWaitsForAppends(t *testing.T) {
	l := mustOpen(t, testConfig(t, 64<<10))
	defer l.Close()
	first := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 50)})
	end1 := first.PhyOffset + int64(first.WroteBytes)
	l.SetConfirmLimit(end1 + 1<<20)
	r := l.NewConfirmedReader(0)
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatalf("first record: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- r.Wait(context.Background()) }()
	second := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 50)})
	if err := <-waited; err != nil {
		t.Fatalf("Wait for an append under a high limit: %v", err)
	}
	if e, err := r.Next(); err != nil || e.Offset != second.PhyOffset {
		t.Fatalf("second record: %+v, %v", e, err)
	}
	// Lowered below the reader: it stays where it is.
	l.SetConfirmLimit(end1)
	if _, err := r.Next(); !errors.Is(err, ErrNoMoreData) {
		t.Fatalf("Next under a lowered limit: %v, want ErrNoMoreData", err)
	}
	go func() { waited <- r.Wait(context.Background()) }()
	third := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 2, 50)})
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) for a record the limit holds back", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.SetConfirmLimit(third.PhyOffset + int64(third.WroteBytes))
	if err := <-waited; err != nil {
		t.Fatalf("Wait after the limit reached the third record: %v", err)
	}
	if e, err := r.Next(); err != nil || e.Offset != third.PhyOffset {
		t.Fatalf("third record: %+v, %v", e, err)
	}
}

// ReadUncommitted lifts the confirm limit as it lifts the flushed bound.
func TestConfirmLimitIgnoredWithReadUncommitted(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	cfg.ReadUncommitted = true
	l := mustOpen(t, cfg)
	defer l.Close()
	res := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 50)})
	l.SetConfirmLimit(0)
	r := l.NewConfirmedReader(0)
	defer r.Close()
	if e, err := r.Next(); err != nil || e.Offset != res.PhyOffset {
		t.Fatalf("confirmed reader with readUnCommitted under a limit of 0: %+v, %v", e, err)
	}
}

// Under SyncFlush the confirmed end is the lower of the flushed offset
// and the limit.
func TestConfirmLimitWithSyncFlush(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	cfg.FlushType = SyncFlush
	l := mustOpen(t, cfg)
	defer l.Close()
	a := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 50), WaitFlush: true})
	b := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 50), WaitFlush: true})
	endA, endB := a.PhyOffset+int64(a.WroteBytes), b.PhyOffset+int64(b.WroteBytes)
	if got := l.ConfirmedOffset(); got != endB {
		t.Fatalf("flushed, no limit: ConfirmedOffset %d, want %d", got, endB)
	}
	l.SetConfirmLimit(endA)
	if got := l.ConfirmedOffset(); got != endA {
		t.Fatalf("flushed, limit at the first record's end: ConfirmedOffset %d, want %d", got, endA)
	}
}

// The limit is the checkpoint's ConfirmPhyOffset, kept across a restart
// (RocketMQ's confirmPhyOffset); lifting it keeps the last one.
func TestConfirmLimitPersistsInTheCheckpoint(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	l := mustOpen(t, cfg)
	res := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 50)})
	l.SetConfirmLimit(res.PhyOffset + 7)
	l.SetConfirmLimit(-1)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l = mustOpen(t, cfg)
	defer l.Close()
	if got := l.Checkpoint().ConfirmPhyOffset; got != res.PhyOffset+7 {
		t.Fatalf("checkpoint ConfirmPhyOffset after a restart %d, want %d", got, res.PhyOffset+7)
	}
	if got := l.ConfirmLimit(); got != -1 {
		t.Fatalf("a reopened log's limit %d, want none (-1): the caller decides", got)
	}
}

// Close wakes a reader the limit holds.
func TestConfirmLimitWaitEndsAtClose(t *testing.T) {
	l := mustOpen(t, testConfig(t, 64<<10))
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 50)})
	l.SetConfirmLimit(0)
	r := l.NewConfirmedReader(0)
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	r.Close()
	_ = l.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait across Close: %v, want ErrClosed", err)
	}
}

// ReadCheckpointFile reads what the log's checkpoint holds without
// opening the log: the confirm limit a closed log kept, zeros for a short
// file, fs.ErrNotExist for none.
func TestReadCheckpointFile(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	if _, err := ReadCheckpointFile(cfg.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a store without a checkpoint: %v, want fs.ErrNotExist", err)
	}
	l := mustOpen(t, cfg)
	l.SetConfirmLimit(1234)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := ReadCheckpointFile(cfg.Dir)
	if err != nil || ck.ConfirmPhyOffset != 1234 {
		t.Fatalf("checkpoint read without opening the log: %+v, %v; want confirmPhyOffset 1234", ck, err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, checkpointName), []byte{0, 0, 0, 0, 0, 0, 0, 9}, 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err = ReadCheckpointFile(cfg.Dir)
	if err != nil || ck != (Checkpoint{PhysicMsgTimestamp: 9}) {
		t.Fatalf("a short checkpoint: %+v, %v; want its field and zeros", ck, err)
	}
	// A checkpoint that cannot be read is an error naming it, not zeros.
	bad := t.TempDir()
	if err := os.Mkdir(filepath.Join(bad, checkpointName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCheckpointFile(bad); err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), checkpointName) {
		t.Fatalf("an unreadable checkpoint: %v, want a read error naming it", err)
	}
}

// A confirmed reader racing appends under a confirm limit above the end
// never reports a whole record as corrupt: the write position it checks a
// record against and the confirmed end it stops at come from one read of
// the write position (before, a later read could put the confirmed end
// past the earlier one, and a record between them was called corrupt).
func TestConfirmedReaderRacingAppendsSeesNoCorruption(t *testing.T) {
	l := mustOpen(t, testConfig(t, 8<<20))
	defer l.Close()
	l.SetConfirmLimit(1 << 40)
	const n = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, i, 40)}); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
		}
	}()
	r := l.NewConfirmedReader(0)
	defer r.Close()
	defer func() { <-done }() // before the log closes
	for seen := 0; seen < n; {
		_, err := r.Next()
		switch {
		case err == nil:
			seen++
		case errors.Is(err, ErrNoMoreData):
			select {
			case <-done:
				if t.Failed() {
					return
				}
			default:
			}
		default:
			t.Errorf("after %d records: %v", seen, err)
			return
		}
	}
}
