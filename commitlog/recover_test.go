package commitlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

// fixtureStore copies a fixture store root into a temporary directory.
func fixtureStore(t *testing.T, name string) string {
	t.Helper()
	switch name {
	case store498:
		return testutil.CopyStore(t, fixturePath(t, store498, "clean"))
	default:
		return testutil.CopyStore(t, fixturePath(t, store440, "store"))
	}
}

func openStore(t *testing.T, dir string) *Log {
	t.Helper()
	cfg := DefaultConfig(dir) // 1 GiB configured: the files' size must win
	cfg.StoreHost = testStoreHost
	cfg.Logger = testLogger(t)
	return mustOpen(t, cfg)
}

func markAbort(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "abort"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// patchFile applies f to the bytes of a store file.
func patchFile(t *testing.T, path string, f func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func segPath(dir string, start int64) string {
	return filepath.Join(dir, "commitlog", SegmentName(start))
}

func TestOpenFixture498(t *testing.T) {
	for _, abnormal := range []bool{false, true} {
		name := "normal"
		if abnormal {
			name = "abnormal"
		}
		t.Run(name, func(t *testing.T) {
			dir := fixtureStore(t, store498)
			if abnormal {
				markAbort(t, dir)
			}
			l := openStore(t, dir)
			info := l.RecoveryInfo()
			if info.Abnormal != abnormal || info.EndOffset != 53272 || info.CutBytes != 0 || info.CutReason != nil {
				t.Fatalf("recovery %+v, want end 53272, abnormal %v, nothing cut", info, abnormal)
			}
			// Normal recovery scans the last three segments; abnormal recovery
			// starts where the checkpoint test of spec 2.7 says: no segment's
			// first record is older than physicMsgTimestamp-3s, so segment 0.
			wantFirst := map[bool]int64{false: 16384, true: 0}[abnormal]
			if info.FirstScanned != wantFirst {
				t.Errorf("first scanned %d, want %d", info.FirstScanned, wantFirst)
			}
			if l.SegmentSize() != 16384 || l.MaxOffset() != 53272 || l.MinOffset() != 0 {
				t.Fatalf("segment size %d, min %d, max %d", l.SegmentSize(), l.MinOffset(), l.MaxOffset())
			}
			if ck := l.Checkpoint(); ck.PhysicMsgTimestamp != 1795976099056 || ck.LogicsMsgTimestamp != 1795976100430 || ck.IndexMsgTimestamp != 1795976100391 {
				t.Errorf("checkpoint %+v", ck)
			}
			if got := scanAll(t, l); len(got) != 104 {
				t.Fatalf("scanned %d records, want 104", len(got))
			}
			c := newCounter()
			r := mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, 1, 100), Assigner: c})
			if r.PhyOffset != 53272 {
				t.Fatalf("first append at %d, want 53272", r.PhyOffset)
			}
			// Fill the last segment: the next one must be 00000000000000065536.
			for l.MaxOffset() < 65536 {
				mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, 2, 1000), Assigner: c})
			}
			if st, err := os.Stat(segPath(dir, 65536)); err != nil || st.Size() != 16384 {
				t.Fatalf("new segment: %v, %v", st, err)
			}
			want := l.MaxOffset()
			n := len(scanAll(t, l))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openStore(t, dir)
			defer l.Close()
			if l.RecoveryInfo().Abnormal || l.MaxOffset() != want || len(scanAll(t, l)) != n {
				t.Fatalf("reopen: %+v, %d records", l.RecoveryInfo(), n)
			}
		})
	}
}

func TestOpenFixture440(t *testing.T) {
	for _, abnormal := range []bool{false, true} {
		dir := fixtureStore(t, store440)
		if abnormal {
			markAbort(t, dir)
		}
		l := openStore(t, dir)
		info := l.RecoveryInfo()
		// The only file ends with a 108-byte blank: the log ends at its end.
		if info.EndOffset != 8192 || l.SegmentSize() != 8192 || info.CutBytes != 0 || info.Records != 47 {
			t.Fatalf("abnormal=%v: recovery %+v, segment size %d", abnormal, info, l.SegmentSize())
		}
		if got := scanAll(t, l); len(got) != 47 {
			t.Fatalf("scanned %d records", len(got))
		}
		r := mustAppend(t, l, AppendRequest{Message: testMessage("abc", 0, 1, 32)})
		if r.PhyOffset != 8192 {
			t.Fatalf("append at %d, want 8192", r.PhyOffset)
		}
		if st, err := os.Stat(segPath(dir, 8192)); err != nil || st.Size() != 8192 {
			t.Fatalf("new segment 00000000000000008192: %v", err)
		}
		l.Close()
	}
}

