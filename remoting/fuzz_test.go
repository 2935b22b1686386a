package remoting

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func seedFrames(f *testing.F) {
	f.Helper()
	f.Add(append(unhex(f, "00000068 00000064"), goRouteHeader...))
	f.Add(unhex(f, binaryVector))
	for _, cmd := range []*Command{
		{Code: 310, Language: "JAVA", Version: 121, ExtFields: map[string]string{"a": "PG", "e": "0"}, Body: []byte("hello")},
		{Code: 0, Flag: 1, Remark: "é\n", SerializeType: SerializeRocketMQ, ExtFields: map[string]string{"": ""}},
	} {
		frame, err := Encode(cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
	}
}

// asJSONText is s as the JSON header writer writes it: each byte that is
// not valid UTF-8 becomes U+FFFD.
func asJSONText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte, of size 1
		i += size
	}
	return b.String()
}

// encoderNormalized returns cmd with the defaults Encode fills in: GO for
// no language, and in a JSON header U+FFFD for each byte of invalid
// UTF-8. It returns nil when two ext keys become the same.
func encoderNormalized(cmd *Command) *Command {
	want := *cmd
	if want.Language == "" {
		want.Language = DefaultLanguage
	}
	if want.SerializeType != SerializeJSON {
		return &want
	}
	want.Language, want.Remark = asJSONText(want.Language), asJSONText(want.Remark)
	if cmd.ExtFields != nil {
		want.ExtFields = make(map[string]string, len(cmd.ExtFields))
		for k, v := range cmd.ExtFields {
			want.ExtFields[asJSONText(k)] = asJSONText(v)
		}
		if len(want.ExtFields) != len(cmd.ExtFields) {
			return nil
		}
	}
	return &want
}

// FuzzDecode: any frame either fails to decode or decodes to a command
// that re-encodes to a frame decoding to the same command, once the
// default the encoder fills in is applied (no language is GO), and whose
// encoding is stable: that frame re-encodes to a frame of the same length
// (the ext fields come in the map's order) that decodes to the same
// command again.
func FuzzDecode(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		cmd, err := Decode(frame)
		if err != nil {
			return
		}
		f1, err := Encode(cmd)
		if err != nil {
			return // e.g. a JSON code that does not fit a binary header cannot be re-encoded as binary
		}
		cmd2, err := Decode(f1)
		if err != nil {
			t.Fatalf("re-decoding our own frame: %v\n%q", err, f1)
		}
		want := encoderNormalized(cmd)
		if want == nil {
			return // two ext keys become one once their invalid UTF-8 is replaced
		}
		if !sameCommand(want, cmd2) {
			t.Fatalf("frame %q decodes to %+v, its re-encoding %q to %+v", frame, cmd, f1, cmd2)
		}
		f2, err := Encode(cmd2)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		if len(f1) != len(f2) {
			t.Fatalf("encoding not stable\n%q\n%q", f1, f2)
		}
		cmd3, err := Decode(f2)
		if err != nil || !sameCommand(cmd2, cmd3) {
			t.Fatalf("round trip changed the command: %v / %v (%v)", cmd2, cmd3, err)
		}
	})
}

