package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// sendSQLFixture stores six messages m0..m5 in SQL/0 with property a = i
// and b = 'x' for the even ones.
func sendSQLFixture(t *testing.T, b *testBroker, c *remoting.Client) {
	t.Helper()
	for i := 0; i < 6; i++ {
		props := fmt.Sprintf("a\x01%d\x02", i)
		if i%2 == 0 {
			props += "b\x01x\x02"
		}
		mustSend(t, c, "SQL", 0, fmt.Sprintf("m%d", i), props)
	}
	b.caughtUp()
}

func sqlPull(group, expr string) map[string]string {
	h := pullReq(group, "SQL", 0, 0, 0, 0, expr)
	h["expressionType"] = "SQL92"
	return h
}

func pulledBodies(t *testing.T, r *remoting.Command) string {
	t.Helper()
	var got []string
	for _, m := range decodeRecords(t, r.Body) {
		got = append(got, string(m.Body))
	}
	return strings.Join(got, " ")
}

// A pull whose own subscription is SQL92 gets the messages the selector
// matches, on a broker with enablePropertyFilter; the offsets it skips
// are passed (nextBeginOffset).
func TestSQL92Pull(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePropertyFilter": "true"})
	c := b.client(nil)
	sendSQLFixture(t, b, c)
	r := call(t, c, remoting.PullMessage, sqlPull("g", "a BETWEEN 1 AND 4 AND b = 'x'"), nil)
	if r.Code != remoting.Success || pulledBodies(t, r) != "m2 m4" || header(t, r, "nextBeginOffset") != 6 {
		t.Fatalf("SQL92 pull: %d %q, bodies %q, nextBeginOffset %s", r.Code, r.Remark, pulledBodies(t, r), r.ExtFields["nextBeginOffset"])
	}
	r = call(t, c, remoting.PullMessage, sqlPull("g", "b IS NULL OR a > 4"), nil)
	if r.Code != remoting.Success || pulledBodies(t, r) != "m1 m3 m5" {
		t.Fatalf("SQL92 pull (IS NULL): %d %q, bodies %q", r.Code, r.Remark, pulledBodies(t, r))
	}
	r = call(t, c, remoting.PullMessage, sqlPull("g", "a > 'x'"), nil)
	if r.Code != remoting.SubscriptionParseFailed {
		t.Fatalf("SQL92 pull with a bad expression: %d %q", r.Code, r.Remark)
	}
}

// A pull that posts its own expression is answered as RocketMQ 5.3.3's
// PullMessageProcessor answers it: an empty expression of a type other
// than TAG, or a TAG expression of "||" alone, is
// SUBSCRIPTION_PARSE_FAILED with its remark (here followed by the
// reason); any other expression
// of a type other than TAG is SYSTEM_ERROR on a broker without
// enablePropertyFilter, whether it compiles or not, since RocketMQ looks
// at the switch before the selector. (On a broker with the switch, a
// selector that does not compile is refused here where RocketMQ serves
// every message: see pull.)
func TestPullOwnExpressionRefusals(t *testing.T) {
	const parseFailed = "parse the consumer's subscription failed"
	on := startTestBroker(t, map[string]string{"enablePropertyFilter": "true"})
	off := startTestBroker(t, nil)
	sendSQLFixture(t, on, on.client(nil))
	sendSQLFixture(t, off, off.client(nil))
	for _, tc := range []struct {
		b        *testBroker
		exprType string
		expr     string
		code     int32
		remark   string
	}{
		{off, "SQL92", "a >", remoting.SystemError, sqlUnsupported},
		{off, "SQL92", "a > 'x'", remoting.SystemError, sqlUnsupported},
		{off, "SQL92", "a > 1", remoting.SystemError, sqlUnsupported},
		{off, "CLASS", "x", remoting.SystemError, unsupportedFilter + "CLASS"},
		{off, "SQL92", "", remoting.SubscriptionParseFailed, parseFailed},
		{off, "TAG", "||", remoting.SubscriptionParseFailed, parseFailed},
		{on, "SQL92", "a >", remoting.SubscriptionParseFailed, parseFailed},
		{on, "SQL92", "", remoting.SubscriptionParseFailed, parseFailed},
		{on, "TAG", "||", remoting.SubscriptionParseFailed, parseFailed},
		// Types are compared as RocketMQ compares them, with equals.
		{off, "sql92", "a > 1", remoting.SystemError, unsupportedFilter + "sql92"},
		{off, "tag", "a", remoting.SystemError, unsupportedFilter + "tag"},
		{on, "sql92", "a > 1", remoting.SubscriptionParseFailed, parseFailed},
	} {
		h := pullReq("g", "SQL", 0, 0, 0, 0, tc.expr)
		h["expressionType"] = tc.exprType
		r := call(t, tc.b.client(nil), remoting.PullMessage, h, nil)
		remark := r.Remark
		if tc.code == remoting.SubscriptionParseFailed {
			remark, _, _ = strings.Cut(remark, ": ")
		}
		if r.Code != tc.code || remark != tc.remark {
			t.Errorf("pull by %s %q (enablePropertyFilter %v): %d %q, want %d %q",
				tc.exprType, tc.expr, tc.b == on, r.Code, r.Remark, tc.code, tc.remark)
		}
	}
}