// The records of the last 4.9.8 segment, from expected.json.
const (
	rec50094 = 50094 // 295 bytes
	rec51138 = 51138 // 454 bytes
	rec52659 = 52659 // 613 bytes, the last one
	end498   = 53272
)

func TestTornTailAndCorruption(t *testing.T) {
	type tc struct {
		name     string
		abnormal bool
		damage   func(t *testing.T, dir string)
		wantEnd  int64
		wantCut  func(n int64) bool
		wantErr  error // in CutReason
		gone     []int64
	}
	inSeg := func(off int64, f func(b []byte, rel int64)) func(t *testing.T, dir string) {
		return func(t *testing.T, d string) {
			start := off / 16384 * 16384
			patchFile(t, segPath(d, start), func(b []byte) { f(b, off-start) })
		}
	}
	cases := []tc{
		{
			name: "truncated mid-record (crash)", abnormal: true,
			damage: inSeg(rec52659, func(b []byte, rel int64) { clear(b[rel+300:]) }),
			// The 300 surviving bytes of the record are cut.
			wantEnd: rec52659, wantCut: func(n int64) bool { return n > 0 && n <= 300 }, wantErr: ErrCorrupt,
		},
		{
			name: "truncated mid-record (no abort file)", abnormal: false,
			damage:  inSeg(rec52659, func(b []byte, rel int64) { clear(b[rel+300:]) }),
			wantEnd: rec52659, wantCut: func(n int64) bool { return n > 0 && n <= 300 }, wantErr: ErrCorrupt,
		},
		{
			name: "flipped body byte", abnormal: true,
			damage:  inSeg(rec50094, func(b []byte, rel int64) { b[rel+90] ^= 0x40 }),
			wantEnd: rec50094, wantCut: func(n int64) bool { return n == end498-rec50094 }, wantErr: ErrCRC,
		},
		{
			name: "flipped body byte (no abort file)", abnormal: false,
			damage:  inSeg(rec50094, func(b []byte, rel int64) { b[rel+90] ^= 0x40 }),
			wantEnd: rec50094, wantCut: func(n int64) bool { return n == end498-rec50094 }, wantErr: ErrCRC,
		},
		{
			name: "zeroed header", abnormal: true,
			damage:  inSeg(rec51138, func(b []byte, rel int64) { clear(b[rel : rel+8]) }),
			wantEnd: rec51138, wantCut: func(n int64) bool { return n == end498-rec51138 },
		},
		{
			name: "zeroed header (no abort file)", abnormal: false,
			damage:  inSeg(rec51138, func(b []byte, rel int64) { clear(b[rel : rel+8]) }),
			wantEnd: rec51138, wantCut: func(n int64) bool { return n == end498-rec51138 }, wantErr: ErrCorrupt,
		},
		{
			name: "corrupt record in an earlier segment", abnormal: true,
			damage:  inSeg(16384, func(b []byte, rel int64) { b[rel+95] ^= 0x01 }),
			wantEnd: 16384, wantCut: func(n int64) bool { return n > 16384*2 }, wantErr: ErrCRC,
			gone: []int64{32768, 49152},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fixtureStore(t, store498)
			c.damage(t, dir)
			if c.abnormal {
				markAbort(t, dir)
			}
			l := openStore(t, dir)
			info := l.RecoveryInfo()
			if info.EndOffset != c.wantEnd || l.MaxOffset() != c.wantEnd {
				t.Fatalf("recovered end %d (max %d), want %d; %+v", info.EndOffset, l.MaxOffset(), c.wantEnd, info)
			}
			if !c.wantCut(info.CutBytes) {
				t.Errorf("cut bytes %d", info.CutBytes)
			}
			if c.wantErr != nil && !errors.Is(info.CutReason, c.wantErr) {
				t.Errorf("cut reason %v, want %v", info.CutReason, c.wantErr)
			}
			for _, g := range c.gone {
				if _, err := os.Stat(segPath(dir, g)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("segment %d should be deleted: %v", g, err)
				}
			}
			// Bytes after the cut are zero in that segment.
			s := l.activeSegment()
			if rel := c.wantEnd - s.start; !allZero(s.data[rel:]) {
				t.Errorf("bytes after the cut are not zeroed")
			}
			recs := scanAll(t, l)
			r := mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 1, 7, 200)})
			if r.PhyOffset != c.wantEnd {
				t.Fatalf("append at %d, want the cut %d", r.PhyOffset, c.wantEnd)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			markAbort(t, dir)
			l = openStore(t, dir)
			defer l.Close()
			if got := scanAll(t, l); len(got) != len(recs)+1 || l.RecoveryInfo().CutBytes != 0 {
				t.Fatalf("after reopen: %d records (want %d), %+v", len(got), len(recs)+1, l.RecoveryInfo())
			}
		})
	}
}

