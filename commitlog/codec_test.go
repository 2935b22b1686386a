package commitlog

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// unhexT decodes a hex literal written with spaces between fields.
func unhexT(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad test vector: %v", err)
	}
	return b
}

// The vectors below were worked out by hand from the field table of spec
// section 1.2, field by field; the CRCs are zlib.crc32(body) & 0x7FFFFFFF
// computed outside Go.

// vectorV1 is a V1 record, IPv4 hosts, body "hi", topic "T", properties
// "a\x01b" without a trailing 0x02. 91 + 2 + 1 + 3 = 97 bytes.
const vectorV1 = `
00000061                   total size 97
DAA320A7                   magic V1
58932AAC                   body CRC of "hi"
00000003                   queue id 3
00000007                   flag 7
0000000000000005           queue offset 5
0000000000001000           physical offset 4096
00000000                   sysFlag 0
0000010203040506           born timestamp
C0A80114 0000C351          born host 192.168.1.20:50001
0000010203040507           store timestamp (position 56)
0A000001 00002A9F          store host 10.0.0.1:10911
00000002                   reconsume times 2
0000000000000000           prepared transaction offset
00000002 6869              body "hi"
01 54                      topic "T"
0003 610162                properties "a\x01b"`

func stripComments(v string) string {
	var b strings.Builder
	for _, line := range strings.Split(v, "\n") {
		fields := strings.Fields(line)
		for _, f := range fields {
			if _, err := hex.DecodeString(f); err != nil {
				break
			}
			b.WriteString(f)
		}
	}
	return b.String()
}

var longTopic = strings.Repeat("x", 128)

// vectorV2 is a V2 record (128-byte topic), IPv6 born and store hosts
// (sysFlag 0x30 | commit 0x08), empty body, properties "k\x01v\x02" with a
// trailing 0x02. 91 + 1 + 12 + 12 + 0 + 128 + 4 = 248 bytes.
var vectorV2 = `
000000F8                                    total size 248
DAA320AB                                    magic V2
00000000                                    CRC of the empty body
00000000                                    queue id 0
00000000                                    flag 0
0000000000000009                            queue offset 9
0000000000000100                            physical offset 256
00000038                                    sysFlag 0x38
0000000000000001                            born timestamp 1
20010DB8000000000000000000000020 0000C418   born host [2001:db8::20]:50200
0000000000000002                            store timestamp 2 (position 68)
20010DB8000000000000000000000010 00002A9F   store host [2001:db8::10]:10911
00000000                                    reconsume times
000000000000ABCD                            prepared transaction offset
00000000                                    body length 0
0080 ` + strings.Repeat("78", 128) + `      topic length 128, topic
0004 6B017602                               properties "k\x01v\x02"`

func vectorV1Message() Message {
	return Message{
		StoreSize: 97, Magic: MagicV1, BodyCRC: 0x58932AAC, QueueID: 3, Flag: 7,
		QueueOffset: 5, PhyOffset: 4096, SysFlag: 0, BornTimestamp: 0x0000010203040506,
		BornHost:       netip.MustParseAddrPort("192.168.1.20:50001"),
		StoreTimestamp: 0x0000010203040507,
		StoreHost:      netip.MustParseAddrPort("10.0.0.1:10911"),
		ReconsumeTimes: 2, Body: []byte("hi"), Topic: "T", Properties: "a\x01b",
	}
}

func vectorV2Message() Message {
	return Message{
		StoreSize: 248, Magic: MagicV2, BodyCRC: 0, QueueOffset: 9, PhyOffset: 256,
		SysFlag: 0x38, BornTimestamp: 1, BornHost: netip.MustParseAddrPort("[2001:db8::20]:50200"),
		StoreTimestamp: 2, StoreHost: netip.MustParseAddrPort("[2001:db8::10]:10911"),
		PreparedTransactionOffset: 0xABCD, Body: []byte{}, Topic: longTopic, Properties: "k\x01v\x02",
	}
}

func TestDecodeVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		want Message
	}{
		{"V1 IPv4", vectorV1, vectorV1Message()},
		{"V2 IPv6 empty body", vectorV2, vectorV2Message()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := unhexT(t, stripComments(tc.hex))
			if len(b) != int(tc.want.StoreSize) {
				t.Fatalf("vector is %d bytes, want %d", len(b), tc.want.StoreSize)
			}
			// Trailing bytes after the record must be ignored.
			got, err := DecodeWith(append(b, 0xEE, 0xEE), DecodeOptions{VerifyCRC: true})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, tc.want)
			}
			if n, err := Check(b, true); err != nil || n != tc.want.StoreSize {
				t.Fatalf("Check = %d, %v", n, err)
			}
			if n, err := RecordSize(b); err != nil || n != tc.want.StoreSize {
				t.Fatalf("RecordSize = %d, %v", n, err)
			}
		})
	}
}

func TestDecodeV2IPv6Positions(t *testing.T) {
	b := unhexT(t, stripComments(vectorV2))
	PatchStoreTimestamp(b, 0x1122334455667788)
	if !bytes.Equal(b[68:76], []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}) {
		t.Fatalf("store timestamp with an IPv6 born host must sit at 68: % x", b[60:80])
	}
	PatchQueueOffset(b, 0x0102)
	PatchPhyOffset(b, 0x0304)
	if !bytes.Equal(b[20:36], unhexT(t, "0000000000000102 0000000000000304")) {
		t.Fatalf("queue/physical offsets at 20/28: % x", b[20:36])
	}
	b1 := unhexT(t, stripComments(vectorV1))
	PatchStoreTimestamp(b1, 0x0A0B)
	if !bytes.Equal(b1[56:64], unhexT(t, "0000000000000A0B")) {
		t.Fatalf("store timestamp with an IPv4 born host must sit at 56: % x", b1[56:64])
	}
}

func TestEncodeVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  Message
		hex  string
	}{
		{"V1 IPv4", vectorV1Message(), vectorV1},
		{"V2 chosen by topic length, IPv6 bits from addresses", vectorV2Message(), vectorV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.msg
			// Encode derives these itself; give it wrong inputs.
			m.StoreSize, m.BodyCRC, m.Magic = 1, 12345, 0
			m.SysFlag &^= FlagBornHostV6 | FlagStoreHostV6
			want := unhexT(t, stripComments(tc.hex))
			var e Encoder
			got, err := e.Encode(&m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%x\nwant\n%x", got, want)
			}
			if n, err := EncodedSize(&m); err != nil || n != len(want) {
				t.Fatalf("EncodedSize = %d, %v", n, err)
			}
		})
	}
	// IPv4-mapped IPv6 addresses are stored as IPv4, like Java.
	m := vectorV1Message()
	m.BornHost = netip.MustParseAddrPort("[::ffff:192.168.1.20]:50001")
	m.StoreHost = netip.MustParseAddrPort("[::ffff:10.0.0.1]:10911")
	got, err := AppendRecord(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	if want := unhexT(t, stripComments(vectorV1)); !bytes.Equal(got, want) {
		t.Fatalf("IPv4-mapped hosts encoded\n%x\nwant\n%x", got, want)
	}
	// MagicV2 forces V2 for a short topic: one more byte.
	m = vectorV1Message()
	m.Magic = MagicV2
	got, _ = AppendRecord(nil, &m)
	if len(got) != 98 || !bytes.Equal(got[4:8], unhexT(t, "DAA320AB")) || !bytes.Equal(got[90:93], unhexT(t, "000154")) {
		t.Fatalf("forced V2: %x", got)
	}
}

