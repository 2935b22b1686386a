// Command gov5client drives RocketMQ 5's Go client
// (github.com/apache/rocketmq-clients/golang/v5), unchanged, against a
// gRPC endpoint for the e2e tests of goclient_grpc_test.go, as node/grpc.js
// drives the Node client: it runs one scenario, named by its argument,
// and prints what the client saw as one line "RESULT <json>" for the test
// to judge. It is a program of its own, built without the race detector,
// because the client races with itself (its settings are written by its
// telemetry stream while another goroutine sends them, its meter is
// replaced at shutdown while being read), which would fail every test
// run with -race whatever the server did.
//
// The scenarios read ENDPOINT and their topics and groups from the
// environment:
//
//	producer  TOPIC FIFO_TOPIC DELAY_TOPIC TXN_TOPIC FIFO_GROUP
//	simple    TAG_TOPIC SQL_TOPIC ACK_TOPIC
//	push      TOPIC GROUP COUNT FAIL_BODY
//	pushfifo  TOPIC GROUP
//	namespace NAMESPACE TOPIC GROUP
//	pushslow  TOPIC GROUP SLOW_MS
//	pushsql   TOPIC GROUP
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	v5 "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/rocketkv/rocketkv/e2e/gov5client/result"
)

// Message and Result are the RESULT line's types, shared with the e2e
// test that reads it.
type (
	Message = result.Message
	Result  = result.Result
)

// run is one scenario's run: the endpoint, and the result it fills.
type run struct {
	endpoint  string
	namespace string
	res       Result
	mu        sync.Mutex // guards res where listeners and checkers write
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gov5client producer|simple|push|pushfifo|pushslow|pushsql|namespace")
		os.Exit(2)
	}
	r := &run{endpoint: os.Getenv("ENDPOINT")}
	var err error
	switch os.Args[1] {
	case "producer":
		err = r.producerScenario()
	case "simple":
		err = r.simpleScenario()
	case "push":
		err = r.pushScenario()
	case "pushfifo":
		err = r.pushFifoScenario()
	case "pushsql":
		err = r.pushSQLScenario()
	case "pushslow":
		err = r.pushSlowScenario()
	case "namespace":
		r.namespace = os.Getenv("NAMESPACE")
		err = r.namespaceScenario()
	default:
		err = fmt.Errorf("unknown scenario %q", os.Args[1])
	}
	if err != nil {
		r.fail("%v", err)
	}
	r.mu.Lock()
	b, jerr := json.Marshal(&r.res)
	r.mu.Unlock()
	if jerr != nil {
		fmt.Fprintln(os.Stderr, "encode the result:", jerr)
		os.Exit(2)
	}
	fmt.Printf("RESULT %s\n", b)
	if err != nil {
		os.Exit(1)
	}
}

// fail records a client error the scenario went on after.
func (r *run) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Failures = append(r.res.Failures, fmt.Sprintf(format, args...))
}

// config is the client's configuration: no ACL, so empty credentials
// (the client insists on having some).
func (r *run) config(group string) *v5.Config {
	return &v5.Config{Endpoint: r.endpoint, NameSpace: r.namespace, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

func (r *run) producer(checker *v5.TransactionChecker, topics ...string) (v5.Producer, error) {
	opts := []v5.ProducerOption{v5.WithTopics(topics...)}
	if checker != nil {
		opts = append(opts, v5.WithTransactionChecker(checker))
	}
	p, err := v5.NewProducer(r.config(""), opts...)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start producer: %w", err)
	}
	return p, nil
}

func (r *run) simpleConsumer(group string, subs map[string]*v5.FilterExpression) (v5.SimpleConsumer, error) {
	sc, err := v5.NewSimpleConsumer(r.config(group), v5.WithSimpleAwaitDuration(2*time.Second), v5.WithSimpleSubscriptionExpressions(subs))
	if err != nil {
		return nil, fmt.Errorf("new simple consumer: %w", err)
	}
	if err := sc.Start(); err != nil {
		return nil, fmt.Errorf("start simple consumer of %s: %w", group, err)
	}
	return sc, nil
}

func send(p v5.Producer, m *v5.Message) (*v5.SendReceipt, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := p.Send(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("send %s to %s: %w", m.Body, m.Topic, err)
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("send %s: %d receipts, want 1", m.Body, len(rs))
	}
	return rs[0], nil
}

// receive is one Receive; MESSAGE_NOT_FOUND, the answer of a poll that
// found nothing, is no messages.
func receive(sc v5.SimpleConsumer, invisible time.Duration) ([]*v5.MessageView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mvs, err := sc.Receive(ctx, 16, invisible)
	var st *v5.ErrRpcStatus
	if errors.As(err, &st) && st.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	return mvs, nil
}

func ack(sc v5.SimpleConsumer, mv *v5.MessageView) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sc.Ack(ctx, mv); err != nil {
		return fmt.Errorf("ack %s: %w", mv.GetBody(), err)
	}
	return nil
}