func TestRecoverFromHint(t *testing.T) {
	dir := fixtureStore(t, store498)
	cfg := DefaultConfig(dir)
	cfg.RecoverFrom = 100 // in segment 0: earlier than the last three segments
	cfg.Logger = testLogger(t)
	l := mustOpen(t, cfg)
	defer l.Close()
	if info := l.RecoveryInfo(); info.FirstScanned != 0 || info.EndOffset != end498 || info.Records != 104 {
		t.Fatalf("recovery %+v", info)
	}
}

func TestLoadSegmentsRules(t *testing.T) {
	t.Run("zero-length last file removed", func(t *testing.T) {
		dir := fixtureStore(t, store498)
		os.WriteFile(segPath(dir, 65536), nil, 0o644)
		l := openStore(t, dir)
		defer l.Close()
		if _, err := os.Stat(segPath(dir, 65536)); !errors.Is(err, os.ErrNotExist) || l.MaxOffset() != end498 {
			t.Fatalf("zero-length last file: %v, max %d", err, l.MaxOffset())
		}
	})
	t.Run("all-zero preallocated last file of the wrong size removed", func(t *testing.T) {
		dir := fixtureStore(t, store498)
		os.WriteFile(segPath(dir, 65536), make([]byte, 5000), 0o644)
		markAbort(t, dir)
		l := openStore(t, dir)
		defer l.Close()
		if _, err := os.Stat(segPath(dir, 65536)); !errors.Is(err, os.ErrNotExist) || l.MaxOffset() != end498 {
			t.Fatalf("partial preallocated file: %v, max %d", err, l.MaxOffset())
		}
	})
	t.Run("all-zero full-size next file (crash after preallocation)", func(t *testing.T) {
		dir := fixtureStore(t, store498)
		os.WriteFile(segPath(dir, 65536), make([]byte, 16384), 0o644)
		markAbort(t, dir)
		l := openStore(t, dir)
		defer l.Close()
		if l.MaxOffset() != end498 {
			t.Fatalf("max %d", l.MaxOffset())
		}
		if _, err := os.Stat(segPath(dir, 65536)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the empty file after the end must be removed: %v", err)
		}
	})
	t.Run("wrong-size last file with data is an error naming it", func(t *testing.T) {
		dir := fixtureStore(t, store498)
		b, _ := os.ReadFile(segPath(dir, 49152))
		os.WriteFile(segPath(dir, 49152), b[:8000], 0o644)
		cfg := DefaultConfig(dir)
		_, err := Open(cfg)
		if !errors.Is(err, ErrBadSegment) || !strings.Contains(err.Error(), "00000000000000049152") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong-size middle file is an error", func(t *testing.T) {
		dir := fixtureStore(t, store498)
		os.WriteFile(segPath(dir, 16384), make([]byte, 100), 0o644)
		_, err := Open(DefaultConfig(dir))
		if !errors.Is(err, ErrBadSegment) || !strings.Contains(err.Error(), "00000000000000016384") {
			t.Fatalf("err = %v", err)
		}
		// A failed Open releases the lock.
		os.WriteFile(segPath(dir, 16384), make([]byte, 16384), 0o644)
		l, err := Open(DefaultConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	})
}

// An existing store's last segment may be sparse (RocketMQ does not
// preallocate): Open reserves its blocks, and while that fails appends are
// refused with ErrDiskFull instead of risking SIGBUS.
func TestOpenAllocatesActiveSegment(t *testing.T) {
	dir := fixtureStore(t, store498)
	cfg := DefaultConfig(dir)
	cfg.Logger = testLogger(t)
	ffs := vfs.NewFaulty(vfs.OS{})
	ffs.SetDiskFull(true)
	cfg.FS = ffs
	l := mustOpen(t, cfg)
	defer l.Close()
	if n := ffs.Allocations(); n != 1 {
		t.Fatalf("Open made %d allocations, want 1 (the active segment)", n)
	}
	if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("TopicA", 0, 1, 10)}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if l.MaxOffset() != end498 {
		t.Fatalf("max %d", l.MaxOffset())
	}
	ffs.SetDiskFull(false)
	if r := mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, 1, 10)}); r.PhyOffset != end498 {
		t.Fatalf("append at %d", r.PhyOffset)
	}
}

