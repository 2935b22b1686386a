package filter

import (
	"fmt"
	"strings"
)

// tokenKind is what a token is.
type tokenKind uint8

const (
	tokEOF tokenKind = iota
	tokIdent
	tokString
	tokInteger
	tokFloat
	tokOp  // = <> > >= < <= ( ) , + -
	tokErr // where the text stops being tokens; text is why
	// Keywords.
	tokNot
	tokAnd
	tokOr
	tokBetween
	tokIn
	tokTrue
	tokFalse
	tokNull
	tokIs
	tokContains
	tokStartsWith
	tokEndsWith
)

var keywords = map[string]tokenKind{
	"NOT": tokNot, "AND": tokAnd, "OR": tokOr, "BETWEEN": tokBetween, "IN": tokIn,
	"TRUE": tokTrue, "FALSE": tokFalse, "NULL": tokNull, "IS": tokIs,
	"CONTAINS": tokContains, "STARTSWITH": tokStartsWith, "ENDSWITH": tokEndsWith,
}

// token is one token of an expression; text is the source text, except
// for a string literal, whose text is its value (each doubled quote made one).
type token struct {
	kind tokenKind
	text string
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "the end of the expression"
	case tokErr:
		return t.text
	case tokString:
		return fmt.Sprintf("'%s' at %d", strings.ReplaceAll(t.text, "'", "''"), t.pos)
	}
	return fmt.Sprintf("%q at %d", t.text, t.pos)
}

// lex splits an expression into tokens, ending with tokEOF, or with a
// tokErr carrying the lexical error where the text stops being tokens
// (the parser fails only if it needs that token: RocketMQ's parser reads
// tokens as it goes and ignores what follows the expression). Where two
// tokens could start at a position the longer one wins, and a keyword
// wins over a property name of the same length, as in RocketMQ's JavaCC
// token manager.
func lex(src string) []token {
	var toks []token
	lastBreak := strings.LastIndexAny(src, "\n\r")
	for i := 0; ; {
		i = skipSpace(src, i, lastBreak)
		if i < 0 {
			return append(toks, token{kind: tokErr, text: "unterminated comment", pos: len(src)})
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEOF, pos: i})
		}
		c := src[i]
		switch {
		case c == '\'':
			s, next, ok := stringLiteral(src, i)
			if !ok {
				return append(toks, token{kind: tokErr, text: fmt.Sprintf("unterminated string starting at %d", i), pos: i})
			}
			toks = append(toks, token{kind: tokString, text: s, pos: i})
			i = next
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			kind, n := number(src[i:])
			toks = append(toks, token{kind: kind, text: src[i : i+n], pos: i})
			i += n
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			word := src[i:j]
			kind, ok := keywords[strings.ToUpper(word)]
			if !ok {
				kind = tokIdent
			}
			toks = append(toks, token{kind: kind, text: word, pos: i})
			i = j
		default:
			n := operator(src[i:])
			if n == 0 {
				return append(toks, token{kind: tokErr, text: fmt.Sprintf("unexpected character %q at %d", rune(c), i), pos: i})
			}
			toks = append(toks, token{kind: tokOp, text: src[i : i+n], pos: i})
			i += n
		}
	}
}

// skipSpace returns the position of the next token at or after i, past
// white space and comments; -1 for a block comment without its end.
// lastBreak is the position of the source's last line break (-1 if none).
func skipSpace(src string, i, lastBreak int) int {
	for i < len(src) {
		switch {
		case strings.IndexByte(" \t\n\r\f", src[i]) >= 0:
			i++
		case strings.HasPrefix(src[i:], "--") && i < lastBreak:
			// A line comment ends with a line break; without one, "--"
			// is two minus signs, as in RocketMQ's grammar.
			i += strings.IndexAny(src[i:], "\n\r")
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return -1
			}
			i += 2 + end + 2
		default:
			return i
		}
	}
	return i
}

// stringLiteral reads the quoted string starting at src[i], a single
// quote: the longest text that is one (see the grammar in the package
// documentation), as RocketMQ's JavaCC token manager takes it. A doubled
// quote is an escaped quote if the literal goes on after it, but where
// the text ends before a closing quote, the literal is the longest one
// that was complete: 'x' followed by two quotes at the end is the
// literal x, and the second of those quotes starts the next token. ok is
// false only when no literal was complete.
func stringLiteral(src string, i int) (value string, next int, ok bool) {
	var b strings.Builder
	complete, completeNext := -1, 0 // b.Len() and next of the longest complete literal
	for j := i + 1; j < len(src); j++ {
		if src[j] != '\'' {
			b.WriteByte(src[j])
			continue
		}
		if j+1 < len(src) && src[j+1] == '\'' {
			complete, completeNext = b.Len(), j+1
			b.WriteByte('\'')
			j++
			continue
		}
		return b.String(), j + 1, true
	}
	if complete < 0 {
		return "", 0, false
	}
	return b.String()[:complete], completeNext, true
}

// number returns the kind and length of the longest integer or float
// literal at the start of s (which starts with a digit, or a dot and a
// digit); an integer wins a tie.
func number(s string) (tokenKind, int) {
	intLen := 0
	if s[0] == '0' {
		intLen = 1
	} else if isDigit(s[0]) {
		intLen = digits(s)
		if intLen < len(s) && (s[intLen] == 'l' || s[intLen] == 'L') {
			intLen++
		}
	}
	floatLen := 0
	whole := digits(s)
	switch {
	case whole > 0 && whole < len(s) && s[whole] == '.':
		n := whole + 1
		n += digits(s[n:])
		floatLen = n + exponent(s[n:])
	case whole == 0 && s[0] == '.':
		if d := digits(s[1:]); d > 0 {
			floatLen = 1 + d + exponent(s[1+d:])
		}
	case whole > 0:
		if e := exponent(s[whole:]); e > 0 {
			floatLen = whole + e
		}
	}
	if floatLen > intLen {
		return tokFloat, floatLen
	}
	return tokInteger, intLen
}

// exponent returns the length of an exponent ("E", a sign, digits) at the
// start of s, 0 if there is none.
func exponent(s string) int {
	if len(s) == 0 || s[0] != 'e' && s[0] != 'E' {
		return 0
	}
	n := 1
	if n < len(s) && (s[n] == '+' || s[n] == '-') {
		n++
	}
	d := digits(s[n:])
	if d == 0 {
		return 0
	}
	return n + d
}

func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// operator returns the length of the operator at the start of s, 0 if
// there is none.
func operator(s string) int {
	for _, op := range []string{"<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-"} {
		if strings.HasPrefix(s, op) {
			return len(op)
		}
	}
	return 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$'
}
func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }
