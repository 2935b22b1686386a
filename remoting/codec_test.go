package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// unhex turns a hex dump with spaces, newlines and | separators into bytes.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	r := strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "")
	b, err := hex.DecodeString(r.Replace(s))
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

// The Go client's GET_ROUTEINFO_BY_TOPIC request, as spec 1.3 records it:
// a 100-byte JSON header (second word 0x00000064), so L = 104 (0x68).
const goRouteHeader = `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T"}}`

func TestEncodeMatchesGoClientFrame(t *testing.T) {
	want := append(unhex(t, "00000068 | 00000064"), goRouteHeader...)
	cmd := &Command{Code: 105, Language: "GO", Version: 317, Opaque: 1, ExtFields: map[string]string{"topic": "T"}}
	got, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame\n got %q\nwant %q", got, want)
	}
	back, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if back.Code != 105 || back.Language != "GO" || back.Version != 317 || back.Opaque != 1 || back.Flag != 0 ||
		back.Remark != "" || back.ExtFields["topic"] != "T" || len(back.ExtFields) != 1 || back.Body != nil ||
		back.SerializeType != SerializeJSON {
		t.Fatalf("decoded %+v", back)
	}
}

// A ROCKETMQ binary header worked out from spec 1.4: SEND_MESSAGE_V2 (310)
// from JAVA (0), version 479, opaque 12, flag 0, remark "hi", ext fields
// a=PG and b=T (area 9+8 = 17 bytes), body "xy". Header = 21 + 2 + 17 = 40
// bytes, so the second word is 0x01000028 and L = 4 + 40 + 2 = 46 (0x2e).
const binaryVector = `
0000002e | 01000028
0136 | 00 | 01df | 0000000c | 00000000
00000002 | 6869
00000011
0001 61 | 00000002 5047
0001 62 | 00000001 54
7879`

func TestBinaryHeaderVector(t *testing.T) {
	frame := unhex(t, binaryVector)
	cmd, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	want := &Command{Code: 310, Language: "JAVA", Version: 479, Opaque: 12, Remark: "hi",
		ExtFields: map[string]string{"a": "PG", "b": "T"}, Body: []byte("xy"), SerializeType: SerializeRocketMQ}
	if !sameCommand(cmd, want) {
		t.Fatalf("decoded %v, want %v", cmd, want)
	}
	again, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// The ext fields are written in the map's order: bytes 31..47 hold
	// the two entries (9 and 8 bytes) either way round.
	swapped := slices.Concat(frame[:31], frame[40:48], frame[31:40], frame[48:])
	if !bytes.Equal(again, frame) && !bytes.Equal(again, swapped) {
		t.Fatalf("re-encoded\n% x\nwant\n% x\nor\n% x", again, frame, swapped)
	}
}

func TestDecodeJSONHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   Command
	}{{
		name:   "java alphabetical with serializeTypeCurrentRPC and no remark",
		header: `{"code":0,"extFields":{"msgId":"0A","queueId":"3"},"flag":1,"language":"JAVA","opaque":12,"serializeTypeCurrentRPC":"JSON","version":479}`,
		want:   Command{Code: 0, Language: "JAVA", Version: 479, Opaque: 12, Flag: 1, ExtFields: map[string]string{"msgId": "0A", "queueId": "3"}},
	}, {
		name:   "ali-ons numbers and booleans keep their literal text",
		header: `{"code":310,"language":"JAVA","opaque":3,"flag":0,"version":121,"extFields":{"a":"PG","e":0,"k":false,"l":-16,"x":1.5e3,"t":true}}`,
		want: Command{Code: 310, Language: "JAVA", Version: 121, Opaque: 3,
			ExtFields: map[string]string{"a": "PG", "e": "0", "k": "false", "l": "-16", "x": "1.5e3", "t": "true"}},
	}, {
		name:   "null ext values are absent, objects kept as raw text",
		header: `{"code":34,"extFields":{"n":null,"o":{"p":[1,2]}}}`,
		want:   Command{Code: 34, ExtFields: map[string]string{"o": `{"p":[1,2]}`}},
	}, {
		name:   "numeric strings and nulls in top-level fields, unknown fields skipped",
		header: " {\n\"code\" : \"11\", \"remark\":null, \"language\":null, \"future\":{\"a\":[true,null,{}]}, \"opaque\":-7, \"extFields\":null } ",
		want:   Command{Code: 11, Opaque: -7},
	}, {
		name:   "escapes",
		header: `{"code":1,"remark":"a\"b\\c\/d\n\u00e9\ud83d\ude00\ud800x","extFields":{"k\u0041":"\t"}}`,
		want:   Command{Code: 1, Remark: "a\"b\\c/d\né😀\uFFFDx", ExtFields: map[string]string{"kA": "\t"}},
	}, {
		name:   "repeated keys end as their last value, escaped values beside plain ones",
		header: `{"code":1,"extFields":{"k":"1","d":"\u0001a\u0002b","k":null,"j":"x","e":7,"j":"y\"z","k":"2"}}`,
		want:   Command{Code: 1, ExtFields: map[string]string{"d": "\x01a\x02b", "e": "7", "j": "y\"z", "k": "2"}},
	}, {
		name:   "a null drops a key set before it",
		header: `{"code":1,"extFields":{"k":"1","k":null}}`,
		want:   Command{Code: 1, ExtFields: map[string]string{}},
	}, {
		name:   "values longer than the stack buffer",
		header: `{"code":1,"extFields":{"a":"` + strings.Repeat("v", 600) + `","b":"` + strings.Repeat("\u00e9", 100) + `"}}`,
		want:   Command{Code: 1, ExtFields: map[string]string{"a": strings.Repeat("v", 600), "b": strings.Repeat("é", 100)}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Command
			if err := decodeJSONHeader([]byte(tt.header), &got); err != nil {
				t.Fatal(err)
			}
			if !sameCommand(&got, &tt.want) {
				t.Fatalf("got %v\nwant %v", &got, &tt.want)
			}
		})
	}
}

