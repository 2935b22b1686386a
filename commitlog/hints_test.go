package commitlog

import (
	"math/rand/v2"
	"testing"
)

func TestBoundaryHints(t *testing.T) {
	var h boundaryHints
	if _, ok := h.before(100); ok {
		t.Fatal("a hint before any was noted")
	}
	for off := int64(0); off < 10*hintSpacing; off += 1000 {
		h.note(off)
	}
	// Hints at 0, 17000, 34000, ...: the first start hintSpacing past the last.
	for off, want := range map[int64]int64{16999: 0, 17000: 17000, 33999: 17000, 34500: 34000} {
		if got, ok := h.before(off); !ok || got != want {
			t.Fatalf("before(%d) = %d %v, want %d", off, got, ok, want)
		}
	}
	if n := len(h.offs); n < 9 || n > 10 {
		t.Fatalf("%d hints for 10 spacings", n)
	}
	for off := int64(10 * hintSpacing); len(h.offs) < maxHints; off += hintSpacing {
		h.note(off)
	}
	last := h.offs[len(h.offs)-1]
	h.note(last + hintSpacing) // past the cap: the older half goes
	if n := len(h.offs); n != maxHints/2+1 {
		t.Fatalf("%d hints after the cap, want %d", n, maxHints/2+1)
	}
	if _, ok := h.before(hintSpacing); ok {
		t.Fatal("an early hint outlived the cap")
	}
}

// recordStarts lists the record starts of the log's segment starting at
// seg, walked from the segment's first byte.
func recordStarts(t *testing.T, l *Log, seg int64) []int64 {
	t.Helper()
	var out []int64
	for pos := seg; pos < min(seg+l.segSize, l.MaxOffset()); {
		v, err := l.ReadStream(pos, 8)
		if err != nil {
			t.Fatal(err)
		}
		n, err := RecordSize(v.Data)
		v.Release()
		out = append(out, pos)
		if err != nil {
			break // the blank filler
		}
		pos += int64(n)
	}
	return out
}

// RecordStart finds the record holding an offset from the hints of a
// replica and of a recovered log as from the segment's start.
func TestRecordStartWithHints(t *testing.T) {
	m := mustOpen(t, testConfig(t, 1<<20))
	defer m.Close()
	c := newCounter()
	for i := range 3000 {
		mustAppend(t, m, AppendRequest{Message: testMessage("TopicH", 0, i, 200+(i*37)%1500), Assigner: c})
	}
	dir := t.TempDir()
	r := openReplica(t, dir, 1<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	stream(t, m, r, rng, 30000) // from the master's newest segment
	for i := range 3000 {
		mustAppend(t, m, AppendRequest{Message: testMessage("TopicH", 0, i, 200+(i*37)%1500), Assigner: c})
	}
	stream(t, m, r, rng, 30000)
	check := func(l *Log, what string) {
		t.Helper()
		if len(l.hints.offs) < 10 {
			t.Fatalf("%s: %d hints", what, len(l.hints.offs))
		}
		for seg := l.MinOffset(); seg < l.MaxOffset(); seg += l.segSize {
			starts := recordStarts(t, l, seg)
			for range 300 {
				i := rng.IntN(len(starts) - 1)
				off := starts[i] + rng.Int64N(starts[i+1]-starts[i])
				got, err := l.RecordStart(off)
				if err != nil || got != starts[i] {
					t.Fatalf("%s: RecordStart(%d) = %d, %v; want %d", what, off, got, err, starts[i])
				}
				if got, err := l.MessageStart(off); err != nil || got != starts[i] {
					t.Fatalf("%s: MessageStart(%d) = %d, %v; want %d", what, off, got, err, starts[i])
				}
			}
			// A sealed segment ends with its filler: MessageStart of any of
			// its bytes is the last message's start.
			if filler := starts[len(starts)-1]; seg+l.segSize < l.MaxOffset() {
				for _, off := range []int64{filler, filler + 5, seg + l.segSize - 1} {
					if got, err := l.RecordStart(off); err != nil || got != filler {
						t.Fatalf("%s: RecordStart(%d) in the filler = %d, %v; want %d", what, off, got, err, filler)
					}
					if got, err := l.MessageStart(off); err != nil || got != starts[len(starts)-2] {
						t.Fatalf("%s: MessageStart(%d) in the filler = %d, %v; want %d", what, off, got, err, starts[len(starts)-2])
					}
				}
				// From a hint at the filler itself.
				l.hints.mu.Lock()
				saved := l.hints.offs
				l.hints.offs = []int64{filler}
				l.hints.mu.Unlock()
				got, err := l.MessageStart(filler + 1)
				l.hints.mu.Lock()
				l.hints.offs = saved
				l.hints.mu.Unlock()
				if err != nil || got != starts[len(starts)-2] {
					t.Fatalf("%s: MessageStart(%d) with a hint at the filler = %d, %v; want %d", what, filler+1, got, err, starts[len(starts)-2])
				}
			}
		}
	}
	check(r, "replica")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, 1<<20)
	cfg.Dir = dir
	r = mustOpen(t, cfg)
	defer r.Close()
	check(r, "recovered")
}
