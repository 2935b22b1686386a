// Package jsonscan reads JSON documents of a known shape without
// reflection: the caller walks objects and arrays and takes each value
// with the method for the type it expects. The Remoting JSON header and
// the body of a POP batch ack are read this way, on every request: a
// reflective decoder cost several times as much and allocated for every
// field.
//
// A Scanner checks the syntax of everything it consumes, including
// values it skips, and bounds their nesting (MaxDepth), so hostile input
// gets an error naming its offset rather than a panic or a deep stack.
package jsonscan

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of the values SkipValue consumes.
const MaxDepth = 64

// Scanner reads one JSON document; pos is the offset of the next byte.
type Scanner struct {
	data []byte
	pos  int
}

// New returns a Scanner at the start of data.
func New(data []byte) Scanner { return Scanner{data: data} }

// Errorf returns an error that names the scanner's offset.
func (s *Scanner) Errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *Scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Peek returns the next non-space byte without consuming it, or 0 at the
// end of the input (a NUL byte in the input also reads as 0; no valid token
// starts with one).
func (s *Scanner) Peek() byte {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// Expect consumes the byte b, which must come next after spaces.
func (s *Scanner) Expect(b byte) error {
	if s.Peek() != b {
		if s.pos >= len(s.data) {
			return s.Errorf("want %q, got end of input", b)
		}
		return s.Errorf("want %q, got %q", b, s.data[s.pos])
	}
	s.pos++
	return nil
}

// End checks that nothing but spaces follows.
func (s *Scanner) End() error {
	if s.skipSpace(); s.pos != len(s.data) {
		return s.Errorf("trailing data after the document")
	}
	return nil
}

// Object calls field for every member of the object at the current
// position; field must consume the member's value. The key slice is only
// valid during the call.
func (s *Scanner) Object(field func(key []byte) error) error {
	if err := s.Expect('{'); err != nil {
		return err
	}
	if s.Peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.Peek() != '"' {
			return s.Errorf("want a member name")
		}
		key, err := s.RawString()
		if err != nil {
			return err
		}
		if err := s.Expect(':'); err != nil {
			return err
		}
		s.skipSpace()
		if err := field(key); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.Errorf("want ',' or '}' after member %q", key)
		}
	}
}

// Array calls elem for every element of the array at the current
// position; elem must consume the element.
func (s *Scanner) Array(elem func() error) error {
	if err := s.Expect('['); err != nil {
		return err
	}
	if s.Peek() == ']' {
		s.pos++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.Errorf("want ',' or ']' in array")
		}
	}
}

// Literal consumes word (null, true, false) if it comes next and reports
// whether it did.
func (s *Scanner) Literal(word string) bool {
	s.skipSpace()
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return true
	}
	return false
}

// SkipValue consumes one value of any type, checking its syntax, and
// returns its text.
func (s *Scanner) SkipValue() ([]byte, error) {
	s.skipSpace()
	start := s.pos
	if err := s.skipValue(0); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

func (s *Scanner) skipValue(depth int) error {
	if depth > MaxDepth {
		return s.Errorf("nested deeper than %d", MaxDepth)
	}
	switch b := s.Peek(); {
	case b == '"':
		_, err := s.RawString()
		return err
	case b == '{':
		return s.Object(func([]byte) error { return s.skipValue(depth + 1) })
	case b == '[':
		return s.Array(func() error { return s.skipValue(depth + 1) })
	case b == '-' || (b >= '0' && b <= '9'):
		_, err := s.Number()
		return err
	case s.Literal("true"), s.Literal("false"), s.Literal("null"):
		return nil
	case b == 0:
		return s.Errorf("want a value, got end of input")
	default:
		return s.Errorf("unexpected %q", b)
	}
}

// Number consumes a number,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns its text.
func (s *Scanner) Number() ([]byte, error) {
	s.skipSpace()
	d := s.data
	start, i := s.pos, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, s.Errorf("bad number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, s.Errorf("bad number fraction")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, s.Errorf("bad number exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return d[start:i], nil
}

// Int reads an integer of the given bit size written as a number, as a
// string holding one (as Java's fastjson accepts), or null (0).
func (s *Scanner) Int(bits int) (int64, error) {
	var text []byte
	switch b := s.Peek(); {
	case b == '"':
		v, err := s.RawString()
		if err != nil {
			return 0, err
		}
		text = v
	case b == 'n' && s.Literal("null"):
		return 0, nil
	case b == '-' || (b >= '0' && b <= '9'):
		v, err := s.Number()
		if err != nil {
			return 0, err
		}
		text = v
	default:
		return 0, s.Errorf("want an integer")
	}
	v, err := strconv.ParseInt(string(text), 10, bits)
	if err != nil {
		return 0, s.Errorf("%q is not a %d-bit integer", text, bits)
	}
	return v, nil
}

// RawString consumes a string literal and returns its decoded bytes;
// without escapes they alias the input and nothing is allocated.
func (s *Scanner) RawString() ([]byte, error) {
	if s.Peek() != '"' {
		return nil, s.Errorf("want a string")
	}
	d := s.data
	start := s.pos + 1
	for i := start; i < len(d); i++ {
		switch b := d[i]; {
		case b == '"':
			s.pos = i + 1
			return d[start:i], nil
		case b == '\\':
			return s.escaped(start, i)
		case b < 0x20:
			s.pos = i
			return nil, s.Errorf("control character in string")
		}
	}
	s.pos = len(d)
	return nil, s.Errorf("unterminated string")
}

// String consumes a string literal and returns its decoded value.
func (s *Scanner) String() (string, error) {
	v, err := s.RawString()
	return string(v), err
}

// escaped decodes a string whose first escape is at esc.
func (s *Scanner) escaped(start, esc int) ([]byte, error) {
	d := s.data
	out := make([]byte, 0, esc-start+16)
	out = append(out, d[start:esc]...)
	i := esc
	for i < len(d) {
		b := d[i]
		switch {
		case b == '"':
			s.pos = i + 1
			return out, nil
		case b < 0x20:
			s.pos = i
			return nil, s.Errorf("control character in string")
		case b != '\\':
			out = append(out, b)
			i++
			continue
		}
		if i+1 >= len(d) {
			break
		}
		switch e := d[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
			i += 2
		case 'b', 'f', 'n', 'r', 't':
			out = append(out, namedEscapes[strings.IndexByte("bfnrt", e)])
			i += 2
		case 'u':
			r, ok := hex4(d, i+2)
			if !ok {
				s.pos = i
				return nil, s.Errorf("bad \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					r2, ok = hex4(d, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			s.pos = i
			return nil, s.Errorf("bad escape \\%c", e)
		}
	}
	s.pos = len(d)
	return nil, s.Errorf("unterminated string")
}

// namedEscapes are the characters of \b, \f, \n, \r and \t, in that order.
const namedEscapes = "\b\f\n\r\t"

// hex4 parses the four hex digits at d[i:i+4].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string literal, as rocketkv
// writes headers and bodies: quotes, backslashes and control characters are
// escaped, invalid UTF-8 becomes U+FFFD, everything else (including '<',
// '>', '&' and non-ASCII text) is kept as is. It is meant for hand-written
// JSON bodies whose shape clients depend on.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
