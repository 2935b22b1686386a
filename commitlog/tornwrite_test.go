package commitlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A crash (a SIGKILL) at any byte of an append's copy into the mapping
// leaves, after recovery, the records before the append and a prefix of
// whole records of it, each exactly as appended: the copy writes every
// record's size and magic after the rest of it (writeSpans), so a record
// cut short reads as the log's end, never as a record whose lengths and
// body CRC hold while its properties end in zeros.
func TestACrashMidCopyKeepsOnlyWholeRecords(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	l := mustOpen(t, cfg)
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 100)})
	var batch []*Message
	for i := range 3 {
		m := testMessage("T", 0, i+1, 60)
		m.Properties += "\x02KEYS\x01" + strings.Repeat("k", 120)
		batch = append(batch, m)
	}
	res := mustAppend(t, l, AppendRequest{Batch: batch})
	start, end := res.PhyOffset, res.PhyOffset+res.WroteBytes
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(segPath(cfg.Dir, 0))
	if err != nil {
		t.Fatal(err)
	}
	image := whole[start:end]
	var offs []int
	for off := 0; off < len(image); off += int(binary.BigEndian.Uint32(image[off:])) {
		offs = append(offs, off)
	}
	if len(offs) != 3 {
		t.Fatalf("the batch holds %d records, want 3", len(offs))
	}
	spans := slices.Collect(writeSpans(offs, len(image)))
	for j, sp := range spans {
		for _, cut := range []int{sp[0] + 1, (sp[0] + sp[1]) / 2, sp[1] - 1} {
			t.Run(fmt.Sprintf("span%d_byte%d", j, cut), func(t *testing.T) {
				torn := bytes.Clone(whole)
				clear(torn[start:end])
				for _, done := range spans[:j] {
					copy(torn[start+int64(done[0]):start+int64(done[1])], image[done[0]:done[1]])
				}
				copy(torn[start+int64(sp[0]):start+int64(cut)], image[sp[0]:cut])
				c := testConfig(t, 64<<10)
				if err := os.MkdirAll(filepath.Dir(segPath(c.Dir, 0)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(segPath(c.Dir, 0), torn, 0o644); err != nil {
					t.Fatal(err)
				}
				markAbort(t, c.Dir)
				r := mustOpen(t, c)
				defer r.Close()
				kept := r.MaxOffset() - start
				if kept < 0 || (kept != 0 && !slices.Contains(offs[1:], int(kept)) && kept != int64(len(image))) {
					t.Fatalf("recovered end %d is not a record boundary of the append [%d, %d)", r.MaxOffset(), start, end)
				}
				for off := int64(0); off < kept; {
					v, err := r.ReadRecord(start + off)
					if err != nil {
						t.Fatalf("read kept record at %d: %v", start+off, err)
					}
					if !bytes.Equal(v.Data, image[off:off+int64(len(v.Data))]) {
						t.Fatalf("kept record at %d differs from the one appended", start+off)
					}
					off += int64(len(v.Data))
					v.Release()
				}
			})
		}
	}
}

// The copy of an append runs on every append: it allocates nothing.
func TestWriteHeadersLastAllocatesNothing(t *testing.T) {
	buf, dst, offs := make([]byte, 300), make([]byte, 300), []int{0, 100, 200}
	if n := testing.AllocsPerRun(100, func() { writeHeadersLast(dst, buf, offs) }); n != 0 {
		t.Fatalf("%v allocations per copy", n)
	}
}
