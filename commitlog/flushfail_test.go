package commitlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

// flushFailChildEnv names the store of TestFlushFailureChildProcess.
const flushFailChildEnv = "ROCKETKV_COMMITLOG_FLUSHFAIL_CHILD"

// flushFailAcked is how many records the child appends before its flushes
// fail.
const flushFailAcked = 20

// stopRecorder records the calls of Config.Stop.
type stopRecorder struct {
	mu    sync.Mutex
	calls []error
}

func (r *stopRecorder) stop(err error) {
	r.mu.Lock()
	r.calls = append(r.calls, err)
	r.mu.Unlock()
}

func (r *stopRecorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.calls...)
}

// After a failed flush the log reports nothing as flushed any more, even
// once syncs succeed again: the append that met the failure and every
// later one time out (FLUSH_DISK_TIMEOUT), Flush, WaitDurable and Close
// return ErrFlushFailed, the checkpoint stays at the last good flush, and
// Config.Stop is called once. The records are all there after a reopen
// (abnormal recovery: the abort file stays).
func TestFlushFailureStopsReportingFlushed(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	ffs := vfs.NewFaulty(vfs.OS{})
	cfg.FS = ffs
	cfg.FlushType = SyncFlush
	cfg.SyncFlushTimeout = 200 * time.Millisecond
	var stops stopRecorder
	cfg.Stop = stops.stop
	l := mustOpen(t, cfg)
	c := newCounter()
	// Waited for without a deadline: on a busy machine the first flush
	// may take longer than SyncFlushTimeout.
	first := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 100), Assigner: c})
	if err := l.WaitDurable(context.Background(), first.PhyOffset+first.WroteBytes); err != nil {
		t.Fatalf("flush before the failure: %v", err)
	}
	good := l.Checkpoint()

	ffs.FailSyncs(1)
	for i := 1; i <= 2; i++ {
		// The first meets the failed sync; the second comes when syncs
		// work again, and must not be reported flushed either.
		res, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, i, 100), Assigner: c, WaitFlush: true})
		if err != nil {
			t.Fatalf("append %d after the failed flush: %v (the record is written; only its flush is not known)", i, err)
		}
		if res.Status != FlushDiskTimeout {
			t.Fatalf("append %d after the failed flush: %v, want FLUSH_DISK_TIMEOUT", i, res.Status)
		}
	}
	calls := stops.errors()
	if len(calls) != 1 || !errors.Is(calls[0], ErrFlushFailed) || !errors.Is(calls[0], syscall.EIO) ||
		!strings.Contains(calls[0].Error(), filepath.Join(cfg.SegmentDir, SegmentName(0))) {
		t.Fatalf("Stop calls %v, want one naming the segment, wrapping ErrFlushFailed and EIO", calls)
	}
	if err := l.Flush(); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("Flush after the failure: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.WaitDurable(ctx, l.MaxOffset()); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("WaitDurable after the failure: %v", err)
	}
	if got := l.Checkpoint(); got != good {
		t.Fatalf("checkpoint moved past the failed flush: %+v, was %+v", got, good)
	}
	end := l.MaxOffset()
	if err := l.Close(); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("Close after the failure: %v", err)
	}
	if n := len(stops.errors()); n != 1 {
		t.Fatalf("Stop called %d times, want once", n)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, abortFileName)); err != nil {
		t.Fatalf("the abort file went although the log was not flushed: %v", err)
	}

	cfg.FS, cfg.Stop = vfs.OS{}, nil
	l = mustOpen(t, cfg)
	defer l.Close()
	if l.MaxOffset() != end {
		t.Fatalf("recovered end %d, want %d (every record was written)", l.MaxOffset(), end)
	}
}

// Under ASYNC_FLUSH the background flush meets the failure: Stop is called
// and Flush reports it.
func TestAsyncFlushFailure(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	ffs := vfs.NewFaulty(vfs.OS{})
	cfg.FS = ffs
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.FlushThoroughInterval = 20 * time.Millisecond // a flush however few pages are dirty
	var stops stopRecorder
	cfg.Stop = stops.stop
	l := mustOpen(t, cfg)
	defer l.Close()
	ffs.FailSyncs(1)
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 100), Assigner: newCounter()})
	deadline := time.Now().Add(10 * time.Second)
	for len(stops.errors()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background flush's failure did not reach Stop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Flush(); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("Flush after the background flush failed: %v", err)
	}
}

// TestFlushFailureChildProcess is the child of TestFlushFailureStopsTheProcess:
// it appends flushFailAcked records with SYNC_FLUSH (one line each once
// acknowledged), then makes the next sync fail and appends once more with
// the default Config.Stop.
func TestFlushFailureChildProcess(t *testing.T) {
	dir := os.Getenv(flushFailChildEnv)
	if dir == "" {
		t.Skip("child of TestFlushFailureStopsTheProcess")
	}
	ffs := vfs.NewFaulty(vfs.OS{})
	cfg := crashConfig(dir)
	cfg.FS = ffs
	l, err := Open(cfg)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(3)
	}
	c := newCounter()
	for i := range flushFailAcked {
		res, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, i, 500), Assigner: c, WaitFlush: true})
		if err != nil || res.Status != PutOK {
			fmt.Println("ERROR", err, res.Status)
			os.Exit(3)
		}
		fmt.Printf("ACK %d\n", res.Records[0].Offset)
	}
	ffs.FailSyncs(1)
	res, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, flushFailAcked, 500), Assigner: c, WaitFlush: true})
	fmt.Println("SURVIVED", res.Status, err)
	os.Exit(0)
}

// A failed flush ends a process that kept Config.Stop's default, with a
// line naming the segment and the error, before the append that met it
// is answered; a reopen has every acknowledged record.
func TestFlushFailureStopsTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	stdout, stderr := testutil.RunChildToExit(t, 30*time.Second, 2,
		[]string{"-test.run=^TestFlushFailureChildProcess$", "-test.count=1"}, flushFailChildEnv+"="+dir)
	if strings.Contains(stdout, "SURVIVED") {
		t.Fatalf("the append that met the failed flush was answered:\n%s", stdout)
	}
	for _, want := range []string{"commitlog fatal", ErrFlushFailed.Error(), SegmentName(0), "input/output error"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("the child's last words lack %q:\n%s", want, stderr)
		}
	}
	acked := strings.Count(stdout, "ACK ")
	if acked != flushFailAcked {
		t.Fatalf("%d records acknowledged before the failure, want %d:\n%s", acked, flushFailAcked, stdout)
	}
	l := mustOpen(t, crashConfig(dir))
	defer l.Close()
	var n int
	r := l.NewReader(0)
	defer r.Close()
	for ; ; n++ {
		if _, err := r.Next(); err != nil {
			if !errors.Is(err, ErrNoMoreData) {
				t.Fatalf("read after the reopen: %v", err)
			}
			break
		}
	}
	if n < flushFailAcked {
		t.Fatalf("%d records after the reopen, want at least the %d acknowledged", n, flushFailAcked)
	}
}
