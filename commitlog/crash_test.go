package commitlog

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashChildEnv names the store directory a crash-test child appends to.
const crashChildEnv = "ROCKETKV_COMMITLOG_CRASH_CHILD"

func crashConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.SegmentSize = 128 << 10 // small, so that runs roll segments
	cfg.FlushType = SyncFlush
	cfg.StoreHost = testStoreHost
	return cfg
}

// TestCrashChildProcess is the child of TestCrashRecovery: it appends
// with SYNC_FLUSH from several goroutines and prints one ACK line per
// acknowledged record, until it is killed. It does nothing in a normal run.
func TestCrashChildProcess(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("crash-test child; runs only under TestCrashRecovery")
	}
	l, err := Open(crashConfig(dir))
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(s string) {
		outMu.Lock()
		os.Stdout.WriteString(s) // one write per line: lines never interleave
		outMu.Unlock()
	}
	say(fmt.Sprintf("READY %d\n", l.MaxOffset()))
	seed, _ := strconv.Atoi(os.Getenv(crashChildEnv + "_SEED"))
	c := newCounter()
	for w := 0; w < 4; w++ {
		go func(w int) {
			rng := rand.New(rand.NewSource(int64(seed*10 + w)))
			for i := 0; ; i++ {
				req := AppendRequest{WaitFlush: true, Assigner: c}
				if rng.Intn(5) == 0 {
					for j := 0; j < 3; j++ {
						req.Batch = append(req.Batch, testMessage("crash", int32(w), i*10+j, rng.Intn(2000)))
					}
				} else if rng.Intn(4) == 0 {
					// Large records make a kill in the middle of a copy likelier.
					req.Message = testMessage("crash", int32(w), i, 30000+rng.Intn(70000))
				} else {
					req.Message = testMessage("crash", int32(w), i, rng.Intn(6000))
				}
				r, err := l.Append(context.Background(), req)
				if err != nil || r.Status != PutOK {
					say(fmt.Sprintf("ERROR %v %v\n", err, r.Status))
					os.Exit(3)
				}
				var b strings.Builder
				for _, p := range r.Records {
					v, err := l.Read(p.Offset, p.Size)
					if err != nil {
						say(fmt.Sprintf("ERROR read back %v\n", err))
						os.Exit(3)
					}
					fmt.Fprintf(&b, "ACK %d %d %d\n", p.Offset, p.Size, crc32.ChecksumIEEE(v.Data))
					v.Release()
				}
				say(b.String())
			}
		}(w)
	}
	select {} // until SIGKILL
}

type ackedRecord struct {
	off  int64
	size int32
	crc  uint32
}

// TestCrashRecovery SIGKILLs an appending child at random moments, at least
// 20 times, restarting it on the same store each time, and checks after
// every kill that every acknowledged record is present and byte-identical,
// that the whole log scans clean (no partial record is visible), and that
// the next run continues at the recovered end.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	const kills = 22
	rng := rand.New(rand.NewSource(1))
	var acked []ackedRecord
	expectEnd := int64(0)
	totalAcks, cuts := 0, 0
	for run := 0; run < kills; run++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, fmt.Sprintf("%s_SEED=%d", crashChildEnv, run))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// One goroutine reads the child's output: the first line on ready,
		// the rest into got, until the pipe closes after the kill.
		ready := make(chan string, 1)
		readDone := make(chan struct{})
		var got []string
		go func() {
			defer close(readDone)
			br := bufio.NewReader(out)
			for first := true; ; first = false {
				s, err := br.ReadString('\n')
				if err != nil {
					return // a line cut by the kill has no newline: not acknowledged
				}
				s = strings.TrimSuffix(s, "\n")
				if first {
					ready <- s
					continue
				}
				got = append(got, s)
			}
		}()
		var readyLine string
		select {
		case readyLine = <-ready:
		case <-readDone:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("child exited before it was ready")
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("child never became ready")
		}
		if readyLine != fmt.Sprintf("READY %d", expectEnd) {
			cmd.Process.Kill()
			t.Fatalf("run %d: child says %q, want READY %d (the end recovered after the previous kill)", run, readyLine, expectEnd)
		}
		time.Sleep(time.Duration(20+rng.Intn(130)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-readDone // the pipe closes when the child dies
		cmd.Wait()
		runAcks := 0
		for _, s := range got {
			f := strings.Fields(s)
			if len(f) == 0 {
				continue
			}
			if f[0] != "ACK" || len(f) != 4 {
				t.Fatalf("run %d: child said %q", run, s)
			}
			off, _ := strconv.ParseInt(f[1], 10, 64)
			size, _ := strconv.ParseInt(f[2], 10, 32)
			crc, _ := strconv.ParseUint(f[3], 10, 32)
			if off < expectEnd && runAcks == 0 {
				t.Fatalf("run %d: first acknowledged record at %d, before the recovered end %d", run, off, expectEnd)
			}
			acked = append(acked, ackedRecord{off, int32(size), uint32(crc)})
			runAcks++
		}
		totalAcks += runAcks

		// Recover in this process (abnormal: the child never closed).
		cfg := crashConfig(dir)
		cfg.Logger = testLogger(t)
		l, err := Open(cfg)
		if err != nil {
			t.Fatalf("run %d: reopen: %v", run, err)
		}
		if !l.RecoveryInfo().Abnormal {
			t.Fatalf("run %d: recovery after SIGKILL must be abnormal", run)
		}
		for _, a := range acked {
			v, err := l.Read(a.off, a.size)
			if err != nil {
				t.Fatalf("run %d: acknowledged record at %d lost: %v (recovered end %d)", run, a.off, err, l.MaxOffset())
			}
			if crc32.ChecksumIEEE(v.Data) != a.crc {
				t.Fatalf("run %d: acknowledged record at %d changed", run, a.off)
			}
			v.Release()
		}
		if l.RecoveryInfo().CutBytes > 0 {
			cuts++ // the kill landed inside an append
		}
		scanAll(t, l) // every record up to the end decodes with a good CRC
		expectEnd = l.MaxOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if totalAcks < kills {
		t.Fatalf("only %d records acknowledged over %d runs: the test did not exercise appends", totalAcks, kills)
	}
	t.Logf("%d kills, %d acknowledged records, %d recoveries cut a partial tail, log end %d", kills, totalAcks, cuts, expectEnd)
}
