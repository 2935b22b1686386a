package kvindex

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rs/zerolog"
)

// childEnvWALFull names the store of a child that fills its index's
// write-ahead log disk (TestWALWriteFailureStopsTheProcess);
// childEnvWALFail set to "sync" makes the log's fdatasyncs fail instead of
// its writes.
const (
	childEnvWALFull = "KVINDEX_WAL_FULL_DIR"
	childEnvWALFail = "KVINDEX_WAL_FAIL"
)

// walFullOffsets is how many offsets the child commits before its disk
// fills.
const walFullOffsets = 50

// fullDisk fails every write to a write-ahead log file with ENOSPC while
// it is on.
func fullDisk(full *atomic.Bool) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) && isWAL(op.Path) {
			return syscall.ENOSPC
		}
		return nil
	})
}

// failingSyncs fails every fdatasync of a write-ahead log file with EIO
// while it is on.
func failingSyncs(on *atomic.Bool) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && op.Kind == errorfs.OpFileSyncData && isWAL(op.Path) {
			return syscall.EIO
		}
		return nil
	})
}

// runWALFullChild commits walFullOffsets offsets (printing each once its
// commit returned), fills the disk of the index's log, then writes as the
// broker's request handlers and dispatcher do: unsynced writes and synced
// commits, each behind a recover as the Remoting server runs handlers. It returns 0 only
// if the process survived all of that.
func runWALFullChild(dir string) int {
	var full atomic.Bool
	inject := fullDisk(&full)
	if os.Getenv(childEnvWALFail) == "sync" {
		inject = failingSyncs(&full)
	}
	db, ok := openChildIndex(Options{Dir: dir, FS: errorfs.Wrap(vfs.Default, inject), Logger: zerolog.New(os.Stderr)})
	if !ok {
		return 3
	}
	offsets := db.ConsumerOffsets()
	for q := range int32(walFullOffsets) {
		if err := offsets.Set("G", "T", q, 100+int64(q)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		fmt.Printf("acked %d\n", q)
	}
	full.Store(true)
	if os.Getenv(childEnvWALSync) == "interval" {
		// The broker's periodic sync.
		if err := db.SyncWAL(); err != nil {
			fmt.Fprintf(os.Stderr, "SyncWAL: %v\n", err)
		}
	}
	handler := func(fn func() error) {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(os.Stderr, "recovered: %v\n", r)
			}
		}()
		if err := fn(); err != nil {
			fmt.Fprintf(os.Stderr, "write failed: %v\n", err)
		}
	}
	// Unsynced writes first, several of Pebble's 32 KiB log blocks: its
	// log writer meets the failure when it writes a full block, and hands
	// it to the next write only at the block after (as a panic, with the
	// commit pipeline's lock held). Synced commits after them.
	value := bytes.Repeat([]byte{'v'}, 4<<10)
	for i := range 100 {
		handler(func() error { return db.pdb.Set(fmt.Appendf(metaKey("walfull-probe-"), "%d", i), value, pebble.NoSync) })
		time.Sleep(time.Millisecond)
	}
	for i := range 20 {
		handler(func() error { return offsets.Set("G", "T", walFullOffsets, int64(i)) })
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("survived")
	return 0
}

