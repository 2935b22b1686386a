package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSkipValue(t *testing.T) {
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`"a\"b\u00e9\ud83d\ude00"`, true},
		{` {"a":[1,-2.5e+3,true,false,null,{"b":{}}],"c":""} `, true},
		{`[]`, true},
		{`0`, true},
		{`-0.1E9`, true},
		{`01`, false}, // trailing data after 0
		{`1.`, false},
		{`1e`, false},
		{`-`, false},
		{`"abc`, false},
		{"\"a\tb\"", false},
		{`"\x"`, false},
		{`"\u12"`, false},
		{`{"a" 1}`, false},
		{`{"a":1,}`, false},
		{`[1 2]`, false},
		{`tru`, false},
		{``, false},
		{strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2), false},
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), true},
	} {
		s := New([]byte(tc.doc))
		raw, err := s.SkipValue()
		if err == nil {
			err = s.End()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%.40q: error %v, want ok=%v", tc.doc, err, tc.ok)
		}
		if err == nil && string(raw) != strings.TrimSpace(tc.doc) {
			t.Errorf("%.40q: text %q", tc.doc, raw)
		}
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		bits int
		want int64
		ok   bool
	}{
		{`42`, 32, 42, true},
		{`"-7"`, 8, -7, true},
		{`null`, 64, 0, true},
		{`2147483648`, 32, 0, false},
		{`1.5`, 64, 0, false},
		{`"x"`, 64, 0, false},
		{`true`, 64, 0, false},
		{`-129`, 8, 0, false},
	} {
		s := New([]byte(tc.doc))
		v, err := s.Int(tc.bits)
		if (err == nil) != tc.ok || v != tc.want {
			t.Errorf("%s as int%d: %d %v, want %d ok=%v", tc.doc, tc.bits, v, err, tc.want, tc.ok)
		}
	}
}

func TestStringAliasesInputWithoutEscapes(t *testing.T) {
	doc := []byte(`"plain"`)
	s := New(doc)
	raw, err := s.RawString()
	if err != nil || string(raw) != "plain" || &raw[0] != &doc[1] {
		t.Fatalf("RawString %q %v, want a slice of the input", raw, err)
	}
}

// Escapes decode as encoding/json decodes them: the named ones, \/, \u
// with surrogate pairs, and a lone surrogate as U+FFFD.
func TestStringEscapesAsEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`"\b\f\n\r\t"`, `"a\"b\\c\/d"`, `"x\u00e9y\u0000"`, `"\ud83d\ude00!"`,
		`"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"tab\tend"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: encoding/json: %v", doc, err)
		}
		s := New([]byte(doc))
		got, err := s.String()
		if err != nil || got != want || s.End() != nil {
			t.Errorf("%s: got %q (%v), want %q", doc, got, err, want)
		}
	}
}

// replaceInvalidUTF8 returns s with each byte that is not valid UTF-8
// replaced by U+FFFD.
func replaceInvalidUTF8(s string) string {
	var b strings.Builder
	for _, r := range s { // RuneError for each invalid byte
		b.WriteRune(r)
	}
	return b.String()
}

// FuzzScanner: SkipValue takes a whole document exactly when
// encoding/json finds it valid (below MaxDepth), and what it consumed
// scans again on its own; a document that is one string reads as
// encoding/json reads it; and any text written with AppendString reads
// back as written, invalid UTF-8 replaced.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(`{"a":[1,"b",{"c":null}],"d":-1.5e3}`), "")
	f.Add([]byte(`"\ud83d\ude00"`), "\x00\"\\\u2028\xff")
	f.Add([]byte(`"\ud800x\u0041\/\b"`), "é\n\t")
	f.Add([]byte(` [01] `), "<&>")
	f.Add([]byte(`{"a":1,}`), "\x7f")
	f.Fuzz(func(t *testing.T, doc []byte, text string) {
		lit := AppendString(nil, text)
		ls := New(lit)
		if got, err := ls.String(); err != nil || ls.End() != nil || got != replaceInvalidUTF8(text) || !json.Valid(lit) {
			t.Fatalf("%q written as %s, read back as %q, %v", text, lit, got, err)
		}
		s := New(doc)
		raw, err := s.SkipValue()
		whole := err == nil && s.End() == nil
		deep := bytes.Count(doc, []byte("["))+bytes.Count(doc, []byte("{")) >= MaxDepth
		if !deep && whole != json.Valid(doc) {
			t.Fatalf("%q: whole document %v, encoding/json says valid %v (%v)", doc, whole, json.Valid(doc), err)
		}
		if err != nil {
			return
		}
		// What was consumed is a value on its own.
		again := New(raw)
		if _, err := again.SkipValue(); err != nil || again.End() != nil {
			t.Fatalf("%q skipped as %q, which does not scan again: %v", doc, raw, err)
		}
		if !whole || raw[0] != '"' || !utf8.Valid(doc) {
			return
		}
		str := New(doc)
		got, err := str.String()
		var want string
		if jerr := json.Unmarshal(doc, &want); err != nil || jerr != nil || got != want {
			t.Fatalf("%q read as %q (%v), encoding/json says %q (%v)", doc, got, err, want, jerr)
		}
	})
}
