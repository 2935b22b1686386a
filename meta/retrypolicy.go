package meta

import (
	"encoding/json"
	"math"
	"strings"
	"time"
)

// Retry policy types (RocketMQ's GroupRetryPolicyType).
const (
	RetryPolicyCustomized  = "CUSTOMIZED"
	RetryPolicyExponential = "EXPONENTIAL"
)

// GroupRetryPolicy is RocketMQ's retry policy of a group: the pauses before
// each new delivery of a message the group's consumers failed. RocketMQ 5's
// proxy tells gRPC consumers these pauses (they apply them when they nack)
// and applies them itself to a message whose automatic renewal ran out.
// Type picks one of the two policies; the one picked may be absent, and
// RocketMQ's default of its kind then applies.
//
// JSON as RocketMQ writes it in subscriptionGroup.json, where the absent
// policies are left out:
//
//	{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}}
//	{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}}
type GroupRetryPolicy struct {
	Type        string                  `json:"type"`
	Exponential *ExponentialRetryPolicy `json:"exponentialRetryPolicy,omitempty"`
	Customized  *CustomizedRetryPolicy  `json:"customizedRetryPolicy,omitempty"`
}

// ExponentialRetryPolicy is RocketMQ's ExponentialRetryPolicy: the n-th
// retry (n from 0) waits Initial * Multiplier^n ms, at most Max ms.
type ExponentialRetryPolicy struct {
	Initial    int64 `json:"initial"`
	Max        int64 `json:"max"`
	Multiplier int64 `json:"multiplier"`
}

// CustomizedRetryPolicy is RocketMQ's CustomizedRetryPolicy: a list of
// pauses in ms. The n-th retry (n from 0) waits Next[n+2], the last entry
// once n+2 is past the end: the offset is RocketMQ's, which kept the
// index its delay levels had (a first retry waited level 3, 10 s).
type CustomizedRetryPolicy struct {
	Next []int64 `json:"next"`
}

// UnmarshalJSON fills the fields the JSON leaves out with RocketMQ's
// defaults, as its JSON reader does (it starts from a default policy).
func (e *ExponentialRetryPolicy) UnmarshalJSON(b []byte) error {
	type plain ExponentialRetryPolicy
	v := plain(DefaultExponentialRetryPolicy())
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = ExponentialRetryPolicy(v)
	return nil
}

// UnmarshalJSON keeps RocketMQ's default pauses when the JSON has no
// "next" (its JSON reader starts from a default policy).
func (c *CustomizedRetryPolicy) UnmarshalJSON(b []byte) error {
	type plain CustomizedRetryPolicy
	var v plain
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Next == nil {
		v.Next = DefaultCustomizedRetryPolicy().Next
	}
	*c = CustomizedRetryPolicy(v)
	return nil
}

// DefaultExponentialRetryPolicy is RocketMQ's ExponentialRetryPolicy
// without settings: 5 s, doubling, up to 2 h.
func DefaultExponentialRetryPolicy() ExponentialRetryPolicy {
	return ExponentialRetryPolicy{Initial: 5000, Max: 2 * 3600 * 1000, Multiplier: 2}
}

// DefaultCustomizedRetryPolicy is RocketMQ's CustomizedRetryPolicy
// without settings: its list is RocketMQ's delay levels
// (DefaultMessageDelayLevel), 1 s to 2 h.
func DefaultCustomizedRetryPolicy() CustomizedRetryPolicy {
	levels, _ := ParseDelayLevels(DefaultMessageDelayLevel) // a constant that parses (TestParseDelayLevels)
	next := make([]int64, len(levels))
	for i, d := range levels {
		next[i] = d.Milliseconds()
	}
	return CustomizedRetryPolicy{Next: next}
}

// IsExponential reports whether the policy's type is EXPONENTIAL (in any
// letter case); any other type, or no policy, is CUSTOMIZED.
func (p *GroupRetryPolicy) IsExponential() bool {
	return p != nil && strings.EqualFold(p.Type, RetryPolicyExponential)
}

// NextDelay is the pause before the next delivery of a message delivered
// reconsumeTimes times before, by RocketMQ's GroupRetryPolicy.getRetryPolicy:
// the exponential policy when the type is EXPONENTIAL and one is given,
// else the customized one given, else the default customized one (so an
// EXPONENTIAL type without its policy falls back to the delay levels, as
// in RocketMQ).
func (p *GroupRetryPolicy) NextDelay(reconsumeTimes int) time.Duration {
	if p != nil && p.IsExponential() && p.Exponential != nil {
		return p.Exponential.NextDelay(reconsumeTimes)
	}
	if p != nil && !p.IsExponential() && p.Customized != nil && len(p.Customized.Next) > 0 {
		return p.Customized.NextDelay(reconsumeTimes)
	}
	d := DefaultCustomizedRetryPolicy()
	return d.NextDelay(reconsumeTimes)
}

// NextDelay is min(Max, Initial * Multiplier^n) ms with n clamped to
// [0, 32], as RocketMQ computes it (a product past int64 ends at Max).
func (e ExponentialRetryPolicy) NextDelay(reconsumeTimes int) time.Duration {
	n := min(max(reconsumeTimes, 0), 32)
	ms := float64(e.Initial) * math.Pow(float64(e.Multiplier), float64(n))
	if ms > float64(e.Max) {
		ms = float64(e.Max)
	}
	if ms < 0 || math.IsNaN(ms) {
		ms = 0
	}
	return msDuration(ms)
}

// maxDelayMs is the longest pause a time.Duration holds, in ms.
const maxDelayMs = math.MaxInt64 / int64(time.Millisecond)

// msDuration converts ms to a Duration, the longest one past its range.
func msDuration(ms float64) time.Duration {
	if ms >= float64(maxDelayMs) {
		return time.Duration(maxDelayMs) * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}

// Millis converts a pause of a policy, in ms, to a Duration: negative
// ones are 0 and those past a Duration's range its longest.
func Millis(ms int64) time.Duration { return msDuration(float64(max(ms, 0))) }

// NextDelay is Next[min(n+2, len-1)] ms (n clamped at 0); 0 for an empty
// list.
func (c CustomizedRetryPolicy) NextDelay(reconsumeTimes int) time.Duration {
	if len(c.Next) == 0 {
		return 0
	}
	i := min(min(max(reconsumeTimes, 0), len(c.Next))+2, len(c.Next)-1)
	return Millis(c.Next[i])
}