// A write-ahead log write or fdatasync that fails (a full disk, an I/O
// error) ends the process with a line naming the log and the error, in
// either WALSync mode, rather
// than leave Pebble's commit pipeline locked under a recovered panic (a
// broker whose every later index write would hang); a reopen keeps every
// synced commit made before.
func TestWALWriteFailureStopsTheProcess(t *testing.T) {
	for _, tc := range []struct {
		mode, fail string
		want       []string // in the child's last words
	}{
		{"always", "write", []string{".log: write of", "no space left on device"}},
		{"interval", "write", []string{".log: write of", "no space left on device"}},
		{"always", "sync", []string{".log: fdatasync failed", "input/output error"}},
		{"interval", "sync", []string{".log: fdatasync failed", "input/output error"}},
	} {
		mode := tc.mode
		t.Run(mode+"/"+tc.fail, func(t *testing.T) {
			dir := t.TempDir()
			// A child that hangs after its log's disk filled fails here.
			stdout, stderr := testutil.RunChildToExit(t, 20*time.Second, 2, []string{"-test.run=^$"},
				childEnvWALFull+"="+dir, childEnvWALSync+"="+mode, childEnvWALFail+"="+tc.fail)
			if strings.Contains(stdout, "survived") {
				t.Fatal("the child went on after its log writes failed")
			}
			for _, want := range append([]string{"index write-ahead log", "restart once the disk has room"}, tc.want...) {
				if !strings.Contains(stderr, want) {
					t.Fatalf("the child's last words lack %q:\n%s", want, stderr)
				}
			}
			if got := strings.Count(stdout, "acked "); got != walFullOffsets {
				t.Fatalf("child acknowledged %d offsets before its disk filled, want %d:\n%s", got, walFullOffsets, stdout)
			}

			db := openDBAt(t, dir)
			offsets := db.ConsumerOffsets()
			for q := range int32(walFullOffsets) {
				if off, ok, err := offsets.Get("G", "T", q); err != nil || !ok || off != 100+int64(q) {
					t.Fatalf("acknowledged offset of queue %d after the reopen: %d %v %v, want %d", q, off, ok, err, 100+q)
				}
			}
		})
	}
}

// The wrapper stops at a failed write, sync or creation of a log file
// only; other files' errors go back to Pebble.
func TestWALFailStopFS(t *testing.T) {
	var full atomic.Bool
	var stops []string
	fs := walFailStopFS{
		FS:   errorfs.Wrap(vfs.NewMem(), fullDisk(&full)),
		stop: func(format string, args ...any) { stops = append(stops, fmt.Sprintf(format, args...)) },
	}
	wal, err := fs.Create("000004.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	table, err := fs.Create("000005.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Write([]byte("before")); err != nil || len(stops) != 0 {
		t.Fatalf("a write with room: %v, stops %q", err, stops)
	}
	full.Store(true)
	if _, err := table.Write([]byte("x")); err != nil || len(stops) != 0 {
		// The injector fails only log writes: a table write goes through.
		t.Fatalf("a table write: %v, stops %q", err, stops)
	}
	if _, err := wal.Write([]byte("after")); !errors.Is(err, syscall.ENOSPC) || len(stops) != 1 ||
		!strings.Contains(stops[0], "000004.log: write of 5 bytes failed") || !strings.Contains(stops[0], "no space left on device") {
		t.Fatalf("a failed log write: %v, stops %q", err, stops)
	}

	inner := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpFileSyncData {
			return syscall.EIO
		}
		return nil
	}))
	stops = nil
	fs.FS = inner
	if _, err := fs.Create("000006.sst", vfs.WriteCategoryUnspecified); !errors.Is(err, syscall.EIO) || len(stops) != 0 {
		t.Fatalf("a table that cannot be created: %v, stops %q", err, stops)
	}
	if _, err := fs.Create("000007.log", vfs.WriteCategoryUnspecified); !errors.Is(err, syscall.EIO) || len(stops) != 1 ||
		!strings.Contains(stops[0], "000007.log: create failed") {
		t.Fatalf("a log that cannot be created: %v, stops %q", err, stops)
	}
	synced := failStopWAL{File: wal, fs: fs, name: "000004.log"}
	synced.File = errorfs.WrapFile(wal, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSyncData {
			return syscall.EIO
		}
		return nil
	}))
	if err := synced.SyncData(); !errors.Is(err, syscall.EIO) || len(stops) != 2 || !strings.Contains(stops[1], "000004.log: fdatasync failed") {
		t.Fatalf("a failed log sync: %v, stops %q", err, stops)
	}
}
