package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// ConsumeQueue layouts.
const (
	storeKV   = "kv"
	storeFile = "file"
)

// cqRunOptions configure one ConsumeQueue measurement (one child process).
type cqRunOptions struct {
	Store          string        `json:"store"`
	Queues         int           `json:"queues"`
	QueuesPerTopic int           `json:"queues_per_topic"`
	Entries        int64         `json:"entries"`
	Batch          int           `json:"batch"`
	Reads          int           `json:"reads"`
	Budget         time.Duration `json:"budget_ns"`
	// NoCompact skips the full compaction of the KV layout (the on-disk
	// figures are then as the write phase left them).
	NoCompact bool   `json:"no_compact,omitempty"`
	Dir       string `json:"-"`
}

func (o cqRunOptions) validate() error {
	switch {
	case o.Store != storeKV && o.Store != storeFile:
		return fmt.Errorf("store %q: want kv or file", o.Store)
	case o.Queues < 1:
		return fmt.Errorf("queues %d: want at least 1", o.Queues)
	case o.QueuesPerTopic < 1:
		return fmt.Errorf("queues per topic %d: want at least 1", o.QueuesPerTopic)
	case o.Entries < 1:
		return fmt.Errorf("entries %d: want at least 1", o.Entries)
	case o.Batch < 1:
		return fmt.Errorf("batch %d: want at least 1", o.Batch)
	case o.Reads < 0:
		return fmt.Errorf("reads %d: want >= 0", o.Reads)
	case o.Budget <= 0:
		return fmt.Errorf("budget %s: want > 0", o.Budget)
	}
	return nil
}

// cqRunResult is what one ConsumeQueue measurement found. Sizes are bytes,
// durations nanoseconds.
type cqRunResult struct {
	Options cqRunOptions `json:"options"`
	// Written counts the entries Put; Complete is false when the write
	// phase stopped early (Stopped says why: the time budget or an error).
	Written  int64  `json:"written"`
	Complete bool   `json:"complete"`
	Stopped  string `json:"stopped,omitempty"`
	// WriteTime and WriteRate cover the Puts; FlushTime the Flush after.
	WriteTime time.Duration `json:"write_ns"`
	WriteRate float64       `json:"write_per_s"`
	FlushTime time.Duration `json:"flush_ns"`
	// Read is the latency of Get of 32 entries at random queues and
	// offsets; ReadEntries the mean number of entries returned.
	Read        Latency `json:"read"`
	ReadEntries float64 `json:"read_entries"`
	// Start is the process before opening the store, Peak the most
	// descriptors and mappings seen while writing and reading, After the
	// process after writing and reading (PeakRSS is the high-water mark).
	Start     Resources `json:"start"`
	PeakFDs   int       `json:"peak_fds"`
	PeakMaps  int       `json:"peak_maps"`
	After     Resources `json:"after"`
	StoreFDs  int       `json:"store_fds,omitempty"`  // file layout: files it holds open
	StoreMaps int       `json:"store_maps,omitempty"` // file layout: mappings it holds
	// CompactTime is the full compaction (kv); Disk is the store directory
	// after it (kv) or after Flush (file); PebbleDisk is Pebble's own count.
	CompactTime time.Duration `json:"compact_ns"`
	Disk        DiskUsage     `json:"disk"`
	PebbleDisk  uint64        `json:"pebble_disk,omitempty"`
	// Reopen is closing done, opening again, the startup calls the broker
	// makes for the layout, and the first read; ReopenOK false when it did
	// not finish within the budget or failed (ReopenError).
	Reopen      time.Duration `json:"reopen_ns"`
	ReopenOK    bool          `json:"reopen_ok"`
	ReopenError string        `json:"reopen_error,omitempty"`
	// Limits of the machine the file layout runs into.
	MaxMapCount int   `json:"max_map_count"`
	NoFileLimit int64 `json:"nofile_limit"`
}

