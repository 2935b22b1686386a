package broker

import (
	"fmt"
	"slices"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/filter"
	"github.com/rocketkv/rocketkv/kvindex"
)

// Expression types of a subscription.
const (
	exprTag   = "TAG"
	exprSQL92 = "SQL92"
	subAll    = "*"
)

// subscription is one consumer group's filter on one topic, from a
// heartbeat or from a pull request's own expression.
type subscription struct {
	Topic      string
	SubString  string
	ExprType   string
	SubVersion int64
	all        bool
	codes      map[int64]struct{}
	tags       map[string]struct{}
	// sql is the compiled selector of a SQL92 subscription; nil for TAG.
	sql *filter.Expr
	// broken is why a SQL92 subscription a heartbeat registered has no
	// selector (its expression does not compile): pulls by it are
	// refused with FILTER_DATA_NOT_EXIST, as RocketMQ's are.
	broken error
	// origin, set by forRetry, returns the SQL92 subscription that decides
	// a retry message in place of sql: the retry topic's group's
	// subscription to the message's original topic, or nil to take it.
	origin func(originTopic string) *subscription
}

// newSubscription builds a filter from an expression the way RocketMQ's
// FilterAPI.buildSubscriptionData does (filter.ParseTags): exactly "" or
// "*" matches everything; otherwise the tags separated by "||". An
// expression of separators alone ("||", "||||") is an error, FilterAPI's
// "subString split error"; one whose tags are all empty (" || ") takes
// no message. Tag codes are recomputed with
// Java's String.hashCode (clients' codeSet is ignored: the Go client
// hashes UTF-8 bytes instead). A SQL92 expression is compiled (package
// filter); whether the broker serves it (enablePropertyFilter) is for the
// caller to check. The type is spelled exactly TAG or SQL92 (or empty,
// TAG): RocketMQ's ExpressionType and FilterFactory compare it with
// equals, so "sql92" is an unknown type there too.
func newSubscription(topic, expr, exprType string, subVersion int64) (*subscription, error) {
	if exprType == "" {
		exprType = exprTag
	}
	s := &subscription{Topic: topic, SubString: expr, ExprType: exprType, SubVersion: subVersion}
	if exprType == exprSQL92 {
		sel, err := filter.Compile(expr)
		if err != nil {
			return nil, err
		}
		s.sql = sel
		return s, nil
	}
	if exprType != exprTag {
		return nil, fmt.Errorf("expression type %s is not supported by this broker (TAG and SQL92 are)", exprType)
	}
	tags, all, err := filter.ParseTags(expr)
	if err != nil {
		return nil, fmt.Errorf("TAG expression %q: %w", expr, err)
	}
	if all {
		s.all, s.SubString = true, subAll
		return s, nil
	}
	s.codes = map[int64]struct{}{}
	s.tags = map[string]struct{}{}
	for _, t := range tags {
		s.tags[t] = struct{}{}
		s.codes[commitlog.TagsCode(t)] = struct{}{}
	}
	return s, nil
}

// matchesCode is the index-level filter: a nil or "*" subscription takes
// everything; otherwise the entry's tag code must be one of the
// subscription's (messages without a tag, code 0, do not match a tag
// list).
func (s *subscription) matchesCode(code int64) bool {
	if s == nil || s.all || s.sql != nil {
		return true
	}
	_, ok := s.codes[code]
	return ok
}

// arrivalMatch is the check a request held with this subscription gets
// before a dispatch re-runs it (RocketMQ's isMatchedByConsumeQueue with
// the dispatched tagsCode, then isMatchedByCommitLog with the dispatched
// properties): a TAG subscription wakes only when one of the new entries
// carries one of its codes, and the re-run then checks the exact tag as
// always; a SQL92 one only when its selector takes one of the new
// entries' properties (or they cannot be read). Nil, waking on every
// dispatch, for no subscription and "*".
func (s *subscription) arrivalMatch() func(kvindex.Arrival) bool {
	switch {
	case s == nil || s.all:
		return nil
	case s.sql != nil:
		return func(a kvindex.Arrival) bool {
			taken := false
			known := a.EachProperties(func(props string) bool {
				taken = s.sqlTakes(props)
				return !taken
			})
			return taken || !known
		}
	}
	return func(a kvindex.Arrival) bool { return slices.ContainsFunc(a.Codes, s.matchesCode) }
}

// sqlTakes evaluates the subscription's SQL92 selector against a
// message's properties string; for a subscription made by forRetry, the
// selector of the message's original topic instead.
func (s *subscription) sqlTakes(props string) bool {
	sel := s.sql
	if s.origin != nil {
		// RocketMQ looks the original topic's filter data up by the
		// RETRY_TOPIC property and takes the message when there is none.
		// A message without the property (never a consumer's send-back
		// nor a revive) is taken too, where RocketMQ's lookup of a null
		// topic fails the pull.
		topic, _ := commitlog.LookupProperty(props, propRetryTopic)
		o := s.origin(topic)
		if o == nil || o.sql == nil {
			return true
		}
		sel = o.sql
	}
	return sel.Matches(func(name string) (string, bool) { return commitlog.LookupProperty(props, name) })
}

// forRetry returns a copy of s, a SQL92 subscription to a %RETRY% topic,
// that filters each message by the SQL92 subscription origin returns for
// the topic the message was first sent to (filterSupportRetry, RocketMQ's
// ExpressionForRetryMessageFilter); messages origin returns nil for are
// taken. Other subscriptions are returned as they are: RocketMQ's retry
// filter passes TAG subscriptions through to the tag-code check.
func (s *subscription) forRetry(origin func(originTopic string) *subscription) *subscription {
	if !s.isSQL92() {
		return s
	}
	c := *s
	c.origin = origin
	return &c
}

// matchesRecord checks the exact tag of a record whose code matched, so
// that two tags with the same hash do not leak into each other, or
// evaluates a SQL92 selector against the record's properties.
func (s *subscription) matchesRecord(rec []byte) bool {
	if s == nil || s.all {
		return true
	}
	m, err := commitlog.Decode(rec)
	if err != nil {
		return false
	}
	return s.matchesProperties(m.Properties)
}

// matchesProperties is matchesRecord for a message already decoded.
func (s *subscription) matchesProperties(props string) bool {
	if s == nil || s.all {
		return true
	}
	if s.sql != nil {
		return s.sqlTakes(props)
	}
	tag, _ := commitlog.LookupProperty(props, "TAGS")
	_, ok := s.tags[tag]
	return ok
}

// tagList returns the subscription's tags (for consumer connection info).
func (s *subscription) tagList() []string {
	out := make([]string, 0, len(s.tags))
	for t := range s.tags {
		out = append(out, t)
	}
	return out
}

// codeList returns the tag codes.
func (s *subscription) codeList() []int64 {
	out := make([]int64, 0, len(s.codes))
	for c := range s.codes {
		out = append(out, c)
	}
	return out
}

// isTagType reports whether an expression type names tag filtering: no
// type at all, or TAG, spelled so (RocketMQ's ExpressionType.isTagType).
func isTagType(exprType string) bool {
	return exprType == "" || exprType == exprTag
}

// isSQL92 reports whether the subscription filters by SQL92.
func (s *subscription) isSQL92() bool { return s != nil && s.ExprType == exprSQL92 }

// RocketMQ's remark for a subscription other than TAG on a broker without
// enablePropertyFilter (unsupportedFilter + the expression type), and
// the one for SQL92.
const (
	unsupportedFilter = "The broker does not support consumer to filter message by "
	sqlUnsupported    = unsupportedFilter + exprSQL92
)