// Gaps between segments are tolerated (spec 2.2): reads skip them.
func TestSegmentGap(t *testing.T) {
	dir := fixtureStore(t, store498)
	// Move the last segment one segment further: 49152 -> 65536.
	if err := os.Rename(segPath(dir, 49152), segPath(dir, 65536)); err != nil {
		t.Fatal(err)
	}
	// Its records' physical offsets no longer match their position, so
	// recovery ends the log at its start; the records before the gap stay.
	l := openStore(t, dir)
	defer l.Close()
	if l.MaxOffset() != 65536 {
		t.Fatalf("max %d, want 65536", l.MaxOffset())
	}
	if got := scanAll(t, l); len(got) != 96 {
		t.Fatalf("scanned %d records across the gap, want 96", len(got))
	}
	r := mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, 1, 10)})
	if r.PhyOffset != 65536 {
		t.Fatalf("append at %d", r.PhyOffset)
	}
	if got := scanAll(t, l); len(got) != 97 {
		t.Fatalf("scanned %d records, want 97", len(got))
	}
}

// TestLastNonZeroAt checks the tail scan of crash recovery across its read
// chunks: it must find the last non-zero byte wherever it is, relative to
// the start of the scan.
func TestLastNonZeroAt(t *testing.T) {
	const size = 3*tailScanChunk + 100
	cases := []struct {
		name     string
		nonZero  []int64 // positions set to 1
		from, to int64
		want     int64
	}{
		{"all zero", nil, 0, size, 0},
		{"first byte", []int64{0}, 0, size, 1},
		{"last byte", []int64{size - 1}, 0, size, size},
		{"end of first chunk", []int64{tailScanChunk - 1}, 0, size, tailScanChunk},
		{"start of second chunk", []int64{tailScanChunk}, 0, size, tailScanChunk + 1},
		{"last of several", []int64{10, 2*tailScanChunk + 7}, 0, size, 2*tailScanChunk + 8},
		{"relative to from", []int64{5000}, 4096, size, 5000 - 4096 + 1},
		{"before from is ignored", []int64{100}, 4096, size, 0},
		{"past to is ignored", []int64{size - 1}, 0, size - 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seg")
			b := make([]byte, size)
			for _, p := range c.nonZero {
				b[p] = 1
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := vfs.OS{}.OpenFile(path, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := lastNonZeroAt(f, c.from, c.to)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("lastNonZeroAt(%d, %d) = %d, want %d", c.from, c.to, got, c.want)
			}
		})
	}
}

// TestLastNonZeroAtAllocated checks the scan over a file like a crashed
// segment: allocated but unwritten blocks (which SEEK_DATA may skip) with
// written bytes between them, and a hole.
func TestLastNonZeroAtAllocated(t *testing.T) {
	const size = 8 << 20
	path := filepath.Join(t.TempDir(), "seg")
	fs := vfs.OS{}
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fs.Allocate(f, 0, size/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil { // the second half is a hole
		t.Fatal(err)
	}
	check := func(from, want int64) {
		t.Helper()
		got, err := lastNonZeroAt(f, from, size)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("lastNonZeroAt(%d) = %d, want %d", from, got, want)
		}
	}
	check(0, 0)
	if _, err := f.WriteAt([]byte{7}, 3<<20+5); err != nil {
		t.Fatal(err)
	}
	check(0, 3<<20+6)
	check(1<<20, 2<<20+6)
	if _, err := f.WriteAt([]byte{9, 0, 0}, 7<<20); err != nil { // inside the hole
		t.Fatal(err)
	}
	check(0, 7<<20+1)
	check(3<<20+6, 4<<20-5)
}

