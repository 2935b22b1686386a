package remoting

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrBadJSONHeader is returned (wrapped, with the position and the cause)
// when a JSON header is not a JSON object or one of its known fields has
// the wrong type.
var ErrBadJSONHeader = errors.New("bad JSON header")

// maxJSONDepth bounds the nesting of values inside a JSON header, so a
// hostile header cannot exhaust the stack of the skipping code.
const maxJSONDepth = 64

// extFieldsHint sizes a decoded header's ext field map: 14 fields (a
// SEND_MESSAGE_V2 header has up to 14) fill a Go map of 16 slots at its
// maximum load; a hint of 16 would allocate 32.
const extFieldsHint = 14

// appendJSONHeader appends the JSON header of c to dst. Field order is the
// Go client's; ext fields are sorted by key (the order fastjson writes) so
// the output is deterministic; every ext value is written as a JSON string.
func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	lang := c.Language
	if lang == "" {
		lang = DefaultLanguage
	}
	dst = AppendJSONString(dst, lang)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = AppendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	var stack [16]string
	keys := sortedKeys(stack[:0], c.ExtFields)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst = AppendJSONString(dst, c.ExtFields[k])
	}
	return append(dst, "}}"...)
}

// sortedKeys appends the keys of m to buf in byte order.
func sortedKeys(buf []string, m map[string]string) []string {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s to dst as a JSON string literal, the way this
// package writes headers: quotes, backslashes and control characters are
// escaped, invalid UTF-8 becomes U+FFFD, everything else (including '<',
// '>', '&' and non-ASCII text) is kept as is. It is meant for hand-written
// JSON bodies whose shape clients depend on.
func AppendJSONString(dst []byte, s string) []byte {
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

// decodeJSONHeader fills the header fields of c from a JSON header.
//
// Accepted beyond strict typing, as fastjson accepts it: null for any
// field (zero value), numeric strings for the integer fields, and numbers,
// booleans, objects and arrays as extFields values, which are kept as their
// literal JSON text. Null extFields values are dropped (Java treats them as
// absent). Unknown fields are skipped after being checked for syntax.
func decodeJSONHeader(data []byte, c *Command) error {
	s := jsonScanner{data: data}
	if err := s.header(c); err != nil {
		return fmt.Errorf("%w: %w", ErrBadJSONHeader, err)
	}
	return nil
}

// jsonScanner reads a JSON document from data, pos being the next byte.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the
// end of the input (a NUL byte in the input also reads as 0; no valid token
// starts with one).
func (s *jsonScanner) peek() byte {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *jsonScanner) expect(b byte) error {
	if s.peek() != b {
		if s.pos >= len(s.data) {
			return s.errorf("want %q, got end of input", b)
		}
		return s.errorf("want %q, got %q", b, s.data[s.pos])
	}
	s.pos++
	return nil
}

// object calls field for every member of the object at the current
// position; field must consume the member's value. The key slice is only
// valid during the call.
func (s *jsonScanner) object(field func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errorf("want a member name")
		}
		key, err := s.rawStr()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		s.skipSpace()
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or '}' after member %q", key)
		}
	}
}

// rawStr consumes a string literal and returns its decoded bytes; without
// escapes they alias the input and nothing is allocated.
func (s *jsonScanner) rawStr() ([]byte, error) {
	d := s.data
	start := s.pos + 1
	for i := start; i < len(d); i++ {
		switch b := d[i]; {
		case b == '"':
			s.pos = i + 1
			return d[start:i], nil
		case b == '\\':
			v, err := s.strEscaped(start, i)
			return []byte(v), err
		case b < 0x20:
			s.pos = i
			return nil, s.errorf("control character in string")
		}
	}
	s.pos = len(d)
	return nil, s.errorf("unterminated string")
}

// internKey returns the ext field names clients send most as constants, so
// decoding them allocates nothing; other names are copied.
func internKey(k []byte) string {
	switch string(k) {
	case "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n":
		i := k[0] - 'a'
		return letterKeys[i : i+1]
	case "topic":
		return "topic"
	case "queueId":
		return "queueId"
	case "producerGroup":
		return "producerGroup"
	case "consumerGroup":
		return "consumerGroup"
	case "defaultTopic":
		return "defaultTopic"
	case "defaultTopicQueueNums":
		return "defaultTopicQueueNums"
	case "sysFlag":
		return "sysFlag"
	case "bornTimestamp":
		return "bornTimestamp"
	case "flag":
		return "flag"
	case "properties":
		return "properties"
	case "reconsumeTimes":
		return "reconsumeTimes"
	case "unitMode":
		return "unitMode"
	case "maxReconsumeTimes":
		return "maxReconsumeTimes"
	case "batch":
		return "batch"
	case "bname":
		return "bname"
	case "queueOffset":
		return "queueOffset"
	case "maxMsgNums":
		return "maxMsgNums"
	case "commitOffset":
		return "commitOffset"
	case "suspendTimeoutMillis":
		return "suspendTimeoutMillis"
	case "subscription":
		return "subscription"
	case "subVersion":
		return "subVersion"
	case "expressionType":
		return "expressionType"
	case "msgId":
		return "msgId"
	case "transactionId":
		return "transactionId"
	case "offset":
		return "offset"
	case "MSG_REGION":
		return "MSG_REGION"
	case "TRACE_ON":
		return "TRACE_ON"
	}
	return string(k)
}

