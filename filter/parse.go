package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Expr is a compiled selector.
type Expr struct {
	src  string
	root node
}

// String returns the selector's source text.
func (e *Expr) String() string { return e.src }

// Matches reports whether a message with these properties is selected:
// the expression evaluates to TRUE. Null and failed evaluations do not
// match.
func (e *Expr) Matches(p Properties) bool {
	v, err := e.root.eval(p)
	return err == nil && v.k == kBool && v.b
}

// SyntaxError is why Compile refused an expression.
type SyntaxError struct {
	Expr string
	Msg  string
}

// Error names the expression and what is wrong with it.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("SQL92 expression %q: %s", e.Expr, e.Msg)
}

// Limits that keep a hostile expression from exhausting the broker's
// stack (Go cannot recover from a stack overflow; RocketMQ's parser
// catches its StackOverflowError): its length, and how deeply
// parentheses, signs and NOTs nest. Both sit above what RocketMQ's parser
// takes in practice: it has no length limit (a generated IN list of
// 12,000 ids is 85 KB) and parses some 800 to 1,000 nested parentheses
// on a 1 MiB thread stack, failing somewhere below 2,000 (it takes far
// longer runs of NOTs or signs, which nobody writes). An AND chain is as
// deep as it is long, so the length bounds the depth of evaluation too.
const (
	maxLength  = 256 << 10
	maxNesting = 1024
)

// Compile parses a SQL92 selector. It returns a *SyntaxError for an
// expression RocketMQ's parser refuses, or one beyond maxLength bytes or
// nested deeper than RocketMQ's users write. As in RocketMQ, parsing
// stops where the expression can no longer continue, and whatever text
// follows is ignored as long as its first token is one ("a = 1 b" is
// "a = 1"); a NOT there continues it, and must begin NOT CONTAINS, NOT
// BETWEEN and the like.
func Compile(src string) (*Expr, error) {
	if len(src) > maxLength {
		return nil, &SyntaxError{Expr: src[:64] + "...", Msg: fmt.Sprintf("longer than %d bytes", maxLength)}
	}
	p := &parser{toks: lex(src)}
	root, err := p.selector()
	if err != nil {
		return nil, &SyntaxError{Expr: src, Msg: err.Error()}
	}
	return &Expr{src: src, root: root}, nil
}

// parser is a recursive-descent parser over the tokens, one method per
// grammar rule of the package documentation.
type parser struct {
	toks  []token
	i     int
	depth int // parentheses, signs and NOTs open
}

// enter counts one more level of nesting; leave undoes it.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return fmt.Errorf("nested deeper than %d levels", maxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) peek() token { return p.toks[p.i] }

// peek2 returns the token after the next.
func (p *parser) peek2() token { return p.toks[min(p.i+1, len(p.toks)-1)] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF && t.kind != tokErr {
		p.i++
	}
	return t
}

// isOp reports whether the next token is the operator op.
func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == op
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return fmt.Errorf("expected %q, found %s", op, p.peek())
	}
	p.next()
	return nil
}

func (p *parser) selector() (node, error) {
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	// The token after the expression must be one (RocketMQ's parser has
	// read it to see that the expression ends); what follows is ignored.
	if t := p.peek(); t.kind == tokErr {
		return nil, fmt.Errorf("%s", t.text)
	}
	return asBoolean(n)
}

// asBoolean makes n an operand of a logical operator: a boolean
// expression as it is, a property cast, anything else refused.
func asBoolean(n node) (node, error) {
	if n.boolean() {
		return n, nil
	}
	if pr, ok := n.(property); ok {
		return boolCast{pr}, nil
	}
	return nil, fmt.Errorf("expression will not result in a boolean value: %s", describe(n))
}

func (p *parser) or() (node, error) {
	return p.logicChain(tokOr, p.and)
}

func (p *parser) and() (node, error) {
	return p.logicChain(tokAnd, p.equality)
}

// logicChain parses operand { kw operand } into left-nested AND or OR.
func (p *parser) logicChain(kw tokenKind, operand func() (node, error)) (node, error) {
	left, err := operand()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == kw {
		p.next()
		right, err := operand()
		if err != nil {
			return nil, err
		}
		l, err := asBoolean(left)
		if err != nil {
			return nil, err
		}
		r, err := asBoolean(right)
		if err != nil {
			return nil, err
		}
		left = logic{and: kw == tokAnd, l: l, r: r}
	}
	return left, nil
}

func (p *parser) equality() (node, error) {
	left, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isOp("=") || p.isOp("<>"):
			neq := p.next().text == "<>"
			right, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if err := checkEqualOperands(left, right); err != nil {
				return nil, err
			}
			left = equal{l: left, r: right}
			if neq {
				left = not{left}
			}
		case p.peek().kind == tokIs:
			p.next()
			negd := p.peek().kind == tokNot
			if negd {
				p.next()
			}
			if t := p.next(); t.kind != tokNull {
				return nil, fmt.Errorf("expected NULL after IS, found %s", t)
			}
			left = equal{l: left, r: constant{null}}
			if negd {
				left = not{left}
			}
		default:
			return left, nil
		}
	}
}

// checkEqualOperands refuses a NULL literal on either side of "=" (IS
// NULL is the test for it) and a boolean literal compared with a literal
// of another type.
func checkEqualOperands(l, r node) error {
	for _, n := range []node{l, r} {
		if c, ok := n.(constant); ok && c.v.k == kNull {
			return fmt.Errorf("'NULL' cannot be compared")
		}
	}
	lc, lok := l.(constant)
	rc, rok := r.(constant)
	if lok && rok && lc.v.k == kBool && rc.v.k != kBool {
		return fmt.Errorf("'%s' cannot be compared with '%s'", lc.v, rc.v)
	}
	return nil
}

