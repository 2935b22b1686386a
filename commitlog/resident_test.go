package commitlog

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// evict drops the pages of [offset, offset+size) from the page cache: the
// mapping's pages first (MADV_DONTNEED; the page cache keeps pages a
// mapping still uses), then the file's (POSIX_FADV_DONTNEED, which drops
// clean pages only: the caller flushes first).
func evict(t *testing.T, l *Log, offset int64, size int) {
	t.Helper()
	s := l.acquireSegment(offset)
	if s == nil {
		t.Fatalf("no segment holds %d", offset)
	}
	defer s.release()
	lo := (offset - s.start) &^ (osPageSize - 1)
	hi := offset - s.start + int64(size)
	if err := unix.Madvise(s.data[lo:hi], unix.MADV_DONTNEED); err != nil {
		t.Fatalf("madvise: %v", err)
	}
	f, err := os.Open(s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), lo, hi-lo, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise: %v", err)
	}
}

// pageResident asks mincore directly about the page at offset.
func pageResident(t *testing.T, l *Log, offset int64) bool {
	t.Helper()
	s := l.acquireSegment(offset)
	if s == nil {
		t.Fatalf("no segment holds %d", offset)
	}
	defer s.release()
	rel := offset - s.start
	vec := make([]byte, 1)
	if err := mincore(s.data[rel:rel+osPageSize], vec); err != nil {
		t.Fatal(err)
	}
	return vec[0]&1 != 0
}

// Resident tells whether a record's pages are in the page cache, as
// mincore(2) sees them: a record just written is, one whose pages were
// dropped is not, and a record on two pages is resident only with both.
func TestViewResident(t *testing.T) {
	l := mustOpen(t, testConfig(t, 1<<20))
	defer l.Close()
	c := newCounter()
	var recs []AppendResult
	for i := range 12 {
		recs = append(recs, mustAppend(t, l, AppendRequest{Message: testMessage("TopicRes", 0, i, 1500), Assigner: c}))
	}
	resident := func(r AppendResult) bool {
		t.Helper()
		v, err := l.Read(r.PhyOffset, int32(r.WroteBytes))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		in, err := v.Resident()
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	for i, r := range recs {
		if !resident(r) {
			t.Fatalf("record %d at %d, just written, is not resident", i, r.PhyOffset)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Record 2 (about 3.2-4.9 KiB into the segment) crosses from the
	// first page into the second: dropping the second page alone makes
	// it not resident, and leaves record 0 (first page) resident.
	r := recs[2]
	if r.PhyOffset/osPageSize == (r.PhyOffset+r.WroteBytes-1)/osPageSize {
		t.Fatalf("record 2 [%d, %d) does not cross a page boundary", r.PhyOffset, r.PhyOffset+r.WroteBytes)
	}
	second := (r.PhyOffset/osPageSize + 1) * osPageSize
	evict(t, l, second, int(osPageSize))
	if pageResident(t, l, second) {
		t.Skip("the page cache kept the evicted page (a file system that ignores POSIX_FADV_DONTNEED)")
	}
	if resident(r) {
		t.Fatalf("record 2 at %d reported resident without its second page", r.PhyOffset)
	}
	if !resident(recs[0]) {
		t.Fatalf("record 0 at %d lost its page with the next page's eviction", recs[0].PhyOffset)
	}
	var released *View
	if _, err := released.Resident(); err == nil {
		t.Fatal("a nil view reported its residency")
	}
}

// SampledResidency reports, per segment, the page-cache residency of the
// first page of each group of step pages, as RocketMQ 5's
// ColdDataCheckService samples mincore's vector; the chunks it asks
// mincore about in do not change the answer.
func TestSampledResidency(t *testing.T) {
	l := mustOpen(t, testConfig(t, 1<<20))
	defer l.Close()
	c := newCounter()
	for i := range 16 {
		mustAppend(t, l, AppendRequest{Message: testMessage("TopicRes", 0, i, 1500), Assigner: c})
	}
	if l.MaxOffset() < 5*osPageSize {
		t.Fatalf("the records end at %d, before the fifth page", l.MaxOffset())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	sampled := func(step int) []byte {
		t.Helper()
		var first []byte
		n := 0
		if err := l.SampledResidency(step, func(start int64, sample []byte) {
			if n == 0 {
				if start != 0 {
					t.Fatalf("first segment reported at %d", start)
				}
				first = sample
			}
			n++
		}); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no segment reported")
		}
		pages := (int64(1<<20) + osPageSize - 1) / osPageSize
		if want := int((pages + int64(step) - 1) / int64(step)); len(first) != want {
			t.Fatalf("step %d: %d samples, want %d", step, len(first), want)
		}
		return first
	}
	in := func(b byte) bool { return b&1 != 0 }
	evict(t, l, 2*osPageSize, int(osPageSize))
	if pageResident(t, l, 2*osPageSize) || !pageResident(t, l, 3*osPageSize) {
		t.Skip("the page cache kept the evicted page, or dropped its neighbour")
	}
	s1, s2 := sampled(1), sampled(2)
	if !in(s1[0]) || !in(s1[1]) || in(s1[2]) || !in(s1[3]) || !in(s1[4]) {
		t.Fatalf("step 1, page 2 evicted: pages 0-4 %v", s1[:5])
	}
	if !in(s2[0]) || in(s2[1]) || !in(s2[2]) {
		t.Fatalf("step 2, page 2 evicted: groups 0-2 %v, want group 1 (pages 2 and 3) out by its first page", s2[:3])
	}
	// Chunks of 5 pages with a step of 3 give what one call gives.
	s := l.acquireSegment(0)
	defer s.release()
	whole, err := s.sampledResidency(3, make([]byte, residencyChunk))
	if err != nil {
		t.Fatal(err)
	}
	chunked, err := s.sampledResidency(3, make([]byte, 5))
	if err != nil {
		t.Fatal(err)
	}
	if string(whole) != string(chunked) || in(whole[0]) != in(s1[0]) || in(whole[1]) != in(s1[3]) {
		t.Fatalf("step 3: %v in one call, %v in chunks of 5 pages; pages 0 and 3 are %v %v", whole[:4], chunked[:4], s1[0], s1[3])
	}
	// Page 3 evicted as well: the group of pages 2 and 3 is still judged
	// by page 2 alone, and the one of pages 4 and 5 by page 4.
	evict(t, l, 3*osPageSize, int(osPageSize))
	if s2 := sampled(2); in(s2[1]) || !in(s2[2]) {
		t.Fatalf("step 2, pages 2 and 3 evicted: groups 1-2 %v", s2[1:3])
	}
	l.Close()
	if err := l.SampledResidency(1, func(int64, []byte) {}); err == nil {
		t.Fatal("a closed log reported its residency")
	}
}
