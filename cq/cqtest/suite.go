package cqtest

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

//go:embed testdata/*.txt
var scripts embed.FS

// Run runs the whole suite against the layout open opens: every script of
// testdata/ (see the package documentation), the checks that are easier in
// Go (closed store, concurrent readers, many queues, long queues, Queues
// calling back into the store) and the metamorphic comparison with Memory.
// Each part is a subtest, so `go test -run 'X/script/truncate'` picks one.
func Run(t *testing.T, open Opener) {
	t.Run("script", func(t *testing.T) { RunScripts(t, open) })
	t.Run("closed", func(t *testing.T) { testClosed(t, open) })
	t.Run("concurrent-readers", func(t *testing.T) { testConcurrentReaders(t, open) })
	t.Run("many-queues", func(t *testing.T) { testManyQueues(t, open) })
	t.Run("long-queue", func(t *testing.T) { testLongQueue(t, open) })
	t.Run("queues-reentrant", func(t *testing.T) { testQueuesReentrant(t, open) })
	t.Run("metamorphic", func(t *testing.T) {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
				Metamorphic(t, MetamorphicConfig{Seed: seed, Ops: 1200}, open, MemoryOpener())
			})
		}
	})
}

// RunScripts runs every script of testdata/ as a subtest named after it:
// the data-driven part of Run alone, for a layout configuration that does
// not need the rest again.
func RunScripts(t *testing.T, open Opener) {
	names, err := fs.Glob(scripts, "testdata/*.txt")
	if err != nil || len(names) == 0 {
		t.Fatalf("no scripts embedded: %v", err)
	}
	for _, name := range names {
		text, err := scripts.ReadFile(name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		base := path.Base(name)
		t.Run(base[:len(base)-len(".txt")], func(t *testing.T) {
			RunScript(t, open, base, string(text))
		})
	}
}

// put adds ds to log and puts them, failing t on an error.
func put(t *testing.T, s cq.Store, log *CommitLog, ds []cq.Dispatch) {
	t.Helper()
	for _, d := range ds {
		log.Add(d.PhyOffset, d.Size, d.StoreTimestamp)
	}
	if err := s.Put(ds); err != nil {
		t.Fatalf("put %d entries: %v", len(ds), err)
	}
}

func testClosed(t *testing.T, open Opener) {
	log := NewCommitLog()
	s := open(t, t.TempDir(), log)
	put(t, s, log, []cq.Dispatch{{Topic: "T", QueueID: 0, Entry: cq.Entry{PhyOffset: 0, Size: 10, StoreTimestamp: 1}}})
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	calls := map[string]func() error{
		"Put": func() error {
			return s.Put([]cq.Dispatch{{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: 1, PhyOffset: 10, Size: 10}}})
		},
		"Get":          func() error { _, err := s.Get("T", 0, 0, 1); return err },
		"MaxOffset":    func() error { _, err := s.MaxOffset("T", 0); return err },
		"MinOffset":    func() error { _, err := s.MinOffset("T", 0); return err },
		"OffsetByTime": func() error { _, err := s.OffsetByTime("T", 0, 1, cq.Lower); return err },
		"DeleteQueue":  func() error { return s.DeleteQueue("T", 0) },
		"DeleteTopic":  func() error { return s.DeleteTopic("T") },
		"CorrectMin":   func() error { return s.CorrectMin(0) },
		"Truncate":     func() error { return s.Truncate(0) },
		"Queues":       func() error { return s.Queues(func(string, int32) bool { return true }) },
		"Flush":        s.Flush,
		"Close":        s.Close,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, cq.ErrClosed) {
			t.Errorf("%s after Close: got %v, want cq.ErrClosed", name, err)
		}
	}
}

// testConcurrentReaders runs one writer (the dispatcher) and several readers
// that check every answer against what was dispatched. Meant for -race.
func testConcurrentReaders(t *testing.T, open Opener) {
	const (
		queues  = 6
		batches = 150
		perCall = 8
	)
	log := NewCommitLog()
	s := open(t, t.TempDir(), log)
	defer s.Close()

	// want[q][off] is the entry dispatched at off; written before Put, so a
	// reader seeing MaxOffset > off may read it.
	var mu sync.Mutex
	want := make([][]cq.Entry, queues)
	done := make(chan struct{})
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- concurrentReader(s, int32(r%queues), queues, &mu, want, done)
		}()
	}
	phy, ts := int64(0), int64(1_000)
	for b := range batches {
		var ds []cq.Dispatch
		for i := range perCall {
			q := int32((b + i) % queues)
			mu.Lock()
			e := cq.Entry{QueueOffset: int64(len(want[q])), PhyOffset: phy, Size: int32(20 + i), TagsCode: int64(q), StoreTimestamp: ts}
			want[q] = append(want[q], e)
			mu.Unlock()
			phy += int64(e.Size)
			ts += int64(i % 2)
			ds = append(ds, cq.Dispatch{Topic: "C", QueueID: q, Entry: e})
		}
		put(t, s, log, ds)
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Error(err)
		}
	}
}

