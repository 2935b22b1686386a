package commitlog

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// FuzzCheckpointFile opens a checkpoint file of arbitrary content (short,
// long or garbage): it never panics, reads the first 40 bytes (zeros for
// what is missing), and what it reads writes back as the same bytes.
func FuzzCheckpointFile(f *testing.F) {
	f.Add(Checkpoint{PhysicMsgTimestamp: 1700000000000, LogicsMsgTimestamp: 2, IndexMsgTimestamp: 3,
		MasterFlushedOffset: 4096, ConfirmPhyOffset: -1}.marshal())
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(append(Checkpoint{}.marshal(), 0xff, 0xfe))
	f.Fuzz(func(t *testing.T, content []byte) {
		p := filepath.Join(t.TempDir(), "checkpoint")
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		cf, c, err := openCheckpoint(vfs.OS{}, p)
		if err != nil {
			t.Fatalf("open a checkpoint of %d bytes: %v", len(content), err)
		}
		defer cf.f.Close()
		want := make([]byte, 40)
		copy(want, content)
		if got := c.marshal()[:40]; string(got) != string(want) {
			t.Fatalf("checkpoint %x read as %+v, which writes as %x", content, c, got)
		}
	})
}

// FuzzParseSegmentName feeds arbitrary file names of a CommitLog directory
// to the segment name parser: it never panics, and a name it accepts is
// the name of the offset it returns.
func FuzzParseSegmentName(f *testing.F) {
	f.Add(SegmentName(0))
	f.Add(SegmentName(1 << 30))
	f.Add("99999999999999999999")
	f.Add("0000000000000000000x")
	f.Add("-0000000000000000001")
	f.Fuzz(func(t *testing.T, name string) {
		off, ok := parseSegmentName(name)
		if ok && (off < 0 || SegmentName(off) != name) {
			t.Fatalf("parseSegmentName(%q) = %d, named %q", name, off, SegmentName(off))
		}
	})
}

// FuzzPropertyRewrite reads arbitrary stored properties with the helpers
// the broker uses on records read back from the CommitLog
// (RealDestination, LookupProperty, RewriteProperties): nothing panics,
// and rewriting drops exactly the named keys and sets exactly the given
// pair, leaving the other properties as ParseProperties reads them.
func FuzzPropertyRewrite(f *testing.F) {
	f.Add("REAL_TOPIC\x01T\x02REAL_QID\x013\x02", "REAL_TOPIC", "KEYS", "k")
	f.Add("a\x01b\x02c\x01d", "a", "c", "e")
	f.Add("\x01\x02\x01\x01\x02k\x01\x01v", "k", "x", "")
	f.Add("REAL_QID\x01-1\x02REAL_TOPIC\x01\x02", "", "", "")
	f.Fuzz(func(t *testing.T, props, drop, setKey, setValue string) {
		_, _, _ = RealDestination(props)
		out := RewriteProperties(props, []string{drop}, [2]string{setKey, setValue})
		if strings.ContainsAny(setKey, "\x01\x02") || strings.Contains(setValue, "\x02") {
			return // FormatProperties' rule: such a pair cannot be written
		}
		want := ParseProperties(props)
		delete(want, drop)
		delete(want, setKey)
		if setKey != "" && setValue != "" {
			want[setKey] = setValue
		}
		if got := ParseProperties(out); !maps.Equal(got, want) {
			t.Fatalf("RewriteProperties(%q, drop %q, set %q=%q) = %q, which reads as %q, want %q", props, drop, setKey, setValue, out, got, want)
		}
		if setKey != "" && setValue != "" {
			if v, ok := LookupProperty(out, setKey); !ok || v != setValue {
				t.Fatalf("RewriteProperties(%q) = %q: %s reads as %q %v", props, out, setKey, v, ok)
			}
		}
	})
}

// FuzzAppendWithProperties: any bytes, any properties: never a panic, dst
// kept; a record that decodes is rewritten to one that decodes to the same
// message with the new properties and a TOTALSIZE of its own length.
func FuzzAppendWithProperties(f *testing.F) {
	for _, s := range fixtureRecordSeeds(f) {
		f.Add(s, "TAGS\x01t\x02")
	}
	rec, err := AppendRecord(nil, &Message{Topic: "%DLQ%g", Body: []byte("b"), Properties: "UNIQ_KEY\x01U\x02RKV_REVIVED_FROM\x01x\x02"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rec, "UNIQ_KEY\x01U\x02")
	f.Add([]byte("short"), "")
	f.Fuzz(func(t *testing.T, rec []byte, props string) {
		before, beforeErr := Decode(rec)
		out, err := AppendWithProperties([]byte("dst"), rec, props)
		if string(out[:3]) != "dst" {
			t.Fatalf("dst's bytes overwritten: %q", out[:3])
		}
		if err != nil {
			if len(out) != 3 {
				t.Fatalf("an error (%v) with %d bytes appended", err, len(out)-3)
			}
			return
		}
		if beforeErr != nil {
			t.Fatalf("rewrote a record Decode refuses (%v)", beforeErr)
		}
		after, err := Decode(out[3:])
		if err != nil {
			t.Fatalf("the rewritten record does not decode: %v", err)
		}
		if after.Properties != props || after.Topic != before.Topic || !bytes.Equal(after.Body, before.Body) ||
			after.QueueOffset != before.QueueOffset || after.PhyOffset != before.PhyOffset {
			t.Fatalf("rewritten as %+v from %+v with properties %q", after, before, props)
		}
		if int(after.StoreSize) != len(out)-3 {
			t.Fatalf("TOTALSIZE %d, record of %d bytes", after.StoreSize, len(out)-3)
		}
	})
}
