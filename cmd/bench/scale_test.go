package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScaleSizes(t *testing.T) {
	got, err := parseScaleSizes("10x100, 1kx100,10kx100,2x3")
	if err != nil {
		t.Fatal(err)
	}
	want := []scaleSize{{10, 100}, {1000, 100}, {10000, 100}, {2, 3}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if got[2].queues() != 1_000_000 || got[2].String() != "1M (10kx100)" {
		t.Errorf("%v: %d queues, %q", got[2], got[2].queues(), got[2].String())
	}
	for _, bad := range []string{"", "10", "x100", "10x", "0x5", "10x100x3"} {
		if _, err := parseScaleSizes(bad); err == nil {
			t.Errorf("parseScaleSizes(%q) accepted", bad)
		}
	}
}

// The uniform choice touches every queue about equally; the Zipf choice
// gives its hottest queue a large share and scatters hot queues over the
// topics.
func TestPicker(t *testing.T) {
	size := scaleSize{topics: 20, perTopic: 50}
	const n = 100_000
	count := func(dist string) []int {
		qs := newQueueSet(size)
		pick := picker(scaleOptions{dist: dist, zipfS: 1.1, producers: 2, seed: 3}, qs)
		counts := make([]int, size.queues())
		for i := range n {
			topic, q := pick(i%2, i/2)
			counts[qs.index[topic]*size.perTopic+q]++
		}
		return counts
	}
	uni := count("uniform")
	for g, c := range uni {
		if c < n/size.queues()/2 || c > n/size.queues()*2 {
			t.Fatalf("uniform: queue %d got %d of %d", g, c, n)
		}
	}
	zipf := count("zipf")
	hottest, hotTopics := 0, map[int]bool{}
	for g, c := range zipf {
		hottest = max(hottest, c)
		if c > n/100 {
			hotTopics[g/size.perTopic] = true
		}
	}
	if hottest < n/20 {
		t.Errorf("zipf: hottest queue got only %d of %d", hottest, n)
	}
	if len(hotTopics) < 2 {
		t.Errorf("zipf: hot queues all in %d topic(s)", len(hotTopics))
	}
}

func TestScaleOptionsValidate(t *testing.T) {
	ok := scaleOptions{stores: []string{"kv", "file"}, messages: 1, body: 1, producers: 1, inflight: 1, consumers: 1,
		window: 1, batch: 1, runs: 1, createBatch: 1, dist: "uniform", zipfS: 1.1, budget: 1}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*scaleOptions){
		"store":  func(o *scaleOptions) { o.stores = []string{"rocksdb"} },
		"none":   func(o *scaleOptions) { o.stores = nil },
		"dist":   func(o *scaleOptions) { o.dist = "pareto" },
		"zipf-s": func(o *scaleOptions) { o.dist, o.zipfS = "zipf", 1 },
		"window": func(o *scaleOptions) { o.window = 0 },
		"budget": func(o *scaleOptions) { o.budget = 0 },
		"idle":   func(o *scaleOptions) { o.idle = o.budget },
	} {
		o := ok
		mod(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestScaleSmoke runs `bench scale` end to end at a tiny size against the
// real broker and name server binaries (built here), both layouts, so the
// subcommand cannot rot. It checks that every phase completes and the
// tables print, never a figure.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts brokers")
	}
	bin := t.TempDir()
	for _, c := range []string{"broker", "namesrv"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, c), "github.com/rocketkv/rocketkv/cmd/"+c).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", c, err, out)
		}
	}
	dir := t.TempDir()
	out := runBench(t, "scale", "--broker-bin", filepath.Join(bin, "broker"), "--dir", dir, "--sizes", "2x3,3x4",
		"--messages", "300", "--producers", "2", "--inflight", "8", "--consumers", "2", "--window", "4", "--batch", "8",
		"--runs", "1", "--budget", "1m", "--min-free", "0", "--namesrv", "--dist", "zipf",
		"--broker-set", "mappedFileSizeCommitLog=8388608")
	for _, want := range []string{"\nkv ", "\nfile ", "vs kv 6", "kv/file indexed", "cq B/msg", "registered after", "limits: vm.max_map_count"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "STOPPED") || strings.Count(out, " yes\n") != 4 {
		t.Fatalf("a tiny configuration did not complete:\n%s", out)
	}
	// --file-max-queues keeps the file layout to the small size;
	// --broker-pprof prints each broker's profiling address; --idle
	// reports each run's idle CPU; --seed only has to be accepted.
	out = runBench(t, "scale", "--broker-bin", filepath.Join(bin, "broker"), "--dir", dir, "--sizes", "2x3,3x4",
		"--messages", "100", "--producers", "2", "--inflight", "8", "--consumers", "2", "--window", "4", "--batch", "8",
		"--runs", "1", "--budget", "1m", "--min-free", "0", "--file-max-queues", "6", "--seed", "7", "--broker-pprof",
		"--idle", "300ms", "--broker-set", "mappedFileSizeCommitLog=8388608")
	if strings.Count(out, " yes\n") != 3 || strings.Contains(out, "\nfile   12 ") || strings.Count(out, "broker pprof: http://127.0.0.1:") != 3 ||
		strings.Count(out, "; idle 300 ms: broker CPU ") != 3 || !strings.Contains(out, "idle CPU") {
		t.Fatalf("--file-max-queues 6 / --broker-pprof / --idle:\n%s", out)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("stores left behind: %v", left)
	}
}
