package broker

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// A TAG subscription is parsed as RocketMQ's FilterAPI.buildSubscriptionData
// parses it: only exactly "" and "*" are SUB_ALL (before any trimming);
// String.split("\\|\\|") drops the empty strings at the end and, when
// nothing is left, FilterAPI throws "subString split error"; each tag is
// trimmed with String.trim, which strips the characters up to ' ' only,
// and empty tags are dropped. The tags and codes below are those Java
// computes.
func TestTagSubscriptionParsesLikeFilterAPI(t *testing.T) {
	for _, tc := range []struct {
		expr string
		all  bool
		err  bool
		tags map[string]int64 // tag: Java's String.hashCode
	}{
		{expr: "", all: true},
		{expr: "*", all: true},
		{expr: " *", tags: map[string]int64{"*": 42}}, // the literal tag "*"
		{expr: "* ", tags: map[string]int64{"*": 42}},
		{expr: "||", err: true},
		{expr: "||||", err: true},
		{expr: "|||", tags: map[string]int64{"|": 124}},
		{expr: "a||", tags: map[string]int64{"a": 97}},
		{expr: "||a", tags: map[string]int64{"a": 97}},
		{expr: "a|| ||b", tags: map[string]int64{"a": 97, "b": 98}},
		{expr: "a|||b", tags: map[string]int64{"a": 97, "|b": 3942}},
		{expr: "a|b", tags: map[string]int64{"a|b": 97159}},
		{expr: " || ", tags: map[string]int64{}}, // no tag, no error: takes nothing
		{expr: " ", tags: map[string]int64{}},
		{expr: "\t", tags: map[string]int64{}},
		{expr: "\x00a\x1f", tags: map[string]int64{"a": 97}},
		{expr: "TagA\u3000", tags: map[string]int64{"TagA\u3000": 80578777}}, // U+3000 is above ' '
		{expr: "\u00a0TagA", tags: map[string]int64{"\u00a0TagA": 150362279}},
		{expr: "\u0085a", tags: map[string]int64{"\u0085a": 4220}},
	} {
		s, err := newSubscription("T", tc.expr, exprTag, 0)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "subString split error") {
				t.Errorf("newSubscription(%q) = %+v, %v; want FilterAPI's subString split error", tc.expr, s, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("newSubscription(%q): %v", tc.expr, err)
			continue
		}
		if s.all != tc.all {
			t.Errorf("newSubscription(%q).all = %v, want %v", tc.expr, s.all, tc.all)
		}
		if tc.all {
			continue
		}
		codes := map[int64]struct{}{}
		for tag, code := range tc.tags {
			codes[code] = struct{}{}
			if got := commitlog.TagsCode(tag); got != code {
				t.Errorf("TagsCode(%q) = %d, Java's hashCode is %d", tag, got, code)
			}
		}
		if !slices.Equal(slices.Sorted(maps.Keys(s.tags)), slices.Sorted(maps.Keys(tc.tags))) || !maps.Equal(s.codes, codes) {
			t.Errorf("newSubscription(%q): tags %q codes %v, want %q %v", tc.expr, s.tagList(), s.codeList(), slices.Sorted(maps.Keys(tc.tags)), codes)
		}
		if s.SubString != tc.expr {
			t.Errorf("newSubscription(%q).SubString = %q, want the expression as given", tc.expr, s.SubString)
		}
	}
	// A subscription without tags takes no message at all.
	s, err := newSubscription("T", " || ", exprTag, 0)
	if err != nil || s.matchesCode(commitlog.TagsCode("a")) || s.matchesCode(0) || s.matchesProperties("TAGS\x01a\x02") {
		t.Errorf(`newSubscription(" || ") takes messages (%v)`, err)
	}
}

// A TAG expression FilterAPI refuses is a pull's or a POP's
// SUBSCRIPTION_PARSE_FAILED, as a SQL92 expression that does not compile
// is; " *" takes the messages tagged "*" only, " || " none.
func TestTagSubscriptionErrorsReachTheClient(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "TagSub", 0, "star", "TAGS\x01*\x02")
	mustSend(t, c, "TagSub", 0, "a", "TAGS\x01a\x02")
	mustSend(t, c, "TagSub", 0, "none", "")
	b.caughtUp()
	pull := func(sub string) *remoting.Command {
		return call(t, c, remoting.PullMessage, pullReq("g", "TagSub", 0, 0, 0, 0, sub), nil)
	}
	if r := pull("||"); r.Code != remoting.SubscriptionParseFailed || !strings.Contains(r.Remark, "subString split error") {
		t.Errorf(`pull with "||": %d %q, want SUBSCRIPTION_PARSE_FAILED with FilterAPI's error`, r.Code, r.Remark)
	}
	pop := call(t, c, remoting.PopMessage, map[string]string{"consumerGroup": "g", "topic": "TagSub", "queueId": "0",
		"maxMsgNums": "1", "invisibleTime": "60000", "pollTime": "0", "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"initMode": "0", "exp": "||", "expType": "TAG"}, nil)
	if pop.Code != remoting.SubscriptionParseFailed {
		t.Errorf(`pop with "||": %d %q, want SUBSCRIPTION_PARSE_FAILED`, pop.Code, pop.Remark)
	}
	if r := pull(" *"); r.Code != remoting.Success || pulledBodies(t, r) != "star" {
		t.Errorf(`pull with " *": %d %q, bodies %q; want the message tagged "*" only`, r.Code, r.Remark, pulledBodies(t, r))
	}
	if r := pull(" || "); r.Code == remoting.SubscriptionParseFailed || len(decodeRecords(t, r.Body)) != 0 {
		t.Errorf(`pull with " || ": %d %q, bodies %q; want no message`, r.Code, r.Remark, pulledBodies(t, r))
	}
}