// A selector sees every property of the stored message, as RocketMQ's
// MessageEvaluationContext reads the stored properties string: the
// client's system properties (TAGS, KEYS, UNIQ_KEY) and those the broker
// adds when it stores a message (CLUSTER, a UNIQ_KEY the client left out);
// a property the message lacks is NULL.
func TestSQL92SeesStoredProperties(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePropertyFilter": "true"})
	c := b.client(nil)
	mustSend(t, c, "SQLP", 0, "m0", "TAGS\x01t1\x02KEYS\x01k1 k2\x02")
	mustSend(t, c, "SQLP", 0, "m1", "TAGS\x01t2\x02UNIQ_KEY\x01U1\x02")
	b.caughtUp()
	for _, tc := range []struct{ expr, want string }{
		{"TAGS = 't1'", "m0"},
		{"KEYS = 'k1 k2'", "m0"},
		{"UNIQ_KEY = 'U1'", "m1"},
		{"UNIQ_KEY IS NOT NULL", "m0 m1"},
		{"CLUSTER = '" + b.cfg.BrokerClusterName + "'", "m0 m1"},
		{"nope IS NULL", "m0 m1"},
		{"nope = 'x' OR nope <> 'x'", ""},
		{"TAGS IN ('t1', 't2') AND KEYS IS NOT NULL", "m0"},
	} {
		h := pullReq("g", "SQLP", 0, 0, 0, 0, tc.expr)
		h["expressionType"] = "SQL92"
		r := call(t, c, remoting.PullMessage, h, nil)
		got := ""
		if r.Code == remoting.Success {
			got = pulledBodies(t, r)
		} else if r.Code != remoting.PullNotFound && r.Code != remoting.PullRetryImmediately {
			t.Fatalf("pull by %q: %d %q", tc.expr, r.Code, r.Remark)
		}
		if got != tc.want {
			t.Errorf("pull by %q: %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// A push consumer's SQL92 subscription comes with its heartbeat; its
// pulls carry no expression. On a broker without enablePropertyFilter
// the pulls are refused as RocketMQ refuses them; an expression that
// does not compile is FILTER_DATA_NOT_EXIST.
func TestSQL92SubscriptionFromHeartbeat(t *testing.T) {
	heartbeatType := func(c *remoting.Client, group, exprType, expr string) {
		body := strings.Replace(string(heartbeatBody("cid-"+group, "", group, map[string]string{"SQL": expr})),
			`"expressionType":"TAG"`, `"expressionType":"`+exprType+`"`, 1)
		heartbeat(t, c, []byte(body))
	}
	heartbeatSQL := func(c *remoting.Client, group, expr string) { heartbeatType(c, group, "SQL92", expr) }
	headerless := func(group string) map[string]string {
		h := pullReq(group, "SQL", 0, 0, 0, 0, "")
		h["sysFlag"] = "0"
		delete(h, "subscription")
		return h
	}

	on := startTestBroker(t, map[string]string{"enablePropertyFilter": "true"})
	c := on.client(nil)
	sendSQLFixture(t, on, c)
	heartbeatSQL(c, "gs", "a >= 3")
	if r := call(t, c, remoting.PullMessage, headerless("gs"), nil); r.Code != remoting.Success || pulledBodies(t, r) != "m3 m4 m5" {
		t.Fatalf("pull by the heartbeat's SQL92 subscription: %d %q", r.Code, r.Remark)
	}
	heartbeatSQL(c, "gbad", "a >")
	if r := call(t, c, remoting.PullMessage, headerless("gbad"), nil); r.Code != remoting.FilterDataNotExist {
		t.Fatalf("pull by a SQL92 subscription that does not compile: %d %q", r.Code, r.Remark)
	}
	// A type RocketMQ's FilterFactory does not know (it compares with
	// equals, so "sql92" is one) keeps the subscription without filter
	// data too.
	for _, typ := range []string{"sql92", "CLASS"} {
		g := "g-" + typ
		heartbeatType(c, g, typ, "a >= 3")
		if r := call(t, c, remoting.PullMessage, headerless(g), nil); r.Code != remoting.FilterDataNotExist {
			t.Errorf("pull by a %s subscription: %d %q, want FILTER_DATA_NOT_EXIST", typ, r.Code, r.Remark)
		}
	}

	off := startTestBroker(t, nil)
	oc := off.client(nil)
	sendSQLFixture(t, off, oc)
	heartbeatSQL(oc, "gs", "a >= 3")
	for _, h := range []map[string]string{headerless("gs"), sqlPull("gs", "a >= 3")} {
		if r := call(t, oc, remoting.PullMessage, h, nil); r.Code != remoting.SystemError || r.Remark != sqlUnsupported {
			t.Fatalf("SQL92 pull without enablePropertyFilter: %d %q", r.Code, r.Remark)
		}
	}
}

// CHECK_CLIENT_CONFIG, as the Java push consumer sends it before it
// starts with a SQL92 subscription.
func TestCheckClientConfig(t *testing.T) {
	body := func(exprType, expr string) []byte {
		return []byte(`{"clientId":"c1","group":"g","subscriptionData":{"topic":"SQL","subString":"` + expr +
			`","expressionType":"` + exprType + `","subVersion":1,"tagsSet":[],"codeSet":[],"classFilterMode":false}}`)
	}
	on := startTestBroker(t, map[string]string{"enablePropertyFilter": "true"})
	off := startTestBroker(t, nil)
	for _, tc := range []struct {
		b        *testBroker
		exprType string
		expr     string
		code     int32
		remark   string
	}{
		{off, "TAG", "a || b", remoting.Success, ""},
		{off, "SQL92", "a > 1", remoting.SystemError, sqlUnsupported},
		{on, "SQL92", "a > 1", remoting.Success, ""},
		{on, "SQL92", "a > 'x'", remoting.SubscriptionParseFailed, "cannot be compared"},
		{on, "CLASS", "x", remoting.SubscriptionParseFailed, "not supported"},
		// RocketMQ's isTagType and FilterFactory compare the type with
		// equals: "tag" is not TAG, "sql92" no known filter.
		{off, "tag", "a", remoting.SystemError, unsupportedFilter + "tag"},
		{off, "sql92", "a > 1", remoting.SystemError, unsupportedFilter + "sql92"},
		{on, "sql92", "a > 1", remoting.SubscriptionParseFailed, "not supported"},
	} {
		r := call(t, tc.b.client(nil), remoting.CheckClientConfig, nil, body(tc.exprType, tc.expr))
		if r.Code != tc.code || !strings.Contains(r.Remark, tc.remark) {
			t.Errorf("%s %q (enablePropertyFilter %v): %d %q, want %d with %q",
				tc.exprType, tc.expr, tc.b == on, r.Code, r.Remark, tc.code, tc.remark)
		}
	}
	if r := call(t, off.client(nil), remoting.CheckClientConfig, nil, []byte("{")); r.Code != remoting.SystemError {
		t.Errorf("CHECK_CLIENT_CONFIG with a bad body: %d %q", r.Code, r.Remark)
	}
}

// POP filters by SQL92 too; RocketMQ's pop does not ask for
// enablePropertyFilter, so neither does this one.
func TestSQL92Pop(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendSQLFixture(t, b, rc)
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "SQL", QueueID: 0, MaxMsgNums: 32,
		InvisibleTime: time.Minute, Exp: "a < 2 OR a IN ('5')", ExpType: "SQL92"})
	if got := fmt.Sprint(bodies(res.Messages)); got != "[m0 m1 m5]" {
		t.Fatalf("SQL92 pop: %v", got)
	}
	bad, err := c.Pop(ctx20(t), popclient.PopRequest{Group: "g2", Topic: "SQL", QueueID: 0, MaxMsgNums: 32,
		InvisibleTime: time.Minute, Exp: "a IN (5)", ExpType: "SQL92"})
	if err != nil || bad.Code != remoting.SubscriptionParseFailed {
		t.Fatalf("SQL92 pop with a bad expression: %+v, %v", bad, err)
	}
}

// enablePropertyFilter can be turned on while the broker runs
// (UPDATE_BROKER_CONFIG): SQL92 pulls refused before are served after.
func TestEnablePropertyFilterAtRuntime(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	sendSQLFixture(t, b, c)
	if r := call(t, c, remoting.PullMessage, sqlPull("g", "a > 3"), nil); r.Code != remoting.SystemError {
		t.Fatalf("SQL92 pull before the update: %d %q", r.Code, r.Remark)
	}
	updateConfig(t, c, "enablePropertyFilter=true")
	if r := call(t, c, remoting.PullMessage, sqlPull("g", "a > 3"), nil); r.Code != remoting.Success || pulledBodies(t, r) != "m4 m5" {
		t.Fatalf("SQL92 pull after the update: %d %q", r.Code, r.Remark)
	}
}

// A pop reads the group's pop-retry topic with its filter too, as
// RocketMQ's PopMessageProcessor passes the pop's filter to the retry
// topic's queues: a revived message the group's expression (SQL92 or
// tags) no longer selects is skipped, not delivered.
func TestPopFiltersThePopRetryTopic(t *testing.T) {
	for _, tc := range []struct {
		name, expType, all, only string
		props                    [2]string
	}{
		{"SQL92", "SQL92", "a IS NOT NULL", "a = 2", [2]string{"a\x011\x02", "a\x012\x02"}},
		{"TAG", "TAG", "t1 || t2", "t2", [2]string{"TAGS\x01t1\x02", "TAGS\x01t2\x02"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startTestBroker(t, nil)
			c, rc := popClient(b)
			mustSend(t, rc, "PR", 0, "one", tc.props[0])
			mustSend(t, rc, "PR", 0, "two", tc.props[1])
			b.caughtUp()
			first := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PR", QueueID: -1, MaxMsgNums: 2,
				InvisibleTime: 100 * time.Millisecond, Exp: tc.all, ExpType: tc.expType})
			if got := fmt.Sprint(bodies(first.Messages)); got != "[one two]" {
				t.Fatalf("first pop with %q: %s", tc.all, got)
			}
			// The group now selects the second only: once both are
			// revived, the pop-retry topic gives it and never the first.
			var got []string
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !slices.Contains(got, "two"); {
				res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PR", QueueID: -1, MaxMsgNums: 2,
					InvisibleTime: time.Minute, PollTime: 500 * time.Millisecond, Exp: tc.only, ExpType: tc.expType})
				got = append(got, bodies(res.Messages)...)
			}
			if fmt.Sprint(got) != "[two]" {
				t.Fatalf("pops with %q after the revive: %v, want [two] (the revived message it selects, not the one it does not)", tc.only, got)
			}
		})
	}
}