// receiveAll receives and acknowledges until want messages came or
// timeout passed.
func receiveAll(sc v5.SimpleConsumer, want int, timeout time.Duration) ([]Message, error) {
	var got []Message
	for deadline := time.Now().Add(timeout); len(got) < want && time.Now().Before(deadline); {
		mvs, err := receive(sc, 10*time.Second)
		if err != nil {
			return got, err
		}
		for _, mv := range mvs {
			got = append(got, record(mv))
			if err := ack(sc, mv); err != nil {
				return got, err
			}
		}
	}
	return got, nil
}

func record(mv *v5.MessageView) Message {
	m := Message{Body: string(mv.GetBody()), ID: mv.GetMessageId(), Keys: mv.GetKeys(), Props: mv.GetProperties(),
		Topic: mv.GetTopic(), Offset: mv.GetOffset(), Attempt: mv.GetDeliveryAttempt(), AtMs: time.Now().UnixMilli()}
	if h := mv.GetBornHost(); h != nil {
		m.BornHost = *h
	}
	if t := mv.GetTag(); t != nil {
		m.Tag = *t
	}
	if g := mv.GetMessageGroup(); g != nil {
		m.Group = *g
	}
	if t := mv.GetBornTimestamp(); t != nil {
		m.BornMs = t.UnixMilli()
	}
	if t := mv.GetDeliveryTimestamp(); t != nil {
		m.DeliveryMs = t.UnixMilli()
	}
	return m
}

func bodies(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}

