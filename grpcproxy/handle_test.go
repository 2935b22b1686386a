package grpcproxy

import (
	"errors"
	"math"
	"testing"

	"github.com/rocketkv/rocketkv/pop"
)

// TestParseHandleExample checks that the nine-field example of Handle's
// doc comment decodes to exactly the fields it names, in RocketMQ proxy's
// order.
func TestParseHandleExample(t *testing.T) {
	const s = "5 1700000000000 60000 0 0 broker-a 3 7 4096"
	got, err := ParseHandle(s)
	if err != nil {
		t.Fatalf("ParseHandle(%q): %v", s, err)
	}
	want := Handle{
		Handle: pop.Handle{
			CKOffset: 5, PopTime: 1700000000000, InvisibleTime: 60000, ReviveQID: 0,
			RetryFlag: "0", BrokerName: "broker-a", QueueID: 3, QueueOffset: 7,
		},
		CommitLogOffset: 4096,
	}
	if got != want {
		t.Fatalf("ParseHandle(%q) = %+v, want %+v", s, got, want)
	}
	if got.String() != s {
		t.Fatalf("String() of the parsed handle = %q, want the input %q", got.String(), s)
	}
}

// TestHandleStringRoundTrip checks that ParseHandle(h.String()) gives back
// h for handles the proxy writes: normal and retry pops, zero offsets,
// the largest values and broker names with punctuation.
func TestHandleStringRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    Handle
	}{
		{"normal pop", Handle{Handle: pop.Handle{CKOffset: 12, PopTime: 1712345678901, InvisibleTime: 30000, ReviveQID: 2,
			RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: 1, QueueOffset: 14}, CommitLogOffset: 987654}},
		{"retry v1 pop", Handle{Handle: pop.Handle{CKOffset: 0, PopTime: 1, InvisibleTime: 1000, ReviveQID: 7,
			RetryFlag: pop.FlagRetryV1, BrokerName: "b", QueueID: 0, QueueOffset: 0}, CommitLogOffset: 0}},
		{"retry v2 pop", Handle{Handle: pop.Handle{CKOffset: 3, PopTime: 2, InvisibleTime: 3, ReviveQID: 0,
			RetryFlag: pop.FlagRetryV2, BrokerName: "broker_b-1.example", QueueID: 9, QueueOffset: 3}, CommitLogOffset: 1 << 40}},
		{"orderly pop", Handle{Handle: pop.Handle{CKOffset: 4, PopTime: 5, InvisibleTime: 6, ReviveQID: pop.OrderReviveQueue,
			RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: 2, QueueOffset: 4}, CommitLogOffset: 77}},
		{"largest values", Handle{Handle: pop.Handle{CKOffset: math.MaxInt64, PopTime: math.MaxInt64, InvisibleTime: math.MaxInt64,
			ReviveQID: math.MaxInt32, RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: math.MaxInt32,
			QueueOffset: math.MaxInt64}, CommitLogOffset: math.MaxInt64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.h.String()
			got, err := ParseHandle(s)
			if err != nil {
				t.Fatalf("ParseHandle(%q) of %+v: %v", s, tc.h, err)
			}
			if got != tc.h {
				t.Fatalf("ParseHandle(%q) = %+v, want %+v", s, got, tc.h)
			}
		})
	}
}

// TestParseHandleRejectsMalformed checks that text the proxy did not
// write is refused with an error wrapping ErrBadHandle: a wrong number of
// fields, a non-number where a number belongs, negative positions and no
// broker name.
func TestParseHandleRejectsMalformed(t *testing.T) {
	tests := []struct {
		name, s string
	}{
		{"empty", ""},
		{"one field", "4096"},
		{"eight fields (a bare pop handle)", "5 1700000000000 60000 0 0 broker-a 3 7"},
		{"ten fields", "5 1700000000000 60000 0 0 broker-a 3 7 4096 1"},
		{"trailing space", "5 1700000000000 60000 0 0 broker-a 3 7 4096 "},
		{"leading space", " 5 1700000000000 60000 0 0 broker-a 3 7 4096"},
		{"tabs between fields", "5\t1700000000000\t60000\t0\t0\tbroker-a\t3\t7\t4096"},
		{"non-numeric commitlog offset", "5 1700000000000 60000 0 0 broker-a 3 7 x4096"},
		{"negative commitlog offset", "5 1700000000000 60000 0 0 broker-a 3 7 -1"},
		{"commitlog offset beyond int64", "5 1700000000000 60000 0 0 broker-a 3 7 9223372036854775808"},
		{"non-numeric ck offset", "five 1700000000000 60000 0 0 broker-a 3 7 4096"},
		{"non-numeric pop time", "5 now 60000 0 0 broker-a 3 7 4096"},
		{"non-numeric invisible time", "5 1700000000000 1m 0 0 broker-a 3 7 4096"},
		{"non-numeric revive queue", "5 1700000000000 60000 q 0 broker-a 3 7 4096"},
		{"revive queue beyond int32", "5 1700000000000 60000 2147483648 0 broker-a 3 7 4096"},
		{"empty broker", "5 1700000000000 60000 0 0  3 7 4096"},
		{"non-numeric queue id", "5 1700000000000 60000 0 0 broker-a three 7 4096"},
		{"queue id beyond int32", "5 1700000000000 60000 0 0 broker-a 2147483648 7 4096"},
		{"negative queue id", "5 1700000000000 60000 0 0 broker-a -1 7 4096"},
		{"non-numeric queue offset", "5 1700000000000 60000 0 0 broker-a 3 seven 4096"},
		{"negative queue offset", "5 1700000000000 60000 0 0 broker-a 3 -7 4096"},
		{"empty queue offset", "5 1700000000000 60000 0 0 broker-a 3  4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHandle(tc.s)
			if err == nil {
				t.Fatalf("ParseHandle(%q) = %+v, want an error", tc.s, h)
			}
			if !errors.Is(err, ErrBadHandle) {
				t.Fatalf("ParseHandle(%q) error %v does not wrap ErrBadHandle", tc.s, err)
			}
		})
	}
}
