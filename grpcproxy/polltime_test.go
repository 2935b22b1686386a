package grpcproxy

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// A receive polls what it asks for; one that asks nothing polls, as
// RocketMQ's proxy, the time left before its deadline less half the
// client's request timeout (the Go simple consumer's case: its await
// duration of 5 s plus its 3 s request timeout give 6.5 s, where polling
// to the deadline answered too late for it); always within the bounds
// and ending pollReserve before the deadline.
func TestPollTime(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinLongPolling, cfg.MaxLongPolling = 5*time.Second, 20*time.Second
	s := &Server{cfg: cfg}
	for _, tc := range []struct {
		name        string
		asked       *durationpb.Duration
		left        time.Duration
		hasDeadline bool
		client      time.Duration
		want        time.Duration
		refused     bool
	}{
		{"Go simple consumer", nil, 8 * time.Second, true, 3 * time.Second, 6500 * time.Millisecond, false},
		{"asked, within the deadline", durationpb.New(10 * time.Second), 30 * time.Second, true, 3 * time.Second, 10 * time.Second, false},
		{"asked, past the deadline", durationpb.New(10 * time.Second), 8 * time.Second, true, 3 * time.Second, 8*time.Second - pollReserve, false},
		{"asked too little", durationpb.New(time.Second), 30 * time.Second, true, 3 * time.Second, 5 * time.Second, false},
		{"nothing asked, no deadline", nil, 0, false, 3 * time.Second, 20 * time.Second, false},
		{"nothing asked, far deadline", nil, time.Minute, true, 3 * time.Second, 20 * time.Second, false},
		{"deadline too near", nil, 4 * time.Second, true, 3 * time.Second, 0, true},
	} {
		got, err := s.pollTime(tc.asked, tc.left, tc.hasDeadline, tc.client)
		if (err != nil) != tc.refused || got != tc.want {
			t.Errorf("%s: poll %v (%v), want %v (refused %v)", tc.name, got, err, tc.want, tc.refused)
		}
	}
}
