package grpcproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
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
	c.redelivered(t, group, topic, got, start, 7*time.Second, 25*time.Second, "about 10 s: 2 s of renewals and the group's 8 s pause")
}

// redelivered has client "other" receive got's message again and fails
// the test unless it comes as delivery attempt 2 between lo and hi after
// start (want says when it is expected).
func (c *testCluster) redelivered(t *testing.T, group, topic string, got *rmqpb.Message, start time.Time, lo, hi time.Duration, want string) {
	t.Helper()
	again := c.receiveN(t, "other", receiveRequest(group, topic, 10*time.Second, 5*time.Second), 1)[0]
	if waited := time.Since(start); waited < lo || waited > hi {
		t.Fatalf("delivered again after %v, want %s", waited, want)
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

// renewalOf returns the renewal kept for the handle a client was given,
// or nil.
func (r *renewer) renewalOf(clientID, handle string) *renewal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byClient[clientID][handle]
}

// unreachable points a renewal at addr, standing for its broker while
// the broker cannot be reached, and returns the address it had.
func (r *renewer) unreachable(rn *renewal, addr string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := rn.p.addr
	rn.p.addr = addr
	return was
}

// failures returns the renewals in a row of rn that did not reach the
// broker, and the renewals made.
func (r *renewer) failures(rn *renewal) (failed, renewed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return rn.failed, rn.renewed
}

// deadAddr returns a loopback address nothing listens on: a connection
// to it is refused, as to a broker that is down.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// unreachableRenewal is a message received with auto-renewal whose
// renewal a test pointed at a dead address.
type unreachableRenewal struct {
	msg        *rmqpb.Message
	handle     string // the handle the client holds
	rn         *renewal
	brokerAddr string    // the address the renewal had
	received   time.Time // when the receive was sent
}

// receiveUnreachable sends one message to a new one-queue topic, has
// client "holder" receive it with auto-renewal, and points its renewal at
// a dead address.
func receiveUnreachable(t *testing.T, c *testCluster, topic, group string) unreachableRenewal {
	t.Helper()
	c.createTopic(t, topic, 1, "")
	c.send(t, "renew-producer", newMessage(topic, "renewals that cannot reach the broker"))
	req := receiveRequest(group, topic, 0, 2*time.Second)
	req.AutoRenew = true
	u := unreachableRenewal{received: time.Now()}
	u.msg = c.receiveN(t, "holder", req, 1)[0]
	u.handle = u.msg.GetSystemProperties().GetReceiptHandle()
	if u.rn = c.proxy.renewer.renewalOf("holder", u.handle); u.rn == nil {
		t.Fatal("the received message is not being renewed")
	}
	u.brokerAddr = c.proxy.renewer.unreachable(u.rn, deadAddr(t))
	return u
}

// renewFailureConfig renews a 5 s handle from 1 s on, every 250 ms, for
// 20 s at a time.
func renewFailureConfig(retries int) func(*Config) {
	return func(cfg *Config) {
		cfg.DefaultInvisible = 5 * time.Second
		cfg.RenewAhead = 4 * time.Second
		cfg.RenewPeriod = 250 * time.Millisecond
		cfg.RenewPolicy = []time.Duration{20 * time.Second}
		cfg.MaxRenewRetry = retries
	}
}

// A renewal that does not reach the broker is tried again at the next
// rounds; once the broker answers, the message stays invisible past the
// handle's first invisible time and the client's ack uses the renewed
// handle.
func TestRenewalRetriedUntilTheBrokerAnswers(t *testing.T) {
	c := startTestCluster(t, renewFailureConfig(5))
	const topic, group = "RenewRetryT", "GroupRenewRetry"
	u := receiveUnreachable(t, c, topic, group)
	start, got, handle, rn := u.received, u.msg, u.handle, u.rn
	// Due at about 1 s; two rounds fail, then the broker is back.
	for failed, _ := c.proxy.renewer.failures(rn); failed < 2; failed, _ = c.proxy.renewer.failures(rn) {
		if time.Since(start) > 3500*time.Millisecond {
			t.Fatalf("%d failed renewals 3.5 s after the receive, want 2 (a round every 250 ms from 1 s)", failed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.proxy.renewer.unreachable(rn, u.brokerAddr)
	for failed, renewed := c.proxy.renewer.failures(rn); renewed == 0; failed, renewed = c.proxy.renewer.failures(rn) {
		if c.proxy.renewer.renewalOf("holder", handle) == nil {
			t.Fatal("the renewal was given up after failures that did not reach the broker, fewer than maxRenewRetryTimes")
		}
		if time.Since(start) > 4500*time.Millisecond {
			t.Fatalf("not renewed 4.5 s after the receive (%d failures in a row)", failed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The first handle ended at 5 s: the renewal keeps the message from
	// another consumer until 8 s and after.
	c.expectNothing(t, "other", receiveRequest(group, topic, 10*time.Second, time.Second), 8*time.Second-time.Since(start))
	if st := c.ack(t, "holder", group, topic, got.GetSystemProperties().GetMessageId(), handle); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("ack after the renewals: %v", st)
	}
}

// A renewal that does not reach the broker maxRenewRetryTimes times more
// is given up: the message comes back when its handle's invisible time
// ends. So does a message whose give-back (renewMaxTimeMillis) cannot
// reach the broker.
func TestRenewalGivenUpWhenTheBrokerStaysAway(t *testing.T) {
	for _, tc := range []struct {
		name     string
		renewMax time.Duration
	}{
		{"renewal", time.Hour},
		{"give-back", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startTestCluster(t, func(cfg *Config) {
				renewFailureConfig(2)(cfg)
				cfg.RenewMax = tc.renewMax
			})
			const topic, group = "RenewGiveUpT", "GroupRenewGiveUp"
			u := receiveUnreachable(t, c, topic, group)
			start, got, handle, rn := u.received, u.msg, u.handle, u.rn
			// Due at about 1 s: the renewal fails three times (the first
			// try and two more) and is given up by about 1.75 s; a give-back
			// is tried once.
			for c.proxy.renewer.renewalOf("holder", handle) != nil {
				if time.Since(start) > 4500*time.Millisecond {
					failed, _ := c.proxy.renewer.failures(rn)
					t.Fatalf("still renewing 4.5 s after the receive, %d failures in a row", failed)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if failed, _ := c.proxy.renewer.failures(rn); tc.renewMax > 0 && failed != 2 {
				t.Errorf("given up after %d retries, want maxRenewRetryTimes (2)", failed)
			}
			c.redelivered(t, group, topic, got, start, 4500*time.Millisecond, 15*time.Second, "about 5 s: when the first handle ends")
		})
	}
}

// hungBroker returns the address of a broker that accepts connections and
// reads requests but never answers them.
func hungBroker(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
		}
	}()
	return l.Addr().String()
}

// holdOnHungBroker has the proxy renew n messages of clientID held on
// the broker at addr, each due for renewal invisible from now, as a
// receive from topic HungTopic whose route named addr as the master
// would have them renewed, and returns the handles the client holds.
func holdOnHungBroker(p *Server, clientID, addr string, n int, invisible time.Duration) []string {
	handles := make([]string, n)
	for i := range n {
		h := Handle{Handle: pop.Handle{CKOffset: int64(i), PopTime: time.Now().UnixMilli(), InvisibleTime: time.Hour.Milliseconds(),
			RetryFlag: pop.FlagNormal, BrokerName: "hung", QueueOffset: int64(i)}, CommitLogOffset: 1}
		handles[i] = h.String()
		p.renewer.add(clientID, handles[i], held{handle: h, group: "HungGroup", topic: "HungTopic", routeTopic: "HungTopic", addr: addr}, invisible)
	}
	return handles
}

// busyCount returns how many of a client's renewals a worker is sending.
func (r *renewer) busyCount(clientID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rn := range r.byClient[clientID] {
		if rn.busy != nil {
			n++
		}
	}
	return n
}

// renewing returns how many renewals of a client the proxy keeps.
func (r *renewer) renewing(clientID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byClient[clientID])
}

// markIdle makes a client known to the proxy as one idle for an hour.
func (r *clientRegistry) markIdle(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients[id] = &clientState{seen: time.Now().Add(-time.Hour)}
}

// waitFor polls cond until it holds, failing the test with what when it
// does not within 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20 s: %s", what)
		}
	}
}

// A broker that does not answer holds up neither the renewals to other
// brokers nor the housekeeping loop, whether the proxy renews messages
// held on it or makes an idle client's messages on it visible again: a
// message held with auto_renew on a healthy broker is renewed, and its
// ack goes through, while the hung broker's requests wait for their
// (minute-long) timeout. RocketMQ's proxy submits each renewal to a
// worker pool and never waits for one in its scan.
func TestHungBrokerDoesNotDelayOtherRenewals(t *testing.T) {
	for _, tc := range []struct {
		name string
		idle bool // the hung broker's messages belong to a client gone idle
	}{
		{"renewals to it on their way", false},
		{"an idle client's messages on it made visible again", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startTestCluster(t, func(cfg *Config) {
				cfg.RequestTimeout = time.Minute // the hung broker's requests outlast the test
				cfg.DefaultInvisible = 20 * time.Second
				cfg.RenewAhead = 19 * time.Second // due a second after the receive
				cfg.RenewPeriod = 100 * time.Millisecond
				cfg.RenewPolicy = []time.Duration{30 * time.Second}
			})
			const topic, group = "RenewHungT", "GroupRenewHung"
			c.createTopic(t, topic, 1, "")
			c.send(t, "p", newMessage(topic, "held while a broker hangs"))
			hung := hungBroker(t)
			if tc.idle {
				holdOnHungBroker(c.proxy, "stuck", hung, 40, time.Hour)
				c.proxy.clients.markIdle("stuck")
				waitFor(t, "the idle client forgotten", func() bool { return c.proxy.renewer.renewing("stuck") == 0 })
			} else {
				holdOnHungBroker(c.proxy, "stuck", hung, 40, 0)
				waitFor(t, "renewals to the hung broker on their way", func() bool { return c.proxy.renewer.busyCount("stuck") > 0 })
			}

			req := receiveRequest(group, topic, 0, time.Second)
			req.AutoRenew = true
			got := c.receiveN(t, "holder", req, 1)[0]
			handle := got.GetSystemProperties().GetReceiptHandle()
			rn := c.proxy.renewer.renewalOf("holder", handle)
			if rn == nil {
				t.Fatal("the received message is not being renewed")
			}
			waitFor(t, "the message on the healthy broker renewed while the hung broker's requests wait", func() bool {
				_, renewed := c.proxy.renewer.failures(rn)
				return renewed > 0
			})
			if st := c.ack(t, "holder", group, topic, got.GetSystemProperties().GetMessageId(), handle); st.GetCode() != rmqpb.Code_OK {
				t.Fatalf("ack of the renewed message: %v", st)
			}
		})
	}
}

