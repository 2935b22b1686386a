package filter

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// kind is the type of a value, after Java's boxed types.
type kind uint8

const (
	kNull   kind = iota
	kBool        // Boolean
	kInt         // Integer: int32 range
	kLong        // Long
	kDouble      // Double
	kString      // String: every property value
)

// value is the result of evaluating an expression.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	null      = value{}
	trueValue = value{k: kBool, b: true}
	falseVal  = value{k: kBool}
)

func boolValue(b bool) value {
	if b {
		return trueValue
	}
	return falseVal
}

func (v value) String() string {
	switch v.k {
	case kBool:
		return strings.ToUpper(strconv.FormatBool(v.b))
	case kInt, kLong:
		return strconv.FormatInt(v.i, 10)
	case kDouble:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case kString:
		return "'" + strings.ReplaceAll(v.s, "'", "''") + "'"
	}
	return "NULL"
}

func (v value) isNumber() bool { return v.k == kInt || v.k == kLong || v.k == kDouble }

// equals is Java's equals on the boxed values: same type and value
// (doubles by their bits, so NaN equals NaN and -0.0 does not equal 0.0).
func (v value) equals(w value) bool {
	if v.k != w.k {
		return false
	}
	switch v.k {
	case kBool:
		return v.b == w.b
	case kInt, kLong:
		return v.i == w.i
	case kDouble:
		return doubleBits(v.f) == doubleBits(w.f)
	case kString:
		return v.s == w.s
	}
	return true
}

// errConvert: a string compared with a number does not parse as one (a
// NumberFormatException in RocketMQ), or another comparison Java cannot
// make. The message does not match.
var errConvert = errors.New("cannot compare")

// compare orders two non-null values as RocketMQ's comparison does when
// it converts strings: the left value's type decides which side is
// converted, and values of unrelated types compare as "less" (-1).
func compare(l, r value) (int, error) {
	if l.k != r.k {
		var err error
		switch l.k {
		case kBool:
			if r.k == kString {
				// RocketMQ casts the Boolean on the left to a String here
				// and fails.
				return 0, fmt.Errorf("%w %s with %s", errConvert, l, r)
			}
			return -1, nil
		case kInt, kLong:
			switch r.k {
			case kInt, kLong: // an Integer and a Long compare as Longs
				l.k, r.k = kLong, kLong
			case kDouble:
				l = value{k: kDouble, f: float64(l.i)}
			case kString:
				r, err = parseAs(l.k, r.s)
			default:
				return -1, nil
			}
		case kDouble:
			switch r.k {
			case kInt, kLong:
				r = value{k: kDouble, f: float64(r.i)}
			case kString:
				r, err = parseAs(kDouble, r.s)
			default:
				return -1, nil
			}
		case kString:
			switch r.k {
			case kBool:
				l = boolValue(strings.EqualFold(l.s, "true"))
			case kInt, kLong, kDouble:
				l, err = parseAs(r.k, l.s)
			default:
				return -1, nil
			}
		default:
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
	}
	switch l.k {
	case kBool:
		switch {
		case l.b == r.b:
			return 0, nil
		case l.b:
			return 1, nil
		}
		return -1, nil
	case kInt, kLong:
		return cmp.Compare(l.i, r.i), nil
	case kDouble:
		return compareDoubles(l.f, r.f), nil
	case kString:
		return strings.Compare(l.s, r.s), nil
	}
	return 0, nil
}

// compareDoubles is Java's Double.compare: -0.0 is below 0.0, NaN is
// above everything and equal to itself.
func compareDoubles(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return cmp.Compare(doubleBits(a), doubleBits(b))
}

// doubleBits is Java's Double.doubleToLongBits: NaNs collapse to one.
func doubleBits(f float64) int64 {
	if math.IsNaN(f) {
		return 0x7ff8000000000000
	}
	return int64(math.Float64bits(f))
}

// parseAs converts a string as Java's Integer.valueOf, Long.valueOf or
// Double.valueOf does.
func parseAs(k kind, s string) (value, error) {
	switch k {
	case kInt:
		n, ok := parseJavaInteger(s, 32)
		if !ok {
			return null, fmt.Errorf("%w: %q is not an int", errConvert, s)
		}
		return value{k: kInt, i: n}, nil
	case kLong:
		n, ok := parseJavaInteger(s, 64)
		if !ok {
			return null, fmt.Errorf("%w: %q is not a long", errConvert, s)
		}
		return value{k: kLong, i: n}, nil
	}
	f, ok := parseJavaDouble(s)
	if !ok {
		return null, fmt.Errorf("%w: %q is not a double", errConvert, s)
	}
	return value{k: kDouble, f: f}, nil
}

// parseJavaInteger parses a string as Java's Integer.parseInt (bitSize
// 32) or Long.parseLong (64) does: an optional ASCII sign, then decimal
// digits, which Java reads with Character.digit and so takes from any
// script (Arabic-Indic "١٠" and full-width "１０" are 10), nothing else
// (no spaces), within the type's range.
func parseJavaInteger(s string, bitSize int) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, bitSize)
	if err == nil {
		return n, true
	}
	if !errors.Is(err, strconv.ErrSyntax) || isASCII(s) {
		return 0, false
	}
	// Other scripts' digits: made ASCII digits, which strconv parses and
	// range-checks.
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		if i == 0 && (r == '+' || r == '-') {
			b.WriteRune(r)
			continue
		}
		d := javaDecimalDigit(r)
		if d < 0 {
			return 0, false
		}
		b.WriteByte(byte('0' + d))
	}
	n, err = strconv.ParseInt(b.String(), 10, bitSize)
	return n, err == nil
}

// javaDecimalDigit is Java's Character.digit(ch, 10) for the character r:
// the value of a decimal digit (Unicode category Nd) of the Basic
// Multilingual Plane, -1 for anything else. A digit beyond that plane is
// two chars (surrogates) to Java, neither of them a digit; letters, which
// Character.digit reads as 10 and above, are no decimal digits either.
// Unicode lays each script's digits out as one run from 0 to 9, so a
// digit's value is its distance from the start of its range in unicode.Nd
// modulo 10. (The table is Go's Unicode version; a JDK of an older one,
// such as Java 8's 6.2, does not know the few digits added since, such as
// Myanmar's Tai Laing digits U+A9F0-U+A9F9.)
func javaDecimalDigit(r rune) int {
	if r > 0xFFFF {
		return -1
	}
	c := uint16(r)
	for _, rg := range unicode.Nd.R16 {
		if c < rg.Lo {
			break
		}
		if c <= rg.Hi {
			return int(c-rg.Lo) % 10
		}
	}
	return -1
}

// isASCII reports whether s has only ASCII characters.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// parseJavaDouble parses a string as Java's Double.valueOf: surrounding
// control characters and spaces are ignored, "NaN" and "Infinity" are
// spelled so, a final f, F, d or D is allowed, hexadecimal needs its p
// exponent, and values beyond the range round to infinity or zero.
func parseJavaDouble(s string) (float64, bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" {
		return 0, false
	}
	neg := strings.HasPrefix(s, "-")
	switch body {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if last := body[len(body)-1]; len(body) > 1 && strings.IndexByte("fFdD", last) >= 0 {
		body = body[:len(body)-1]
	}
	if !isDigit(body[0]) && body[0] != '.' || strings.ContainsAny(body, "_iInN") {
		return 0, false
	}
	f, err := strconv.ParseFloat(body, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}
