package configs

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// A properties file (broker.conf, namesrv.properties) is read here as
// RocketMQ reads it: BrokerStartup and NamesrvStartup hand the file to
// java.util.Properties.load(InputStream), whose rules are these.
//
//   - The text is cut into natural lines at "\n", "\r\n" or a lone "\r".
//     Space, tab and form feed at the start of a natural line are skipped;
//     a line left empty is blank, and one that then starts with '#' or '!'
//     is a comment (a comment never continues onto the next line).
//   - A natural line ending in an odd number of backslashes continues on
//     the next one: that backslash and the line break are dropped, and so
//     is the leading white space of the next line. A backslash at the very
//     end of the text is dropped too.
//   - The key runs up to the first '=', ':', space, tab or form feed not
//     escaped by a backslash. White space after it is skipped, then one
//     '=' or ':', then white space again; the rest of the logical line,
//     trailing white space included, is the value. A line with a key only
//     has the empty value; so does a line with a value only, whose key is
//     empty ("=value").
//   - In keys and values, \t \n \r \f stand for tab, line feed, carriage
//     return and form feed, \uXXXX (exactly four hex digits) for that
//     UTF-16 code unit, and a backslash before any other character for
//     that character ("\=" is '=', "\\" a backslash, "\a" is 'a').
//     A malformed \u escape is an error (Java throws).
//   - A key given twice keeps its last value. Keys are case-sensitive.
//
// The one deliberate difference is the encoding. load(InputStream) takes
// each byte as an ISO-8859-1 character, so "é" saved as UTF-8 reaches
// RocketMQ as "Ã©". Here valid UTF-8 is read as UTF-8, what the file's
// writer meant, and any byte that is not part of valid UTF-8 as the
// ISO-8859-1 character Java reads: a file saved in ISO-8859-1 reads as in
// Java.
//
// RocketMQ then sets its configuration from the entries with
// MixAll.properties2Object; schema.loadProperties says how rocketkv's
// handling of the entries compares.
//
// The bodies of UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG are
// properties texts too, read by the same rules (ParseProperties). RocketMQ
// decodes the body as UTF-8 (MixAll.DEFAULT_CHARSET), and
// MixAll.string2Properties encodes that string back to UTF-8 and hands
// the bytes to the same load(InputStream): the rules and the encoding
// difference above apply to them as to files.

// errBadUnicodeEscape is returned by parseProperties for a \u not followed
// by four hexadecimal digits, on which Properties.load throws
// IllegalArgumentException ("Malformed \uxxxx encoding") and RocketMQ does
// not start.
var errBadUnicodeEscape = errors.New(`malformed \uXXXX escape`)

// property is one entry of a properties file.
type property struct {
	key, value string
	// line is the natural line (from 1) the entry starts on.
	line int
}

// parseProperties reads the entries of a properties text in file order,
// a key given twice included (the later one is the key's value), as
// java.util.Properties.load does (see the rules above). It fails only on a
// malformed \u escape.
func parseProperties(text []byte) ([]property, error) {
	r := newLineReader(text)
	var out []property
	for {
		logical, line, ok := r.next()
		if !ok {
			return out, nil
		}
		rawKey, rawValue := splitEntry(logical)
		key, err := unescapeProperty(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: key: %w", line, err)
		}
		value, err := unescapeProperty(rawValue)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %s: %w", line, key, err)
		}
		out = append(out, property{key: key, value: value, line: line})
	}
}

// ParseProperties reads a properties text by the rules above and returns
// its keys with their values as a java.util.Properties holds them: a key
// given twice has its last value, and an entry without a key ("=value")
// is there under the empty key. It is how RocketMQ reads the body of
// UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG
// (MixAll.string2Properties). It fails only on a malformed \u escape,
// with an error naming the line, where string2Properties returns null.
func ParseProperties(text []byte) (map[string]string, error) {
	entries, err := parseProperties(text)
	if err != nil {
		return nil, err // it names the line; the caller says what the text is
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		out[e.key] = e.value
	}
	return out, nil
}

// decodeProperties decodes a properties text as UTF-8, taking each byte
// that is not part of valid UTF-8 as its ISO-8859-1 character. offsets
// holds the byte offset in text of each character, and len(text) after
// the last.
func decodeProperties(text []byte) (chars []rune, offsets []int) {
	chars = make([]rune, 0, len(text))
	offsets = make([]int, 0, len(text)+1)
	for off := 0; off < len(text); {
		r, n := utf8.DecodeRune(text[off:])
		if r == utf8.RuneError && n == 1 {
			r = rune(text[off])
		}
		chars = append(chars, r)
		offsets = append(offsets, off)
		off += n
	}
	return chars, append(offsets, len(text))
}

// isPropertySpace reports the white space of properties files: space, tab
// and form feed (not line breaks, which end a natural line).
func isPropertySpace(c rune) bool { return c == ' ' || c == '\t' || c == '\f' }

// lineReader cuts a properties text into logical lines: comments and blank
// lines dropped, continued lines joined. Besides each logical line it
// reports where in the text the line stands (span), so that a writer
// (setPropertiesKeys) can replace an entry knowing exactly which bytes
// Properties.load reads it from.
type lineReader struct {
	in []rune
	// offset is the byte offset in the text of each character of in, and
	// the text's length after the last.
	offset []int
	pos    int
	// line is the natural line (from 1) of in[pos].
	line int
	buf  []rune
	// start and end delimit, in bytes, the natural lines of the logical
	// line last returned by next; see span.
	start, end int
	// unterminated reports that the logical line last returned by next
	// ends the text inside a continuation: its last natural line ends in
	// an odd number of backslashes, the last of which was dropped.
	unterminated bool
}