func TestEncodeWritesExtValuesAsStrings(t *testing.T) {
	cmd := &Command{Code: 0, Flag: FlagResponse, Opaque: 7, Remark: "é \"q\" \x01\n\xff",
		ExtFields: map[string]string{"queueOffset": "42", "queueId": "1", "TRACE_ON": "true"}}
	frame, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// The ext fields come in the map's order: compare them as a set.
	prefix := `{"code":0,"language":"GO","version":0,"opaque":7,"flag":1,"remark":"é \"q\" \u0001\n�","extFields":{`
	got := string(frame[8:])
	if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, "}}") {
		t.Fatalf("header\n got %s\nwant %s...}}", got, prefix)
	}
	fields := strings.Split(strings.TrimSuffix(strings.TrimPrefix(got, prefix), "}}"), ",")
	slices.Sort(fields)
	if want := []string{`"TRACE_ON":"true"`, `"queueId":"1"`, `"queueOffset":"42"`}; !slices.Equal(fields, want) {
		t.Fatalf("ext fields %q, want %q", fields, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	jsonFrame := func(h string) []byte {
		c := &Command{}
		f, _ := Encode(c)
		f = f[:8]
		f = append(f, h...)
		putUint32(f, uint32(len(f)-4))
		putUint32(f[4:], uint32(len(h)))
		return f
	}
	deep := strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"short", []byte{0, 0, 0, 4}, ErrBadFrame},
		{"length disagrees", unhex(t, "00000010 00000000"), ErrBadFrame},
		{"header past end", unhex(t, "00000006 00000005 7b7d"), ErrBadFrame},
		{"serialize type 2", unhex(t, "00000006 02000002 7b7d"), ErrUnknownSerializeType},
		{"empty JSON header", unhex(t, "00000004 00000000"), ErrBadJSONHeader},
		{"unterminated object", jsonFrame(`{"code":1`), ErrBadJSONHeader},
		{"not an object", jsonFrame(`[]`), ErrBadJSONHeader},
		{"code is text", jsonFrame(`{"code":"abc"}`), ErrBadJSONHeader},
		{"code overflows int32", jsonFrame(`{"code":2147483648}`), ErrBadJSONHeader},
		{"code is a fraction", jsonFrame(`{"code":1.5}`), ErrBadJSONHeader},
		{"bad literal", jsonFrame(`{"extFields":{"a":tru}}`), ErrBadJSONHeader},
		{"trailing garbage", jsonFrame(`{"code":1}x`), ErrBadJSONHeader},
		{"control char in string", jsonFrame("{\"remark\":\"a\x01\"}"), ErrBadJSONHeader},
		{"bad escape", jsonFrame(`{"remark":"\q"}`), ErrBadJSONHeader},
		{"too deep", jsonFrame(`{"x":` + deep + `}`), ErrBadJSONHeader},
		{"extFields not an object", jsonFrame(`{"extFields":[1]}`), ErrBadJSONHeader},
		{"binary too short", unhex(t, "00000008 01000004 00000000"), ErrBadBinaryHeader},
		{"binary remark too long", unhex(t, "00000019 01000015 0000 00 0000 00000000 00000000 00000005 00000000"), ErrBadBinaryHeader},
		{"binary negative remark", unhex(t, "00000019 01000015 0000 00 0000 00000000 00000000 ffffffff 00000000"), ErrBadBinaryHeader},
		{"binary ext area too long", unhex(t, "00000019 01000015 0000 00 0000 00000000 00000000 00000000 00000001"), ErrBadBinaryHeader},
		{"binary key past area", unhex(t, "0000001c 01000018 0000 00 0000 00000000 00000000 00000000 00000003 0005 61"), ErrBadBinaryHeader},
		{"binary value past area", unhex(t, "00000021 0100001d 0000 00 0000 00000000 00000000 00000000 00000008 0001 61 00000009 62"), ErrBadBinaryHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := Decode(tt.frame)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, %v; want %v", cmd, err, tt.want)
			}
		})
	}
}

func putUint32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

func TestEncodeRejects(t *testing.T) {
	for _, cmd := range []*Command{
		{Code: PopMessage, SerializeType: SerializeRocketMQ},
		{Code: 1, Version: 40000, SerializeType: SerializeRocketMQ},
		{Code: 1, ExtFields: map[string]string{strings.Repeat("k", 40000): "v"}, SerializeType: SerializeRocketMQ},
		{Code: 1, SerializeType: 7},
	} {
		dst := []byte("keep")
		out, err := AppendEncode(dst, cmd)
		if err == nil {
			t.Errorf("AppendEncode(%v) succeeded", cmd)
		}
		if string(out) != "keep" {
			t.Errorf("AppendEncode changed dst on error: %q", out)
		}
	}
}

func TestRoundTripBothEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		cmd := randomCommand(rng)
		cmd.SerializeType = byte(i % 2)
		frame, err := Encode(cmd)
		if err != nil {
			t.Fatalf("encode %v: %v", cmd, err)
		}
		back, err := Decode(frame)
		if err != nil {
			t.Fatalf("decode %v: %v", cmd, err)
		}
		if !sameCommand(back, cmd) {
			t.Fatalf("round trip\n got %v\nwant %v", back, cmd)
		}
	}
}