// A renewal only waiting for a worker (behind renewals to a broker that
// does not answer) does not hold up an ack or nack of its message: only
// one being sent is waited for, so that the ack uses the handle it gives.
func TestQueuedRenewalDoesNotHoldUpItsAck(t *testing.T) {
	p := startProxyWithoutCluster(t, func(cfg *Config) {
		cfg.RequestTimeout = time.Minute // the hung broker's requests outlast the test
		cfg.RenewPeriod = 100 * time.Millisecond
	})
	const n = 3 * renewWorkersPerBroker
	handles := holdOnHungBroker(p, "stuck", hungBroker(t), n, 0)
	waitFor(t, "renewals to the hung broker on their way", func() bool { return p.renewer.busyCount("stuck") >= renewWorkersPerBroker })
	gone, cancel := context.WithCancel(context.Background())
	cancel() // an ack that cannot wait at all
	stopped := 0
	for _, h := range handles {
		if _, ok := p.renewer.remove(gone, "stuck", h); ok {
			stopped++
		}
	}
	if want := n - renewWorkersPerBroker; stopped != want {
		t.Fatalf("%d of %d renewals stopped without waiting, want the %d not being sent", stopped, n, want)
	}
}

// startProxyWithoutCluster starts a proxy whose name server is down (for
// tests that need no route) and shuts it down when the test ends.
func startProxyWithoutCluster(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NamesrvAddrs = []string{deadAddr(t)}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("proxy shutdown: %v", err)
		}
	})
	return p
}

