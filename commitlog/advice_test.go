package commitlog

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// randomAdvised reports, for the segment starting at start, which of its
// bytes the process's mapping has advised MADV_RANDOM ("rr" in the VmFlags
// of /proc/self/smaps): the advised ranges relative to the segment's start.
func randomAdvised(t *testing.T, l *Log, start int64) [][2]int64 {
	t.Helper()
	s := l.acquireSegment(start)
	if s == nil {
		t.Fatalf("no segment at %d", start)
	}
	defer s.release()
	base := uint64(uintptr(unsafe.Pointer(&s.data[0])))
	end := base + uint64(len(s.data))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var out [][2]int64
	var lo, hi uint64
	inSeg := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			a, b, _ := strings.Cut(fields[0], "-")
			lo, _ = strconv.ParseUint(a, 16, 64)
			hi, _ = strconv.ParseUint(b, 16, 64)
			inSeg = lo >= base && hi <= end
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && inSeg {
			for _, fl := range strings.Fields(flags) {
				if fl == "rr" {
					out = append(out, [2]int64{int64(lo - base), int64(hi - base)})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSyncFlushActiveSegmentSmallPages checks the page advice of a
// sync-flush log: the segment being written is advised MADV_RANDOM (the
// kernel then caches it in single pages, so a group commit's msync writes
// the few pages appended since the last one and not a whole 2 MiB folio),
// a segment left behind by a roll is back to the default (read-ahead for
// consumers reading it from disk later), after a restart the active
// segment is advised from its write position on, and an async-flush log is
// not advised at all.
func TestSyncFlushActiveSegmentSmallPages(t *testing.T) {
	const segSize = 1 << 20
	cfg := testConfig(t, segSize)
	cfg.FlushType = SyncFlush
	l := mustOpen(t, cfg)
	c := newCounter()
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 4000), Assigner: c, WaitFlush: true})
	if got := randomAdvised(t, l, 0); fmt.Sprint(got) != fmt.Sprint([][2]int64{{0, segSize}}) {
		l.Close()
		t.Fatalf("active segment of a new sync-flush log advised %v, want all of it", got)
	}
	var last AppendResult
	for i := 1; l.MaxOffset() < segSize+segSize/4; i++ {
		last = mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 4000), Assigner: c, WaitFlush: true})
	}
	if got := randomAdvised(t, l, 0); len(got) != 0 {
		t.Errorf("sealed segment still advised %v", got)
	}
	if got := randomAdvised(t, l, segSize); fmt.Sprint(got) != fmt.Sprint([][2]int64{{0, segSize}}) {
		t.Errorf("active segment after a roll advised %v, want all of it", got)
	}
	end := last.PhyOffset + last.WroteBytes
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = mustOpen(t, cfg)
	from := (end - segSize) &^ (pageSize - 1)
	if got := randomAdvised(t, l, segSize); fmt.Sprint(got) != fmt.Sprint([][2]int64{{from, segSize}}) {
		t.Errorf("reopened active segment advised %v, want [%d %d] (from its write position %d)", got, from, segSize, end-segSize)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.FlushType = AsyncFlush
	l = mustOpen(t, cfg)
	defer l.Close()
	for i := 0; l.MaxOffset() < 2*segSize+segSize/4; i++ {
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 4000), Assigner: c})
	}
	if got := randomAdvised(t, l, 2*segSize); len(got) != 0 {
		t.Errorf("async-flush active segment advised %v, want nothing", got)
	}
}