// FuzzJSONHeader: the hand-written JSON reader never panics, accepts only
// valid JSON, and agrees with encoding/json on string fields.
func FuzzJSONHeader(f *testing.F) {
	f.Add([]byte(goRouteHeader))
	f.Add([]byte(`{"code":310,"language":"JAVA","opaque":3,"flag":0,"version":121,"extFields":{"a":"PG","e":0,"k":false}}`))
	f.Add([]byte(`{"code":"1","remark":"\ud83d\ude00\u00e9\\","extFields":{"o":{"p":[1,2.5e-3,null]},"n":null}}`))
	f.Add([]byte(`{"code":0,"extFields":{"msgId":"0A"},"flag":1,"serializeTypeCurrentRPC":"JSON"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd Command
		if err := decodeJSONHeader(data, &cmd); err != nil {
			if !errors.Is(err, ErrBadJSONHeader) {
				t.Fatalf("error not wrapping ErrBadJSONHeader: %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if !utf8.Valid(data) {
			return // encoding/json replaces invalid bytes; we keep them
		}
		// encoding/json matches field names case-insensitively; Java and
		// this reader do not, so compare member by exact name.
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("encoding/json rejects what we accepted: %v", err)
		}
		// A fresh string for each: unmarshalling null leaves it as it was.
		var remark, language string
		if raw, ok := ref["remark"]; ok && json.Unmarshal(raw, &remark) == nil && remark != cmd.Remark {
			t.Fatalf("remark %q, encoding/json says %q", cmd.Remark, remark)
		}
		if raw, ok := ref["language"]; ok && json.Unmarshal(raw, &language) == nil && language != cmd.Language {
			t.Fatalf("language %q, encoding/json says %q", cmd.Language, language)
		}
		var s string
		var ext map[string]json.RawMessage
		if raw, ok := ref["extFields"]; ok && json.Unmarshal(raw, &ext) == nil {
			for k, v := range ext {
				if json.Unmarshal(v, &s) == nil && v[0] == '"' && cmd.ExtFields[k] != s {
					t.Fatalf("ext %q = %q, encoding/json says %q", k, cmd.ExtFields[k], s)
				}
			}
		}
	})
}

// FuzzBinaryHeader: the ROCKETMQ header reader never panics and what it
// accepts survives a round trip.
func FuzzBinaryHeader(f *testing.F) {
	f.Add(unhex(f, binaryVector)[8:])
	f.Add(make([]byte, 21))
	f.Add(unhex(f, "0000 00 0000 00000000 00000000 00000000 00000003 0005 61"))
	f.Fuzz(func(t *testing.T, h []byte) {
		var cmd Command
		if err := decodeBinaryHeader(h, &cmd); err != nil {
			if !errors.Is(err, ErrBadBinaryHeader) {
				t.Fatalf("error not wrapping ErrBadBinaryHeader: %v", err)
			}
			return
		}
		cmd.SerializeType = SerializeRocketMQ
		out, err := appendBinaryHeader(nil, &cmd)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var back Command
		if err := decodeBinaryHeader(out, &back); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		back.SerializeType = SerializeRocketMQ
		if !sameCommand(&cmd, &back) {
			t.Fatalf("round trip %v -> %v", &cmd, &back)
		}
	})
}

// chunkReader returns the stream in pieces whose sizes come from sizes.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)]) + 1
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzFrameSplitter: whatever the bytes and however they are chunked, the
// frame reader returns frames that are consecutive pieces of the stream,
// each as long as its length word says, and stops with an error.
func FuzzFrameSplitter(f *testing.F) {
	var stream []byte
	stream = append(stream, append(unhex(f, "00000068 00000064"), goRouteHeader...)...)
	stream = append(stream, unhex(f, binaryVector)...)
	f.Add(stream, []byte{0, 3, 200})
	f.Add(unhex(f, "00000004 00000000 00000003"), []byte{})
	f.Add(unhex(f, "7fffffff 00"), []byte{7})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		const limit = 1 << 16
		fr := NewFrameReader(&chunkReader{data: data, sizes: sizes}, limit)
		fr.chunk = 5 // frames grow over several reads, as past 64 KiB
		pos := 0
		for {
			frame, err := fr.ReadFrame()
			if err != nil {
				if err == io.EOF && pos != len(data) {
					t.Fatalf("clean EOF at %d of %d", pos, len(data))
				}
				return
			}
			if len(frame) > limit {
				t.Fatalf("frame of %d bytes over the limit", len(frame))
			}
			if !bytes.Equal(frame, data[pos:pos+len(frame)]) {
				t.Fatalf("frame at %d is not the stream's bytes", pos)
			}
			if n, err := FrameLength(frame, limit); err != nil || n != len(frame) {
				t.Fatalf("frame length %d, FrameLength says %d, %v", len(frame), n, err)
			}
			pos += len(frame)
			_, _ = Decode(frame)
		}
	})
}

// FuzzProxyHeader: the PROXY protocol framing and parsing never panic;
// the framing never claims bytes that are not there, never finds a header
// where none can start, and asks for more only of a prefix; a parsed
// client address is a usable TCP address.
func FuzzProxyHeader(f *testing.F) {
	v1 := tcpHeader(f, 1, "192.0.2.1:1234", "198.51.100.1:10911")
	v2 := tcpHeader(f, 2, "[2001:db8::1]:1234", "[2001:db8::2]:10911")
	for _, seed := range [][]byte{v1, v2, v1[:9], v2[:15], []byte("PROXY UNKNOWN\r\n"), append(append([]byte{}, v2...), v1...)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		size, more, err := proxyHeaderSize(data)
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadProxyHeader) || size != 0 || more {
				t.Fatalf("error %v with size %d, more %v", err, size, more)
			}
			return
		case size > len(data) || size < 0:
			t.Fatalf("size %d of %d bytes", size, len(data))
		case more && size != 0:
			t.Fatalf("more with size %d", size)
		case !mayOpenProxyHeader(data) && (size != 0 || more):
			t.Fatalf("a header found in %q", data)
		case size == 0:
			return
		}
		client, err := parseProxyHeader(data[:size])
		if err != nil {
			if !errors.Is(err, ErrBadProxyHeader) {
				t.Fatalf("error not wrapping ErrBadProxyHeader: %v", err)
			}
			return
		}
		if client != nil && (client.Port == 0 || client.IP == nil) {
			t.Fatalf("unusable client address %v", client)
		}
	})
}