// filterSupportRetry: a pull of a group's %RETRY% topic by a SQL92
// subscription filters each message by the group's SQL92 subscription to
// the topic named in its RETRY_TOPIC property, and takes the messages
// whose origin the group does not filter by SQL92 (or that name none), as
// RocketMQ's ExpressionForRetryMessageFilter; a TAG subscription to the
// retry topic is not affected, and the key changes at run time.
func TestFilterSupportRetry(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePropertyFilter": "true", "filterSupportRetry": "true"})
	c := b.client(nil)
	const retry = "%RETRY%gr"
	for i := 0; i < 6; i++ {
		mustSend(t, c, retry, 0, fmt.Sprintf("m%d", i), fmt.Sprintf("a\x01%d\x02RETRY_TOPIC\x01SQL\x02", i))
	}
	mustSend(t, c, retry, 0, "other", "a\x011\x02RETRY_TOPIC\x01Other\x02")
	mustSend(t, c, retry, 0, "none", "a\x011\x02")
	b.caughtUp()
	// The group filters SQL by "a >= 3", its retry topic by a selector
	// that takes nothing on its own, and Other by a tag.
	subs := map[string]string{"SQL": "a >= 3", retry: "a < 0", "Other": "t"}
	body := strings.ReplaceAll(string(heartbeatBody("cid-gr", "", "gr", subs)), `"expressionType":"TAG"`, `"expressionType":"SQL92"`)
	body = strings.Replace(body, `"topic":"Other","subString":"t","subVersion":42,"expressionType":"SQL92"`,
		`"topic":"Other","subString":"t","subVersion":42,"expressionType":"TAG"`, 1)
	heartbeat(t, c, []byte(body))
	headerless := func(group, topic string) map[string]string {
		h := pullReq(group, topic, 0, 0, 0, 0, "")
		h["sysFlag"] = "0"
		delete(h, "subscription")
		return h
	}
	pull := func(group, topic string) string {
		t.Helper()
		r := call(t, c, remoting.PullMessage, headerless(group, topic), nil)
		switch r.Code {
		case remoting.Success:
			return pulledBodies(t, r)
		case remoting.PullNotFound, remoting.PullRetryImmediately:
			return ""
		}
		t.Fatalf("pull of %s by %s: %d %q", topic, group, r.Code, r.Remark)
		return ""
	}
	if got := pull("gr", retry); got != "m3 m4 m5 other none" {
		t.Fatalf("retry pull with filterSupportRetry: %q, want the origin's filter (m3 m4 m5) and the unfiltered (other none)", got)
	}
	// A pull that posts its own SQL92 selector for the retry topic is
	// filtered by the origin's subscription as well.
	r := call(t, c, remoting.PullMessage, func() map[string]string {
		h := pullReq("gr", retry, 0, 0, 0, 0, "a < 0")
		h["expressionType"] = "SQL92"
		return h
	}(), nil)
	if r.Code != remoting.Success || pulledBodies(t, r) != "m3 m4 m5 other none" {
		t.Fatalf("retry pull by its own selector with filterSupportRetry: %d %q", r.Code, r.Remark)
	}
	// A TAG subscription to the retry topic (the Java and Go push
	// consumers' "*") is not affected.
	h := pullReq("gr", retry, 0, 0, 0, 0, "*")
	if r := call(t, c, remoting.PullMessage, h, nil); r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 8 {
		t.Fatalf("TAG * pull of the retry topic with filterSupportRetry: %d %q", r.Code, r.Remark)
	}

	// A pull held at the end of the retry topic sleeps through a message
	// the origin's filter rejects and is woken by one it takes.
	hold := headerless("gr", retry)
	hold["queueOffset"], hold["sysFlag"], hold["suspendTimeoutMillis"] = "8", strconv.Itoa(pullSuspend), "25000"
	done := b.holdPull(c, hold)
	mustSend(t, c, retry, 0, "rejected", "a\x010\x02RETRY_TOPIC\x01SQL\x02")
	b.caughtUp()
	stillHeld(t, b, done, "a retry message the origin's filter rejects")
	mustSend(t, c, retry, 0, "taken", "a\x017\x02RETRY_TOPIC\x01SQL\x02")
	if a := <-done; a.resp == nil || a.resp.Code != remoting.Success || pulledBodies(t, a.resp) != "taken" {
		t.Fatalf("held retry pull woken by a message the origin's filter takes: %+v", a)
	}

	updateConfig(t, c, "filterSupportRetry=false")
	if got := pull("gr", retry); got != "" {
		t.Fatalf("retry pull without filterSupportRetry: %q, want none (the retry subscription's own a < 0)", got)
	}
	updateConfig(t, c, "filterSupportRetry=true")
	if got := pull("gr", retry); got != "m3 m4 m5 other none taken" {
		t.Fatalf("retry pull with filterSupportRetry back on: %q", got)
	}
}