// randomCommand returns a command whose fields survive both encodings:
// valid UTF-8 text, int16 code and version, a known language.
func randomCommand(rng *rand.Rand) *Command {
	text := func() string {
		const alphabet = "abcXYZ019 _%@\"\\\n\té中😀\x00\x1f"
		runes := []rune(alphabet)
		n := rng.IntN(12)
		var b strings.Builder
		for range n {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		return b.String()
	}
	cmd := &Command{
		Code:     int32(rng.IntN(65536) - 32768),
		Language: LanguageName(byte(rng.IntN(14))),
		Version:  int32(rng.IntN(65536) - 32768),
		Opaque:   rng.Int32() - rng.Int32(),
		Flag:     int32(rng.IntN(4)),
		Remark:   text(),
	}
	if n := rng.IntN(5); n > 0 {
		cmd.ExtFields = make(map[string]string, n)
		for range n {
			cmd.ExtFields[text()] = text()
		}
	}
	if rng.IntN(2) == 0 {
		cmd.Body = []byte(text())
		if len(cmd.Body) == 0 {
			cmd.Body = nil
		}
	}
	return cmd
}

// sameCommand compares commands, treating nil and empty maps and bodies as
// equal.
func sameCommand(a, b *Command) bool {
	return a.Code == b.Code && a.Language == b.Language && a.Version == b.Version && a.Opaque == b.Opaque &&
		a.Flag == b.Flag && a.Remark == b.Remark && maps.Equal(a.ExtFields, b.ExtFields) &&
		bytes.Equal(a.Body, b.Body) && a.SerializeType == b.SerializeType
}

func TestFrameReader(t *testing.T) {
	var stream []byte
	var want []*Command
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		cmd := randomCommand(rng)
		cmd.SerializeType = byte(i % 2)
		want = append(want, cmd)
		stream, _ = AppendEncode(stream, cmd)
	}
	fr := NewFrameReader(iotest.OneByteReader(bytes.NewReader(stream)), 0)
	for i, w := range want {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		got, err := Decode(frame)
		if err != nil || !sameCommand(got, w) {
			t.Fatalf("frame %d: %v %v", i, got, err)
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("after last frame: %v, want EOF", err)
	}

	fr = NewFrameReader(bytes.NewReader(stream[:len(stream)-1]), 0)
	var err error
	for err == nil {
		_, err = fr.ReadFrame()
	}
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated stream: %v, want ErrUnexpectedEOF", err)
	}
	fr = NewFrameReader(bytes.NewReader([]byte{0, 0}), 0)
	if _, err := fr.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("two bytes: %v, want ErrUnexpectedEOF", err)
	}
	fr = NewFrameReader(bytes.NewReader(unhex(t, "00001000 00000000")), 1024)
	if _, err := fr.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v, want ErrFrameTooLarge", err)
	}
	if _, err := FrameLength(unhex(t, "00000003"), 0); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("length 3: %v, want ErrBadFrame", err)
	}
	if _, err := FrameLength(unhex(t, "80000000"), 0); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("negative length: %v, want ErrBadFrame", err)
	}
}

func TestLanguageCodes(t *testing.T) {
	for name, code := range map[string]byte{"JAVA": 0, "GO": 9, "NODE_JS": 13, "RUST": 12} {
		if c, ok := LanguageCode(name); !ok || c != code {
			t.Errorf("LanguageCode(%s) = %d, %v", name, c, ok)
		}
		if LanguageName(code) != name {
			t.Errorf("LanguageName(%d) = %s", code, LanguageName(code))
		}
	}
	if c, ok := LanguageCode("COBOL"); ok || c != 7 {
		t.Errorf("unknown language: %d %v", c, ok)
	}
	if LanguageName(200) != "OTHER" {
		t.Errorf("unknown code: %s", LanguageName(200))
	}
}

func TestNewResponse(t *testing.T) {
	req := &Command{Code: SendMessageV2, Opaque: 99, SerializeType: SerializeRocketMQ, Flag: 0}
	resp := NewResponse(req, Success, "ok")
	if resp.Opaque != 99 || !resp.IsResponse() || resp.SerializeType != SerializeRocketMQ || resp.Code != Success ||
		resp.Remark != "ok" || resp.Version != CurrentVersion {
		t.Fatalf("%+v", resp)
	}
	if (&Command{Flag: FlagOneway}).IsResponse() || !(&Command{Flag: FlagOneway}).IsOneway() {
		t.Fatal("flag bits")
	}
}

