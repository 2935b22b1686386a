package filter

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// props builds a property lookup from "k=v" pairs.
func props(pairs ...string) Properties {
	m := map[string]string{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// The outcomes below follow RocketMQ's SelectorParser and
// ComparisonExpression as described in the package documentation.
func TestEvaluate(t *testing.T) {
	msg := props("a=10", "b=abc", "c=10.5", "d=true", "e=", "TAGS=TagA", "big=3000000000", "neg=-3", "sp= 7 ")
	for _, tc := range []struct {
		expr string
		want string // TRUE, FALSE, NULL or ERROR (an evaluation that fails)
	}{
		// Numbers against properties (strings parsed as the literal's type).
		{"a = 10", "TRUE"},
		{"a = 10.0", "TRUE"},
		{"a <> 10", "FALSE"},
		{"a > 5", "TRUE"},
		{"a >= 10", "TRUE"},
		{"a < 10", "FALSE"},
		{"a <= 9", "FALSE"},
		{"10 = a", "TRUE"},
		{"a > 5L", "TRUE"},
		{"a > 4000000000", "FALSE"},
		{"c > 10", "ERROR"}, // "10.5" is not an Integer
		{"c > 10.0", "TRUE"},
		{"c = 10.5", "TRUE"},
		{"b = 5", "ERROR"},
		{"big > 5", "ERROR"}, // beyond Integer: Integer.valueOf fails
		{"big > 5000000000", "FALSE"},
		{"big > 5L", "ERROR"}, // 5L is still an Integer literal
		{"neg = -3", "TRUE"},
		{"neg < -2", "TRUE"},
		{"neg = - -3", "FALSE"},
		{"sp = 7", "ERROR"},  // Integer.valueOf does not trim
		{"sp = 7.0", "TRUE"}, // Double.valueOf does
		{"a BETWEEN 10 AND 20", "TRUE"},
		{"a BETWEEN 11 AND 20", "FALSE"},
		{"a NOT BETWEEN 11 AND 20", "TRUE"},
		{"a between 1 and 9 or a between 10 and 10", "TRUE"},
		// Strings.
		{"b = 'abc'", "TRUE"},
		{"b <> 'abd'", "TRUE"},
		{"b = 'ABC'", "FALSE"},
		{"TAGS = 'TagA'", "TRUE"},
		{"a > c", "FALSE"}, // two strings: compared as doubles
		{"b > a", "ERROR"},
		{"e = ''", "TRUE"},
		{"b IN ('x', 'abc')", "TRUE"},
		{"b NOT IN ('x', 'abc')", "FALSE"},
		{"b IN ('x')", "FALSE"},
		{"zz IN ('x')", "NULL"},
		{"zz NOT IN ('x')", "NULL"},
		{"b CONTAINS 'bc'", "TRUE"},
		{"b NOT CONTAINS 'bc'", "FALSE"},
		{"b STARTSWITH 'ab'", "TRUE"},
		{"b ENDSWITH 'ab'", "FALSE"},
		{"b NOT ENDSWITH 'ab'", "TRUE"},
		{"b CONTAINS ''", "FALSE"},
		{"zz CONTAINS 'a'", "FALSE"},
		{"zz NOT CONTAINS 'a'", "FALSE"},
		{"'it''s' = 'it''s'", "TRUE"},
		// Booleans.
		{"d = TRUE", "TRUE"},
		{"b = TRUE", "FALSE"},
		{"d", "FALSE"}, // a property alone is a string, never TRUE
		{"zz", "NULL"},
		{"NOT d", "TRUE"},
		{"TRUE", "TRUE"},
		{"NOT FALSE", "TRUE"},
		{"(a > 5) = TRUE", "TRUE"},
		{"(a > 5) = 1", "FALSE"}, // unrelated types compare as "less"
		// NULL and three-valued logic.
		{"zz IS NULL", "TRUE"},
		{"a IS NULL", "FALSE"},
		{"a IS NOT NULL", "TRUE"},
		{"zz = 1", "NULL"},
		{"zz <> 1", "NULL"},
		{"zz > 1", "NULL"},
		{"NOT zz = 1", "NULL"},
		{"zz = 1 OR a = 10", "TRUE"},
		{"zz = 1 OR a = 11", "NULL"},
		{"zz = 1 AND a = 11", "FALSE"},
		{"zz = 1 AND a = 10", "NULL"},
		{"a = 11 AND b = 5", "FALSE"}, // the failing right side is not evaluated
		{"a = 10 OR b = 5", "TRUE"},
		{"a = 10 AND b = 5", "ERROR"},
		{"NULL", "NULL"},
		// Precedence: AND binds tighter than OR; comparisons than both.
		{"a = 1 OR a = 10 AND b = 'abc'", "TRUE"},
		{"(a = 1 OR a = 10) AND b = 'x'", "FALSE"},
		// Keywords in any case; comments.
		{"a Between 1 aNd 20 -- a comment\n", "TRUE"},
		{"/* before */ a = 10", "TRUE"},
		{"a > --5", "TRUE"}, // no line break: two minus signs
		{"a = +10", "TRUE"},
		{"a = 1e1", "TRUE"},
		{"c = .105E2", "TRUE"},
		{"NOT ((b > 5) CONTAINS '')", "TRUE"}, // an empty search is FALSE before b > 5 fails
		// RocketMQ's parser stops where the expression cannot go on and
		// ignores the rest, if its first token is one.
		{"a = 10 b = 2", "TRUE"},
		{"a = 10)", "TRUE"},
		{"a = 10 --", "TRUE"},
		{"a = 010", "FALSE"}, // "0" then "10": a = 0
		{"a = 0L", "FALSE"},  // "0" then the property L
	} {
		e, err := Compile(tc.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.expr, err)
			continue
		}
		got := outcome(t, tc.expr, e, msg)
		if got != tc.want {
			t.Errorf("%q = %s, want %s", tc.expr, got, tc.want)
		}
		if want := tc.want == "TRUE"; e.Matches(msg) != want {
			t.Errorf("%q: Matches = %v, want %v", tc.expr, !want, want)
		}
	}
}

// Expressions RocketMQ's parser refuses, refused with a *SyntaxError.
func TestCompileRefuses(t *testing.T) {
	for _, expr := range []string{
		"",
		"5",
		"'x'",
		"-a",
		"a AND 5",
		"NOT 5",
		"a = NULL",
		"NULL = a",
		"TRUE = 5",
		"a > 'x'",
		"a > TRUE",
		"a > NULL",
		"(a = 1) > 2",
		"a BETWEEN 5 AND 1",
		"a BETWEEN NULL AND 1",
		"5 IN ('x')",
		"a IN ()",
		"a IN (1, 2)",
		"a CONTAINS b",
		"a != 1", // "!" is no token
		"a = 'open",
		"/* open",
		"a = 1 /* open",
		"a = 9223372036854775808",
		"a = 1e999",
		"a.b = 1",
		"a IS 1",
		"(a = 1",
		"a = #",
		"a = 1 #",     // the token after the expression must be one
		"a = 1 'open", // (RocketMQ's parser reads it)
		strings.Repeat("(", 1100) + "a = 1" + strings.Repeat(")", 1100),
		strings.Repeat("NOT ", 1100) + "a = 1",
		strings.Repeat("(", 200000) + "a",
		strings.Repeat("a = 1 AND ", 30000) + "a = 1",
	} {
		_, err := Compile(expr)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%q) = %v, want a SyntaxError", expr, err)
		}
	}
}

