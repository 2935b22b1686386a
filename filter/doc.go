// Package filter evaluates RocketMQ's SQL92 message selectors: the
// expressions a consumer subscribes with when its expression type is
// SQL92 (MessageSelector.bySql in the Java client, consumer.SQL92 in the
// Go client), matched against a message's properties on the broker.
//
// Compile parses an expression once; Expr.Matches is safe for concurrent
// use. ParseTags reads the other expression type, TAG ("TagA || TagB"),
// for the broker's filter and the tools' alike.
//
//	sel, err := filter.Compile("region = 'eu' AND amount BETWEEN 10 AND 100")
//	if err != nil { ... }           // refused as RocketMQ refuses it
//	ok := sel.Matches(func(name string) (string, bool) {
//		return commitlog.LookupProperty(m.Properties, name)
//	})
//
// # Grammar
//
// The language is RocketMQ's (its JavaCC SelectorParser), keywords in any
// case:
//
//	selector   = or
//	or         = and { OR and }
//	and        = equality { AND equality }
//	equality   = comparison { "=" comparison | "<>" comparison
//	             | IS NULL | IS NOT NULL }
//	comparison = unary { (">" | ">=" | "<" | "<=") unary
//	             | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//	             | [NOT] BETWEEN unary AND unary
//	             | [NOT] IN "(" string { "," string } ")" }
//	unary      = "+" unary | "-" unary | NOT unary | primary
//	primary    = literal | property | "(" or ")"
//	literal    = string | integer | float | TRUE | FALSE | NULL
//	property   = [A-Za-z_$] { [A-Za-z0-9_$] }
//	string     = "'" { any character but "'" | "''" } "'"
//	integer    = "0" | [1-9] { [0-9] } [ "l" | "L" ]   (int64; int32 if it fits)
//	float      = digits "." [digits] [exp] | "." digits [exp] | digits exp
//
// Spaces, tabs, line breaks, "--" line comments and "/* */" block
// comments separate tokens. There is no arithmetic beyond the sign. A
// string literal is the longest text of its form, as in RocketMQ's token
// manager: where the text ends before a closing quote, the literal ends
// at the last quote that closed it, and the lone quote after it starts
// the next token, so that
//
//	a = 10 'x''
//
// is a = 10 and the literal 'x', not a = 10 and an unterminated literal.
//
// Parsing stops where the expression cannot go on, and the text after it
// is ignored if its first token is one, as RocketMQ's parser does ("a = 1
// b = 2" selects by a = 1). A NOT after an operand goes on: it must begin
// NOT CONTAINS, NOT STARTSWITH, NOT ENDSWITH, NOT BETWEEN or NOT IN
// ("a = 1 NOT b = 2" is refused). Compile refuses what RocketMQ's parser
// refuses: an operand of AND, OR, NOT or the whole selector that cannot
// be a boolean (a literal number or string), ">", ">=", "<", "<=" or
// BETWEEN on a string, boolean or NULL literal or on a comparison, "="
// with a NULL literal (IS NULL is the test), IN on anything but a
// property, BETWEEN bounds in the wrong order, an integer beyond int64, a
// float beyond the double range. (RocketMQ also refuses a float literal
// of zero, such as 0.0 or 1e-400, which rounds to it, by a quirk of its
// range check; Compile accepts it.) It also refuses an expression longer
// than 256 KiB or nested (parentheses, signs, NOTs) more than 1,024
// levels deep: RocketMQ's parser takes any length and thousands of signs
// or NOTs in a row, but fails as a stack overflow on parentheses nested
// somewhere between 800 and 2,000 levels, depending on the JVM's stack;
// an AND or OR chain of some 10,000 terms it parses may overflow the
// stack when it is evaluated, so that it matches no message, where
// Compile's evaluates.
//
// # Evaluation
//
// Values are null, boolean, integer (Java's Integer and Long), float
// (Double) and string; a property is its string value, or null when the
// message lacks it. Logic is three-valued as in SQL: a comparison with a
// null is null, NOT null is null, AND and OR are null unless decided by
// the other side; only a result of TRUE matches. Mixed operands convert as
// RocketMQ's ComparisonExpression converts them: numbers widen (integer to
// long to double), a string compared with a number is parsed as that
// number's type (a property "10" equals 10, "10.5" compared with 10 is an
// error; as in Java, an integer may be written in the decimal digits of
// any script, "١٠" equals 10, a float only in ASCII digits), a string
// compared with a boolean is true only if it spells "true" in any case;
// two strings compared with ">" and the like are parsed as doubles. A
// property used alone as a condition ("WHERE flag") is never true:
// properties are strings, not booleans. CONTAINS, STARTSWITH and ENDSWITH,
// with or without NOT, are false for a missing property and for an empty
// search string.
//
// An evaluation that fails (a string that does not parse as the number it
// is compared with) does not match, as RocketMQ logs the error and treats
// the message as filtered out.
package filter
