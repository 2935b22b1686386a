package filter

import (
	"errors"
	"testing"
)

// Verdicts of RocketMQ 5.3.3's own selector: each row was run through its
// SelectorParser.parse and the resulting expression's evaluate (the
// filter module's classes as tagged, on JDK 17), with the properties
// given. REFUSED is a parse that throws, ERROR an evaluation that throws
// (RocketMQ's ExpressionMessageFilter then drops the message), and TRUE,
// FALSE or NULL what evaluate returned. A float literal of zero (0.0,
// -0.0), which RocketMQ refuses and Compile accepts, is left out: see the
// package documentation.
func TestRocketMQVerdicts(t *testing.T) {
	for _, tc := range []struct {
		expr  string
		props []string
		want  string
	}{
		// Literals: no hexadecimal or octal (0x10 is 0 and the property
		// x10, ignored; 010 is 0 and 10), an L suffix, int beyond int32 is
		// a Long, a literal beyond Long is refused (before any sign), floats
		// with and without digits around the point and with exponents
		// ("1e" is 1 and the property e).
		{"a = 0x10", []string{"a=0"}, "TRUE"},
		{"a = 0x10", []string{"a=16"}, "FALSE"},
		{"a = 010", []string{"a=10"}, "FALSE"},
		{"a = 10l", []string{"a=10"}, "TRUE"},
		{"a = 10L", []string{"a=10"}, "TRUE"},
		{"a = 2147483648", []string{"a=2147483648"}, "TRUE"},
		{"a = 2147483647", []string{"a=2147483648"}, "ERROR"},
		{"a = 9223372036854775807L", []string{"a=9223372036854775807"}, "TRUE"},
		{"a = -9223372036854775808", []string{"a=-9223372036854775808"}, "REFUSED"},
		{"a = 9223372036854775808", []string{"a=1"}, "REFUSED"},
		{"a = 1.", []string{"a=1"}, "TRUE"},
		{"a = .5e1", []string{"a=5"}, "TRUE"},
		{"a = 5E-1", []string{"a=0.5"}, "TRUE"},
		{"a = 1e", []string{"a=1"}, "TRUE"},
		{"a = 1.5e+1", []string{"a=15"}, "TRUE"},
		{"a = 1e400", []string{"a=1"}, "REFUSED"},
		{"a = 4.9e-324", []string{"a=4.9E-324"}, "TRUE"},
		// A property compared with a number is parsed as that number's
		// type: Integer.valueOf (no spaces, no fraction), Long.valueOf,
		// Double.valueOf (spaces trimmed, d suffix, hexadecimal with p).
		{"a = 10", []string{"a=10.0"}, "ERROR"},
		{"a = 10.0", []string{"a=10"}, "TRUE"},
		{"a = 10", []string{"a=+10"}, "TRUE"},
		{"a = 10", []string{"a= 10"}, "ERROR"},
		{"a = 10.0", []string{"a= 10 "}, "TRUE"},
		{"a = 10.0", []string{"a=10d"}, "TRUE"},
		{"a = 10.0", []string{"a=0xAp0"}, "TRUE"},
		{"a > 2147483647", []string{"a=2147483648"}, "ERROR"},
		{"a > 2147483648", []string{"a=2147483649"}, "TRUE"},
		{"a = 1", []string{"a=1.0"}, "ERROR"},
		{"a <> 1", []string{"a=x"}, "ERROR"},
		{"1 < a", []string{"a=2"}, "TRUE"},
		{"1 = a", []string{"a=x"}, "ERROR"},
		// Strings, and booleans: a string equals TRUE or FALSE as
		// Boolean.valueOf reads it; TRUE on the left of a string cannot
		// be compared at all.
		{"a = 'x''y'", []string{"a=x'y"}, "TRUE"},
		{"a = ''''", []string{"a='"}, "TRUE"},
		{"a = TRUE", []string{"a=TrUe"}, "TRUE"},
		{"a = FALSE", []string{"a=no"}, "TRUE"},
		{"a = true", []string{"a=true"}, "TRUE"},
		{"TRUE = a", []string{"a=true"}, "ERROR"},
		{"TRUE = 'true'", []string{}, "REFUSED"},
		{"'true' = TRUE", []string{}, "TRUE"},
		// Literals and properties against each other: numbers widen; two
		// properties are compared as strings by "=", as doubles by ">".
		{"1 = 1.0", []string{}, "TRUE"},
		{"1 = 1L", []string{}, "TRUE"},
		{"2147483648 = 2147483648.0", []string{}, "TRUE"},
		{"a > b", []string{"a=10", "b=9"}, "TRUE"},
		{"a > b", []string{"a=abc", "b=1"}, "ERROR"},
		{"a = b", []string{"a=1", "b=1.0"}, "FALSE"},
		// BETWEEN is ">= AND <=" (so "2.5" is no Integer for the lower
		// bound), bounds checked only for BETWEEN, and only when both are
		// literals (-5 is a negation, not one).
		{"a BETWEEN 1 AND 2.5", []string{"a=2"}, "TRUE"},
		{"a BETWEEN 1 AND 2.5", []string{"a=2.5"}, "ERROR"},
		{"a BETWEEN 2.5 AND 1", []string{"a=2"}, "REFUSED"},
		{"a NOT BETWEEN 2.5 AND 1", []string{"a=2"}, "TRUE"},
		{"a NOT BETWEEN 1 AND 3", []string{"a=5"}, "TRUE"},
		{"a BETWEEN 'x' AND 'y'", []string{"a=x"}, "REFUSED"},
		{"a BETWEEN -1 AND -5", []string{"a=-3"}, "FALSE"},
		// IN, CONTAINS and the like: strings only, NULL or FALSE without
		// a value.
		{"a IN ('1')", []string{"a=1"}, "TRUE"},
		{"a IN ('1', '1.0')", []string{"a=1.0"}, "TRUE"},
		{"a NOT IN ('x')", []string{}, "NULL"},
		{"a CONTAINS 'b'", []string{"a=abc"}, "TRUE"},
		{"a NOT STARTSWITH 'a'", []string{}, "FALSE"},
		{"a ENDSWITH ''", []string{"a=abc"}, "FALSE"},
		// Three-valued logic, precedence (AND over OR, comparisons over
		// both, NOT over a comparison's left operand), keywords in any
		// case, what follows a complete expression.
		{"a IS NOT NULL AND a > 5", []string{"a=7"}, "TRUE"},
		{"a IS NULL OR a = 1", []string{}, "TRUE"},
		{"NOT a", []string{"a=true"}, "TRUE"},
		{"a", []string{"a=true"}, "FALSE"},
		{"NOT (a > 1)", []string{}, "NULL"},
		{"a > 1 OR TRUE", []string{}, "TRUE"},
		{"a > 1 AND FALSE", []string{}, "FALSE"},
		{"a > 1 AND TRUE", []string{}, "NULL"},
		{"a = 1 OR b = 1 AND c = 1", []string{"a=1"}, "TRUE"},
		{"(a = 1 OR b = 1) AND c = 1", []string{"a=1"}, "NULL"},
		{"NOT a = 1 AND b = 1", []string{"a=2", "b=1"}, "FALSE"},
		{"a = 1 = TRUE", []string{"a=1"}, "TRUE"},
		{"a = 1 <> FALSE", []string{"a=2"}, "FALSE"},
		{"nOt a iS nUlL", []string{"a=1"}, "FALSE"},
		{"a = 1 b", []string{"a=1"}, "TRUE"},
		{"a = 1 NOT b", []string{"a=1"}, "REFUSED"},
		{"a = 1 -- x", []string{"a=1"}, "TRUE"},
		{"a = 1 --", []string{"a=1"}, "TRUE"},
		{"a = 1 /* x */ AND b = 2", []string{"a=1", "b=2"}, "TRUE"},
		// No "==", double quotes or LIKE: "a LIKE 'x%'" is "a" and
		// whatever follows, a property alone, never TRUE.
		{"a == 1", []string{"a=1"}, "REFUSED"},
		{"a = \"x\"", []string{"a=x"}, "REFUSED"},
		{"a LIKE 'x%'", []string{"a=x"}, "FALSE"},
		{"a = 1 LIKE", []string{"a=1"}, "TRUE"},
		// Negation: of a number only (a property is a string: NULL).
		{"-a = -1", []string{"a=1"}, "NULL"},
		{"a = - 1", []string{"a=-1"}, "TRUE"},
		{"a = -'1'", []string{"a=-1"}, "FALSE"},
		{"-a > 0", []string{"a=1"}, "NULL"},
		{"TRUE AND 1 = 1", []string{}, "TRUE"},
		{"NULL OR TRUE", []string{}, "TRUE"},
		{"NULL AND TRUE", []string{}, "NULL"},
		{"NOT NULL", []string{}, "NULL"},
	} {
		e, err := Compile(tc.expr)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Errorf("Compile(%q) = %T %v, want a *SyntaxError", tc.expr, err, err)
			}
			if tc.want != "REFUSED" {
				t.Errorf("Compile(%q): %v, want %s", tc.expr, err, tc.want)
			}
			continue
		}
		if tc.want == "REFUSED" {
			t.Errorf("Compile(%q) accepted it; RocketMQ refuses it", tc.expr)
			continue
		}
		msg := props(tc.props...)
		if got := outcome(t, tc.expr, e, msg); got != tc.want {
			t.Errorf("%q with %v = %s, want %s", tc.expr, tc.props, got, tc.want)
		}
		if want := tc.want == "TRUE"; e.Matches(msg) != want {
			t.Errorf("%q with %v: Matches = %v, want %v", tc.expr, tc.props, !want, want)
		}
	}
}