// newLineReader reads the properties text text.
func newLineReader(text []byte) *lineReader {
	in, offset := decodeProperties(text)
	return &lineReader{in: in, offset: offset, line: 1}
}

// span is the byte range of the text that the logical line last returned
// by next was read from: from the start of the natural line holding its
// first character (leading white space included) to the end of the line
// break that ended it, or of the text. It takes in the continuation lines
// and the empty line that may end them, not the lines of a backslash
// alone that may come before (they continue into the first line but add
// nothing to it). The text around a span reads the same when the span is
// replaced by entries on lines of their own, each ending in a line break.
func (r *lineReader) span() (start, end int) { return r.start, r.end }

// read returns the next character and moves past it, counting lines.
func (r *lineReader) read() rune {
	c := r.in[r.pos]
	r.pos++
	if c == '\n' || (c == '\r' && (r.pos == len(r.in) || r.in[r.pos] != '\n')) {
		r.line++
	}
	return c
}

// next returns the next logical line (escapes still in it) and the natural
// line it starts on, or false at the end of the text. The slice is reused
// by the following call. span and unterminated then describe that line.
func (r *lineReader) next() (logical []rune, line int, ok bool) {
	r.buf = r.buf[:0]
	skipSpace := true // at the start of a natural line
	continued := false
	backslash := false // the last character is an unescaped backslash
	first := 0         // the index in in of the first character of buf
	for r.pos < len(r.in) {
		c := r.read()
		if skipSpace {
			if isPropertySpace(c) {
				continue
			}
			// Blank lines between entries are skipped; an empty line
			// after a continuation ends the entry.
			if !continued && (c == '\r' || c == '\n') {
				continue
			}
			skipSpace, continued = false, false
		}
		if len(r.buf) == 0 && (c == '#' || c == '!') {
			for r.pos < len(r.in) {
				if c := r.read(); c == '\r' || c == '\n' {
					break
				}
			}
			skipSpace = true
			continue
		}
		if c != '\r' && c != '\n' {
			if len(r.buf) == 0 {
				line, first = r.line, r.pos-1
			}
			r.buf = append(r.buf, c)
			backslash = c == '\\' && !backslash
			continue
		}
		if len(r.buf) == 0 {
			skipSpace = true
			continue
		}
		// "\r\n" is one line break.
		crlf := c == '\r' && r.pos < len(r.in) && r.in[r.pos] == '\n'
		if !backslash || r.pos == len(r.in) {
			if crlf {
				r.read() // within the span; the next call would skip it
			}
			break
		}
		// The line continues: drop the backslash and the line break
		// and the next line's leading white space.
		r.buf = r.buf[:len(r.buf)-1]
		backslash = false
		skipSpace, continued = true, true
		if crlf {
			r.read()
		}
	}
	if len(r.buf) == 0 {
		return nil, 0, false
	}
	r.unterminated = backslash
	if backslash { // a backslash ending the text
		r.buf = r.buf[:len(r.buf)-1]
	}
	lineStart := first
	for lineStart > 0 && r.in[lineStart-1] != '\r' && r.in[lineStart-1] != '\n' {
		lineStart--
	}
	r.start, r.end = r.offset[lineStart], r.offset[r.pos]
	return r.buf, line, true
}

// splitEntry cuts a logical line into its key and value, both still
// escaped.
func splitEntry(line []rune) (key, value []rune) {
	keyEnd, valueStart := len(line), len(line)
	sep := false
	backslash := false
	for i, c := range line {
		if !backslash && (c == '=' || c == ':') {
			keyEnd, valueStart, sep = i, i+1, true
			break
		}
		if !backslash && isPropertySpace(c) {
			keyEnd, valueStart = i, i+1
			break
		}
		backslash = c == '\\' && !backslash
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isPropertySpace(c) {
			if sep || (c != '=' && c != ':') {
				break
			}
			sep = true
		}
		valueStart++
	}
	return line[:keyEnd], line[valueStart:]
}

// unescapeProperty resolves the escapes of a key or value. \u escapes are
// UTF-16 code units: a surrogate pair makes one character, and a lone
// surrogate (which a Java string may hold) becomes U+FFFD.
func unescapeProperty(s []rune) (string, error) {
	if !slices.Contains(s, '\\') {
		return string(s), nil
	}
	units := make([]uint16, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			units = utf16.AppendRune(units, c)
			continue
		}
		i++
		if i == len(s) {
			break // cannot happen: the line reader drops a final backslash
		}
		switch c = s[i]; c {
		case 'u':
			if i+4 >= len(s) {
				return "", fmt.Errorf("%w: %q", errBadUnicodeEscape, string(s[i-1:]))
			}
			var v uint16
			for _, h := range s[i+1 : i+5] {
				d, ok := hexDigit(h)
				if !ok {
					return "", fmt.Errorf("%w: %q", errBadUnicodeEscape, string(s[i-1:i+5]))
				}
				v = v<<4 | d
			}
			units = append(units, v)
			i += 4
		case 't':
			units = append(units, '\t')
		case 'n':
			units = append(units, '\n')
		case 'r':
			units = append(units, '\r')
		case 'f':
			units = append(units, '\f')
		default:
			units = utf16.AppendRune(units, c)
		}
	}
	return string(utf16.Decode(units)), nil
}

// hexDigit is the value of an ASCII hexadecimal digit.
func hexDigit(c rune) (uint16, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint16(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint16(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint16(c-'A') + 10, true
	}
	return 0, false
}