// producerScenario sends normal messages (keys, tag, a property), two
// message groups interleaved to a FIFO topic (and a third, received
// without an ack, then again), a delay message (and one
// it recalls) and four transactions (committed, rolled back, and two
// left to the checker: one it answers UNKNOWN then COMMIT, one
// ROLLBACK), and receives each topic with a simple consumer; last, a
// message naming a system property, and one more.
func (r *run) producerScenario() error {
	topic, fifoTopic, delayTopic, txnTopic := os.Getenv("TOPIC"), os.Getenv("FIFO_TOPIC"), os.Getenv("DELAY_TOPIC"), os.Getenv("TXN_TOPIC")
	r.res.TxnChecked = map[string]int{}
	checker := &v5.TransactionChecker{Check: func(mv *v5.MessageView) v5.TransactionResolution {
		r.mu.Lock()
		defer r.mu.Unlock()
		body := string(mv.GetBody())
		r.res.TxnChecked[body]++
		switch {
		case body == "txn-open-commit" && r.res.TxnChecked[body] > 1:
			return v5.COMMIT
		case body == "txn-open-rollback":
			return v5.ROLLBACK
		}
		return v5.UNKNOWN
	}}
	p, err := r.producer(checker, topic, fifoTopic, delayTopic, txnTopic)
	if err != nil {
		return err
	}
	defer func() { _ = p.GracefulStop() }()

	// Normal messages.
	r.res.SentIDs, r.res.SentOffsets = map[string]string{}, map[string]int64{}
	r.res.Hostname, _ = os.Hostname()
	for i := range 5 {
		m := &v5.Message{Topic: topic, Body: fmt.Appendf(nil, "normal-%d", i)}
		m.SetKeys(fmt.Sprintf("key-%d", i), "shared-key")
		m.SetTag("TagN")
		m.AddProperty("seq", strconv.Itoa(i))
		rc, err := send(p, m)
		if err != nil {
			return err
		}
		r.res.SentIDs[string(m.Body)] = rc.MessageID
		r.res.SentOffsets[string(m.Body)] = rc.Offset
	}
	sc, err := r.simpleConsumer("gov5-normal-cg", map[string]*v5.FilterExpression{topic: v5.SUB_ALL})
	if err != nil {
		return err
	}
	defer func() { _ = sc.GracefulStop() }()
	if r.res.Normal, err = receiveAll(sc, 5, 30*time.Second); err != nil {
		return err
	}

	// FIFO: order-a-0, order-b-0, order-a-1, ...
	for i := range 6 {
		for _, g := range []string{"order-a", "order-b"} {
			m := &v5.Message{Topic: fifoTopic, Body: fmt.Appendf(nil, "%s-%d", g, i)}
			m.SetMessageGroup(g)
			if _, err := send(p, m); err != nil {
				return err
			}
		}
	}
	fc, err := r.simpleConsumer(os.Getenv("FIFO_GROUP"), map[string]*v5.FilterExpression{fifoTopic: v5.SUB_ALL})
	if err != nil {
		return err
	}
	defer func() { _ = fc.GracefulStop() }()
	if r.res.Fifo, err = receiveAll(fc, 12, 40*time.Second); err != nil {
		return err
	}
	// A FIFO message received and not acknowledged holds its group back
	// until its invisible time is over, then comes again.
	for i := range 2 {
		m := &v5.Message{Topic: fifoTopic, Body: fmt.Appendf(nil, "order-c-%d", i)}
		m.SetMessageGroup("order-c")
		if _, err := send(p, m); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(20 * time.Second); len(r.res.FifoFirst) == 0 && time.Now().Before(deadline); {
		mvs, err := receive(fc, 3*time.Second)
		if err != nil {
			return err
		}
		for _, mv := range mvs {
			r.res.FifoFirst = append(r.res.FifoFirst, record(mv))
		}
	}
	held := time.Now()
	for time.Since(held) < 15*time.Second && len(r.res.FifoAgain) == 0 {
		mvs, err := receive(fc, 10*time.Second)
		if err != nil {
			return err
		}
		for _, mv := range mvs {
			r.res.FifoAgain = append(r.res.FifoAgain, record(mv))
			if err := ack(fc, mv); err != nil {
				return err
			}
		}
	}

	// Delay: one kept, one recalled.
	dc, err := r.simpleConsumer("gov5-delay-cg", map[string]*v5.FilterExpression{delayTopic: v5.SUB_ALL})
	if err != nil {
		return err
	}
	defer func() { _ = dc.GracefulStop() }()
	at := time.Now().Add(4 * time.Second).Truncate(time.Millisecond)
	r.res.DelayAtMs = at.UnixMilli()
	for _, body := range []string{"delayed", "delay-recalled"} {
		m := &v5.Message{Topic: delayTopic, Body: []byte(body)}
		m.SetDelayTimestamp(at)
		rc, err := send(p, m)
		if err != nil {
			return err
		}
		if body == "delay-recalled" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.Recall(ctx, delayTopic, rc.RecallHandle)
			cancel()
			if err != nil {
				r.res.RecallErr = err.Error()
			}
		}
	}
	if r.res.Delay, err = receiveAll(dc, 1, 20*time.Second); err != nil {
		return err
	}
	late, err := receiveAll(dc, 1, 3*time.Second)
	if err != nil {
		return err
	}
	r.res.Delay = append(r.res.Delay, late...)

	// Transactions.
	tc, err := r.simpleConsumer("gov5-txn-cg", map[string]*v5.FilterExpression{txnTopic: v5.SUB_ALL})
	if err != nil {
		return err
	}
	defer func() { _ = tc.GracefulStop() }()
	for _, body := range []string{"txn-commit", "txn-open-commit", "txn-open-rollback", "txn-rollback"} {
		tx := p.BeginTransaction()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.SendWithTransaction(ctx, &v5.Message{Topic: txnTopic, Body: []byte(body)}, tx)
		cancel()
		if err != nil {
			return fmt.Errorf("send %s in a transaction: %w", body, err)
		}
		switch body {
		case "txn-commit":
			err = tx.Commit()
		case "txn-rollback":
			err = tx.RollBack()
		}
		if err != nil {
			return fmt.Errorf("end the transaction of %s: %w", body, err)
		}
	}
	got, err := receiveAll(tc, 2, 30*time.Second)
	if err != nil {
		return err
	}
	// A rolled back message would come with the others: checks run every
	// second.
	late, err = receiveAll(tc, 1, 4*time.Second)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.res.TxnDelivered = append(got, late...)
	r.mu.Unlock()

	// A message naming a system property is refused; the producer
	// sends on.
	bad := &v5.Message{Topic: topic, Body: []byte("refused")}
	bad.AddProperty("UNIQ_KEY", "mine")
	if _, err := send(p, bad); err != nil {
		r.res.Refused = err.Error()
	}
	if _, err := send(p, &v5.Message{Topic: topic, Body: []byte("after-refused")}); err != nil {
		return err
	}
	r.res.SentAfter = true
	return nil
}

