package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// cqOptions are the flags of `bench cq`.
type cqOptions struct {
	stores   []string
	queues   []int
	perTopic int
	entries  int64
	batch    int
	reads    int
	runs     int
	budget   time.Duration
	compact  bool
	dir      string
}

func newCQCommand() *cobra.Command {
	var o cqOptions
	var queues string
	cmd := &cobra.Command{
		Use:   "cq",
		Short: "ConsumeQueue layouts compared: writes/s, 32-entry read latency, RSS, bytes on disk per entry, open files and mmaps, reopen time",
		Long: `cq measures each ConsumeQueue layout (--stores kv,file) at each queue count
(--queues, topics of --queues-per-topic queues) in its own child process, so
resident memory, descriptors and mappings are per configuration. A child:

  - writes --entries entries round robin over the queues through cq.Store.Put
    in batches of --batch (the dispatcher's batch size), pruning the KV
    journal every second as the dispatcher does, within --budget;
  - flushes, then times --reads Gets of 32 entries at random queues and
    offsets;
  - reads VmRSS/VmHWM, /proc/self/fd and /proc/self/maps;
  - compacts (kv: a full Pebble compaction) and measures the store directory
    as du does (allocated blocks and apparent size);
  - closes, then times a reopen: open, the startup calls the broker makes for
    the layout (file: Truncate and CorrectMin over every queue), first read.

A file-layout run that runs out of budget, disk, descriptors or mappings is
reported with what it measured up to there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			qs, err := parseQueueCounts(queues)
			if err != nil {
				return err
			}
			o.queues = qs
			return runCQ(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.stores, "stores", []string{storeKV, storeFile}, "layouts to measure: kv, file")
	f.StringVar(&queues, "queues", "1k,100k,1M", "queue counts, comma separated (k and M suffixes allowed)")
	f.IntVar(&o.perTopic, "queues-per-topic", 8, "queues per topic")
	f.Int64Var(&o.entries, "entries", 32_000_000, "entries written per configuration")
	f.IntVar(&o.batch, "batch", 4096, "entries per Put (the dispatcher's MaxBatchRecords)")
	f.IntVar(&o.reads, "reads", 10_000, "32-entry range reads per configuration")
	f.IntVar(&o.runs, "runs", 3, "runs per configuration; the table gives medians")
	f.DurationVar(&o.budget, "budget", 10*time.Minute, "time budget of one configuration's write phase, and of its reopen")
	f.BoolVar(&o.compact, "compact", true, "fully compact the KV layout before measuring its disk (false: as the write phase left it)")
	f.StringVar(&o.dir, "dir", "", "parent directory of the temporary stores (default: the system temp directory)")
	return cmd
}

// parseQueueCounts reads "1k,100k,1M" (or plain numbers).
func parseQueueCounts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mult := 1
		switch {
		case strings.HasSuffix(part, "k") || strings.HasSuffix(part, "K"):
			mult, part = 1000, part[:len(part)-1]
		case strings.HasSuffix(part, "M") || strings.HasSuffix(part, "m"):
			mult, part = 1_000_000, part[:len(part)-1]
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--queues: %q is not a positive count", part)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--queues: no queue count in %q", s)
	}
	return out, nil
}

// fmtCount prints a queue count as the flag would: 1k, 100k, 1M.
func fmtCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func runCQ(ctx context.Context, w, errw io.Writer, o cqOptions) error {
	for _, s := range o.stores {
		if s != storeKV && s != storeFile {
			return fmt.Errorf("--stores: %q is not kv or file", s)
		}
	}
	if o.runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.runs)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	fmt.Fprintf(w, "cq: %d entries per configuration (round robin, %d queues per topic), Put batches of %d, %d reads of 32 entries, %d runs, budget %s\n",
		o.entries, o.perTopic, o.batch, o.reads, o.runs, o.budget)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	type config struct {
		store  string
		queues int
		runs   []cqRunResult
		failed []string // runs whose child process failed, and why
	}
	var configs []*config
	for _, q := range o.queues {
		for _, s := range o.stores {
			configs = append(configs, &config{store: s, queues: q})
		}
	}
	for run := range o.runs {
		for _, c := range configs {
			args := []string{"cq-run", "--store", c.store, "--queues", strconv.Itoa(c.queues),
				"--queues-per-topic", strconv.Itoa(o.perTopic), "--entries", strconv.FormatInt(o.entries, 10),
				"--batch", strconv.Itoa(o.batch), "--reads", strconv.Itoa(o.reads), "--budget", o.budget.String()}
			if o.dir != "" {
				args = append(args, "--dir", o.dir)
			}
			if !o.compact {
				args = append(args, "--no-compact")
			}
			res, err := runChild(ctx, exe, args, errw)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				// A child that dies (an index failure, the OOM killer) is a
				// result: reported, not hidden, and the other runs go on.
				c.failed = append(c.failed, err.Error())
				fmt.Fprintf(w, "run %d %s %s queues: FAILED: %v (its stderr is above)\n", run+1, c.store, fmtCount(c.queues), err)
				continue
			}
			c.runs = append(c.runs, res)
			fmt.Fprintf(w, "run %d %s %s queues: %s\n", run+1, c.store, fmtCount(c.queues), cqRunLine(res))
		}
	}
	// The KV rate at the smallest queue count is the baseline of the rate
	// ratios.
	var kvBase float64
	for _, c := range configs {
		if c.store == storeKV && c.queues == slices.Min(o.queues) {
			kvBase = medianOf(c.runs, func(r cqRunResult) float64 { return r.WriteRate })
		}
	}
	var t table
	t.add("store", "queues", "written", "entries/s", "vs kv "+fmtCount(slices.Min(o.queues)), "read p50", "read p99",
		"RSS", "peak RSS", "disk B/entry", "sst B/entry", "apparent B/entry", "files", "peak fds", "peak maps", "reopen")
	for _, c := range configs {
		if len(c.runs) == 0 {
			t.add(c.store, fmtCount(c.queues), fmt.Sprintf("all %d runs failed", len(c.failed)))
			continue
		}
		med := func(f func(cqRunResult) float64) float64 { return medianOf(c.runs, f) }
		written := med(func(r cqRunResult) float64 { return float64(r.Written) })
		rate := med(func(r cqRunResult) float64 { return r.WriteRate })
		writtenCell := fmtNum(written)
		if !allComplete(c.runs) {
			writtenCell += " (incomplete)"
		}
		if len(c.failed) > 0 {
			writtenCell += fmt.Sprintf(" (%d of %d runs failed)", len(c.failed), len(c.failed)+len(c.runs))
		}
		reopen := fmtDur(time.Duration(med(func(r cqRunResult) float64 { return float64(r.Reopen) })))
		if !allReopened(c.runs) {
			reopen = "> " + reopen + " (failed)"
		}
		perEntry := func(f func(DiskUsage) int64) string {
			return sig3(med(func(r cqRunResult) float64 { return ratio(float64(f(r.Disk)), float64(r.Written)) }))
		}
		t.add(c.store, fmtCount(c.queues), writtenCell, rate, fmt.Sprintf("%.2f", ratio(rate, kvBase)),
			time.Duration(med(func(r cqRunResult) float64 { return float64(r.Read.P50) })),
			time.Duration(med(func(r cqRunResult) float64 { return float64(r.Read.P99) })),
			fmtBytes(int64(med(func(r cqRunResult) float64 { return float64(r.After.RSS) }))),
			fmtBytes(int64(med(func(r cqRunResult) float64 { return float64(r.After.PeakRSS) }))),
			perEntry(func(d DiskUsage) int64 { return d.Allocated }),
			sstCell(c.store, perEntry(func(d DiskUsage) int64 { return d.Tables })),
			perEntry(func(d DiskUsage) int64 { return d.Apparent }),
			groupThousands(int64(med(func(r cqRunResult) float64 { return float64(r.Disk.Files) }))),
			groupThousands(int64(med(func(r cqRunResult) float64 { return float64(r.PeakFDs) }))),
			groupThousands(int64(med(func(r cqRunResult) float64 { return float64(r.PeakMaps) }))),
			reopen)
	}
	if err := t.write(w); err != nil {
		return err
	}
	failures := 0
	for _, c := range configs {
		failures += len(c.failed)
	}
	for _, c := range configs {
		if len(c.runs) > 0 {
			r := c.runs[0]
			fmt.Fprintf(w, "limits: vm.max_map_count %d, open files %d; the process starts with %d descriptors and %d mappings\n",
				r.MaxMapCount, r.NoFileLimit, r.Start.FDs, r.Start.Maps)
			break
		}
	}
	if failures > 0 {
		return fmt.Errorf("%d runs failed; the table covers the others", failures)
	}
	return nil
}

// sstCell shows the table bytes per entry for the kv layout only.
func sstCell(store, v string) string {
	if store != storeKV {
		return "-"
	}
	return v
}

func allComplete(rs []cqRunResult) bool {
	for _, r := range rs {
		if !r.Complete {
			return false
		}
	}
	return true
}

func allReopened(rs []cqRunResult) bool {
	for _, r := range rs {
		if !r.ReopenOK {
			return false
		}
	}
	return true
}

// cqRunLine summarises one child's result.
func cqRunLine(r cqRunResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s entries in %s (%s/s)", fmtNum(float64(r.Written)), fmtDur(r.WriteTime), fmtNum(r.WriteRate))
	if !r.Complete {
		fmt.Fprintf(&b, " INCOMPLETE: %s", r.Stopped)
	}
	fmt.Fprintf(&b, "; flush %s; read32 %s (%.1f entries/read); RSS %s peak %s; fds %d maps %d",
		fmtDur(r.FlushTime), r.Read, r.ReadEntries, fmtBytes(r.After.RSS), fmtBytes(r.After.PeakRSS), r.PeakFDs, r.PeakMaps)
	if r.Options.Store == storeFile {
		fmt.Fprintf(&b, " (store holds %d files, %d maps)", r.StoreFDs, r.StoreMaps)
	} else {
		fmt.Fprintf(&b, "; compaction %s, pebble %s", fmtDur(r.CompactTime), fmtBytes(int64(r.PebbleDisk)))
	}
	fmt.Fprintf(&b, "; disk %s allocated, %s apparent, %d files, %d dirs",
		fmtBytes(r.Disk.Allocated), fmtBytes(r.Disk.Apparent), r.Disk.Files, r.Disk.Dirs)
	if r.Disk.Tables > 0 {
		fmt.Fprintf(&b, ", %s in tables, %s in WAL", fmtBytes(r.Disk.Tables), fmtBytes(r.Disk.WAL))
	}
	if r.ReopenOK {
		fmt.Fprintf(&b, "; reopen %s", fmtDur(r.Reopen))
	} else {
		fmt.Fprintf(&b, "; reopen FAILED: %s", r.ReopenError)
	}
	return b.String()
}

// runChild runs the bench binary with args and decodes its JSON result;
// its stderr goes to errw.
func runChild(ctx context.Context, exe string, args []string, errw io.Writer) (cqRunResult, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout = &out
	cmd.Stderr = errw
	if err := cmd.Run(); err != nil {
		return cqRunResult{}, fmt.Errorf("child %s: %w", strings.Join(args, " "), err)
	}
	return decodeCQResult(&out)
}
