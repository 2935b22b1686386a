package autoswitch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

func entries(pairs ...int64) []EpochEntry {
	var out []EpochEntry
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return withEnds(out)
}

// The files below are laid out by hand from RocketMQ's CheckpointFile and
// EpochEntrySerializer: the count, the CRC-32 of the entry lines with the
// top bit cleared, then "epoch-start" lines. 773307083 is the checksum
// CheckpointFile's own documentation gives for 7-7000, 8-8000.
func TestParseEpochFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want []EpochEntry
		bad  bool
	}{
		{name: "rocketmq example", file: "2\n773307083\n7-7000\n8-8000\n", want: entries(7, 7000, 8, 8000)},
		// The checksum worked out apart, with Python's zlib.crc32 & 0x7fffffff.
		{name: "first epoch at 0", file: "2\n327520601\n1-0\n2-1024\n", want: entries(1, 0, 2, 1024)},
		{name: "one entry", file: "1\n0\n1-0\n", want: entries(1, 0)},
		{name: "crlf", file: "2\r\n773307083\r\n7-7000\r\n8-8000\r\n", want: entries(7, 7000, 8, 8000)},
		{name: "no final newline", file: "2\n773307083\n7-7000\n8-8000", want: entries(7, 7000, 8, 8000)},
		{name: "empty list", file: "0\n0\n", want: nil},
		{name: "unchecked checksum", file: "2\n0\n7-7000\n8-8000\n", want: entries(7, 7000, 8, 8000)},
		{name: "wrong checksum", file: "2\n773307084\n7-7000\n8-8000\n", bad: true},
		{name: "count too high", file: "3\n773307083\n7-7000\n8-8000\n", bad: true},
		{name: "count too low", file: "1\n773307083\n7-7000\n8-8000\n", bad: true},
		{name: "epochs out of order", file: "2\n0\n8-7000\n7-8000\n", bad: true},
		{name: "same start", file: "2\n0\n7-7000\n8-7000\n", bad: true},
		{name: "not a number", file: "1\n0\nx-7000\n", bad: true},
		{name: "no dash", file: "1\n0\n77000\n", bad: true},
		{name: "negative start", file: "1\n0\n7--7000\n", bad: true},
		{name: "epoch over int32", file: "1\n0\n2147483648-1\n", bad: true},
		{name: "empty", file: "", bad: true},
		{name: "count only", file: "1\n", bad: true},
		{name: "count not a number", file: "a\n0\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEpochFile([]byte(tc.file))
			if tc.bad {
				if !errors.Is(err, ErrEpochFile) {
					t.Fatalf("ParseEpochFile(%q) = %v, %v; want ErrEpochFile", tc.file, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEpochFile(%q): %v", tc.file, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ParseEpochFile(%q) = %v, want %v", tc.file, got, tc.want)
			}
		})
	}
}

func TestFormatEpochFile(t *testing.T) {
	if got, want := string(FormatEpochFile(entries(7, 7000, 8, 8000))), "2\n773307083\n7-7000\n8-8000\n"; got != want {
		t.Fatalf("FormatEpochFile = %q, want %q", got, want)
	}
	if got, want := string(FormatEpochFile(nil)), "0\n0\n"; got != want {
		t.Fatalf("FormatEpochFile(nil) = %q, want %q", got, want)
	}
}