// simpleScenario receives nine messages of TagA/B/C with the filter
// "TagA || TagC", nine with properties n and color with a SQL92 filter,
// and on a third topic acknowledges one message and makes the other
// invisible for 6 s more, then receives again until it comes back.
func (r *run) simpleScenario() error {
	topic, sqlTopic, ackTopic := os.Getenv("TAG_TOPIC"), os.Getenv("SQL_TOPIC"), os.Getenv("ACK_TOPIC")
	p, err := r.producer(nil, topic, sqlTopic, ackTopic)
	if err != nil {
		return err
	}
	defer func() { _ = p.GracefulStop() }()
	for i := range 9 {
		tag := []string{"TagA", "TagB", "TagC"}[i%3]
		m := &v5.Message{Topic: topic, Body: fmt.Appendf(nil, "%s-%d", tag, i)}
		m.SetTag(tag)
		if _, err := send(p, m); err != nil {
			return err
		}
		m = &v5.Message{Topic: sqlTopic, Body: fmt.Appendf(nil, "sql-%d", i)}
		m.SetTag(tag)
		m.AddProperty("n", strconv.Itoa(i))
		m.AddProperty("color", []string{"red", "blue"}[i%2])
		if _, err := send(p, m); err != nil {
			return err
		}
	}
	for _, body := range []string{"acked", "put-back", "changed-acked"} {
		if _, err := send(p, &v5.Message{Topic: ackTopic, Body: []byte(body)}); err != nil {
			return err
		}
	}

	tagged, err := r.simpleConsumer("gov5-tag-cg", map[string]*v5.FilterExpression{topic: v5.NewFilterExpression("TagA || TagC")})
	if err != nil {
		return err
	}
	defer func() { _ = tagged.GracefulStop() }()
	got, err := receiveAll(tagged, 7, 8*time.Second) // 6 match: wait for a seventh in vain
	if err != nil {
		return err
	}
	r.res.Tagged = bodies(got)

	selected, err := r.simpleConsumer("gov5-sql-cg", map[string]*v5.FilterExpression{
		sqlTopic: v5.NewFilterExpressionWithType("color = 'red' AND n > 2 AND TAGS <> 'TagB'", v5.SQL92)})
	if err != nil {
		return err
	}
	defer func() { _ = selected.GracefulStop() }()
	if got, err = receiveAll(selected, 3, 8*time.Second); err != nil {
		return err
	}
	r.res.Selected = bodies(got)

	sc, err := r.simpleConsumer("gov5-ack-cg", map[string]*v5.FilterExpression{ackTopic: v5.SUB_ALL})
	if err != nil {
		return err
	}
	defer func() { _ = sc.GracefulStop() }()
	var first []*v5.MessageView
	for deadline := time.Now().Add(30 * time.Second); len(first) < 3 && time.Now().Before(deadline); {
		mvs, err := receive(sc, 2*time.Second)
		if err != nil {
			return err
		}
		first = append(first, mvs...)
	}
	var putBack *v5.MessageView
	for _, mv := range first {
		r.res.FirstReceived = append(r.res.FirstReceived, record(mv))
		switch string(mv.GetBody()) {
		case "acked":
			if err := ack(sc, mv); err != nil {
				return err
			}
		case "changed-acked":
			// The view takes the handle the change answers; the ack
			// uses it.
			if err := sc.ChangeInvisibleDuration(mv, 3*time.Second); err != nil {
				return fmt.Errorf("change invisible duration of changed-acked: %w", err)
			}
			if err := ack(sc, mv); err != nil {
				r.res.AckAfterChange = err.Error()
			}
		default:
			putBack = mv
		}
	}
	if putBack == nil {
		return fmt.Errorf("put-back was not received")
	}
	if err := sc.ChangeInvisibleDuration(putBack, 6*time.Second); err != nil {
		return fmt.Errorf("change invisible duration: %w", err)
	}
	changed := time.Now()
	r.res.ChangedAtMs = changed.UnixMilli()
	// The first invisible time (2 s) is over by now: whatever comes
	// before 6 s came too early.
	for time.Since(changed) < 15*time.Second && len(r.res.Again) == 0 {
		mvs, err := receive(sc, 10*time.Second)
		if err != nil {
			return err
		}
		for _, mv := range mvs {
			r.res.Again = append(r.res.Again, record(mv))
			if err := ack(sc, mv); err != nil {
				return err
			}
		}
	}
	left, err := receiveAll(sc, 1, 4*time.Second)
	if err != nil {
		return err
	}
	r.res.Leftover = bodies(left)
	return nil
}