func newCQRunCommand() *cobra.Command {
	o := cqRunOptions{}
	cmd := &cobra.Command{
		Use:    "cq-run",
		Short:  "One ConsumeQueue measurement, as JSON (bench cq runs it in a child process per configuration)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runCQOne(cmd.Context(), o)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			return enc.Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Store, "store", storeKV, "layout: kv or file")
	f.IntVar(&o.Queues, "queues", 1000, "queues")
	f.IntVar(&o.QueuesPerTopic, "queues-per-topic", 8, "queues per topic")
	f.Int64Var(&o.Entries, "entries", 1_000_000, "entries to write, round robin over the queues")
	f.IntVar(&o.Batch, "batch", 4096, "entries per Put")
	f.IntVar(&o.Reads, "reads", 10_000, "32-entry range reads")
	f.DurationVar(&o.Budget, "budget", 10*time.Minute, "time budget of the write phase and of the reopen")
	f.BoolVar(&o.NoCompact, "no-compact", false, "skip the KV layout's full compaction before measuring the disk")
	f.StringVar(&o.Dir, "dir", "", "parent of the temporary store")
	return cmd
}

// recordSize is the CommitLog record size the entries describe (a 1 KiB
// body with the bench's properties).
const recordSize = 1240

// entryGen produces the benchmark's entries: entry i belongs to queue
// i mod Q, at queue offset i / Q, with CommitLog offset i x recordSize, so
// every queue gets the same number and the CommitLog order interleaves them
// as round-robin producers do.
type entryGen struct {
	queues, perTopic int
	topics           []string
	tags             int64
	base             int64
}

func newEntryGen(queues, perTopic int) *entryGen {
	n := (queues + perTopic - 1) / perTopic
	g := &entryGen{queues: queues, perTopic: perTopic, topics: make([]string, n),
		tags: commitlog.TagsCode(benchTag), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}
	for t := range g.topics {
		g.topics[t] = fmt.Sprintf("BenchTopic%07d", t)
	}
	return g
}

// queue returns the topic and queue id of queue index q.
func (g *entryGen) queue(q int) (string, int32) {
	return g.topics[q/g.perTopic], int32(q % g.perTopic)
}

// entry returns entry i.
func (g *entryGen) entry(i int64) cq.Dispatch {
	q := int(i % int64(g.queues))
	topic, qid := g.queue(q)
	return cq.Dispatch{Topic: topic, QueueID: qid, Entry: cq.Entry{
		QueueOffset:    i / int64(g.queues),
		PhyOffset:      i * recordSize,
		Size:           recordSize,
		TagsCode:       g.tags,
		StoreTimestamp: g.base + i/100, // 100k messages per second
	}}
}

// cqLayout is an open ConsumeQueue of either layout.
type cqLayout struct {
	store cq.Store
	db    *kvindex.DB   // kv
	kv    *kvindex.CQ   // kv
	file  *filecq.Store // file
}

func openLayout(kind, root string) (*cqLayout, error) {
	switch kind {
	case storeKV:
		db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(root, kvindex.DirName), Logger: zerolog.Nop()})
		if err != nil {
			return nil, err
		}
		kv := db.ConsumeQueue(0)
		return &cqLayout{store: kv, db: db, kv: kv}, nil
	default:
		fs, err := filecq.Open(filecq.Options{Dir: root, Logger: zerolog.Nop()})
		if err != nil {
			return nil, err
		}
		return &cqLayout{store: fs, file: fs}, nil
	}
}

func (l *cqLayout) close() error {
	err := l.store.Close()
	if l.db != nil {
		err = errors.Join(err, l.db.Close())
	}
	return err
}

// startup makes the calls the broker's dispatcher recovery makes before
// serving: the file layout is truncated at the CommitLog's end and its
// minima corrected (it keeps none); the KV layout needs neither (its minima
// are persisted and its dispatched offset is written with its entries).
func (l *cqLayout) startup(logEnd int64) error {
	if l.file == nil {
		return nil
	}
	if err := l.file.Truncate(logEnd); err != nil {
		return fmt.Errorf("startup truncate: %w", err)
	}
	if err := l.file.CorrectMin(0); err != nil {
		return fmt.Errorf("startup correct min: %w", err)
	}
	return nil
}