func TestHeader(t *testing.T) {
	h := Header{"topic": "T", "queueId": "3", "offset": "-9000000000", "bad": "x1", "flag": "TRUE", "no": "0", "empty": ""}
	if v, err := h.String("topic"); err != nil || v != "T" {
		t.Fatal(v, err)
	}
	_, err := h.String("group")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "group" || !errors.Is(err, ErrMissingField) ||
		err.Error() != `header field "group": missing` {
		t.Fatalf("missing: %v", err)
	}
	if v, err := h.Int32("queueId"); err != nil || v != 3 {
		t.Fatal(v, err)
	}
	_, err = h.Int32("bad")
	if !errors.Is(err, ErrBadField) || err.Error() != `header field "bad": bad value "x1": want a 32-bit integer` {
		t.Fatalf("bad: %v", err)
	}
	if _, err := h.Int32("offset"); !errors.Is(err, ErrBadField) {
		t.Fatalf("int32 overflow: %v", err)
	}
	if v, err := h.Int64("offset"); err != nil || v != -9000000000 {
		t.Fatal(v, err)
	}
	if v, err := h.OptInt32("absent", 16); err != nil || v != 16 {
		t.Fatal(v, err)
	}
	if v, err := h.OptInt64("empty", 5); err != nil || v != 5 {
		t.Fatal(v, err)
	}
	if _, err := h.OptInt64("bad", 5); !errors.Is(err, ErrBadField) {
		t.Fatal(err)
	}
	if v, err := h.Bool("flag"); err != nil || !v {
		t.Fatal(v, err)
	}
	if v, err := h.Bool("no"); err != nil || v {
		t.Fatal(v, err)
	}
	if _, err := h.Bool("absent"); !errors.Is(err, ErrMissingField) {
		t.Fatal(err)
	}
	if !h.OptBool("absent", true) || h.OptBool("no", true) || h.OptString("absent", "d") != "d" || !h.Has("empty") {
		t.Fatal("optional getters")
	}

	r := h.Reader()
	topic := r.String("topic")
	q := r.Int32("queueId")
	_ = r.Int64("bad")
	_ = r.String("later")
	if topic != "T" || q != 3 || !errors.Is(r.Err(), ErrBadField) || !strings.Contains(r.Err().Error(), `"bad"`) {
		t.Fatalf("reader: %v %v %v", topic, q, r.Err())
	}

	out := Header{}
	out.SetInt32("queueId", -1)
	out.SetInt64("offset", 1<<40)
	out.SetBool("TRACE_ON", true)
	out.Set("msgId", "AB")
	if !maps.Equal(out, Header{"queueId": "-1", "offset": "1099511627776", "TRACE_ON": "true", "msgId": "AB"}) {
		t.Fatal(out)
	}
}

// ReadFrame allocates as the frame's bytes arrive: a peer that declares a
// frame of nearly MaxFrameSize and sends nothing more (a TLS connection's
// reader, the client's) costs a read chunk, not the declared size; a
// large frame arriving in pieces is read whole.
func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], DefaultMaxFrameSize-4)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewFrameReader(bytes.NewReader(head[:]), DefaultMaxFrameSize).ReadFrame()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a frame cut after its length word: %v, want io.ErrUnexpectedEOF", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Fatalf("a length word alone allocated %d bytes", grown)
	}

	body := make([]byte, 3<<20+17)
	for i := range body {
		body[i] = byte(i * 7)
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	frame = append(frame, body...)
	got, err := NewFrameReader(iotest.HalfReader(bytes.NewReader(frame)), DefaultMaxFrameSize).ReadFrame()
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("a %d-byte frame read in halves: %d bytes, %v", len(frame), len(got), err)
	}
}