// pushScenario sends COUNT messages push-0... and consumes them with a
// push consumer that fails FAIL_BODY the first time.
func (r *run) pushScenario() error {
	topic, group, failBody := os.Getenv("TOPIC"), os.Getenv("GROUP"), os.Getenv("FAIL_BODY")
	count, err := strconv.Atoi(os.Getenv("COUNT"))
	if err != nil {
		return fmt.Errorf("COUNT: %w", err)
	}
	if err := r.sendNumbered(topic, "push", count, nil); err != nil {
		return err
	}
	ok := map[string]bool{}
	done := make(chan struct{})
	return r.consumeWithPush(group, topic, func(mv *v5.MessageView) v5.ConsumerResult {
		// under r.mu
		body := string(mv.GetBody())
		if body == failBody && mv.GetDeliveryAttempt() == 1 {
			return v5.FAILURE
		}
		if ok[body] = true; len(ok) == count {
			closeOnce(done)
		}
		return v5.SUCCESS
	}, done, 40*time.Second)
}

// pushFifoScenario sends fifo-0..fifo-5 of one message group and
// consumes them with a push consumer of an orderly group that always
// fails fifo-2: the client retries it itself, as often as the group's
// policy allows, then forwards it to the dead-letter queue and goes on.
func (r *run) pushFifoScenario() error {
	topic, group := os.Getenv("TOPIC"), os.Getenv("GROUP")
	if err := r.sendNumbered(topic, "fifo", 6, func(_ int, m *v5.Message) { m.SetMessageGroup("g1") }); err != nil {
		return err
	}
	done := make(chan struct{})
	return r.consumeWithPush(group, topic, func(mv *v5.MessageView) v5.ConsumerResult {
		body := string(mv.GetBody())
		if body == "fifo-2" {
			return v5.FAILURE
		}
		if body == "fifo-5" {
			closeOnce(done)
		}
		return v5.SUCCESS
	}, done, 40*time.Second)
}