// A message received with auto_renew is kept for renewal without its
// body or properties (RocketMQ's proxy keeps a MessageReceiptHandle:
// handle, ids, queue, offset and reconsume times), for as long as it is
// renewed: up to renewMaxTime, hours, for every message a push consumer
// caches. Only its delivery count is kept, for a give-back's retry pause.
func TestRenewalKeepsNoMessageBody(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "RenewBodyT", "GroupRenewBody"
	c.createTopic(t, topic, 1, "")
	m := newMessage(topic, "x")
	m.Body = bytes.Repeat([]byte("b"), 1<<20)
	c.send(t, "p", m)
	req := receiveRequest(group, topic, 0, time.Second)
	req.AutoRenew = true
	got := c.receiveN(t, "holder", req, 1)[0]
	rn := c.proxy.renewer.renewalOf("holder", got.GetSystemProperties().GetReceiptHandle())
	if rn == nil {
		t.Fatal("the received message is not being renewed")
	}
	c.proxy.renewer.mu.Lock()
	kept := retainedBytes(reflect.ValueOf(rn), map[uintptr]bool{})
	reconsumed := rn.p.reconsumed
	c.proxy.renewer.mu.Unlock()
	if kept > 1<<10 {
		t.Fatalf("the renewal of a message with a %d-byte body keeps %d bytes of strings and byte slices", len(m.Body), kept)
	}
	if want := int(got.GetSystemProperties().GetDeliveryAttempt()) - 1; reconsumed != want {
		t.Fatalf("the renewal keeps %d earlier deliveries, want %d (delivery attempt %d)", reconsumed, want, want+1)
	}
}

// retainedBytes sums the lengths of the strings and byte slices v
// reaches through pointers, structs, slices, maps and interfaces (the
// protobuf runtime's internals excepted), each pointer once.
func retainedBytes(v reflect.Value, seen map[uintptr]bool) int {
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		return retainedBytes(v.Elem(), seen)
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return retainedBytes(v.Elem(), seen)
	case reflect.Struct:
		if strings.HasPrefix(v.Type().PkgPath(), "google.golang.org/protobuf/") {
			return 0
		}
		n := 0
		for i := range v.NumField() {
			n += retainedBytes(v.Field(i), seen)
		}
		return n
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Len()
		}
		n := 0
		for i := range v.Len() {
			n += retainedBytes(v.Index(i), seen)
		}
		return n
	case reflect.Map:
		n := 0
		for it := v.MapRange(); it.Next(); {
			n += retainedBytes(it.Key(), seen) + retainedBytes(it.Value(), seen)
		}
		return n
	default:
		return 0
	}
}
