package remoting

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestCodeNamesAsRocketMQLabelsThem(t *testing.T) {
	for code, want := range map[int32]string{
		SendMessage: "send_message", SendMessageV2: "send_message_v2", PullMessage: "pull_message",
		PopMessage: "pop_message", HeartBeat: "heart_beat", Notification: "notification",
		UpdateAndCreateSubscriptionGroup: "update_and_create_subscriptiongroup",
		// Not RocketMQ's: the number.
		CheckpointIndex: "10001", -5: "-5",
		// The plain ACL's codes left RequestCode in 5.3.
		UpdateAndCreateACLConfig: "50",
	} {
		if got := RequestCodeName(code); got != want {
			t.Errorf("RequestCodeName(%d) = %q, want %q", code, got, want)
		}
	}
	for code, want := range map[int32]string{
		Success: "success", SystemBusy: "system_busy", PullNotFound: "pull_not_found",
		PollingTimeout: "polling_timeout", RPCTimeOut: "rpc_time_out", 99999: "99999",
	} {
		if got := ResponseCodeName(code); got != want {
			t.Errorf("ResponseCodeName(%d) = %q, want %q", code, got, want)
		}
	}
}

// The name tables and codes.go were written from RocketMQ separately:
// every constant of codes.go whose comment gives its Java name has that
// name in the table of its kind, unless 5.3.3 no longer defines it.
func TestCodeNamesAgreeWithCodesGo(t *testing.T) {
	gone := map[string]bool{ // in codes.go for older peers, not in 5.3.3's classes
		"UPDATE_AND_CREATE_ACL_CONFIG": true, "DELETE_ACL_CONFIG": true, "GET_BROKER_CLUSTER_ACL_INFO": true,
		"UPDATE_GLOBAL_WHITE_ADDRS_CONFIG": true, "UPDATE_AND_CREATE_ACL_CONFIG_FAILED": true,
		"DELETE_ACL_CONFIG_FAILED": true, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED": true,
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "codes.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	javaName := regexp.MustCompile(`^[A-Z][A-Z0-9_]+`)
	checked := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		response := g.Doc != nil && strings.HasPrefix(g.Doc.Text(), "Response codes")
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if v.Comment == nil {
				continue
			}
			name := javaName.FindString(strings.TrimSpace(v.Comment.Text()))
			if name == "" || gone[name] {
				continue
			}
			code := literal(t, v)
			got := RequestCodeName(code)
			if response {
				got = ResponseCodeName(code)
			}
			if got != strings.ToLower(name) {
				t.Errorf("%s = %d: named %q, codes.go says %s", v.Names[0].Name, code, got, name)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("only %d constants checked: codes.go's layout changed?", checked)
	}
}

// literal returns the value of a constant declared with an integer
// literal, negative ones included.
func literal(t *testing.T, v *ast.ValueSpec) int32 {
	t.Helper()
	e, sign := v.Values[0], int64(1)
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		e, sign = u.X, -1
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		t.Fatalf("%s is not an integer literal", v.Names[0].Name)
	}
	n, err := strconv.ParseInt(lit.Value, 10, 32)
	if err != nil {
		t.Fatalf("%s: %v", v.Names[0].Name, err)
	}
	return int32(sign * n)
}
