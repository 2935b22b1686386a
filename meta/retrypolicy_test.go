package meta

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestGroupRetryPolicyJSON checks that a group's retry policy survives a
// trip through JSON as RocketMQ writes it, sub-policies included, and that
// fields a policy leaves out take RocketMQ's defaults.
func TestGroupRetryPolicyJSON(t *testing.T) {
	tests := []struct {
		name, in string
		want     GroupRetryPolicy
		out      string
	}{
		{
			name: "type only",
			in:   `{"type":"CUSTOMIZED"}`,
			want: GroupRetryPolicy{Type: "CUSTOMIZED"},
			out:  `{"type":"CUSTOMIZED"}`,
		},
		{
			name: "exponential given whole",
			in:   `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}`,
			want: GroupRetryPolicy{Type: "EXPONENTIAL", Exponential: &ExponentialRetryPolicy{Initial: 1000, Max: 60000, Multiplier: 3}},
			out:  `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}`,
		},
		{
			name: "exponential with only initial: max and multiplier are RocketMQ's",
			in:   `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000}}`,
			want: GroupRetryPolicy{Type: "EXPONENTIAL", Exponential: &ExponentialRetryPolicy{Initial: 1000, Max: 7200000, Multiplier: 2}},
			out:  `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":7200000,"multiplier":2}}`,
		},
		{
			name: "customized list, the other policy kept too",
			in:   `{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[100,200,300]},"exponentialRetryPolicy":{"initial":5000,"max":10000,"multiplier":2}}`,
			want: GroupRetryPolicy{Type: "CUSTOMIZED", Customized: &CustomizedRetryPolicy{Next: []int64{100, 200, 300}},
				Exponential: &ExponentialRetryPolicy{Initial: 5000, Max: 10000, Multiplier: 2}},
			out: `{"type":"CUSTOMIZED","exponentialRetryPolicy":{"initial":5000,"max":10000,"multiplier":2},"customizedRetryPolicy":{"next":[100,200,300]}}`,
		},
		{
			name: "customized without next: RocketMQ's levels",
			in:   `{"type":"CUSTOMIZED","customizedRetryPolicy":{}}`,
			want: GroupRetryPolicy{Type: "CUSTOMIZED", Customized: &CustomizedRetryPolicy{Next: DefaultCustomizedRetryPolicy().Next}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g SubscriptionGroupConfig
			if err := json.Unmarshal([]byte(`{"groupName":"G","groupRetryPolicy":`+tt.in+`}`), &g); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*g.GroupRetryPolicy, tt.want) {
				t.Fatalf("decoded %+v, want %+v", *g.GroupRetryPolicy, tt.want)
			}
			if tt.out == "" {
				return
			}
			raw, err := json.Marshal(g.GroupRetryPolicy)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tt.out {
				t.Fatalf("encoded %s, want %s", raw, tt.out)
			}
		})
	}
}

// TestSubscriptionDataSetKept checks that a group's subscriptionDataSet
// is kept through JSON and left out when there is none, as RocketMQ
// writes it.
func TestSubscriptionDataSetKept(t *testing.T) {
	in := `{"groupName":"G","subscriptionDataSet":[{"topic":"T","expressionType":"TAG","expression":"a || b","version":7}]}`
	var g SubscriptionGroupConfig
	if err := json.Unmarshal([]byte(in), &g); err != nil {
		t.Fatal(err)
	}
	want := []SimpleSubscriptionData{{Topic: "T", ExpressionType: "TAG", Expression: "a || b", Version: 7}}
	if !reflect.DeepEqual(g.SubscriptionDataSet, want) {
		t.Fatalf("subscriptionDataSet %+v, want %+v", g.SubscriptionDataSet, want)
	}
	raw, err := json.Marshal(NewSubscriptionGroupConfig("G"))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["subscriptionDataSet"]; ok {
		t.Fatalf("a group without subscriptions wrote subscriptionDataSet: %s", raw)
	}
}

// TestRetryPolicyNextDelay checks the pauses against RocketMQ's rules,
// worked out by hand: customized index reconsumeTimes+2 clamped to the
// last entry; exponential initial*multiplier^n capped at max; an
// EXPONENTIAL type without its policy uses the default levels.
func TestRetryPolicyNextDelay(t *testing.T) {
	exp := &GroupRetryPolicy{Type: "EXPONENTIAL", Exponential: &ExponentialRetryPolicy{Initial: 1000, Max: 10000, Multiplier: 3}}
	custom := &GroupRetryPolicy{Type: "CUSTOMIZED", Customized: &CustomizedRetryPolicy{Next: []int64{100, 200, 300, 400}}}
	tests := []struct {
		name   string
		policy *GroupRetryPolicy
		times  int
		want   time.Duration
	}{
		{"no policy, first retry: level 3", nil, 0, 10 * time.Second},
		{"no policy, fourth: level 6", nil, 3, 2 * time.Minute},
		{"no policy, past the levels: the last", nil, 100, 2 * time.Hour},
		{"no policy, negative times as 0", nil, -5, 10 * time.Second},
		{"exponential type without its policy: levels", &GroupRetryPolicy{Type: "EXPONENTIAL"}, 1, 30 * time.Second},
		{"exponential type in lower case", &GroupRetryPolicy{Type: "exponential", Exponential: exp.Exponential}, 1, 3 * time.Second},
		{"exponential n=0", exp, 0, time.Second},
		{"exponential n=2", exp, 2, 9 * time.Second},
		{"exponential capped at max", exp, 3, 10 * time.Second},
		{"exponential huge n capped", exp, math.MaxInt, 10 * time.Second},
		{"customized n=0: third entry", custom, 0, 300 * time.Millisecond},
		{"customized n=1: fourth", custom, 1, 400 * time.Millisecond},
		{"customized past the end: the last", custom, 7, 400 * time.Millisecond},
		{"customized huge n", custom, math.MaxInt, 400 * time.Millisecond},
		{"customized empty list: levels", &GroupRetryPolicy{Type: "CUSTOMIZED", Customized: &CustomizedRetryPolicy{Next: []int64{}}}, 0, 10 * time.Second},
		{"customized type, exponential given: levels", &GroupRetryPolicy{Type: "CUSTOMIZED", Exponential: exp.Exponential}, 0, 10 * time.Second},
		{"exponential past Duration's range", &GroupRetryPolicy{Type: "EXPONENTIAL", Exponential: &ExponentialRetryPolicy{Initial: 1 << 40, Max: math.MaxInt64, Multiplier: 1 << 20}}, 32,
			time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond},
	}
	for _, tt := range tests {
		if got := tt.policy.NextDelay(tt.times); got != tt.want {
			t.Errorf("%s: NextDelay(%d) = %v, want %v", tt.name, tt.times, got, tt.want)
		}
	}
	if !exp.IsExponential() || custom.IsExponential() || (*GroupRetryPolicy)(nil).IsExponential() {
		t.Error("IsExponential")
	}
}