// TestAbnormalRecoveryZeroesWholeTail checks that crash recovery clears
// stray bytes anywhere after the end of the log, also far beyond the
// window it reads for its report, and in a later segment it deletes.
func TestAbnormalRecoveryZeroesWholeTail(t *testing.T) {
	const segSize = 3 * tailReportWindow
	cfg := testConfig(t, segSize)
	l := mustOpen(t, cfg)
	var end int64
	for i := 0; i < 10; i++ {
		r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 100)})
		end = r.PhyOffset + r.WroteBytes
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	far := end + tailReportWindow + 12345
	patchFile(t, segPath(cfg.Dir, 0), func(b []byte) { b[end+10] = 0x5a; b[far] = 0xa5 })
	markAbort(t, cfg.Dir)

	l = mustOpen(t, cfg)
	defer l.Close()
	info := l.RecoveryInfo()
	if info.EndOffset != end {
		t.Fatalf("recovered end %d, want %d", info.EndOffset, end)
	}
	if info.CutBytes != 11 {
		t.Errorf("cut bytes %d, want 11 (the stray byte inside the report window)", info.CutBytes)
	}
	b, err := os.ReadFile(segPath(cfg.Dir, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(b[end:]) {
		t.Fatalf("bytes after the end are not all zero (last non-zero at %d)", int64(lastNonZero(b[end:]))+end-1)
	}
	if got := scanAll(t, l); len(got) != 10 {
		t.Fatalf("scanned %d records, want 10", len(got))
	}
}

// CutAt ends the log at a record start, over segment rolls, and the log
// goes on from there; an offset that is not a record start is refused
// and changes nothing.
func TestCutAt(t *testing.T) {
	cfg := testConfig(t, 16<<10)
	l := mustOpen(t, cfg)
	c := newCounter()
	var starts []int64
	for i := range 60 {
		res := mustAppend(t, l, AppendRequest{Message: testMessage("TopicC", 0, i, 500+i*7), Assigner: c})
		starts = append(starts, res.Records[0].Offset)
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cut := starts[20]
	if cut/cfg.SegmentSize == end/cfg.SegmentSize {
		t.Fatalf("the cut (%d) must lie segments before the end (%d)", cut, end)
	}

	bad := cfg
	bad.CutAt = cut + 1
	if _, err := Open(bad); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a cut inside a record: %v, want ErrOffsetOutOfRange", err)
	}
	past := cfg
	past.CutAt = end + 100
	if _, err := Open(past); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a cut past the end: %v, want ErrOffsetOutOfRange", err)
	}
	l = mustOpen(t, cfg)
	if l.MaxOffset() != end || len(scanAll(t, l)) != 60 {
		t.Fatalf("refused cuts changed the log: end %d (was %d)", l.MaxOffset(), end)
	}
	l.Close()

	at := cfg
	at.CutAt = cut
	l = mustOpen(t, at)
	if l.MaxOffset() != cut || len(scanAll(t, l)) != 20 {
		t.Fatalf("after the cut at %d: end %d, %d records", cut, l.MaxOffset(), len(scanAll(t, l)))
	}
	res := mustAppend(t, l, AppendRequest{Message: testMessage("TopicC", 0, 99, 300), Assigner: newCounter()})
	if res.Records[0].Offset != cut {
		t.Fatalf("the next append went to %d, want the cut %d", res.Records[0].Offset, cut)
	}
	l.Close()
	l = mustOpen(t, cfg) // a normal reopen sees the cut log and the new record, nothing of the old tail
	defer l.Close()
	if got := scanAll(t, l); len(got) != 21 {
		t.Fatalf("reopened after the cut: %d records, want 21", len(got))
	}
}

