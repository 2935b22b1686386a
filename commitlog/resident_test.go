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