// consumeWithPush consumes topic as group with a push consumer whose
// listener, called under r.mu, is consume, recording each call in
// Consumed (and Failed), until done is closed or timeout passed, then
// for 3 s more (a message consumed again would come by then).
func (r *run) consumeWithPush(group, topic string, consume func(*v5.MessageView) v5.ConsumerResult, done chan struct{}, timeout time.Duration) error {
	pc, err := v5.NewPushConsumer(r.config(group),
		v5.WithPushAwaitDuration(2*time.Second),
		v5.WithPushSubscriptionExpressions(map[string]*v5.FilterExpression{topic: v5.SUB_ALL}),
		v5.WithPushConsumptionThreadCount(4),
		v5.WithPushMessageListener(&v5.FuncMessageListener{Consume: func(mv *v5.MessageView) v5.ConsumerResult {
			r.mu.Lock()
			defer r.mu.Unlock()
			res := consume(mv)
			r.res.Consumed = append(r.res.Consumed, record(mv))
			if res.Type == v5.ConsumerResultTypeFailure {
				r.res.Failed = append(r.res.Failed, string(mv.GetBody()))
			}
			return res
		}}))
	if err != nil {
		return fmt.Errorf("new push consumer: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("start push consumer: %w", err)
	}
	defer func() { _ = pc.GracefulStop() }()
	select {
	case <-done:
	case <-time.After(timeout):
		r.fail("not all messages were consumed within %v", timeout)
	}
	time.Sleep(3 * time.Second)
	return nil
}

// namespaceScenario sends three messages to TOPIC of NAMESPACE and
// receives them with a simple consumer of GROUP in it, acknowledging
// each.
func (r *run) namespaceScenario() error {
	topic, group := os.Getenv("TOPIC"), os.Getenv("GROUP")
	if err := r.sendNumbered(topic, "ns", 3, func(_ int, m *v5.Message) { m.SetTag("TagNs") }); err != nil {
		return err
	}
	sc, err := r.simpleConsumer(group, map[string]*v5.FilterExpression{topic: v5.NewFilterExpression("TagNs")})
	if err != nil {
		return err
	}
	defer func() { _ = sc.GracefulStop() }()
	if r.res.Received, err = receiveAll(sc, 3, 30*time.Second); err != nil {
		return err
	}
	left, err := receiveAll(sc, 1, 3*time.Second)
	if err != nil {
		return err
	}
	r.res.Leftover = bodies(left)
	return nil
}

// pushSlowScenario sends slow-0 and fast-1 and consumes them with a push
// consumer whose listener takes SLOW_MS over slow-0.
func (r *run) pushSlowScenario() error {
	topic, group := os.Getenv("TOPIC"), os.Getenv("GROUP")
	slow, err := strconv.Atoi(os.Getenv("SLOW_MS"))
	if err != nil {
		return fmt.Errorf("SLOW_MS: %w", err)
	}
	p, err := r.producer(nil, topic)
	if err != nil {
		return err
	}
	defer func() { _ = p.GracefulStop() }()
	for _, body := range []string{"slow-0", "fast-1"} {
		if _, err := send(p, &v5.Message{Topic: topic, Body: []byte(body)}); err != nil {
			return err
		}
	}
	ok := map[string]bool{}
	done := make(chan struct{})
	return r.consumeWithPush(group, topic, func(mv *v5.MessageView) v5.ConsumerResult {
		if string(mv.GetBody()) == "slow-0" {
			r.mu.Unlock() // others are consumed meanwhile
			time.Sleep(time.Duration(slow) * time.Millisecond)
			r.mu.Lock()
		}
		if ok[string(mv.GetBody())] = true; len(ok) == 2 {
			closeOnce(done)
		}
		return v5.SUCCESS
	}, done, 40*time.Second)
}

// pushSQLScenario sends sql-0..sql-5 with the property n and consumes
// them with a push consumer subscribed with the SQL92 filter "n >= 3".
func (r *run) pushSQLScenario() error {
	topic, group := os.Getenv("TOPIC"), os.Getenv("GROUP")
	if err := r.sendNumbered(topic, "sql", 6, func(i int, m *v5.Message) { m.AddProperty("n", strconv.Itoa(i)) }); err != nil {
		return err
	}
	pc, err := v5.NewPushConsumer(r.config(group),
		v5.WithPushAwaitDuration(2*time.Second),
		v5.WithPushSubscriptionExpressions(map[string]*v5.FilterExpression{topic: v5.NewFilterExpressionWithType("n >= 3", v5.SQL92)}),
		v5.WithPushMessageListener(&v5.FuncMessageListener{Consume: func(mv *v5.MessageView) v5.ConsumerResult {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.res.Consumed = append(r.res.Consumed, record(mv))
			return v5.SUCCESS
		}}))
	if err != nil {
		return fmt.Errorf("new push consumer: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("start push consumer: %w", err)
	}
	defer func() { _ = pc.GracefulStop() }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r.mu.Lock()
		n := len(r.res.Consumed)
		r.mu.Unlock()
		if n >= 3 {
			break
		}
	}
	time.Sleep(3 * time.Second) // what the filter should have kept back would come by now
	return nil
}

// closeOnce closes done unless it is closed; its callers hold r.mu.
func closeOnce(done chan struct{}) {
	select {
	case <-done:
	default:
		close(done)
	}
}

// sendNumbered sends n messages <prefix>-0..<prefix>-(n-1) to topic with
// a producer of its own, each shaped by shape (when not nil) before it
// is sent.
func (r *run) sendNumbered(topic, prefix string, n int, shape func(i int, m *v5.Message)) error {
	p, err := r.producer(nil, topic)
	if err != nil {
		return err
	}
	defer func() { _ = p.GracefulStop() }()
	for i := range n {
		m := &v5.Message{Topic: topic, Body: fmt.Appendf(nil, "%s-%d", prefix, i)}
		if shape != nil {
			shape(i, m)
		}
		if _, err := send(p, m); err != nil {
			return err
		}
	}
	return nil
}