// epochCache123 is RocketMQ's EpochFileCacheTest's cache: 1-100, 2-300,
// 3-500.
func epochCache123(t *testing.T) *EpochCache {
	t.Helper()
	c, err := OpenEpochFile(filepath.Join(t.TempDir(), EpochFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries(1, 100, 2, 300, 3, 500) {
		if err := c.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestEpochCacheEntries(t *testing.T) {
	c := epochCache123(t)
	if e, ok := c.Entry(2); !ok || e != (EpochEntry{2, 300, 500}) {
		t.Fatalf("Entry(2) = %v %v", e, ok)
	}
	if e, ok := c.Entry(3); !ok || e != (EpochEntry{3, 500, NoEnd}) {
		t.Fatalf("Entry(3) = %v %v", e, ok)
	}
	for off, want := range map[int64]int32{100: 1, 299: 1, 300: 2, 350: 2, 500: 3, 1 << 40: 3} {
		if e, ok := c.EntryByOffset(off); !ok || e.Epoch != want {
			t.Fatalf("EntryByOffset(%d) = %v %v, want epoch %d", off, e, ok, want)
		}
	}
	if e, ok := c.EntryByOffset(99); ok {
		t.Fatalf("EntryByOffset(99) = %v, want none", e)
	}
	if e, ok := c.NextEntry(1); !ok || e.Epoch != 2 {
		t.Fatalf("NextEntry(1) = %v %v", e, ok)
	}
	if e, ok := c.NextEntry(3); ok {
		t.Fatalf("NextEntry(3) = %v, want none", e)
	}
	if c.LastEpoch() != 3 {
		t.Fatalf("LastEpoch = %d", c.LastEpoch())
	}
	for _, e := range entries(3, 600, 4, 500, 2, 900) {
		if err := c.Append(e); !errors.Is(err, ErrEpochOrder) {
			t.Fatalf("Append(%v) = %v, want ErrEpochOrder", e, err)
		}
	}
	if c.Len() != 3 {
		t.Fatalf("refused appends changed the cache: %v", c.Entries())
	}
}

func TestEpochFilePersists(t *testing.T) {
	c := epochCache123(t)
	b, err := os.ReadFile(c.path)
	if err != nil {
		t.Fatal(err)
	}
	// Checksums worked out with Python's zlib.crc32 of the entry lines, & 0x7fffffff.
	if got, want := string(b), "3\n453994644\n1-100\n2-300\n3-500\n"; got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
	bak, err := os.ReadFile(c.path + ".bak")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(bak), "2\n946436882\n1-100\n2-300\n"; got != want {
		t.Fatalf("backup = %q, want the previous content %q", got, want)
	}
	again, err := OpenEpochFile(c.path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Entries(), c.Entries()) {
		t.Fatalf("reopened %v, want %v", again.Entries(), c.Entries())
	}

	// A damaged file: the backup is read, as RocketMQ's read does.
	if err := os.WriteFile(c.path, []byte("3\n1\n1-100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err = OpenEpochFile(c.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Entries(); !slices.Equal(got, entries(1, 100, 2, 300)) {
		t.Fatalf("from the backup: %v", got)
	}
	// Both damaged: an error, not an empty cache.
	if err := os.WriteFile(c.path+".bak", []byte("zz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEpochFile(c.path); !errors.Is(err, ErrEpochFile) {
		t.Fatalf("both damaged: %v, want ErrEpochFile", err)
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(*EpochCache) error
		want []EpochEntry
	}{
		{"suffix by offset 150", func(c *EpochCache) error { return c.TruncateSuffixByOffset(150) }, entries(1, 100)},
		{"suffix by offset 300", func(c *EpochCache) error { return c.TruncateSuffixByOffset(300) }, entries(1, 100)},
		{"suffix by offset 301", func(c *EpochCache) error { return c.TruncateSuffixByOffset(301) }, entries(1, 100, 2, 300)},
		{"suffix by offset 100", func(c *EpochCache) error { return c.TruncateSuffixByOffset(100) }, nil},
		{"suffix by epoch 2", func(c *EpochCache) error { return c.TruncateSuffixByEpoch(2) }, entries(1, 100)},
		{"suffix by epoch 4", func(c *EpochCache) error { return c.TruncateSuffixByEpoch(4) }, entries(1, 100, 2, 300, 3, 500)},
		{"prefix by offset 300", func(c *EpochCache) error { return c.TruncatePrefixByOffset(300) }, entries(2, 300, 3, 500)},
		{"prefix by offset 299", func(c *EpochCache) error { return c.TruncatePrefixByOffset(299) }, entries(1, 100, 2, 300, 3, 500)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := epochCache123(t)
			if err := tc.do(c); err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, tc.want) {
				t.Fatalf("entries = %v, want %v", got, tc.want)
			}
			again, err := OpenEpochFile(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := again.Entries(); !slices.Equal(got, tc.want) {
				t.Fatalf("reopened = %v, want %v", got, tc.want)
			}
		})
	}
}

// The cases of RocketMQ's EpochFileCacheTest (samples 1-4) and more.
func TestConsistentPoint(t *testing.T) {
	for _, tc := range []struct {
		name             string
		local, other     []EpochEntry
		localEnd, othEnd int64 // 0: not set
		want             int64
	}{
		{name: "later epoch starts earlier", local: entries(1, 100, 2, 300, 3, 500), other: entries(1, 100, 2, 300, 3, 450), want: 450},
		{name: "same epochs, ends differ", local: entries(1, 100, 2, 300, 3, 500), other: entries(1, 100, 2, 300, 3, 500), localEnd: 700, othEnd: 600, want: 600},
		{name: "nothing shared", local: entries(1, 100, 2, 300, 3, 500), other: entries(1, 200, 2, 500), want: -1},
		{name: "other has a newer epoch", local: entries(1, 100, 2, 300, 3, 500, 4, 800), other: entries(1, 100, 2, 300, 3, 500), othEnd: 700, want: 700},
		{name: "orphan epoch on local", local: entries(1, 0, 2, 1000), other: entries(1, 0, 3, 800), localEnd: 1500, othEnd: 2000, want: 800},
		{name: "local behind", local: entries(1, 0), other: entries(1, 0, 2, 1000), localEnd: 600, othEnd: 2000, want: 600},
		{name: "empty local", local: nil, other: entries(1, 0), want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, o := NewEpochCache(tc.local), NewEpochCache(tc.other)
			if tc.localEnd > 0 {
				l.SetLastEndOffset(tc.localEnd)
			}
			if tc.othEnd > 0 {
				o.SetLastEndOffset(tc.othEnd)
			}
			if got := l.ConsistentPoint(o); got != tc.want {
				t.Fatalf("ConsistentPoint = %d, want %d", got, tc.want)
			}
		})
	}
}

func FuzzParseEpochFile(f *testing.F) {
	f.Add([]byte("2\n773307083\n7-7000\n8-8000\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("1\n0\n1-0\r\n\n"))
	f.Add([]byte("2\n0\n8-7000\n7-8000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseEpochFile(b)
		if err != nil {
			if !errors.Is(err, ErrEpochFile) {
				t.Fatalf("error %v does not wrap ErrEpochFile", err)
			}
			return
		}
		for i, e := range got {
			if e.Epoch < 0 || e.StartOffset < 0 {
				t.Fatalf("negative entry %v", e)
			}
			if i > 0 && (e.Epoch <= got[i-1].Epoch || e.StartOffset <= got[i-1].StartOffset || got[i-1].EndOffset != e.StartOffset) {
				t.Fatalf("entries out of order: %v", got)
			}
		}
		again, err := ParseEpochFile(FormatEpochFile(got))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("format and parse again: %v %v, want %v", again, err, got)
		}
	})
}

func TestEpochEntryJSON(t *testing.T) {
	b, err := json.Marshal(entries(1, 0, 2, 300))
	if err != nil {
		t.Fatal(err)
	}
	// RocketMQ's EpochEntry fields, as fastjson writes them.
	want := `[{"epoch":1,"startOffset":0,"endOffset":300},{"epoch":2,"startOffset":300,"endOffset":9223372036854775807}]`
	if string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
}

func TestFollowRetention(t *testing.T) {
	c := epochCache123(t)
	fn := c.FollowRetention(zerolog.Nop())
	fn(300) // entries ending at or before 299 go: none
	if got := c.Entries(); !slices.Equal(got, entries(1, 100, 2, 300, 3, 500)) {
		t.Fatalf("after deleting up to 300: %v", got)
	}
	fn(301)
	if got := c.Entries(); !slices.Equal(got, entries(2, 300, 3, 500)) {
		t.Fatalf("after deleting up to 301: %v", got)
	}
	fn(1 << 40) // the last epoch always stays
	if got := c.Entries(); !slices.Equal(got, entries(3, 500)) {
		t.Fatalf("after deleting everything: %v", got)
	}
}