// runCQOne measures one configuration in this process.
func runCQOne(ctx context.Context, o cqRunOptions) (cqRunResult, error) {
	res := cqRunResult{Options: o, MaxMapCount: readIntFile("/proc/sys/vm/max_map_count")}
	if err := o.validate(); err != nil {
		return res, fmt.Errorf("cq-run: %w", err)
	}
	res.NoFileLimit = noFileLimit()
	var err error
	if res.Start, err = selfResources(); err != nil {
		return res, err
	}
	root, err := os.MkdirTemp(o.Dir, "rocketkv-bench-cq-")
	if err != nil {
		return res, fmt.Errorf("cq-run: %w", err)
	}
	defer os.RemoveAll(root)
	l, err := openLayout(o.Store, root)
	if err != nil {
		return res, fmt.Errorf("cq-run: open %s layout: %w", o.Store, err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = l.close()
		}
	}()
	g := newEntryGen(o.Queues, o.QueuesPerTopic)

	// Write phase.
	batch := make([]cq.Dispatch, 0, o.Batch)
	deadline := time.Now().Add(o.Budget)
	start := time.Now()
	lastSample, lastPrune := start, start
	var pruneTo int64
	res.Complete = true
	for i := int64(0); i < o.Entries; {
		batch = batch[:0]
		for ; i < o.Entries && len(batch) < o.Batch; i++ {
			batch = append(batch, g.entry(i))
		}
		if err := l.store.Put(batch); err != nil {
			res.Complete, res.Stopped = false, "Put failed: "+err.Error()
			break
		}
		res.Written = i
		now := time.Now()
		if now.Sub(lastSample) >= time.Second {
			lastSample = now
			if r, err := selfResources(); err == nil {
				res.PeakFDs, res.PeakMaps = max(res.PeakFDs, r.FDs), max(res.PeakMaps, r.Maps)
			}
		}
		if l.kv != nil && now.Sub(lastPrune) >= time.Second {
			// As the dispatcher does every second: drop the journal below
			// the CommitLog's flushed offset, here what was written a
			// second ago.
			if err := l.kv.PruneJournal(pruneTo); err != nil {
				return res, fmt.Errorf("cq-run: prune journal: %w", err)
			}
			lastPrune, pruneTo = now, i*recordSize
		}
		if now.After(deadline) && i < o.Entries {
			res.Complete, res.Stopped = false, fmt.Sprintf("time budget %s used up", o.Budget)
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	res.WriteTime = time.Since(start)
	res.WriteRate = float64(res.Written) / res.WriteTime.Seconds()
	t0 := time.Now()
	if err := l.store.Flush(); err != nil {
		return res, fmt.Errorf("cq-run: flush: %w", err)
	}
	res.FlushTime = time.Since(t0)
	if r, err := selfResources(); err == nil {
		res.PeakFDs, res.PeakMaps = max(res.PeakFDs, r.FDs), max(res.PeakMaps, r.Maps)
	}

	// Reads of 32-entry ranges at random queues and offsets.
	written := res.Written
	perQueue := func(q int) int64 { // entries queue q holds
		n := written / int64(o.Queues)
		if int64(q) < written%int64(o.Queues) {
			n++
		}
		return n
	}
	filled := min(int64(o.Queues), written)
	rng := rand.New(rand.NewPCG(1, 2))
	rec := NewRecorder()
	var got int64
	for range o.Reads {
		if filled == 0 {
			break
		}
		q := int(rng.Int64N(filled))
		n := perQueue(q)
		from := int64(0)
		if n > 32 {
			from = rng.Int64N(n - 32 + 1)
		}
		topic, qid := g.queue(q)
		t := time.Now()
		es, err := l.store.Get(topic, qid, from, 32)
		rec.Record(time.Since(t))
		if err != nil {
			return res, fmt.Errorf("cq-run: read %s/%d@%d: %w", topic, qid, from, err)
		}
		got += int64(len(es))
	}
	res.Read = rec.Summary()
	if o.Reads > 0 {
		res.ReadEntries = float64(got) / float64(o.Reads)
	}
	if res.After, err = selfResources(); err != nil {
		return res, err
	}
	// The file layout maps files for reads only: the peak includes them.
	res.PeakFDs, res.PeakMaps = max(res.PeakFDs, res.After.FDs), max(res.PeakMaps, res.After.Maps)
	if l.file != nil {
		res.StoreFDs, res.StoreMaps = l.file.OpenFiles(), l.file.OpenMappings()
	}

	// On-disk size: after a full compaction for kv (the journal pruned to
	// the end first, as once the CommitLog is flushed), after Flush for file.
	if l.kv != nil {
		if err := l.kv.PruneJournal(written * recordSize); err != nil {
			return res, fmt.Errorf("cq-run: prune journal: %w", err)
		}
		if !o.NoCompact {
			t := time.Now()
			if err := l.db.Compact(ctx); err != nil {
				return res, fmt.Errorf("cq-run: %w", err)
			}
			res.CompactTime = time.Since(t)
		}
		res.PebbleDisk = l.db.DiskUsage()
	}
	if res.Disk, err = diskUsage(root); err != nil {
		return res, err
	}

	// Reopen: close, open, the broker's startup calls, first read.
	closed = true
	if err := l.close(); err != nil {
		return res, fmt.Errorf("cq-run: close: %w", err)
	}
	res.Reopen, res.ReopenOK, res.ReopenError = reopen(o, root, g, written)
	return res, nil
}

// reopen times opening the store again up to its first read, giving up
// after the budget (the open then goes on in the background and is
// abandoned with the process; its directory may not be fully removed).
func reopen(o cqRunOptions, root string, g *entryGen, written int64) (time.Duration, bool, string) {
	type outcome struct {
		d   time.Duration
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		l, err := openLayout(o.Store, root)
		if err != nil {
			done <- outcome{err: err}
			return
		}
		var d time.Duration
		err = l.startup(written * recordSize)
		if err == nil {
			topic, qid := g.queue(0)
			var es []cq.Entry
			es, err = l.store.Get(topic, qid, 0, 32)
			if err == nil && written > 0 && len(es) == 0 {
				err = errors.New("first read after reopen found no entries")
			}
			d = time.Since(start)
		}
		// Closed before reporting, so that the store is not being written
		// while the caller removes it.
		err = errors.Join(err, l.close())
		done <- outcome{d: d, err: err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return time.Since(start), false, r.err.Error()
		}
		return r.d, true, ""
	case <-time.After(o.Budget):
		return o.Budget, false, fmt.Sprintf("not reopened within %s", o.Budget)
	}
}

// readIntFile reads a file holding one integer (0 when unreadable).
func readIntFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var n int
	if _, err := fmt.Sscan(string(b), &n); err != nil {
		return 0
	}
	return n
}

// decodeCQResult reads a child's JSON result.
func decodeCQResult(r io.Reader) (cqRunResult, error) {
	var res cqRunResult
	if err := json.NewDecoder(r).Decode(&res); err != nil {
		return res, fmt.Errorf("decode cq-run result: %w", err)
	}
	return res, nil
}