// A NOT after a complete operand continues the comparison in RocketMQ's
// parser: it must begin NOT CONTAINS, NOT STARTSWITH, NOT ENDSWITH, NOT
// BETWEEN or NOT IN, and anything else after it is a ParseException. It
// is not a token that ends the expression, after which the text would be
// ignored ("a = 1 NOT b = 2" is not "a = 1").
func TestCompileRefusesNotAfterAnOperand(t *testing.T) {
	for _, expr := range []string{
		"a = 1 NOT b = 2",
		"a = 1 NOT",
		"a NOT",
		"(a = 1) NOT",
		"a > 1 NOT (b = 2)",
		"a = 1 NOT NOT b IN ('2')",
		"a = 1 NOT #",
		"a = 1 NOT 'open",
	} {
		e, err := Compile(expr)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%q) = %v, %v; want a SyntaxError (RocketMQ's parser throws ParseException)", expr, e, err)
		}
	}
	// NOT where the grammar takes it still compiles.
	msg := props("a=10", "b=2")
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{"a NOT IN ('x')", true},
		{"b NOT BETWEEN 3 AND 4", true},
		{"a NOT CONTAINS 'x'", true},
		{"a NOT STARTSWITH '1'", false},
		{"a NOT ENDSWITH 'x'", true},
		{"a = 10 AND NOT (b = 3)", true},
		{"a = 10 b = 2", true}, // a token that ends the expression: the rest is ignored
	} {
		e, err := Compile(tc.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.expr, err)
			continue
		}
		if got := e.Matches(msg); got != tc.want {
			t.Errorf("%q matches a=10, b=2: %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// A string literal is the longest text that is one, as JavaCC's token
// manager reads it: a doubled quote is an escaped quote when the literal
// goes on after it, but a text ending before a closing quote ends the
// literal at the last quote that closed it, and the lone quote after it
// starts the next token. After a complete expression that next token is
// read and ignored; where the expression needs it, the lone quote is
// refused. The outcomes are those of RocketMQ's SelectorParser.
func TestStringLiteralLongestMatch(t *testing.T) {
	if toks := lex("'x''"); len(toks) != 2 || toks[0].kind != tokString || toks[0].text != "x" || toks[1].kind != tokErr {
		t.Errorf(`lex("'x''") = %v, want the string 'x' then a lexical error`, toks)
	}
	msg := props("a=10", "b=x'")
	for _, tc := range []struct {
		expr string
		want string // TRUE, FALSE or REFUSED
	}{
		{"a = 10 'x''", "TRUE"}, // a = 10, then the literal 'x'
		{"a = 10 '''", "TRUE"},  // a = 10, then the literal ''
		{"a IN ('10') OR b 'in ('')", "TRUE"},
		{"b = 'x'''", "TRUE"},  // the escaped quote: b = x'
		{"b = 'x'''x", "TRUE"}, // then the property x, ignored
		{"b = 'x' OR b = 'y''", "REFUSED"},
		{"b = 'x''", "REFUSED"},
		{"b = 'x''x", "REFUSED"},
		{"b IN ('x'')", "REFUSED"},
		{"b = 'open", "REFUSED"},
	} {
		e, err := Compile(tc.expr)
		got := "REFUSED"
		if err == nil {
			got = strings.ToUpper(strconv.FormatBool(e.Matches(msg)))
		}
		if got != tc.want {
			t.Errorf("%q = %s (%v), want %s", tc.expr, got, err, tc.want)
		}
	}
}

// Long chains within the length limit compile and evaluate (the AND
// chain is as deep as it is long) without exhausting the stack, and so do
// the long IN lists and deep nesting RocketMQ's parser takes.
func TestLongChains(t *testing.T) {
	chain := strings.Repeat("a = 10 AND ", 23000) + "a = 10"
	e, err := Compile(chain)
	if err != nil {
		t.Fatalf("a chain of 23,000 ANDs: %v", err)
	}
	if !e.Matches(props("a=10")) || e.Matches(props("a=11")) {
		t.Fatal("the chain of ANDs evaluates wrongly")
	}
	nested := strings.Repeat("(", 1000) + "a = 10" + strings.Repeat(")", 1000)
	if e, err := Compile(nested); err != nil || !e.Matches(props("a=10")) {
		t.Fatalf("1,000 nested parentheses: %v", err)
	}
	ids := make([]string, 12000)
	for i := range ids {
		ids[i] = "'" + strconv.Itoa(i) + "'"
	}
	in := "id IN (" + strings.Join(ids, ",") + ")"
	if e, err := Compile(in); err != nil || !e.Matches(props("id=11999")) || e.Matches(props("id=12000")) {
		t.Fatalf("an IN list of 12,000 ids (%d bytes): %v", len(in), err)
	}
	comments := "a > " + strings.Repeat("-", 60000) + "5"
	if _, err := Compile(comments); err == nil {
		t.Fatal("60,000 minus signs compiled") // nesting, and quickly: no quadratic comment scan
	}
}

// A property compared with an integer literal is parsed as Java's
// Integer.valueOf or Long.valueOf parse it, with Character.digit: decimal
// digits of any script count, as long as they are one UTF-16 char each.
// Double.valueOf, for a float literal, takes ASCII digits only. The
// outcomes are those of RocketMQ's filter on Java 17.
func TestUnicodeDigitsCompareAsJavaIntegers(t *testing.T) {
	msg := props(
		"arabic=\u0661\u0660",                     // Arabic-Indic 10
		"wide=\uff11\uff10",                       // full-width 10
		"mixed=1\u0660",                           // 1, Arabic-Indic 0
		"signed=-\uff11\uff10",                    // ASCII sign, full-width digits
		"plus=+\u0661",                            // +1
		"deva=\u0969\u0966",                       // Devanagari 30
		"taiLaing=\ua9f1\ua9f0",                   // Myanmar Tai Laing 10 (Unicode 7.0)
		"long=\u0663"+strings.Repeat("\u0660", 9), // 3000000000
		"intMax=\u0662\u0661\u0664\u0667\u0664\u0668\u0663\u0666\u0664\u0667",
		"math=\U0001d7cf\U0001d7ce", // mathematical bold 10: two surrogates each to Java
		"super=\u00b2",              // superscript two: No, not Nd
		"circled=\u2460",            // circled one: No
		"wideSign=\uff0b1",          // full-width plus sign
		"trail=\u0660x",
		"space= 1",
	)
	for _, tc := range []struct {
		expr string
		want string // TRUE, FALSE or ERROR (the property does not parse)
	}{
		{"arabic = 10", "TRUE"},
		{"arabic > 5", "TRUE"},
		{"5 < arabic", "TRUE"},
		{"arabic BETWEEN 9 AND 11", "TRUE"},
		{"arabic = 11", "FALSE"},
		{"wide = 10", "TRUE"},
		{"mixed = 10", "TRUE"},
		{"signed = -10", "TRUE"},
		{"plus = 1", "TRUE"},
		{"deva = 30", "TRUE"},
		{"taiLaing = 10", "TRUE"},
		{"long = 3000000000", "TRUE"},   // Long.valueOf
		{"long > 2147483647", "ERROR"},  // Integer.valueOf: out of range
		{"intMax = 2147483647", "TRUE"}, // Integer.valueOf at its limit
		{"arabic = 10.0", "ERROR"},      // Double.valueOf: ASCII only
		{"arabic > 5.5", "ERROR"},
		{"math = 10", "ERROR"},
		{"super = 2", "ERROR"},
		{"circled = 1", "ERROR"},
		{"wideSign = 1", "ERROR"},
		{"trail = 0", "ERROR"},
		{"space = 1", "ERROR"},
	} {
		e, err := Compile(tc.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		got := outcome(t, tc.expr, e, msg)
		if got != tc.want {
			t.Errorf("%q = %s, want %s", tc.expr, got, tc.want)
		}
	}
}

// javaDecimalDigit takes each digit's value from its distance to the start
// of its range in unicode.Nd: every range of the Basic Multilingual Plane
// must be whole runs from 0 to 9.
func TestJavaDecimalDigitRuns(t *testing.T) {
	for _, rg := range unicode.Nd.R16 {
		if rg.Stride != 1 || (rg.Hi-rg.Lo+1)%10 != 0 {
			t.Errorf("unicode.Nd range %U-%U (stride %d) is not runs of ten digits", rg.Lo, rg.Hi, rg.Stride)
		}
	}
	for r, want := range map[rune]int{'0': 0, '9': 9, '\u0665': 5, '\uff19': 9, '\u1c49': 9, 'a': -1, '\u00b2': -1, '\U0001d7cf': -1} {
		if got := javaDecimalDigit(r); got != want {
			t.Errorf("javaDecimalDigit(%U) = %d, want %d", r, got, want)
		}
	}
}

func TestParseJavaDouble(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"1.5", true}, {" 2 ", true}, {"-3e2", true}, {"+.5", true}, {"1.", true}, {"7d", true}, {"7F", true},
		{"NaN", true}, {"-Infinity", true}, {"0x1p3", true}, {"1e999", true},
		{"", false}, {"nan", false}, {"inf", false}, {"Infinity1", false}, {"1_0", false}, {"--1", false},
		{"abc", false}, {"1e", false}, {"d", false}, {"0x10", false},
	} {
		if _, ok := parseJavaDouble(tc.s); ok != tc.ok {
			t.Errorf("parseJavaDouble(%q) ok = %v, want %v", tc.s, ok, tc.ok)
		}
	}
}

// FuzzCompile: any text (expressions come from clients) compiles or is
// refused with a SyntaxError, and a compiled expression evaluates
// against any properties without a panic, deterministically.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"a = 10", "a BETWEEN 1 AND 2 OR b IN ('x','y')", "NOT (a IS NULL) AND b CONTAINS 'z'",
		"a > --5", "c = .5e-3 AND d = TRUE", "/* x */ a <> 'it''s' -- y\n"} {
		f.Add(s, "10", "abc")
	}
	f.Fuzz(func(t *testing.T, expr, va, vb string) {
		e, err := Compile(expr)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q) returned %T %v", expr, err, err)
			}
			return
		}
		p := props("a="+va, "b="+vb, "c="+va+vb)
		if e.Matches(p) != e.Matches(p) {
			t.Fatalf("%q matches differently twice", expr)
		}
		v, err := e.root.eval(p)
		if err == nil && v.k != kBool && v.k != kNull {
			t.Fatalf("%q evaluated to %s, not a boolean", expr, v)
		}
	})
}

// outcome is what e gives for msg as RocketMQ's evaluation says it: TRUE,
// FALSE, NULL, or ERROR for a conversion error.
func outcome(t *testing.T, expr string, e *Expr, msg Properties) string {
	t.Helper()
	v, err := e.root.eval(msg)
	if err != nil {
		if !errors.Is(err, errConvert) {
			t.Errorf("%q: unexpected error %v", expr, err)
		}
		return "ERROR"
	}
	return v.String()
}