func (p *parser) comparison() (node, error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		negd := false
		if t.kind == tokNot {
			// RocketMQ's parser takes a NOT after an operand as the start
			// of NOT CONTAINS and the like, and refuses the expression if
			// it is not one: "a = 1 NOT b = 2" is not "a = 1".
			switch after := p.peek2(); after.kind {
			case tokContains, tokStartsWith, tokEndsWith, tokBetween, tokIn:
				p.next()
				negd, t = true, p.peek()
			default:
				return nil, fmt.Errorf("expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT at %d, found %s", t.pos, after)
			}
		}
		switch {
		case t.kind == tokOp && (t.text == ">" || t.text == ">=" || t.text == "<" || t.text == "<="):
			p.next()
			right, err := p.unary()
			if err != nil {
				return nil, err
			}
			if left, err = newOrder(t.text, left, right); err != nil {
				return nil, err
			}
		case t.kind == tokContains || t.kind == tokStartsWith || t.kind == tokEndsWith:
			p.next()
			s := p.next()
			if s.kind != tokString {
				return nil, fmt.Errorf("expected a string after %s, found %s", strings.ToUpper(t.text), s)
			}
			left = textMatch{op: strings.ToUpper(t.text), x: left, search: s.text, negd: negd}
		case t.kind == tokBetween:
			p.next()
			if left, err = p.between(left, negd); err != nil {
				return nil, err
			}
		case t.kind == tokIn:
			p.next()
			if left, err = p.in(left, negd); err != nil {
				return nil, err
			}
		default:
			return left, nil
		}
	}
}

// newOrder builds ">", ">=", "<" or "<=", refusing literal operands that
// are not numbers and boolean expressions.
func newOrder(op string, l, r node) (node, error) {
	for _, n := range []node{l, r} {
		if c, ok := n.(constant); ok && !c.v.isNumber() || n.boolean() {
			return nil, fmt.Errorf("value %s cannot be compared with %s", describe(n), op)
		}
	}
	return order{op: op, l: l, r: r}, nil
}

// between parses "low AND high" after [NOT] BETWEEN.
func (p *parser) between(x node, negd bool) (node, error) {
	low, err := p.unary()
	if err != nil {
		return nil, err
	}
	if t := p.next(); t.kind != tokAnd {
		return nil, fmt.Errorf("expected AND in BETWEEN, found %s", t)
	}
	high, err := p.unary()
	if err != nil {
		return nil, err
	}
	// x >= low AND x <= high; NOT: x < low OR x > high.
	lowOp, highOp := ">=", "<="
	if negd {
		lowOp, highOp = "<", ">"
	} else if err := checkBetweenBounds(low, high); err != nil {
		return nil, err
	}
	lo, err := newOrder(lowOp, x, low)
	if err != nil {
		return nil, err
	}
	hi, err := newOrder(highOp, x, high)
	if err != nil {
		return nil, err
	}
	return logic{and: !negd, l: lo, r: hi}, nil
}

// checkBetweenBounds refuses literal bounds of BETWEEN that are NULL or
// in the wrong order (RocketMQ checks only BETWEEN, not NOT BETWEEN).
func checkBetweenBounds(low, high node) error {
	lc, lok := low.(constant)
	hc, hok := high.(constant)
	if !lok || !hok {
		return nil
	}
	if lc.v.k == kNull || hc.v.k == kNull {
		return fmt.Errorf("illegal values of between, values can not be null")
	}
	if c, err := compare(hc.v, lc.v); err == nil && c < 0 {
		return fmt.Errorf("illegal values of between, left value(%s) must less than or equal to right value(%s)", lc.v, hc.v)
	}
	return nil
}

// in parses the string list after [NOT] IN.
func (p *parser) in(x node, negd bool) (node, error) {
	pr, ok := x.(property)
	if !ok {
		return nil, fmt.Errorf("expected a property for IN, got %s", describe(x))
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	set := map[string]struct{}{}
	for {
		s := p.next()
		if s.kind != tokString {
			return nil, fmt.Errorf("expected a string in the IN list, found %s", s)
		}
		set[s.text] = struct{}{}
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return in{x: pr, set: set, negd: negd}, nil
}

func (p *parser) unary() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.peek()
	switch {
	case t.kind == tokOp && t.text == "+":
		p.next()
		return p.unary()
	case t.kind == tokOp && t.text == "-":
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return negate{x}, nil
	case t.kind == tokNot:
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		b, err := asBoolean(x)
		if err != nil {
			return nil, err
		}
		return not{b}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tokString:
		return constant{value{k: kString, s: t.text}}, nil
	case tokInteger:
		return integerLiteral(t)
	case tokFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("float %s is out of range", t)
		}
		return constant{value{k: kDouble, f: f}}, nil
	case tokTrue:
		return constant{trueValue}, nil
	case tokFalse:
		return constant{falseVal}, nil
	case tokNull:
		return constant{null}, nil
	case tokIdent:
		return property{t.text}, nil
	case tokOp:
		if t.text == "(" {
			n, err := p.or()
			if err != nil {
				return nil, err
			}
			return n, p.expectOp(")")
		}
	}
	return nil, fmt.Errorf("unexpected %s", t)
}

// integerLiteral is an Integer when it fits in 32 bits, else a Long.
func integerLiteral(t token) (node, error) {
	n, err := strconv.ParseInt(strings.TrimRight(t.text, "lL"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("integer %s is out of range", t)
	}
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return constant{value{k: kInt, i: n}}, nil
	}
	return constant{value{k: kLong, i: n}}, nil
}

// describe names a node in an error.
func describe(n node) string {
	switch n := n.(type) {
	case constant:
		return n.v.String()
	case property:
		return n.name
	}
	return "an expression"
}