func concurrentReader(s cq.Store, first int32, queues int, mu *sync.Mutex, want [][]cq.Entry, done <-chan struct{}) error {
	lastMax := make([]int64, queues)
	for i := 0; ; i++ {
		select {
		case <-done:
			return nil
		default:
		}
		q := (first + int32(i)) % int32(queues)
		hi, err := s.MaxOffset("C", q)
		if err != nil {
			return fmt.Errorf("max offset: %w", err)
		}
		if hi < lastMax[q] {
			return fmt.Errorf("queue %d: max went back from %d to %d", q, lastMax[q], hi)
		}
		lastMax[q] = hi
		from := hi - 5
		if from < 0 {
			from = 0
		}
		es, err := s.Get("C", q, from, 10)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if int64(len(es)) < hi-from {
			return fmt.Errorf("queue %d: get(%d, 10) gave %d entries below max %d", q, from, len(es), hi)
		}
		mu.Lock()
		for j, e := range es {
			w := want[q][from+int64(j)]
			w.StoreTimestamp = e.StoreTimestamp
			if e != w {
				mu.Unlock()
				return fmt.Errorf("queue %d offset %d: got %+v, want %+v", q, from+int64(j), e, w)
			}
		}
		mu.Unlock()
		if hi > 0 {
			if _, err := s.OffsetByTime("C", q, 1_000+int64(i%50), cq.Boundary(i%2)); err != nil {
				return fmt.Errorf("offset by time: %w", err)
			}
		}
	}
}

// testManyQueues writes a few entries to each of many queues, then checks
// Queues and every queue's contents before and after a reopen.
func testManyQueues(t *testing.T, open Opener) {
	const topics, perTopic, entries = 30, 10, 3
	log := NewCommitLog()
	dir := t.TempDir()
	s := open(t, dir, log)
	var ds []cq.Dispatch
	phy := int64(0)
	for e := range entries {
		for tp := range topics {
			for q := range perTopic {
				ds = append(ds, cq.Dispatch{Topic: fmt.Sprintf("topic-%02d", tp), QueueID: int32(q * 3),
					Entry: cq.Entry{QueueOffset: int64(e), PhyOffset: phy, Size: 100, TagsCode: int64(tp*1000 + q), StoreTimestamp: phy / 100}})
				phy += 100
			}
		}
	}
	put(t, s, log, ds)
	check := func(s cq.Store) {
		t.Helper()
		qs, err := listQueues(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != topics*perTopic {
			t.Fatalf("Queues listed %d queues, want %d", len(qs), topics*perTopic)
		}
		for _, d := range ds {
			es, err := s.Get(d.Topic, d.QueueID, d.QueueOffset, 1)
			if err != nil || len(es) != 1 {
				t.Fatalf("get %s/%d@%d: %v, %v", d.Topic, d.QueueID, d.QueueOffset, es, err)
			}
			w := d.Entry
			w.StoreTimestamp = es[0].StoreTimestamp
			if es[0] != w {
				t.Fatalf("get %s/%d@%d: got %+v, want %+v", d.Topic, d.QueueID, d.QueueOffset, es[0], w)
			}
		}
	}
	check(s)
	s, err := reopen(t, open, s, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}

// testLongQueue checks reads of a queue far longer than any small file size.
func testLongQueue(t *testing.T, open Opener) {
	const n = 3000
	log := NewCommitLog()
	s := open(t, t.TempDir(), log)
	defer s.Close()
	for b := int64(0); b < n; b += 250 {
		ds := make([]cq.Dispatch, 0, 250)
		for i := b; i < b+250; i++ {
			ds = append(ds, cq.Dispatch{Topic: "L", QueueID: 2, Entry: cq.Entry{
				QueueOffset: i, PhyOffset: 1_000 + 64*i, Size: 64, TagsCode: i % 7, StoreTimestamp: 10_000 + i/3,
			}})
		}
		put(t, s, log, ds)
	}
	es, err := s.Get("L", 2, 0, 5*n)
	if err != nil || len(es) != n {
		t.Fatalf("get all: %d entries, %v; want %d", len(es), err, n)
	}
	for i, e := range es {
		if e.QueueOffset != int64(i) || e.PhyOffset != 1_000+64*int64(i) || e.Size != 64 || e.TagsCode != int64(i)%7 {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if err := checkEntryTimes(log, es); err != nil {
		t.Fatal(err)
	}
	es, err = s.Get("L", 2, 1234, 100)
	if err != nil || len(es) != 100 || es[0].QueueOffset != 1234 || es[99].QueueOffset != 1333 {
		t.Fatalf("get 1234+100: %d entries, %v", len(es), err)
	}
	// Store time 10000+k is held by offsets 3k..3k+2.
	for _, k := range []int64{0, 1, 333, 500, 998, 999} {
		lo, err1 := s.OffsetByTime("L", 2, 10_000+k, cq.Lower)
		hi, err2 := s.OffsetByTime("L", 2, 10_000+k, cq.Upper)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if lo != 3*k || hi != 3*k+2 {
			t.Errorf("store time %d: lower %d upper %d, want %d and %d", 10_000+k, lo, hi, 3*k, 3*k+2)
		}
	}
}

// testQueuesReentrant checks that fn may call the store, and that returning
// false stops the iteration.
func testQueuesReentrant(t *testing.T, open Opener) {
	log := NewCommitLog()
	s := open(t, t.TempDir(), log)
	defer s.Close()
	var ds []cq.Dispatch
	for q := range 5 {
		ds = append(ds, cq.Dispatch{Topic: "R", QueueID: int32(q), Entry: cq.Entry{QueueOffset: 0, PhyOffset: int64(q) * 10, Size: 10, StoreTimestamp: 1}})
	}
	put(t, s, log, ds)
	visited := 0
	err := s.Queues(func(topic string, queueID int32) bool {
		visited++
		hi, err := s.MaxOffset(topic, queueID)
		if err != nil || hi != 1 {
			t.Errorf("max offset of %s/%d inside Queues: %d, %v", topic, queueID, hi, err)
		}
		if es, err := s.Get(topic, queueID, 0, 1); err != nil || len(es) != 1 {
			t.Errorf("get %s/%d inside Queues: %v, %v", topic, queueID, es, err)
		}
		return visited < 3
	})
	if err != nil {
		t.Fatal(err)
	}
	if visited != 3 {
		t.Errorf("Queues visited %d queues after fn returned false at the third, want 3", visited)
	}
}
