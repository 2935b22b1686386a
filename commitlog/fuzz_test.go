package commitlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// fixtureRecordSeeds returns a few records of the 4.9.8 fixture (including
// IPv6 ones and a blank filler) as fuzz seeds, when the fixtures exist.
func fixtureRecordSeeds(f *testing.F) [][]byte {
	dir := filepath.Join(fixturesDir, store498, "clean", "commitlog")
	b, err := os.ReadFile(filepath.Join(dir, "00000000000000032768"))
	if err != nil {
		// Said, not failed: the targets still run on their own seeds,
		// but far shallower.
		f.Logf("fuzzing without the fixture records as seeds: %v", err)
		return nil
	}
	var seeds [][]byte
	for off := 0; off < len(b) && len(seeds) < 40; {
		n, err := Check(b[off:], false)
		if err != nil && !errors.Is(err, ErrBlank) {
			break
		}
		seeds = append(seeds, bytes.Clone(b[off:off+int(n)]))
		if errors.Is(err, ErrBlank) {
			break
		}
		off += int(n)
	}
	return seeds
}

func FuzzDecode(f *testing.F) {
	for _, s := range fixtureRecordSeeds(f) {
		f.Add(s)
	}
	f.Add(unhexT(f, stripComments(vectorV1)))
	f.Add(unhexT(f, stripComments(vectorV2)))
	f.Add(unhexT(f, "0000006C CBD43194"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Decode must stay inside b: give it a slice with no spare capacity.
		b = b[:len(b):len(b)]
		m, err := DecodeWith(b, DecodeOptions{VerifyCRC: true})
		n, cerr := Check(b, true)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Decode err %v, Check err %v", err, cerr)
		}
		if err != nil {
			return
		}
		if int(m.StoreSize) > len(b) || n != m.StoreSize {
			t.Fatalf("size %d (Check %d) of %d bytes", m.StoreSize, n, len(b))
		}
		// Handing out the topic through DecodeOptions.Topics (as the
		// dispatcher does) decodes the same record.
		named, err := DecodeWith(b, DecodeOptions{VerifyCRC: true, Topics: func(tb []byte) string { return string(tb) }})
		if err != nil || !reflect.DeepEqual(named, m) {
			t.Fatalf("with Topics: %+v, %v; without: %+v", named, err, m)
		}
		// A record that decodes re-encodes to the same bytes, unless it
		// uses encodings Encode normalizes (V2 for a short topic is kept via
		// Magic; IPv4-mapped IPv6 hosts become IPv4; port bits above 16 are
		// lost).
		re, err := AppendRecord(nil, &m)
		if m.Topic == "" {
			// A topic length of 0 is read, as RocketMQ's
			// checkMessageAndReturnSize reads it; Encode refuses to write one.
			if !errors.Is(err, ErrTopicTooLong) {
				t.Fatalf("re-encode of a record without a topic: %v, want ErrTopicTooLong", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if len(re) == int(m.StoreSize) && !bytes.Equal(re, b[:m.StoreSize]) {
			m2, err := Decode(re)
			if err != nil || !reflect.DeepEqual(m2.Body, m.Body) || m2.Topic != m.Topic || m2.Properties != m.Properties {
				t.Fatalf("re-encoded record decodes differently: %v", err)
			}
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(unhexT(f, batchVector))
	for _, s := range fixtureRecordSeeds(f) {
		m, err := Decode(s)
		if err != nil {
			continue
		}
		b, _ := AppendBatchItem(nil, m.Flag, m.Body, m.Properties)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		items, err := DecodeBatch(b)
		if err != nil {
			return
		}
		var re []byte
		for _, it := range items {
			re = binaryItem(re, it)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("batch re-encodes to %x, input %x", re, b)
		}
	})
}

// binaryItem re-encodes an item with its original magic and CRC fields.
func binaryItem(dst []byte, it BatchItem) []byte {
	start := len(dst)
	dst, _ = AppendBatchItem(dst, it.Flag, it.Body, it.Properties)
	be := dst[start:]
	be[4], be[5], be[6], be[7] = byte(it.Magic>>24), byte(it.Magic>>16), byte(it.Magic>>8), byte(it.Magic)
	be[8], be[9], be[10], be[11] = byte(it.BodyCRC>>24), byte(it.BodyCRC>>16), byte(it.BodyCRC>>8), byte(it.BodyCRC)
	return dst
}

func FuzzParseProperties(f *testing.F) {
	f.Add("a\x01b\x02c\x01d")
	f.Add("a\x01b\x02c\x01d\x02")
	f.Add("\x01\x02\x01")
	f.Add("k\x01\x01v\x02k\x01w")
	f.Fuzz(func(t *testing.T, s string) {
		m := ParseProperties(s)
		for k, v := range m {
			if k == "" || v == "" {
				t.Fatalf("empty key or value kept: %q=%q", k, v)
			}
			if got, ok := LookupProperty(s, k); !ok || got != v {
				t.Fatalf("LookupProperty(%q) = %q, %v; map says %q", k, got, ok, v)
			}
		}
		// Formatting and parsing again is the identity on maps whose keys
		// and values hold no separators.
		clean := true
		for k, v := range m {
			if bytes.ContainsAny([]byte(k), "\x01\x02") || bytes.ContainsAny([]byte(v), "\x02") {
				clean = false
			}
		}
		if clean && !reflect.DeepEqual(ParseProperties(FormatProperties(m)), m) {
			t.Fatalf("format/parse round trip changed %q", m)
		}
	})
}

func FuzzParseMessageID(f *testing.F) {
	f.Add("C0A8010A00002A9F0000000000000000")
	f.Add("20010DB800000000000000000000001000002A9F0000000000008E6A")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		h, off, err := ParseMessageID(s)
		if err != nil {
			return
		}
		if got := MessageID(h, off); !bytes.EqualFold([]byte(got), []byte(s)) {
			t.Fatalf("MessageID(ParseMessageID(%q)) = %q", s, got)
		}
	})
}

// DecodeAll of arbitrary bytes never panics, and what it decodes is
// exactly the run of whole records Decode finds one after another.
func FuzzDecodeAll(f *testing.F) {
	seeds := fixtureRecordSeeds(f)
	for _, s := range seeds {
		f.Add(s)
	}
	if len(seeds) > 1 {
		f.Add(append(append([]byte(nil), seeds[0]...), seeds[1]...))
		f.Add(append(append([]byte(nil), seeds[0]...), seeds[1][:len(seeds[1])/2]...)) // torn tail
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		msgs, err := DecodeAll(b)
		off := 0
		for i, m := range msgs {
			want, derr := Decode(b[off:])
			if derr != nil || !reflect.DeepEqual(want, m) {
				t.Fatalf("record %d at %d: DecodeAll %+v, Decode %+v (%v)", i, off, m, want, derr)
			}
			off += int(m.StoreSize)
		}
		if err == nil && off != len(b) {
			t.Fatalf("DecodeAll decoded %d of %d bytes without an error", off, len(b))
		}
		if err != nil && off >= len(b) {
			t.Fatalf("DecodeAll failed (%v) after decoding every byte", err)
		}
	})
}

// FuzzAppendReplica feeds a replica a byte stream, as a master's HA
// transfer would, cut into pieces. The first byte gives the number of
// piece sizes that follow (mod 8, each size 1 + 16 x the byte); the rest
// is the stream, sent from offset 0 and then repeating the last size.
// Whatever the bytes, the replica's readable end is a record boundary of
// bytes the stream holds, and a slave killed after the last piece
// recovers to no later end.
func FuzzAppendReplica(f *testing.F) {
	m, err := Open(func() Config { c := DefaultConfig(f.TempDir()); c.SegmentSize = 64 << 10; return c }())
	if err != nil {
		f.Fatal(err)
	}
	for i := range 6 {
		msg := &Message{Topic: "F", QueueID: int32(i % 2), Body: bytes.Repeat([]byte{byte(i)}, 40+i*30),
			Properties: "TAGS\x01t\x02UNIQ_KEY\x01U" + string(rune('a'+i))}
		if _, err := m.Append(context.Background(), AppendRequest{Message: msg}); err != nil {
			f.Fatal(err)
		}
	}
	v, err := m.ReadStream(0, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	stream := bytes.Clone(v.Data)
	v.Release()
	m.Close()
	f.Add(append([]byte{2, 3, 9}, stream...))
	f.Add(append([]byte{1, 0}, stream...))
	f.Add(append([]byte{3, 40, 1, 7}, stream[:len(stream)-20]...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		k := int(in[0] % 8)
		if len(in) < 1+k {
			return
		}
		sizes := []int{1 + 16*len(in)}
		if k > 0 {
			sizes = sizes[:0]
			for _, b := range in[1 : 1+k] {
				sizes = append(sizes, 1+16*int(b))
			}
		}
		data := in[1+k:]
		cfg := DefaultConfig(t.TempDir())
		cfg.SegmentSize = 64 << 10
		cfg.Replica = true
		cfg.FS = vfs.NoSync{} // see vfs.NoSync
		r, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i, off := 0, 0; off < len(data); i++ {
			n := min(sizes[min(i, len(sizes)-1)], len(data)-off)
			if r.AppendReplica(r.ReplicaOffset(), data[off:off+n]) != nil {
				break
			}
			off += n
		}
		end := r.MaxOffset()
		if end > r.ReplicaOffset() {
			t.Fatalf("MaxOffset %d past ReplicaOffset %d", end, r.ReplicaOffset())
		}
		var at int64
		rd := r.NewReader(0)
		for {
			e, err := rd.Next()
			if err != nil {
				break
			}
			if e.Offset != at || !bytes.Equal(e.Data, data[at:at+int64(len(e.Data))]) {
				t.Fatalf("record at %d is not the stream's bytes there", e.Offset)
			}
			at = e.Offset + int64(len(e.Data))
		}
		rd.Close()
		if at > end {
			t.Fatalf("records read to %d past MaxOffset %d", at, end)
		}
		image, err := os.ReadFile(segPath(cfg.Dir, 0))
		if err != nil {
			return // nothing was taken: no segment
		}
		killed := DefaultConfig(t.TempDir())
		killed.SegmentSize, killed.Replica, killed.FS = cfg.SegmentSize, true, cfg.FS
		if err := os.MkdirAll(filepath.Dir(segPath(killed.Dir, 0)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segPath(killed.Dir, 0), image, 0o644); err != nil {
			t.Fatal(err)
		}
		markAbort(t, killed.Dir)
		again, err := Open(killed)
		if err != nil {
			t.Fatalf("reopen the killed slave: %v", err)
		}
		defer again.Close()
		// Recovery may stop earlier: it checks body CRCs, which a replica
		// takes as its master sent them (as RocketMQ's slave does). Never
		// later: that would be a record the slave never held whole.
		if again.MaxOffset() > end {
			t.Fatalf("the killed slave recovered to %d, past its end %d: %+v", again.MaxOffset(), end, again.RecoveryInfo())
		}
	})
}
