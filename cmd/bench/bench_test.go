package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary act as the bench binary, so that `bench
// cq` can run its per-configuration children from the smoke test.
const childEnv = "ROCKETKV_BENCH_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseQueueCounts(t *testing.T) {
	got, err := parseQueueCounts("1k, 100k,1M,7")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1000, 100000, 1000000, 7}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "x", "0", "-1k", ","} {
		if _, err := parseQueueCounts(bad); err == nil {
			t.Errorf("parseQueueCounts(%q) accepted", bad)
		}
	}
	for n, want := range map[int]string{1000: "1k", 100000: "100k", 1000000: "1M", 1500: "1500", 7: "7"} {
		if got := fmtCount(n); got != want {
			t.Errorf("fmtCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseSets(t *testing.T) {
	m, err := parseSets([]string{"storeType=file", "a=b=c"})
	if err != nil {
		t.Fatal(err)
	}
	if m["storeType"] != "file" || m["a"] != "b=c" {
		t.Fatalf("got %v", m)
	}
	for _, bad := range []string{"novalue", "=x"} {
		if _, err := parseSets([]string{bad}); err == nil {
			t.Errorf("parseSets(%q) accepted", bad)
		}
	}
}

func TestModes(t *testing.T) {
	if k, err := (produceOptions{mode: "sync", inflight: 64}).inflightFor(); err != nil || k != 1 {
		t.Errorf("sync: %d %v", k, err)
	}
	if k, err := (produceOptions{mode: "async", inflight: 64}).inflightFor(); err != nil || k != 64 {
		t.Errorf("async: %d %v", k, err)
	}
	if _, err := (produceOptions{mode: "async", inflight: 0}).inflightFor(); err == nil {
		t.Error("async with 0 in flight accepted")
	}
	if _, err := (produceOptions{mode: "oneway"}).inflightFor(); err == nil {
		t.Error("unknown mode accepted")
	}
	if s, err := consumeModeSuspends("push"); err != nil || !s {
		t.Errorf("push: %v %v", s, err)
	}
	if s, err := consumeModeSuspends("pull"); err != nil || s {
		t.Errorf("pull: %v %v", s, err)
	}
	if _, err := consumeModeSuspends("pop"); err == nil {
		t.Error("unknown consume mode accepted")
	}
}

func TestMedianPercentile(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd median %v", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("even median %v", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("empty median %v", got)
	}
	xs := []float64{5, 1}
	median(xs)
	if xs[0] != 5 {
		t.Error("median sorted its argument")
	}
	sorted := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for p, want := range map[float64]int64{50: 50, 99: 100, 100: 100, 10: 10, 1: 10} {
		if got := percentile(sorted, p); got != want {
			t.Errorf("p%v = %d, want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
	if ratio(1, 0) != 0 || ratio(3, 2) != 1.5 {
		t.Error("ratio")
	}
}

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	if r.Summary().Count != 0 || r.Summary().String() != "no samples" {
		t.Fatal("empty recorder")
	}
	for i := 1; i <= 1000; i++ {
		r.Record(time.Duration(i) * time.Millisecond)
	}
	r.Record(0)             // clamped to 1 µs
	r.Record(2 * time.Hour) // clamped to 60 s
	s := r.Summary()
	if s.Count != 1002 {
		t.Fatalf("count %d", s.Count)
	}
	near := func(name string, got, want time.Duration) {
		if d := got - want; d < -want/100 || d > want/100 {
			t.Errorf("%s = %s, want %s within 1%%", name, got, want)
		}
	}
	near("p50", s.P50, 500*time.Millisecond)
	near("p90", s.P90, 900*time.Millisecond)
	near("p99", s.P99, 991*time.Millisecond)
	near("max", s.Max, time.Minute)
	o := NewRecorder()
	o.Record(time.Millisecond)
	r.Merge(o)
	if r.Summary().Count != 1003 {
		t.Error("merge")
	}
	r.Reset()
	if r.Summary().Count != 0 {
		t.Error("reset")
	}
	line := s.String()
	for _, part := range []string{"p50 ", "p90 ", "p99 ", "p99.9 ", "max 60.0 s"} {
		if !strings.Contains(line, part) {
			t.Errorf("summary %q lacks %q", line, part)
		}
	}
}

func TestFormatting(t *testing.T) {
	durs := map[time.Duration]string{
		850:                     "850 ns",
		12300:                   "12.3 µs",
		1200 * time.Microsecond: "1.20 ms",
		250 * time.Millisecond:  "250 ms",
		2500 * time.Millisecond: "2.50 s",
	}
	for d, want := range durs {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%d) = %q, want %q", d, got, want)
		}
	}
	nums := map[float64]string{0: "0", 0.8154: "0.815", 12.34: "12.3", 999: "999", 1234567: "1,234,567", -45678: "-45,678", 1000: "1,000"}
	for v, want := range nums {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
	}
	bs := map[int64]string{512: "512 B", 1536: "1.50 KiB", 3 << 30: "3.00 GiB", 5 << 40: "5.00 TiB"}
	for n, want := range bs {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
	var tb table
	tb.add("a", "long header")
	tb.add(1234.0, time.Millisecond)
	var b bytes.Buffer
	if err := tb.write(&b); err != nil {
		t.Fatal(err)
	}
	if want := "a      long header\n1,234  1.00 ms\n"; b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestProcReaders(t *testing.T) {
	st := []byte("Name:\tbench\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n")
	m, err := parseProcStatus(st, "VmRSS", "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if m["VmRSS"] != 1024*1024 || m["VmHWM"] != 2048*1024 {
		t.Fatalf("got %v", m)
	}
	if _, err := parseProcStatus(st, "VmSwap"); err == nil {
		t.Error("missing field accepted")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t12 pages\n"), "VmRSS"); err == nil {
		t.Error("bad unit accepted")
	}
	// A command name with spaces and a parenthesis; utime 250, stime 50
	// ticks = 3 s.
	stat := []byte("1234 (a b) c) S 1 1 1 0 -1 4194304 10 0 0 0 250 50 0 0 20 0 4 0 100 1000 10\n")
	d, err := parseProcStatCPU(stat)
	if err != nil || d != 3*time.Second {
		t.Fatalf("cpu %s %v", d, err)
	}
	if _, err := parseProcStatCPU([]byte("1234 (x) S 1")); err == nil {
		t.Error("short stat accepted")
	}
	r, err := selfResources()
	if err != nil {
		t.Fatal(err)
	}
	if r.RSS <= 0 || r.PeakRSS < r.RSS || r.FDs < 3 || r.Maps < 10 {
		t.Errorf("implausible resources %+v", r)
	}
	if _, err := procCPU("self"); err != nil {
		t.Error(err)
	}
	if countLines([]byte("a\nb")) != 2 || countLines([]byte("a\n")) != 1 || countLines(nil) != 0 {
		t.Error("countLines")
	}
}

func TestDiskUsageSparse(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Files != 1 || u.Dirs != 2 || u.Apparent < 64<<20 || u.Allocated >= 1<<20 || u.Allocated == 0 {
		t.Fatalf("usage %+v", u)
	}
	if u, err := diskUsage(filepath.Join(dir, "missing")); err != nil || u != (DiskUsage{}) {
		t.Fatalf("missing root: %+v %v", u, err)
	}
}

func TestEntryGen(t *testing.T) {
	g := newEntryGen(10, 4) // topics of 4, 4, 2 queues
	if len(g.topics) != 3 {
		t.Fatalf("%d topics", len(g.topics))
	}
	seen := map[string]int64{}
	for i := int64(0); i < 30; i++ {
		e := g.entry(i)
		k := e.Topic + "/" + string(rune('0'+e.QueueID))
		if e.QueueOffset != seen[k] {
			t.Fatalf("entry %d: %s at %d, want %d", i, k, e.QueueOffset, seen[k])
		}
		seen[k]++
		if e.PhyOffset != i*recordSize || e.Size != recordSize {
			t.Fatalf("entry %d: phy %d size %d", i, e.PhyOffset, e.Size)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("%d queues used", len(seen))
	}
	if topic, qid := g.queue(9); topic != g.topics[2] || qid != 1 {
		t.Fatalf("queue 9 is %s/%d", topic, qid)
	}
	if err := (cqRunOptions{Store: "rocksdb", Queues: 1, QueuesPerTopic: 1, Entries: 1, Batch: 1, Budget: 1}).validate(); err == nil {
		t.Error("unknown store accepted")
	}
}

// runBench runs the bench command line and returns its output.
func runBench(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestSmoke runs every subcommand for a moment so none of them rots. It
// checks that each completes and prints its summary, never a figure.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("smoke runs start brokers")
	}
	t.Setenv(childEnv, "1") // for cq's child processes
	dir := t.TempDir()
	small := []string{"--inprocess", "--dir", dir, "--broker-set", "mappedFileSizeCommitLog=8388608", "--runs", "1", "--queues", "2"}
	t.Run("produce", func(t *testing.T) {
		out := runBench(t, append([]string{"produce", "--duration", "300ms", "--warmup", "100ms", "--producers", "2",
			"--baseline-duration", "200ms", "--clog-segment", "8388608"}, small...)...)
		if !strings.Contains(out, "median of") || !strings.Contains(out, "CPU per message") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("produce-batch", func(t *testing.T) {
		// The broker stores the benchmark's batches: none fails.
		out := runBench(t, append([]string{"produce", "--batch", "4", "--duration", "200ms", "--warmup", "50ms", "--baseline=false"}, small...)...)
		if !strings.Contains(out, "in batches of 4") || !strings.Contains(out, "failed 0;") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("produce-sync", func(t *testing.T) {
		out := runBench(t, append([]string{"produce", "--mode", "sync", "--duration", "200ms", "--warmup", "50ms", "--baseline=false"}, small...)...)
		if !strings.Contains(out, "median of") {
			t.Fatalf("output:\n%s", out)
		}
	})
	for _, mode := range []string{"push", "pull"} {
		t.Run("consume-"+mode, func(t *testing.T) {
			out := runBench(t, append([]string{"consume", "--mode", mode, "--messages", "300", "--consumers", "2", "--timeout", "1m"}, small...)...)
			if !strings.Contains(out, "consume/produce") {
				t.Fatalf("output:\n%s", out)
			}
		})
	}
	t.Run("timer", func(t *testing.T) {
		out := runBench(t, append([]string{"timer", "--messages", "500", "--producers", "2", "--consumers", "2", "--timeout", "1m"}, small...)...)
		if !strings.Contains(out, "delivery/plain") || !strings.Contains(out, "lateness p50") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("txn", func(t *testing.T) {
		out := runBench(t, append([]string{"txn", "--messages", "500", "--producers", "2", "--timeout", "1m"}, small...)...)
		if !strings.Contains(out, "transactions/produce") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("e2e-latency", func(t *testing.T) {
		out := runBench(t, append([]string{"e2e-latency", "--probe", "200ms", "--duration", "400ms", "--warmup", "100ms",
			"--producers", "2", "--consumers", "2"}, small...)...)
		// In process, the CPU per message is the benchmark's, broker included.
		if !strings.Contains(out, "e2e p99") || !strings.Contains(out, "probed max") ||
			!strings.Contains(out, "CPU per message (load generator and broker)") || !strings.Contains(out, "CPU/msg broker") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("e2e-latency-probe-consumers", func(t *testing.T) {
		// The maximum is what the consumers took while the producers sent
		// flat out, at most what was produced; the paced rate is half of it.
		out := runBench(t, append([]string{"e2e-latency", "--probe", "300ms", "--duration", "400ms", "--warmup", "100ms",
			"--producers", "2", "--consumers", "2", "--probe-consumers"}, small...)...)
		m := regexp.MustCompile(`probed max ([\d,.]+) msg/s consumed while ([\d,.]+) msg/s were produced, target ([\d,.]+) msg/s`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no probe line with consumers in the output:\n%s", out)
		}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			return v
		}
		consumed, produced, target := num(m[1]), num(m[2]), num(m[3])
		if consumed <= 0 || consumed > produced || target < consumed*0.49 || target > consumed*0.51 {
			t.Fatalf("probe consumed %g of %g produced, target %g: want 0 < consumed <= produced, target half of consumed\n%s",
				consumed, produced, target, out)
		}
	})
	t.Run("e2e-latency-rate", func(t *testing.T) {
		// --rate replaces the probe: no probed maximum, the given rate.
		out := runBench(t, append([]string{"e2e-latency", "--rate", "500", "--duration", "400ms", "--warmup", "100ms",
			"--producers", "2", "--consumers", "2"}, small...)...)
		if !strings.Contains(out, "run 1: target 500 msg/s") || strings.Contains(out, "probed max") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("cq-no-compact", func(t *testing.T) {
		// --compact=false measures the store as the write phase left it.
		out := runBench(t, "cq", "--stores", "kv", "--queues", "10", "--entries", "500", "--batch", "64",
			"--reads", "20", "--runs", "1", "--budget", "1m", "--compact=false", "--dir", dir)
		if !strings.Contains(out, "compaction 0 ns") || strings.Contains(out, "FAILED") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("cq", func(t *testing.T) {
		out := runBench(t, "cq", "--stores", "kv,file", "--queues", "10,20", "--entries", "500", "--batch", "64",
			"--reads", "20", "--runs", "1", "--budget", "1m", "--dir", dir)
		for _, want := range []string{"\nkv ", "\nfile ", "vs kv 10", "sst B/entry", "limits: vm.max_map_count"} {
			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "INCOMPLETE") || strings.Contains(out, "FAILED") {
			t.Fatalf("a tiny configuration did not finish:\n%s", out)
		}
	})
	t.Run("cq-child-fails", func(t *testing.T) {
		// A child that fails (here: rejected options) is reported and the
		// command fails after printing what it has.
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"cq", "--stores", "kv", "--queues", "10", "--entries", "0", "--runs", "1", "--dir", dir})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "1 runs failed") {
			t.Fatalf("err %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "FAILED") || !strings.Contains(out.String(), "all 1 runs failed") {
			t.Fatalf("output:\n%s", out.String())
		}
	})
	t.Run("dispatch-lag", func(t *testing.T) {
		out := runBench(t, "dispatch-lag", "--duration", "300ms", "--warmup", "100ms", "--writers", "2", "--queues", "16",
			"--runs", "1", "--segment", "8388608", "--dir", dir)
		if !strings.Contains(out, "lag p99") || !strings.Contains(out, "key index on") {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("dispatch-lag-recordings", func(t *testing.T) {
		// --gogc, --trace and --cpuprofile (this process only) and no lag bound.
		prev := debug.SetGCPercent(-1)
		debug.SetGCPercent(prev)
		t.Cleanup(func() { debug.SetGCPercent(prev) })
		trc, prof := filepath.Join(t.TempDir(), "bench.trace"), filepath.Join(t.TempDir(), "bench.pprof")
		out := runBench(t, "dispatch-lag", "--duration", "300ms", "--warmup", "100ms", "--writers", "2", "--queues", "16",
			"--runs", "1", "--segment", "8388608", "--baseline=false", "--max-lag-bytes", "0", "--dir", dir,
			"--gogc", "400", "--trace", trc, "--cpuprofile", prof)
		if !strings.Contains(out, "no lag bound") {
			t.Fatalf("output:\n%s", out)
		}
		if got := debug.SetGCPercent(prev); got != 400 {
			t.Fatalf("--gogc 400 left the GC target at %d", got)
		}
		for file, magic := range map[string]string{trc: "go 1.", prof: "\x1f\x8b"} {
			b, err := os.ReadFile(file)
			if err != nil || !strings.HasPrefix(string(b), magic) {
				t.Fatalf("%s: %d bytes starting %q (%v), want a recording starting %q", file, len(b), b[:min(len(b), 8)], err, magic)
			}
		}
	})
	t.Run("dispatch-lag-no-key-index", func(t *testing.T) {
		out := runBench(t, "dispatch-lag", "--duration", "300ms", "--warmup", "100ms", "--writers", "2", "--queues", "16",
			"--runs", "1", "--segment", "8388608", "--baseline=false", "--key-index=false", "--dir", dir)
		if !strings.Contains(out, "lag p99") || !strings.Contains(out, "key index off") {
			t.Fatalf("output:\n%s", out)
		}
	})
}

// TestDrainCounterEndsAtTheGoal checks that a pop drain ends when its last
// message is counted, not when its consumers return: counts after the goal
// do not move the end.
func TestDrainCounterEndsAtTheGoal(t *testing.T) {
	c := &drainCounter{want: 10}
	c.Add(4)
	if c.reached.Load() != 0 {
		t.Fatal("end recorded before the goal")
	}
	c.Add(6)
	end := c.end()
	time.Sleep(2 * time.Millisecond)
	c.Add(3)
	if got := c.end(); !got.Equal(end) || c.Load() != 13 {
		t.Fatalf("end moved from %v to %v (count %d)", end, got, c.Load())
	}
}