func TestEncodeErrors(t *testing.T) {
	m := vectorV1Message()
	m.Topic = ""
	if _, err := AppendRecord(nil, &m); !errors.Is(err, ErrTopicTooLong) {
		t.Errorf("empty topic: %v", err)
	}
	m.Topic = strings.Repeat("t", 32768)
	if _, err := AppendRecord(nil, &m); !errors.Is(err, ErrTopicTooLong) {
		t.Errorf("32768-byte topic: %v", err)
	}
	m.Topic = "T"
	m.Properties = strings.Repeat("p", 32768)
	if _, err := AppendRecord(nil, &m); !errors.Is(err, ErrPropertiesTooLarge) {
		t.Errorf("32768-byte properties: %v", err)
	}
	m.Properties = strings.Repeat("p", 32767)
	if _, err := AppendRecord(nil, &m); err != nil {
		t.Errorf("32767-byte properties must pass: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := unhexT(t, stripComments(vectorV1))
	mut := func(f func(b []byte) []byte) []byte {
		return f(bytes.Clone(good))
	}
	for _, tc := range []struct {
		name string
		b    []byte
		crc  bool
		want error
	}{
		{"empty", nil, false, ErrTruncated},
		{"7 bytes", good[:7], false, ErrTruncated},
		{"header only", good[:20], false, ErrTruncated},
		{"one byte short", good[:96], false, ErrTruncated},
		{"zeros", make([]byte, 200), false, ErrBadMagic},
		{"bad magic", mut(func(b []byte) []byte { b[7] = 0xA8; return b }), false, ErrBadMagic},
		{"total too small", mut(func(b []byte) []byte { b[3] = 90; return b }), false, ErrCorrupt},
		{"total larger than fields", mut(func(b []byte) []byte { b[3] = 98; return append(b, 0) }), false, ErrCorrupt},
		{"total smaller than fields", mut(func(b []byte) []byte { b[3] = 96; return b }), false, ErrCorrupt},
		{"negative total", mut(func(b []byte) []byte { b[0] = 0x80; return b }), false, ErrCorrupt},
		{"body length past end", mut(func(b []byte) []byte { b[87] = 0x7F; return b }), false, ErrCorrupt},
		{"negative body length", mut(func(b []byte) []byte { b[84] = 0xFF; return b }), false, ErrCorrupt},
		{"topic length past end", mut(func(b []byte) []byte { b[90] = 0xFF; return b }), false, ErrCorrupt},
		{"props length past end", mut(func(b []byte) []byte { b[93] = 0x09; return b }), false, ErrCorrupt},
		{"ipv6 flag without room", mut(func(b []byte) []byte { b[39] = 0x30; return b }), false, ErrCorrupt},
		{"body flipped, CRC checked", mut(func(b []byte) []byte { b[88] ^= 1; return b }), true, ErrCRC},
		{"body flipped, CRC not checked", mut(func(b []byte) []byte { b[88] ^= 1; return b }), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeWith(tc.b, DecodeOptions{VerifyCRC: tc.crc})
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Decode err = %v, want %v", err, tc.want)
			}
			_, err = Check(tc.b, tc.crc)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Check err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDecodeBlank(t *testing.T) {
	b := unhexT(t, "0000006C CBD43194 0000000000")
	m, err := Decode(b)
	if !errors.Is(err, ErrBlank) || m.StoreSize != 108 || m.Magic != BlankMagic {
		t.Fatalf("Decode(blank) = %+v, %v", m, err)
	}
	if n, ok := BlankSize(b); !ok || n != 108 {
		t.Fatalf("BlankSize = %d, %v", n, ok)
	}
	if n, err := Check(b, true); !errors.Is(err, ErrBlank) || n != 108 {
		t.Fatalf("Check = %d, %v", n, err)
	}
	if n, err := RecordSize(b); !errors.Is(err, ErrBlank) || n != 108 {
		t.Fatalf("RecordSize = %d, %v", n, err)
	}
	if _, ok := BlankSize(b[:7]); ok {
		t.Fatal("BlankSize on 7 bytes")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	hosts := []string{"127.0.0.1:0", "192.168.1.10:10911", "[2001:db8::1]:65535", "[fe80::1]:1"}
	var e Encoder
	for i := 0; i < 200; i++ {
		m := Message{
			QueueID: int32(i % 7), Flag: int32(-i), QueueOffset: int64(i) << 33, PhyOffset: int64(i) * 977,
			SysFlag:       []int32{0, FlagCompressed | CompressionZSTD, TransactionCommit, TransactionPrepared | FlagMultiTags}[i%4],
			BornTimestamp: int64(i) * 1e9, StoreTimestamp: -int64(i),
			BornHost: netip.MustParseAddrPort(hosts[i%4]), StoreHost: netip.MustParseAddrPort(hosts[(i/4)%4]),
			ReconsumeTimes: int32(i % 16), PreparedTransactionOffset: int64(i * 3),
			Body:       bytes.Repeat([]byte{byte(i)}, i*13%500),
			Topic:      strings.Repeat("t", 1+i*3%300),
			Properties: strings.Repeat("k\x01v\x02", i%9),
		}
		b, err := e.Encode(&m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeWith(b, DecodeOptions{VerifyCRC: true})
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		m.StoreSize, m.BodyCRC = int32(len(b)), BodyCRC(m.Body)
		m.Magic = MagicV1
		if len(m.Topic) > 127 {
			m.Magic = MagicV2
		}
		if m.BornHost.Addr().Is6() {
			m.SysFlag |= FlagBornHostV6
		}
		if m.StoreHost.Addr().Is6() {
			m.SysFlag |= FlagStoreHostV6
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("message %d round trip\n got %+v\nwant %+v", i, got, m)
		}
	}
}

// DecodeOptions.Topics gives the Topic string: it sees exactly the
// record's topic bytes, its answer is the Topic, and every other field is
// what a plain decode gives, for V1 and V2 (long-topic) records.
func TestDecodeTopicsOption(t *testing.T) {
	var e Encoder
	for _, topic := range []string{"Orders", strings.Repeat("t", 200)} {
		m := Message{Topic: topic, QueueID: 3, Body: []byte("body"), Properties: "TAGS\x01a\x02",
			BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2")}
		b, err := e.Encode(&m)
		if err != nil {
			t.Fatal(err)
		}
		interned := strings.Clone(topic)
		var saw []string
		got, err := DecodeWith(b, DecodeOptions{Topics: func(tb []byte) string { saw = append(saw, string(tb)); return interned }})
		if err != nil {
			t.Fatal(err)
		}
		if len(saw) != 1 || saw[0] != topic {
			t.Fatalf("Topics called with %q, want once with %q", saw, topic)
		}
		if unsafe.StringData(got.Topic) != unsafe.StringData(interned) {
			t.Fatalf("Topic is not the string Topics returned")
		}
		plain, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, plain) {
			t.Fatalf("with Topics\n got %+v\nwant %+v", got, plain)
		}
	}
}

func TestTransactionAndCompressionBits(t *testing.T) {
	for sf, want := range map[int32]int32{0: TransactionNotType, 0x4 | 0x30: TransactionPrepared, 0x8: TransactionCommit, 0xC | 0x1: TransactionRollback} {
		if got := TransactionType(sf); got != want {
			t.Errorf("TransactionType(%#x) = %#x, want %#x", sf, got, want)
		}
	}
	for sf, want := range map[int32]int32{0: 0, 0x100: 0, 0x1: CompressionZLIB, 0x101: CompressionLZ4, 0x201: CompressionZSTD, 0x301: CompressionZLIB} {
		if got := CompressionType(sf); got != want {
			t.Errorf("CompressionType(%#x) = %#x, want %#x", sf, got, want)
		}
	}
}

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"a\x01b", map[string]string{"a": "b"}},
		{"a\x01b\x02c\x01d", map[string]string{"a": "b", "c": "d"}},
		{"a\x01b\x02c\x01d\x02", map[string]string{"a": "b", "c": "d"}},
		{"\x01b\x02c\x01d", map[string]string{"c": "d"}},        // empty key dropped
		{"a\x01\x02c\x01d", map[string]string{"c": "d"}},        // empty value dropped
		{"a\x01b\x01c", map[string]string{"a": "b\x01c"}},       // first 0x01 splits
		{"a\x01b\x02a\x01c", map[string]string{"a": "c"}},       // later duplicate wins
		{"ab\x02\x02\x02x\x01y", map[string]string{"x": "y"}},   // no separator, empty segments
		{"\x01\x02", map[string]string{}},                       // too short
		{"é\x01ü", map[string]string{"é": "ü"}},                 // multi-byte
		{"a\x01b\x02\x01\x01\x01", map[string]string{"a": "b"}}, // separator first
		{"k\x01\x01v", map[string]string{"k": "\x01v"}},         // value starts with 0x01
		{"UNIQ_KEY\x01X\x02TAGS\x01t", map[string]string{"UNIQ_KEY": "X", "TAGS": "t"}},
	} {
		got := ParseProperties(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseProperties(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for k, v := range tc.want {
			if g, ok := LookupProperty(tc.in, k); !ok || g != v {
				t.Errorf("LookupProperty(%q, %q) = %q, %v; want %q", tc.in, k, g, ok, v)
			}
		}
		if _, ok := LookupProperty(tc.in, "missing"); ok {
			t.Errorf("LookupProperty(%q, missing) found something", tc.in)
		}
		pairs := map[string]string{}
		for k, v := range PropertyPairs(tc.in) {
			pairs[k] = v
		}
		if !reflect.DeepEqual(pairs, tc.want) {
			t.Errorf("PropertyPairs(%q) = %q, want %q", tc.in, pairs, tc.want)
		}
	}
	var first []string
	for k := range PropertyPairs("a\x011\x02b\x012\x02c\x013") {
		first = append(first, k)
		if k == "b" {
			break
		}
	}
	if !reflect.DeepEqual(first, []string{"a", "b"}) {
		t.Errorf("PropertyPairs went on after a break: %q", first)
	}
	if got := FormatProperties(map[string]string{"b": "2", "a": "1", "": "x", "e": ""}); got != "a\x011\x02b\x012\x02" {
		t.Errorf("FormatProperties = %q", got)
	}
	if got := FormatProperties(nil); got != "" {
		t.Errorf("FormatProperties(nil) = %q", got)
	}
	props := "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC"
	if n := testing.AllocsPerRun(100, func() { LookupProperty(props, PropertyUniqID) }); n != 0 {
		t.Errorf("LookupProperty allocates %v times", n)
	}
}

func TestTagsCode(t *testing.T) {
	// Values of Java's String.hashCode, worked out over UTF-16 code units
	// outside Go (and "TagA" cross-checked with the 4.9.8 fixture).
	for in, want := range map[string]int64{
		"":                                 0,
		"a":                                97,
		"TagA":                             2598919,
		"TagBatch":                         -726516768,
		"TagV6":                            80567194,
		"héllo wörld 你好 🚀":                 -601694017,
		"🚀":                                1773027,
		"😀x":                               54959989,
		"Once, there was a chance for me!": 1691307661,
	} {
		if got := TagsCode(in); got != want {
			t.Errorf("TagsCode(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestMessageID(t *testing.T) {
	for _, tc := range []struct {
		host string
		off  int64
		id   string
	}{
		{"192.168.1.10:10911", 0, "C0A8010A00002A9F0000000000000000"},
		{"192.168.1.10:10911", 236, "C0A8010A00002A9F00000000000000EC"},
		{"192.168.71.1:8123", 172, "C0A8470100001FBB00000000000000AC"},
		{"[2001:db8::10]:10911", 0x8E6A, "20010DB800000000000000000000001000002A9F0000000000008E6A"},
		{"[::ffff:10.0.0.1]:1", -1, "0A00000100000001FFFFFFFFFFFFFFFF"},
	} {
		h := netip.MustParseAddrPort(tc.host)
		if got := MessageID(h, tc.off); got != tc.id {
			t.Errorf("MessageID(%s, %d) = %s, want %s", tc.host, tc.off, got, tc.id)
		}
		gh, goff, err := ParseMessageID(strings.ToLower(tc.id))
		if err != nil || goff != tc.off || gh != netip.AddrPortFrom(h.Addr().Unmap(), h.Port()) {
			t.Errorf("ParseMessageID(%s) = %v, %d, %v", tc.id, gh, goff, err)
		}
	}
	for _, bad := range []string{"", "C0A8", strings.Repeat("G", 32), strings.Repeat("0", 33), "C0A8010A0001000000000000000000000", "C0A8010A000100000000000000000000"[:31] + "x"} {
		if _, _, err := ParseMessageID(bad); !errors.Is(err, ErrBadMessageID) {
			t.Errorf("ParseMessageID(%q) err = %v", bad, err)
		}
	}
	// A port field above 65535 is refused.
	if _, _, err := ParseMessageID("C0A8010A000100000000000000000000"); !errors.Is(err, ErrBadMessageID) {
		t.Errorf("port 65536: err = %v", err)
	}
}

// batchVector holds two hand-built batch items:
// item 1: total 27 = 22 + body "hi" + props "a\x01b", flag 1;
// item 2: total 22, empty body, empty properties, flag -1.
const batchVector = `
0000001B 00000000 00000000 00000001 00000002 6869 0003 610162
00000016 DAA320A7 00000005 FFFFFFFF 00000000 0000`

func TestDecodeBatch(t *testing.T) {
	b := unhexT(t, batchVector)
	items, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchItem{
		{Flag: 1, Body: []byte("hi"), Properties: "a\x01b"},
		{Magic: int32(-626843481), BodyCRC: 5, Flag: -1, Body: []byte{}, Properties: ""},
	}
	if !reflect.DeepEqual(items, want) {
		t.Fatalf("DecodeBatch = %+v, want %+v", items, want)
	}
	var enc []byte
	enc, _ = AppendBatchItem(enc, 1, []byte("hi"), "a\x01b")
	if !bytes.Equal(enc, b[:27]) {
		t.Fatalf("AppendBatchItem = %x", enc)
	}
	if items, err := DecodeBatch(nil); err != nil || len(items) != 0 {
		t.Fatalf("empty batch: %v, %v", items, err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"short tail":        {b[:30], ErrTruncated},
		"total past end":    {b[:26], ErrTruncated},
		"total too small":   {append([]byte{0, 0, 0, 5}, b[4:27]...), ErrCorrupt},
		"total mismatch":    {append([]byte{0, 0, 0, 0x1A}, b[4:26]...), ErrCorrupt},
		"body len too big":  {append(bytes.Clone(b[:19]), append([]byte{9}, b[20:27]...)...), ErrCorrupt},
		"negative prop len": {append(bytes.Clone(b[:22]), append([]byte{0xFF, 0xFF}, b[24:27]...)...), ErrCorrupt},
	} {
		if _, err := DecodeBatch(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestRewriteProperties(t *testing.T) {
	for _, tc := range []struct {
		name, props string
		drop        []string
		set         [][2]string
		want        string
	}{
		{"unchanged, separator added at the end", "A\x011\x02B\x012", nil, nil, "A\x011\x02B\x012\x02"},
		{"drop keeps the order of the rest", "A\x011\x02B\x012\x02C\x013\x02", []string{"B"}, nil, "A\x011\x02C\x013\x02"},
		{"set replaces in place of nothing: appended", "A\x011\x02B\x012\x02", nil, [][2]string{{"A", "9"}, {"D", "4"}}, "B\x012\x02A\x019\x02D\x014\x02"},
		{"empty values of set are left out", "A\x011\x02", nil, [][2]string{{"E", ""}, {"", "x"}}, "A\x011\x02"},
		{"invalid segments dropped as RocketMQ does", "\x01v\x02K\x01\x02NOSEP\x02A\x011\x02", nil, nil, "A\x011\x02"},
		{"a value keeps further 0x01 bytes", "A\x011\x01x\x02", nil, nil, "A\x011\x01x\x02"},
	} {
		if got := RewriteProperties(tc.props, tc.drop, tc.set...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The send path rewrites every message's properties: one allocation,
	// the result.
	props := "KEYS\x01k1\x02TAGS\x01t\x02WAIT\x01true\x02UNIQ_KEY\x01C0A8011410921B6D3586000186A00000\x02"
	set := [2]string{"REAL_TOPIC", "TopicA"}
	if n := testing.AllocsPerRun(100, func() { RewriteProperties(props, []string{"WAIT"}, set) }); n != 1 {
		t.Errorf("RewriteProperties allocates %v times, want 1", n)
	}
}

// AppendWithProperties replaces a record's properties and keeps every
// other field as stored, for V1, V2 (long-topic) and IPv6 records;
// TopicAndProperties reads the two without a decode.
func TestAppendWithProperties(t *testing.T) {
	for i, m := range []Message{
		{Topic: "%DLQ%g", QueueID: 1, QueueOffset: 7, PhyOffset: 4096, StoreTimestamp: 5, BornTimestamp: 4,
			BornHost: netip.MustParseAddrPort("10.0.0.1:9"), StoreHost: netip.MustParseAddrPort("10.0.0.2:10911"),
			ReconsumeTimes: 3, Body: []byte("payload"), Properties: "UNIQ_KEY\x01U\x02RKV\x01x\x02TAGS\x01t\x02"},
		{Topic: strings.Repeat("t", 200), Magic: MagicV2, Body: []byte("b"), Properties: "A\x011\x02",
			BornHost: netip.MustParseAddrPort("[2001:db8::1]:1"), StoreHost: netip.MustParseAddrPort("[2001:db8::2]:2")},
	} {
		rec, err := AppendRecord(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		topic, props, err := TopicAndProperties(rec)
		if err != nil || string(topic) != m.Topic || string(props) != m.Properties {
			t.Fatalf("record %d: TopicAndProperties = %q, %q, %v", i, topic, props, err)
		}
		want, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"", "UNIQ_KEY\x01U\x02", m.Properties + "MORE\x01y\x02"} {
			prefix := []byte("prefix")
			out, err := AppendWithProperties(prefix, rec, p)
			if err != nil {
				t.Fatalf("record %d with %q: %v", i, p, err)
			}
			if string(out[:len(prefix)]) != "prefix" {
				t.Fatalf("record %d: dst's bytes overwritten", i)
			}
			got, err := DecodeWith(out[len(prefix):], DecodeOptions{VerifyCRC: true})
			if err != nil {
				t.Fatalf("record %d with %q: %v", i, p, err)
			}
			if int(got.StoreSize) != len(out)-len(prefix) {
				t.Fatalf("record %d: TOTALSIZE %d, %d bytes", i, got.StoreSize, len(out)-len(prefix))
			}
			w := want
			w.Properties, w.StoreSize = p, got.StoreSize
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("record %d with %q\n got %+v\nwant %+v", i, p, got, w)
			}
		}
	}
	if _, err := AppendWithProperties(nil, []byte("short"), ""); !errors.Is(err, ErrTruncated) {
		t.Errorf("a truncated record: %v", err)
	}
	rec, _ := AppendRecord(nil, &Message{Topic: "T"})
	if _, err := AppendWithProperties(nil, rec, strings.Repeat("x", 40000)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("properties of 40000 bytes: %v", err)
	}
}

// A record whose topic length is 0 (RocketMQ's checkMessageAndReturnSize
// reads one) decodes with an empty Topic, and Encode refuses to write it
// back with ErrTopicTooLong. FuzzDecode held every decoded record to
// re-encode and failed on such a record (its seed 6f41843809d05ed9).
func TestDecodeReadsAnEmptyTopicThatEncodeRefuses(t *testing.T) {
	var e Encoder
	m := Message{Topic: "T", QueueID: 1, Body: []byte("hi"),
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2")}
	b, err := e.Encode(&m)
	if err != nil {
		t.Fatal(err)
	}
	const topicLenAt = 88 + 2 // V1 with IPv4 hosts: the body length at 84, the body at 88, then the topic length
	if b[topicLenAt] != 1 || b[topicLenAt+1] != 'T' {
		t.Fatalf("no topic length 1 at %d in %x", topicLenAt, b)
	}
	rec := append(append(bytes.Clone(b[:topicLenAt]), 0), b[topicLenAt+2:]...)
	binary.BigEndian.PutUint32(rec, uint32(len(rec)))
	got, err := DecodeWith(rec, DecodeOptions{VerifyCRC: true})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got.Topic != "" || string(got.Body) != "hi" || got.QueueID != 1 || int(got.StoreSize) != len(rec) {
		t.Fatalf("decoded %+v", got)
	}
	if n, err := Check(rec, true); err != nil || int(n) != len(rec) {
		t.Fatalf("Check: %d, %v", n, err)
	}
	if _, err := AppendRecord(nil, &got); !errors.Is(err, ErrTopicTooLong) {
		t.Fatalf("re-encode: %v, want ErrTopicTooLong", err)
	}
}

// PatchPreparedTransactionOffset writes the field where Decode reads it,
// behind hosts of either width, and leaves every other field alone.
func TestPatchPreparedTransactionOffset(t *testing.T) {
	for _, hosts := range [][2]string{{"10.0.0.1:1", "10.0.0.2:2"}, {"[2001:db8::1]:1", "[2001:db8::2]:2"}} {
		m := &Message{Topic: "T", QueueID: 2, QueueOffset: 7, PhyOffset: 99, SysFlag: TransactionCommit,
			BornHost: netip.MustParseAddrPort(hosts[0]), StoreHost: netip.MustParseAddrPort(hosts[1]),
			PreparedTransactionOffset: 1234, Body: []byte("body"), Properties: "UNIQ_KEY\x01u"}
		rec, err := AppendRecord(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := PatchPreparedTransactionOffset(rec, 5678); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeWith(rec, DecodeOptions{VerifyCRC: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.PreparedTransactionOffset != 5678 || got.PhyOffset != 99 || got.QueueOffset != 7 || got.BornHost != m.BornHost ||
			got.StoreHost != m.StoreHost || string(got.Body) != "body" || got.Properties != m.Properties {
			t.Fatalf("hosts %v: %+v", hosts, got)
		}
	}
	if err := PatchPreparedTransactionOffset([]byte{1, 2, 3}, 1); err == nil {
		t.Fatal("a short record patched")
	}
}