// A normal recovery that cuts at the start of the first segment it scans
// deletes the later segments, which puts segments it trusted unread into
// the window the next normal recovery scans. A bad record there must be
// cut by this recovery, not by the next one together with the records
// appended in between (found by FuzzRecover).
func TestRecoveryThatDeletesSegmentsScansTheNextWindow(t *testing.T) {
	cfg := testConfig(t, 4096)
	l := mustOpen(t, cfg)
	c := newCounter()
	for l.MaxOffset() < 4*4096+100 {
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 300), Assigner: c})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The magic code of the second record of segment 0, and garbage
	// where segment 2's first record starts.
	var badAt int64
	patchFile(t, segPath(cfg.Dir, 0), func(b []byte) {
		n, err := Check(b, true)
		if err != nil {
			t.Fatal(err)
		}
		badAt = int64(n)
		b[n+4] ^= 0xff
	})
	patchFile(t, segPath(cfg.Dir, 8192), func(b []byte) { copy(b, "garbage!") })
	l = mustOpen(t, cfg)
	if info := l.RecoveryInfo(); info.EndOffset != badAt || info.FirstScanned != 0 {
		t.Fatalf("recovery %+v, want the end at the bad record %d", info, badAt)
	}
	res := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 2, 300), Assigner: c})
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, cfg)
	defer l.Close()
	if info := l.RecoveryInfo(); l.MaxOffset() != end || info.CutReason != nil {
		t.Fatalf("reopened: end %d, want %d; %+v", l.MaxOffset(), end, info)
	}
	if v, err := l.ReadRecord(res.PhyOffset); err != nil {
		t.Fatalf("the record appended at %d after the recovery: %v", res.PhyOffset, err)
	} else {
		v.Release()
	}
}

// An empty log has no record to cut at: Open fails, as for an offset past
// the end of a log with records (found by FuzzRecover).
func TestCutAtInAnEmptyLog(t *testing.T) {
	cfg := testConfig(t, 4096)
	cfg.CutAt = 84
	if l, err := Open(cfg); !errors.Is(err, ErrOffsetOutOfRange) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("cut at 84 of an empty log: %v, want ErrOffsetOutOfRange", err)
	}
}

// A crash leaves the segment preallocated after the active one, all
// zeros: abnormal recovery deletes it, and that must not send it back
// over the flushed segments before the checkpoint's (spec 2.7). The scan
// of the next normal recovery's window is for a normal recovery's cut: a
// crash's would read up to two more segments at every restart (2 GiB at
// the default size) and warn of a cut that is only the crash's tail.
func TestAbnormalRecoveryDeletingThePreallocatedSegmentStartsFromTheCheckpoint(t *testing.T) {
	cfg := testConfig(t, 4096)
	clock := testutil.NewClock(time.UnixMilli(1_800_000_000_000))
	cfg.Now = clock.Now
	l := mustOpen(t, cfg)
	var starts []int64 // each segment's first record
	for l.MaxOffset() < 9*4096 {
		clock.Set(clock.Now().Add(time.Second))
		res := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 880)})
		if off := res.Records[0].Offset; off%4096 == 0 {
			starts = append(starts, off)
		}
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ck := l.Checkpoint()
	var want int64 = -1
	for _, s := range starts {
		v, err := os.ReadFile(segPath(cfg.Dir, s))
		if err != nil {
			t.Fatal(err)
		}
		if m, err := Decode(v); err == nil && m.StoreTimestamp <= ck.MinTimestamp() {
			want = s
		}
	}
	if want <= 2*4096 || want != end-end%4096 && want != end-end%4096-4096 {
		t.Fatalf("test setup: the checkpoint's segment %d, the log ends at %d", want, end)
	}
	prealloc := end - end%4096 + 4096
	if err := os.WriteFile(segPath(cfg.Dir, prealloc), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	markAbort(t, cfg.Dir)
	l = mustOpen(t, cfg)
	defer l.Close()
	if info := l.RecoveryInfo(); !info.Abnormal || info.EndOffset != end || info.FirstScanned != want || info.CutReason != nil {
		t.Fatalf("recovery %+v, want the scan from the checkpoint's segment %d to the end %d", info, want, end)
	}
	if _, err := os.Stat(segPath(cfg.Dir, prealloc)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the preallocated segment after the end is still there: %v", err)
	}
}
