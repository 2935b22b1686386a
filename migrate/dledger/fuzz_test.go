package dledger

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketkv/rocketkv/migrate/dledger/dledgertest"
)

// FuzzDecodeEntry: any bytes decode to an entry that holds together, or
// to an error; never a panic.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(dledgertest.EncodeEntry(1, 5, 2, 4096, []byte("abc")), int64(4096))
	f.Add(dledgertest.EncodeEntry(2, 0, 0, 0, nil), int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x4d}, int64(0))
	f.Add(make([]byte, 48), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, pos int64) {
		e, err := DecodeEntry(b, pos)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrBadEntry) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if int(e.Size) != HeaderSize+len(e.Body) || int(e.Size) > len(b) || e.Pos != pos || !validMagic(e.Magic) {
			t.Fatalf("entry %+v from %d bytes at %d", e, len(b), pos)
		}
	})
}

// FuzzReader lays arbitrary bytes out as a DLedger data file (and, cut in
// two, as two) and reads them: entries in order, a torn tail or a
// located error; never a panic or a loop.
func FuzzReader(f *testing.F) {
	l := dledgertest.NewLog(256, 0, 0)
	for i := range 6 {
		l.Append(1, bodyOf(i))
	}
	files := l.Files()
	f.Add(files["00000000000000000000"], uint16(0))
	f.Add(append(files["00000000000000000000"], files["00000000000000000256"]...), uint16(256))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0x40}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		if len(b) == 0 || len(b) > 1<<16 {
			return
		}
		dir := t.TempDir()
		size := int64(len(b))
		parts := [][]byte{b}
		if c := int(cut); c > 0 && c < len(b) && len(b)%c == 0 && len(b)/c == 2 {
			size, parts = int64(c), [][]byte{b[:c], b[c:]}
		}
		for i, p := range parts {
			name := filepath.Join(dir, dataName(int64(i)*size))
			if err := os.WriteFile(name, p, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := OpenReader(dir, size)
		if err != nil {
			return
		}
		defer r.Close()
		last := int64(-1)
		for n := 0; ; n++ {
			if n > len(b) {
				t.Fatal("more entries than bytes")
			}
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var pe *PosError
				if !errors.As(err, &pe) {
					t.Fatalf("error without a place: %v", err)
				}
				return
			}
			if e.Pos <= last || e.Pos+int64(e.Size) > int64(len(b)) {
				t.Fatalf("entry at %d (size %d) after %d in %d bytes", e.Pos, e.Size, last, len(b))
			}
			last = e.Pos
		}
	})
}

// dataName is a data file's name for offset.
func dataName(off int64) string { return fmt.Sprintf("%020d", off) }
