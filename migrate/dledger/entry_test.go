package dledger

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/migrate/dledger/dledgertest"
)

// unhex reads a byte vector written out by hand, spaces ignored.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entryABC is, written from DLedgerEntryCoder.encode field by field, the
// entry of index 5, term 2 at offset 4096 whose body is "abc": size
// 48 + 3 = 0x33.
const (
	abcMagicSize = `00000001 00000033`
	abcRest      = `
	0000000000000005 0000000000000002 0000000000001000
	00000000 00000000 00000000
	00000003 616263`
	entryABC = abcMagicSize + abcRest
)

func TestDecodeEntryVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		vec  string
		pos  int64
		want Entry
		err  error
	}{
		{name: "message entry", vec: entryABC, pos: 4096,
			want: Entry{Magic: 1, Size: 51, Index: 5, Term: 2, Pos: 4096, Body: []byte("abc")}},
		{name: "NOOP of DLedger master, no body", vec: `00000002 00000030 0000000000000009 0000000000000003 0000000000000000 00000000 00000000 00000000 00000000`, pos: 0,
			want: Entry{Magic: 2, Size: 48, Index: 9, Term: 3, Pos: 0, Body: []byte{}}},
		{name: "entry followed by more bytes", vec: entryABC + ` ffffffff 0000004d`, pos: 4096,
			want: Entry{Magic: 1, Size: 51, Index: 5, Term: 2, Pos: 4096, Body: []byte("abc")}},
		{name: "magic 7", vec: `00000007 00000033` + abcRest, pos: 4096, err: ErrBadMagic},
		{name: "blank magic is no entry", vec: `ffffffff 0000004d` + strings.Repeat("00", 48), pos: 4096, err: ErrBadMagic},
		{name: "size disagrees with the body length", vec: `00000001 00000034` + abcRest + ` 00`, pos: 4096, err: ErrBadEntry},
		{name: "pos field is not the entry's place", vec: entryABC, pos: 8192, err: ErrBadEntry},
		{name: "header cut short", vec: `00000001 00000033 00000000000000`, pos: 4096, err: ErrTruncated},
		{name: "body cut short", vec: entryABC[:len(entryABC)-2], pos: 4096, err: ErrTruncated},
		{name: "negative body length", vec: `00000001 00000030 0000000000000005 0000000000000002 0000000000001000 00000000 00000000 00000000 ffffffff`, pos: 4096, err: ErrBadEntry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeEntry(unhex(t, tc.vec), tc.pos)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Magic != tc.want.Magic || got.Size != tc.want.Size || got.Index != tc.want.Index || got.Term != tc.want.Term ||
				got.Pos != tc.want.Pos || !bytes.Equal(got.Body, tc.want.Body) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The encoder the tests write DLedger stores with gives the hand-written
// vector: the stores are laid out from DLedger's source, not from the
// decoder under test.
func TestTestEncoderMatchesTheVector(t *testing.T) {
	if got, want := dledgertest.EncodeEntry(1, 5, 2, 4096, []byte("abc")), unhex(t, entryABC); !bytes.Equal(got, want) {
		t.Fatalf("encoder\n%x\nwant\n%x", got, want)
	}
	// Its file layout: an entry of 51 bytes at 0 of a 128-byte file; one
	// of 88 bytes does not fit with 8 to spare (51+88+8 > 128), so the
	// rest of the file is a blank (-1, its length 77 = 0x4d) and the
	// entry opens the next file.
	l := dledgertest.NewLog(128, 0, 0)
	l.Append(1, []byte("abc"))
	if pos := l.Append(1, bytes.Repeat([]byte{'x'}, 40)); pos != 128 {
		t.Fatalf("second entry at %d, want 128", pos)
	}
	f := l.Files()["00000000000000000000"]
	if want := unhex(t, `ffffffff 0000004d`); !bytes.Equal(f[51:59], want) {
		t.Fatalf("blank %x, want %x", f[51:59], want)
	}
	if !bytes.Equal(f[59:], make([]byte, 128-59)) {
		t.Fatal("the blank's rest is not zeros")
	}
	g := l.Files()["00000000000000000128"]
	if want := unhex(t, `00000001 00000058 0000000000000001 0000000000000001 0000000000000080`); !bytes.Equal(g[:32], want) {
		t.Fatalf("second file starts %x, want %x", g[:32], want)
	}
}

func TestDecodeIndexEntry(t *testing.T) {
	// magic 1, pos 4096, size 51, index 5, term 2 (DLedgerEntryCoder.encodeIndex).
	got, err := DecodeIndexEntry(unhex(t, `00000001 0000000000001000 00000033 0000000000000005 0000000000000002`))
	if err != nil {
		t.Fatal(err)
	}
	if got != (IndexEntry{Magic: 1, Pos: 4096, Size: 51, Index: 5, Term: 2}) {
		t.Fatalf("got %+v", got)
	}
	if _, err := DecodeIndexEntry(make([]byte, 31)); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short index entry: %v", err)
	}
}
