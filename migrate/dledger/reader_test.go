package dledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/migrate/dledger/dledgertest"
)

// readAll reads every entry of dir, copying the bodies.
func readAll(t *testing.T, dir string) ([]Entry, *Reader, error) {
	t.Helper()
	r, err := OpenReader(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	var out []Entry
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		e.Body = bytes.Clone(e.Body)
		out = append(out, e)
	}
}

// bodyOf is the body of the i-th test entry: lengths that make entries
// roll over 256-byte files at different places.
func bodyOf(i int) []byte {
	return bytes.Repeat([]byte{byte('a' + i%26)}, 10+(i*37)%90)
}

func TestReaderReadsAcrossFilesAndBlanks(t *testing.T) {
	for _, tc := range []struct {
		name              string
		start, firstIndex int64
	}{
		{"from the first file", 0, 0},
		{"after retention deleted files", 3 * 256, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := dledgertest.NewLog(256, tc.start, tc.firstIndex)
			var pos []int64
			for i := range 20 {
				magic := int32(1)
				var body []byte
				if i == 7 {
					magic = 2 // a NOOP of DLedger master
				} else {
					body = bodyOf(i)
				}
				pos = append(pos, l.Append(magic, body))
			}
			root := t.TempDir()
			dir := l.Write(t, root, "n0")
			got, r, err := readAll(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.FileSize() != 256 || r.StartOffset() != tc.start || r.Files() < 4 {
				t.Fatalf("file size %d, start %d, %d files", r.FileSize(), r.StartOffset(), r.Files())
			}
			if len(got) != 20 {
				t.Fatalf("read %d entries, want 20", len(got))
			}
			for i, e := range got {
				var want []byte
				if i != 7 {
					want = bodyOf(i)
				}
				if e.Index != tc.firstIndex+int64(i) || e.Pos != pos[i] || !bytes.Equal(e.Body, want) {
					t.Fatalf("entry %d: index %d pos %d body %q, want %d %d %q", i, e.Index, e.Pos, e.Body, tc.firstIndex+int64(i), pos[i], want)
				}
			}
			if _, torn := r.Torn(); torn {
				t.Fatal("a clean log read as torn")
			}
		})
	}
}

// writeLog writes n test entries into 256-byte files and returns the data
// directory and the entries' offsets.
func writeLog(t *testing.T, n int) (string, []int64) {
	t.Helper()
	l := dledgertest.NewLog(256, 0, 0)
	var pos []int64
	for i := range n {
		pos = append(pos, l.Append(1, bodyOf(i)))
	}
	return l.Write(t, t.TempDir(), "n0"), pos
}

// fileOf returns the data file holding offset and the position in it.
func fileOf(dir string, off int64) (string, int64) {
	return filepath.Join(dir, fmt.Sprintf("%020d", off-off%256)), off % 256
}

// patch overwrites bytes of a data file.
func patch(t *testing.T, path string, at int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func TestReaderStopsAtATornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string, at int64, size int)
	}{
		{"file cut inside the last entry", func(t *testing.T, path string, at int64, size int) {
			if err := os.Truncate(path, at+int64(size)-5); err != nil {
				t.Fatal(err)
			}
		}},
		{"file cut inside the last header", func(t *testing.T, path string, at int64, size int) {
			if err := os.Truncate(path, at+20); err != nil {
				t.Fatal(err)
			}
		}},
		{"only the magic of the last entry written", func(t *testing.T, path string, at int64, size int) {
			patch(t, path, at+4, make([]byte, size-4))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, pos := writeLog(t, 12)
			last := pos[len(pos)-1]
			path, at := fileOf(dir, last)
			tc.tear(t, path, at, HeaderSize+len(bodyOf(11)))
			got, r, err := readAll(t, dir)
			if err != nil {
				t.Fatalf("a torn tail is no error: %v", err)
			}
			if len(got) != 11 {
				t.Fatalf("read %d entries, want the 11 whole ones", len(got))
			}
			torn, ok := r.Torn()
			if !ok || torn.File != path || torn.At != at || torn.Offset != last {
				t.Fatalf("torn %+v %v, want %s at %d (offset %d)", torn, ok, path, at, last)
			}
		})
	}
}

func TestReaderRefusesDamage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entry   int // whose header is damaged
		damage  func(t *testing.T, path string, at int64)
		err     error
		message string
	}{
		{"bad magic in the middle", 3, func(t *testing.T, path string, at int64) {
			patch(t, path, at, []byte{0xCA, 0xFE, 0xBA, 0xBE})
		}, ErrBadMagic, "0xcafebabe"},
		{"pos field not the entry's place", 4, func(t *testing.T, path string, at int64) {
			patch(t, path, at+24, []byte{0, 0, 0, 0, 0, 0, 0x10, 0})
		}, ErrBadEntry, "pos field says 4096"},
		{"entry index out of order", 5, func(t *testing.T, path string, at int64) {
			patch(t, path, at+8, []byte{0, 0, 0, 0, 0, 0, 0, 99})
		}, ErrBadEntry, "entry index 99 after 4"},
		{"term going back", 6, func(t *testing.T, path string, at int64) {
			patch(t, path, at+16, make([]byte, 8))
		}, ErrBadEntry, "term 0 after 1"},
		{"zeros before the next file", 2, func(t *testing.T, path string, at int64) {
			patch(t, path, at, make([]byte, 8))
		}, ErrBadEntry, "zeros where an entry or a blank belongs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, pos := writeLog(t, 12)
			path, at := fileOf(dir, pos[tc.entry])
			tc.damage(t, path, at)
			_, _, err := readAll(t, dir)
			var pe *PosError
			if !errors.Is(err, tc.err) || !errors.As(err, &pe) {
				t.Fatalf("err %v, want %v located", err, tc.err)
			}
			if pe.File != path || pe.At != at || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %q, want it to name %s at byte %d and say %q", err, path, at, tc.message)
			}
		})
	}
}

func TestOpenReaderRefusesAMissingFile(t *testing.T) {
	dir, _ := writeLog(t, 12)
	if err := os.Remove(filepath.Join(dir, "00000000000000000256")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReader(dir, 0); err == nil || !strings.Contains(err.Error(), "files between are missing") {
		t.Fatalf("open with a file missing: %v", err)
	}
}

func TestReadCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint")
	if err := os.WriteFile(path, []byte("#Sat Dec 05 10:00:00 UTC 2026\nendIndex=41\ncommittedIndex=40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, ok, err := ReadCheckpoint(path)
	if err != nil || !ok || c != (Checkpoint{EndIndex: 41, CommittedIndex: 40}) {
		t.Fatalf("checkpoint %+v %v %v", c, ok, err)
	}
	if _, ok, err := ReadCheckpoint(path + ".none"); ok || err != nil {
		t.Fatalf("missing checkpoint: %v %v", ok, err)
	}
}
