package commitlog

import "testing"

// allRandom reports whether the whole of the segment starting at start
// is advised MADV_RANDOM, noneRandom whether none of it is.
func allRandom(t *testing.T, l *Log, start int64) bool {
	t.Helper()
	covered := int64(0)
	for _, r := range randomAdvised(t, l, start) {
		covered += r[1] - r[0]
	}
	return covered == l.segSize
}

func noneRandom(t *testing.T, l *Log, start int64) bool {
	t.Helper()
	return len(randomAdvised(t, l, start)) == 0
}

// SetRandomReads advises the sealed segments and the ones sealed later,
// and takes the advice back; the segment being written keeps its own.
func TestSetRandomReads(t *testing.T) {
	cfg := testConfig(t, 16<<10)
	l := mustOpen(t, cfg)
	defer l.Close()
	c := newCounter()
	appendN := func(n int) {
		for i := range n {
			mustAppend(t, l, AppendRequest{Message: testMessage("TopicR", 0, i, 1000), Assigner: c})
		}
	}
	appendN(40) // three segments or more
	sealed := func() []*segment { return l.segs[:len(l.segs)-1] }
	if len(sealed()) < 2 {
		t.Fatalf("want two sealed segments, have %d", len(sealed()))
	}
	// each checks every segment of segs with advised.
	each := func(segs []*segment, advised func(*testing.T, *Log, int64) bool, what string) {
		t.Helper()
		for _, s := range segs {
			if !advised(t, l, s.start) {
				t.Fatalf("%s: %s", s.path, what)
			}
		}
	}
	each(l.segs, noneRandom, "advised random before it was asked")
	l.SetRandomReads(true)
	each(sealed(), allRandom, "sealed, not advised random")
	active := l.segs[len(l.segs)-1]
	if !noneRandom(t, l, active.start) {
		t.Fatalf("the active segment %s was advised random", active.path)
	}
	appendN(20) // seals the active one
	if !allRandom(t, l, active.start) {
		t.Fatalf("%s, sealed after the change, not advised random", active.path)
	}
	l.SetRandomReads(false)
	each(sealed(), noneRandom, "still advised random")
}

// A log opened with RandomReads advises its sealed segments at once.
func TestRandomReadsAtOpen(t *testing.T) {
	cfg := testConfig(t, 16<<10)
	l := mustOpen(t, cfg)
	c := newCounter()
	for i := range 40 {
		mustAppend(t, l, AppendRequest{Message: testMessage("TopicR", 0, i, 1000), Assigner: c})
	}
	l.Close()
	cfg.RandomReads = true
	l = mustOpen(t, cfg)
	defer l.Close()
	for _, s := range l.segs[:len(l.segs)-1] {
		if !allRandom(t, l, s.start) {
			t.Fatalf("sealed %s not advised random at open", s.path)
		}
	}
}
