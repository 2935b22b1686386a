package rocksread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestFixturesCoverFormats checks that the ldb-written fixtures hold what
// the scan tests claim to cover: every table format_version 2-5, the four
// checksum types, five compression types, data blocks with a hash index,
// delta-encoded index values past a restart point, and range deletions.
func TestFixturesCoverFormats(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range []string{"cq", "topics"} {
		dir := filepath.Join("testdata", d)
		vs, err := loadVersionSet(dir)
		if err != nil {
			t.Fatal(err)
		}
		var dec decompressor
		defer dec.close()
		for _, cf := range vs.cfs {
			perLevel := map[int]int{}
			for _, f := range cf.sortedFiles() {
				if perLevel[f.level]++; f.level > 0 && perLevel[f.level] > 1 {
					seen["several files in a level"] = true
				}
				name := fmt.Sprintf("%06d.sst", f.number)
				tb, err := openTable(filepath.Join(dir, name), name, &dec)
				if err != nil {
					t.Fatal(err)
				}
				seen[fmt.Sprintf("format_version %d", tb.footer.formatVersion)] = true
				seen["checksum "+checksumName(tb.footer.checksum)] = true
				if len(tb.tombs) > 0 {
					seen["range deletion"] = true
				}
				ti, err := tb.iter()
				if err != nil {
					t.Fatal(err)
				}
				blocks := 0
				for ti.index.next() {
					blocks++
					h := ti.index.handle
					if !tb.delta {
						r := byteReader{b: ti.index.value}
						h = decodeHandle(&r)
					}
					raw := make([]byte, h.size+blockTrailerSize)
					if _, err := tb.f.ReadAt(raw, int64(h.offset)); err != nil {
						t.Fatal(err)
					}
					seen[fmt.Sprintf("compression %d", raw[h.size])] = true
					b, err := tb.readBlock(h, "data")
					if err != nil {
						t.Fatal(err)
					}
					if binary.LittleEndian.Uint32(b[len(b)-4:])&dataBlockHashBit != 0 {
						seen["hash index"] = true
					}
				}
				if ti.index.err != nil {
					t.Fatal(ti.index.err)
				}
				if tb.delta && blocks > 4 {
					seen["delta index past a restart"] = true
				}
				_ = tb.close()
			}
		}
	}
	want := []string{
		"format_version 2", "format_version 3", "format_version 4", "format_version 5",
		"checksum crc32c", "checksum xxHash", "checksum xxHash64", "checksum XXH3",
		"compression 0", "compression 1", "compression 2", "compression 4", "compression 7",
		"hash index", "delta index past a restart", "range deletion", "several files in a level",
	}
	var missing []string
	for _, w := range want {
		if !seen[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		var all []string
		for k := range seen {
			all = append(all, k)
		}
		sort.Strings(all)
		t.Fatalf("fixtures lack %v (they have %v)", missing, all)
	}
}

// copyDB copies a fixture directory so a test can damage it.
func copyDB(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("testdata", name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestDamagedTableFailsChecksum flips one byte inside the first data block
// of every table: each scan must fail with ErrCorrupt naming the file, for
// every checksum type the fixtures use.
func TestDamagedTableFailsChecksum(t *testing.T) {
	for _, d := range []string{"cq", "topics"} {
		dir := copyDB(t, d)
		db, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, cf := range db.ColumnFamilies() {
			for _, f := range cf.Files {
				_, name, _ := strings.Cut(f, ":")
				path := filepath.Join(dir, name)
				orig, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				bad := append([]byte(nil), orig...)
				bad[2] ^= 0x40
				if err := os.WriteFile(path, bad, 0o644); err != nil {
					t.Fatal(err)
				}
				_, err = scanAll(db, cf.Name)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
					t.Errorf("%s/%s with a flipped byte: scan error %v, want ErrCorrupt naming the file", d, name, err)
				}
				if err := os.WriteFile(path, orig, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		_ = db.Close()
	}
}
