package filter

import (
	"strings"
)

// Properties looks up a message property by name; ok is false when the
// message has none of that name.
type Properties func(name string) (value string, ok bool)

// node is a compiled expression.
type node interface {
	eval(p Properties) (value, error)
	// boolean reports whether the node is one of RocketMQ's boolean
	// expressions (a comparison, a logical operator, a boolean or NULL
	// literal), which the parser's checks distinguish.
	boolean() bool
}

// constant is a literal.
type constant struct{ v value }

func (c constant) eval(Properties) (value, error) { return c.v, nil }
func (c constant) boolean() bool                  { return c.v.k == kBool || c.v.k == kNull }

// property is a message property: its string value, or null.
type property struct{ name string }

func (p property) eval(props Properties) (value, error) {
	if s, ok := props(p.name); ok {
		return value{k: kString, s: s}, nil
	}
	return null, nil
}
func (property) boolean() bool { return false }

// negate is the unary minus: a number negated (an int32 wraps as Java's
// does), anything else null.
type negate struct{ x node }

func (n negate) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil {
		return null, err
	}
	switch v.k {
	case kInt:
		return value{k: kInt, i: int64(-int32(v.i))}, nil
	case kLong:
		return value{k: kLong, i: -v.i}, nil
	case kDouble:
		return value{k: kDouble, f: -v.f}, nil
	}
	return null, nil
}
func (negate) boolean() bool { return false }

// not is NOT of a boolean expression: null stays null.
type not struct{ x node }

func (n not) eval(p Properties) (value, error) {
	v, err := n.x.eval(p)
	if err != nil || v.k != kBool {
		return null, err
	}
	return boolValue(!v.b), nil
}
func (not) boolean() bool { return true }

// boolCast is a property used as a condition: null when missing,
// otherwise false (a property is a string, never a boolean).
type boolCast struct{ x node }

func (c boolCast) eval(p Properties) (value, error) {
	v, err := c.x.eval(p)
	if err != nil || v.k == kNull {
		return null, err
	}
	return boolValue(v.k == kBool && v.b), nil
}
func (boolCast) boolean() bool { return true }

// logic is AND or OR in three-valued logic; the right side is not
// evaluated when the left decides.
type logic struct {
	and  bool
	l, r node
}

func (n logic) eval(p Properties) (value, error) {
	l, err := n.l.eval(p)
	if err != nil {
		return null, err
	}
	// AND is decided by a false, OR by a true.
	decided := !n.and
	if l.k == kBool && l.b == decided {
		return l, nil
	}
	r, err := n.r.eval(p)
	if err != nil {
		return null, err
	}
	if r.k == kBool && r.b == decided {
		return r, nil
	}
	if l.k != kBool || r.k != kBool {
		return null, nil
	}
	return boolValue(!decided), nil
}
func (logic) boolean() bool { return true }

// equal is "=" (and, under a not, "<>"), and IS NULL with a NULL literal
// on the right.
type equal struct{ l, r node }

func (n equal) eval(p Properties) (value, error) {
	l, err := n.l.eval(p)
	if err != nil {
		return null, err
	}
	r, err := n.r.eval(p)
	if err != nil {
		return null, err
	}
	switch {
	case l.k == kNull && r.k == kNull:
		return trueValue, nil
	case l.k == kNull:
		return null, nil
	case r.k == kNull:
		return falseVal, nil
	case l.equals(r):
		return trueValue, nil
	}
	c, err := compare(l, r)
	if err != nil {
		return null, err
	}
	return boolValue(c == 0), nil
}
func (equal) boolean() bool { return true }

// order is ">", ">=", "<" or "<=".
type order struct {
	op   string
	l, r node
}

func (n order) eval(p Properties) (value, error) {
	l, err := n.l.eval(p)
	if err != nil || l.k == kNull {
		return null, err
	}
	r, err := n.r.eval(p)
	if err != nil || r.k == kNull {
		return null, err
	}
	if l.k == kString && r.k == kString {
		// Two strings are compared as doubles.
		if l, err = parseAs(kDouble, l.s); err != nil {
			return null, err
		}
		if r, err = parseAs(kDouble, r.s); err != nil {
			return null, err
		}
	}
	c, err := compare(l, r)
	if err != nil {
		return null, err
	}
	switch n.op {
	case ">":
		return boolValue(c > 0), nil
	case ">=":
		return boolValue(c >= 0), nil
	case "<":
		return boolValue(c < 0), nil
	}
	return boolValue(c <= 0), nil
}
func (order) boolean() bool { return true }

// in is [NOT] IN on a property: null when the property is missing.
type in struct {
	x    property
	set  map[string]struct{}
	negd bool
}

func (n in) eval(p Properties) (value, error) {
	v, _ := n.x.eval(p)
	if v.k != kString {
		return null, nil
	}
	_, ok := n.set[v.s]
	return boolValue(ok != n.negd), nil
}
func (in) boolean() bool { return true }

// textMatch is [NOT] CONTAINS, STARTSWITH or ENDSWITH: false (with NOT
// too) for a missing property, a value that is not a string or an empty
// search.
type textMatch struct {
	op     string
	x      node
	search string
	negd   bool
}

func (n textMatch) eval(p Properties) (value, error) {
	if n.search == "" {
		return falseVal, nil // before the operand is evaluated, as in RocketMQ
	}
	v, err := n.x.eval(p)
	if err != nil {
		return null, err
	}
	if v.k != kString {
		return falseVal, nil
	}
	var ok bool
	switch n.op {
	case "CONTAINS":
		ok = strings.Contains(v.s, n.search)
	case "STARTSWITH":
		ok = strings.HasPrefix(v.s, n.search)
	default:
		ok = strings.HasSuffix(v.s, n.search)
	}
	return boolValue(ok != n.negd), nil
}
func (textMatch) boolean() bool { return true }
