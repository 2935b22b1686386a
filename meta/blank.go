package meta

import "unicode"

// IsBlank reports whether s is empty or whitespace alone as RocketMQ's
// UtilAll.isBlank (commons-lang's StringUtils.isBlank) sees it: Java's
// Character.isWhitespace, which takes the tab, line feed, vertical tab,
// form feed, carriage return, the separators U+001C to U+001F and
// Unicode's space, line and paragraph separators but the no-break ones
// (U+00A0, U+2007, U+202F), and not U+0085 that Go's unicode.IsSpace
// takes.
func IsBlank(s string) bool {
	for _, r := range s {
		if !javaWhitespace(r) {
			return false
		}
	}
	return true
}

// javaWhitespace is Java's Character.isWhitespace.
func javaWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1C, 0x1D, 0x1E, 0x1F:
		return true
	case 0x00A0, 0x2007, 0x202F:
		return false
	}
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}
