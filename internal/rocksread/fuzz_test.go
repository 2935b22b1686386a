package rocksread

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// fixtureFiles returns the contents of the fixture files matching pattern.
func fixtureFiles(f *testing.F, pattern string) [][]byte {
	f.Helper()
	var out [][]byte
	for _, d := range []string{"cq", "topics"} {
		m, err := filepath.Glob(filepath.Join("testdata", d, pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range m {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		f.Fatalf("no fixture matches %s", pattern)
	}
	return out
}

// logRecords returns the logical records of the fixtures' MANIFEST or WAL files.
func logRecords(f *testing.F, pattern string) [][]byte {
	f.Helper()
	var out [][]byte
	for _, b := range fixtureFiles(f, pattern) {
		lr := newLogReader(bytes.NewReader(b), pattern, 0)
		for {
			rec, err := lr.next()
			if err != nil {
				break
			}
			out = append(out, bytes.Clone(rec))
		}
	}
	return out
}

func FuzzFooter(f *testing.F) {
	for _, b := range fixtureFiles(f, "*.sst") {
		f.Add(b[len(b)-footerSize:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ft, err := decodeFooter(b)
		if err == nil && (ft.formatVersion < minFormatVersion || ft.formatVersion > maxFormatVersion) {
			t.Fatalf("accepted format_version %d", ft.formatVersion)
		}
	})
}

// FuzzBlock feeds blocks (stored with their trailer, as in the files) to the
// checksum check, the decompressors and the entry iterator.
func FuzzBlock(f *testing.F) {
	for _, b := range fixtureFiles(f, "*.sst") {
		ft, err := decodeFooter(b[len(b)-footerSize:])
		if err != nil {
			f.Fatal(err)
		}
		for _, h := range []blockHandle{ft.index, ft.metaindex, {0, ft.index.offset - blockTrailerSize}} {
			if h.offset+h.size+blockTrailerSize <= uint64(len(b)) {
				f.Add(b[h.offset:h.offset+h.size+blockTrailerSize], ft.checksum, true)
				f.Add(b[h.offset:h.offset+h.size+blockTrailerSize], ft.checksum, false)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, checksum byte, delta bool) {
		var dec decompressor
		defer dec.close()
		data, err := checkBlock(b, checksum%5, &dec, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error %v", err)
			}
			data = b // still walk the bytes as a block
		}
		it, err := newBlockIter(data, "fuzz", delta)
		if err != nil {
			return
		}
		for n := 0; it.next(); n++ {
			if n > len(data) {
				t.Fatal("more entries than bytes")
			}
			_, _ = parseInternalKey(it.key)
		}
	})
}

func FuzzVersionEdit(f *testing.F) {
	for _, rec := range logRecords(f, "MANIFEST-*") {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeVersionEdit(b)
		if err != nil {
			return
		}
		vs := &versionSet{cfs: map[uint32]*columnFamily{0: {name: defaultColumnFamily, files: map[uint64]fileMeta{}}}}
		_ = vs.apply(e)
	})
}

// FuzzLogReader reads MANIFEST and WAL files; every record it returns is
// also decoded as a version edit and as a write batch.
func FuzzLogReader(f *testing.F) {
	for _, b := range fixtureFiles(f, "MANIFEST-*") {
		f.Add(b)
	}
	for _, b := range fixtureFiles(f, "*.log") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lr := newLogReader(bytes.NewReader(b), "fuzz", 0)
		for n := 0; ; n++ {
			rec, err := lr.next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errTornTail) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("unclassified error %v", err)
				}
				return
			}
			if n > len(b) {
				t.Fatal("more records than bytes")
			}
			_, _ = decodeVersionEdit(rec)
			_, _ = decodeWriteBatch(rec)
		}
	})
}

func FuzzWriteBatch(f *testing.F) {
	for _, rec := range logRecords(f, "*.log") {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := decodeWriteBatch(b)
		if err != nil {
			return
		}
		for _, op := range ops {
			if op.kind != kindValue && op.kind != kindDeletion && op.kind != kindSingleDeletion &&
				op.kind != kindRangeDeletion && op.kind != kindMerge {
				t.Fatalf("op kind %#x", op.kind)
			}
		}
	})
}

// FuzzTableFile opens whole SST files (the fixtures' and their mutations)
// and reads every entry: footer, metaindex, properties, range deletions,
// index and data blocks together.
func FuzzTableFile(f *testing.F) {
	for _, b := range fixtureFiles(f, "*.sst") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "000001.sst")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var dec decompressor
		defer dec.close()
		tb, err := openTable(path, "fuzz", &dec)
		if err != nil {
			return
		}
		defer tb.close()
		ti, err := tb.iter()
		if err != nil {
			return
		}
		for ti.next() {
			_ = ti.ent
		}
		if ti.err != nil && !errors.Is(ti.err, ErrCorrupt) && !errors.Is(ti.err, ErrUnsupported) {
			t.Fatalf("unclassified error %v", ti.err)
		}
	})
}