// letterKeys are the single-letter ext names of SEND_MESSAGE_V2 headers.
const letterKeys = "abcdefghijklmn"

func (s *jsonScanner) header(c *Command) error {
	err := s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "code":
			c.Code, err = s.int32Value(key)
		case "version":
			c.Version, err = s.int32Value(key)
		case "opaque":
			c.Opaque, err = s.int32Value(key)
		case "flag":
			c.Flag, err = s.int32Value(key)
		case "language":
			c.Language, err = s.stringValue(key)
		case "remark":
			c.Remark, err = s.stringValue(key)
		case "extFields":
			err = s.extFields(c)
		default:
			err = s.skipValue(0)
		}
		return err
	})
	if err != nil {
		return err
	}
	if s.skipSpace(); s.pos != len(s.data) {
		return s.errorf("trailing data after the header object")
	}
	return nil
}

// extFields reads the extFields member: null or an object.
func (s *jsonScanner) extFields(c *Command) error {
	if s.literal("null") {
		return nil
	}
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, extFieldsHint)
	}
	return s.object(func(k []byte) error {
		switch s.peek() {
		case '"':
			v, err := s.str()
			if err != nil {
				return err
			}
			c.ExtFields[internKey(k)] = v
			return nil
		case 'n':
			if s.literal("null") {
				delete(c.ExtFields, string(k))
				return nil
			}
		}
		start := s.pos
		if err := s.skipValue(0); err != nil {
			return err
		}
		c.ExtFields[internKey(k)] = string(s.data[start:s.pos])
		return nil
	})
}

// literal consumes word if it is next and reports whether it was.
func (s *jsonScanner) literal(word string) bool {
	s.skipSpace()
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return true
	}
	return false
}

// stringValue reads a string or null (empty string).
func (s *jsonScanner) stringValue(field []byte) (string, error) {
	switch s.peek() {
	case '"':
		return s.str()
	case 'n':
		if s.literal("null") {
			return "", nil
		}
	}
	return "", s.errorf("field %q: want a string", field)
}

// int32Value reads an integer, a string holding an integer, or null (0).
func (s *jsonScanner) int32Value(field []byte) (int32, error) {
	var text string
	switch b := s.peek(); {
	case b == '"':
		v, err := s.str()
		if err != nil {
			return 0, err
		}
		text = v
	case b == 'n' && s.literal("null"):
		return 0, nil
	case b == '-' || (b >= '0' && b <= '9'):
		start := s.pos
		if err := s.number(); err != nil {
			return 0, err
		}
		text = string(s.data[start:s.pos])
	default:
		return 0, s.errorf("field %q: want an integer", field)
	}
	v, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		return 0, s.errorf("field %q: %q is not a 32-bit integer", field, text)
	}
	return int32(v), nil
}

// skipValue consumes one JSON value of any type, checking its syntax.
func (s *jsonScanner) skipValue(depth int) error {
	if depth > maxJSONDepth {
		return s.errorf("nested deeper than %d", maxJSONDepth)
	}
	switch b := s.peek(); {
	case b == '"':
		_, err := s.str()
		return err
	case b == '{':
		return s.object(func([]byte) error { return s.skipValue(depth + 1) })
	case b == '[':
		s.pos++
		if s.peek() == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.errorf("want ',' or ']' in array")
			}
		}
	case b == '-' || (b >= '0' && b <= '9'):
		return s.number()
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	case b == 0:
		return s.errorf("want a value, got end of input")
	default:
		return s.errorf("unexpected %q", b)
	}
}

// number consumes a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() error {
	d := s.data
	i := s.pos
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
		return s.errorf("bad number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return s.errorf("bad number fraction")
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
			return s.errorf("bad number exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return nil
}

// str consumes a string literal (the current byte is the opening quote)
// and returns its decoded value.
func (s *jsonScanner) str() (string, error) {
	d := s.data
	start := s.pos + 1
	// Fast path: no escapes.
	for i := start; i < len(d); i++ {
		switch b := d[i]; {
		case b == '"':
			s.pos = i + 1
			return string(d[start:i]), nil
		case b == '\\':
			return s.strEscaped(start, i)
		case b < 0x20:
			s.pos = i
			return "", s.errorf("control character in string")
		}
	}
	s.pos = len(d)
	return "", s.errorf("unterminated string")
}

// strEscaped decodes a string whose first escape is at esc.
func (s *jsonScanner) strEscaped(start, esc int) (string, error) {
	d := s.data
	out := make([]byte, 0, esc-start+16)
	out = append(out, d[start:esc]...)
	i := esc
	for i < len(d) {
		b := d[i]
		switch {
		case b == '"':
			s.pos = i + 1
			return string(out), nil
		case b < 0x20:
			s.pos = i
			return "", s.errorf("control character in string")
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
		case 'b':
			out = append(out, '\b')
			i += 2
		case 'f':
			out = append(out, '\f')
			i += 2
		case 'n':
			out = append(out, '\n')
			i += 2
		case 'r':
			out = append(out, '\r')
			i += 2
		case 't':
			out = append(out, '\t')
			i += 2
		case 'u':
			r, ok := hex4(d, i+2)
			if !ok {
				s.pos = i
				return "", s.errorf("bad \\u escape")
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
			return "", s.errorf("bad escape \\%c", e)
		}
	}
	s.pos = len(d)
	return "", s.errorf("unterminated string")
}

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
