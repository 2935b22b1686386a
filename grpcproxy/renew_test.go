package grpcproxy

import (
	"errors"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
)

// A message renewed for renewMaxTimeMillis is given back, when its
// handle is next about to expire, as RocketMQ's proxy gives it back:
// visible again after its group's retry pause for its next delivery, not
// when the last renewal ends.
func TestRenewalGivesBackAfterTheGroupsRetryPause(t *testing.T) {
	c := startTestCluster(t, func(cfg *Config) {
		cfg.DefaultInvisible = 3 * time.Second
		cfg.RenewAhead = 2 * time.Second
		cfg.RenewPeriod = 200 * time.Millisecond
		cfg.RenewPolicy = []time.Duration{3 * time.Second}
		cfg.RenewMax = 2 * time.Second
	})
	const topic, group = "GiveBackT", "GroupGiveBack"
	c.createTopic(t, topic, 1, "")
	gc := meta.NewSubscriptionGroupConfig(group)
	// A first redelivery waits next[0+2]: 8 s.
	gc.GroupRetryPolicy = &meta.GroupRetryPolicy{Type: meta.RetryPolicyCustomized, Customized: &meta.CustomizedRetryPolicy{Next: []int64{1, 1, 8000}}}
	c.createGroup(t, gc)
	c.send(t, "give-back-producer", newMessage(topic, "held too long"))

	req := receiveRequest(group, topic, 0, 2*time.Second)
	req.AutoRenew = true
	start := time.Now()
	got := c.receiveN(t, "holder", req, 1)[0]
	// Renewed for 3 s at about 1 s; due again at about 2 s, when it has
	// been held for the maximum time: given back with an 8 s pause, so
	// another consumer gets it at about 10 s (the last renewal alone
	// would have ended at about 4 s).
	again := c.receiveN(t, "other", receiveRequest(group, topic, 10*time.Second, 5*time.Second), 1)[0]
	waited := time.Since(start)
	if waited < 7*time.Second || waited > 25*time.Second {
		t.Fatalf("delivered again after %v, want about 10 s: 2 s of renewals and the group's 8 s pause", waited)
	}
	if again.GetSystemProperties().GetMessageId() != got.GetSystemProperties().GetMessageId() || again.GetSystemProperties().GetDeliveryAttempt() != 2 {
		t.Fatalf("received %s attempt %d, want %s attempt 2", again.GetSystemProperties().GetMessageId(),
			again.GetSystemProperties().GetDeliveryAttempt(), got.GetSystemProperties().GetMessageId())
	}
}

// renewTime steps through the renew policy and stays at its last step.
func TestRenewTimeSteps(t *testing.T) {
	cfg := DefaultConfig()
	r := &renewer{s: &Server{cfg: cfg}}
	want := []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, time.Hour, time.Hour}
	for n, w := range want {
		if got := r.renewTime(n); got != w {
			t.Errorf("renewal %d: invisible %v, want %v (RocketMQ's renew steps)", n, got, w)
		}
	}
}

// Renewals that did not reach the broker are tried again; a broker's or
// the proxy's verdict is not.
func TestBrokerVerdict(t *testing.T) {
	if !brokerVerdict(fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "gone")) {
		t.Error("a refused handle counted as a failure to reach the broker")
	}
	if brokerVerdict(errors.New("connection reset")) {
		t.Error("a lost connection counted as the broker's verdict")
	}
}
