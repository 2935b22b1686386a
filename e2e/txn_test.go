package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Topics the broker keeps transactions in (RocketMQ's names).
const (
	halfTopic     = "RMQ_SYS_TRANS_HALF_TOPIC"
	discardTopic  = "TRANS_CHECK_MAX_TIME_TOPIC"
	checkInterval = time.Second
)

// txnBrokerSets makes the broker ask about an open transaction one second
// after its half was stored and again every second. The check maximum is
// raised from 15 so that a producer the broker cannot ask yet (the Go
// client's first heartbeat can come 30 s after it starts, and it
// re-registers with a restarted broker only at its next 30 s heartbeat)
// does not get its transactions given up while the test waits.
var txnBrokerSets = []string{"transactionTimeOut=1000", "transactionCheckInterval=1000", "transactionCheckMax=300"}

// txnApp plays the application behind transaction producers of one group.
// It decides each local transaction by the message's key (the body is the
// key too) and keeps every decision, as an application keeps it in its
// database, so that a check answers what the local transaction decided;
// several producers may share it. It checks what the Go client hands it and
// counts the checks per key.
type txnApp struct {
	topic string
	// execute is what ExecuteLocalTransaction answers for a key.
	execute func(key string) primitive.LocalTransactionState
	// resolve is what CheckLocalTransaction answers for a key not decided
	// yet: call counts the checks of the key from 1, executed says whether
	// ExecuteLocalTransaction ran for it (a half whose send failed in the
	// producer may still be stored).
	resolve func(key string, call int, executed bool) primitive.LocalTransactionState

	// crashes is set when the broker may be killed: its check counts may
	// then go back.
	crashes bool

	mu       sync.Mutex
	executed map[string]string // key -> transaction id ExecuteLocalTransaction saw
	decided  map[string]primitive.LocalTransactionState
	checks   map[string]int // CheckLocalTransaction calls
	problems []string
}

func newTxnApp(topic string, execute func(string) primitive.LocalTransactionState,
	resolve func(string, int, bool) primitive.LocalTransactionState) *txnApp {
	return &txnApp{topic: topic, execute: execute, resolve: resolve,
		executed: map[string]string{}, decided: map[string]primitive.LocalTransactionState{}, checks: map[string]int{}}
}

func (a *txnApp) problem(format string, args ...any) {
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
}

func (a *txnApp) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	key := m.GetKeys()
	s := a.execute(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, again := a.executed[key]; again {
		a.problem("ExecuteLocalTransaction called twice for %s", key)
	}
	if string(m.Body) != key || m.TransactionId == "" {
		a.problem("ExecuteLocalTransaction for %s: body %q, transaction id %q", key, m.Body, m.TransactionId)
	}
	a.executed[key] = m.TransactionId
	if s != primitive.UnkonwnState {
		a.decided[key] = s
	}
	return s
}

func (a *txnApp) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	key := m.GetKeys()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks[key]++
	n := a.checks[key]
	// The client decodes the check's body: the half with its real topic
	// and queue, its properties and the broker's check count.
	if m.Topic != a.topic || string(m.Body) != key {
		a.problem("check of %s: topic %q body %q, want topic %q and the key as body", key, m.Topic, m.Body, a.topic)
	}
	id, executed := a.executed[key]
	if executed && m.TransactionId != id {
		a.problem("check of %s: transaction id %q, ExecuteLocalTransaction saw %q", key, m.TransactionId, id)
	}
	// The broker counts its checks, also those it could not send. It
	// rewrites the count unsynced (kvindex UpdateHalf), so a crash may
	// take it back: then only a count is asked for.
	times, err := strconv.Atoi(m.GetProperty("TRANSACTION_CHECK_TIMES"))
	switch {
	case err != nil || times < 1:
		a.problem("check %d of %s carries TRANSACTION_CHECK_TIMES %q", n, key, m.GetProperty("TRANSACTION_CHECK_TIMES"))
	case !a.crashes && times < n:
		a.problem("check %d of %s carries TRANSACTION_CHECK_TIMES %d: the broker lost count of its checks", n, key, times)
	}
	if s, ok := a.decided[key]; ok {
		return s
	}
	s := a.resolve(key, n, executed)
	if s != primitive.UnkonwnState {
		a.decided[key] = s
	}
	return s
}

// consume is a push consumer's callback: it collects bodies into got and
// checks that each message is the one its transaction sent.
func (a *txnApp) consume(got *collector) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			body := string(m.Body)
			a.mu.Lock()
			if m.Topic != a.topic || m.GetKeys() != body {
				a.problem("consumed %q from %q with keys %q", body, m.Topic, m.GetKeys())
			}
			if id, ok := a.executed[body]; ok && m.MsgId != id {
				a.problem("consumed %s with message id %q, its transaction was %q", body, m.MsgId, id)
			}
			a.mu.Unlock()
			got.add(body)
		}
		return consumer.ConsumeSuccess, nil
	}
}

// committed returns the keys decided commit, sorted.
func (a *txnApp) committed() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var keys []string
	for k, s := range a.decided {
		if s == primitive.CommitMessageState {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func (a *txnApp) decision(key string) (primitive.LocalTransactionState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.decided[key]
	return s, ok
}

func (a *txnApp) wasExecuted(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.executed[key]
	return ok
}

func (a *txnApp) checkCounts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.checks)
}

// report fails the test with every problem the callbacks met.
func (a *txnApp) report(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.problems {
		t.Error(p)
	}
}

// newTxnProducer starts a transaction producer of group (no retries: a
// retried half would be a second transaction with the same key).
func newTxnProducer(t testing.TB, ns, group string, l primitive.TransactionListener, opts ...producer.Option) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l, producerOptions(t, ns, group, append([]producer.Option{producer.WithRetry(0)}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// sendTxn sends the half of a transaction whose key and body are key.
func sendTxn(p rocketmq.TransactionProducer, topic, key string) (*primitive.TransactionSendResult, error) {
	m := primitive.NewMessage(topic, []byte(key))
	m.WithKeys([]string{key})
	return p.SendMessageInTransaction(context.Background(), m)
}

// mustSendTxn sends a transaction and fails unless the half was stored and
// the client reports the state ExecuteLocalTransaction returned.
func mustSendTxn(t testing.TB, p rocketmq.TransactionProducer, topic, key string, want primitive.LocalTransactionState) {
	t.Helper()
	res, err := sendTxn(p, topic, key)
	if err != nil {
		t.Fatalf("send transaction %s: %v", key, err)
	}
	if res.Status != primitive.SendOK || res.State != want {
		t.Fatalf("send transaction %s: status %d state %d, want %d %d", key, res.Status, res.State, primitive.SendOK, want)
	}
}

// keyIndex returns the number after the last '-' of a key.
func keyIndex(key string) int {
	i, err := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
	if err != nil {
		panic("key without an index: " + key)
	}
	return i
}

// waitAllConsumed waits until every key of want() was consumed; want is
// called again each time, as decisions may still come.
func waitAllConsumed(t testing.TB, got *collector, timeout time.Duration, what string, want func() []string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		snap := got.snapshot()
		var missing []string
		for _, k := range want() {
			if snap[k] == 0 {
				missing = append(missing, k)
			}
		}
		ok := len(missing) == 0 && (ready == nil || ready())
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; committed but not consumed: %v", what, timeout, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkDelivered fails unless every key the application committed was
// consumed exactly once and nothing else was consumed.
func checkDelivered(t testing.TB, app *txnApp, got *collector) {
	t.Helper()
	snap := got.snapshot()
	committed := app.committed()
	for _, k := range committed {
		if snap[k] != 1 {
			t.Errorf("committed transaction %s delivered %d times, want once", k, snap[k])
		}
	}
	var keys []string
	for k := range snap {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch s, ok := app.decision(k); {
		case !ok:
			t.Errorf("transaction %s delivered %d times, its producer never decided it", k, snap[k])
		case s != primitive.CommitMessageState:
			t.Errorf("transaction %s delivered %d times, its producer rolled it back", k, snap[k])
		}
	}
}

// checksStop fails if, during three check intervals once everything was
// decided, the broker asks about a transaction it had already asked about,
// or asks twice about one: each commit or rollback, from the local
// transaction or from a check, ends the transaction on the broker. (A
// first check in that time is allowed: after a kill the broker asks about
// the transactions whose END_TRANSACTION the kill cut, in passes a second
// apart, and a rolled-back one among them is not waited for.)
func checksStop(t testing.TB, app *txnApp) {
	t.Helper()
	// Answers still under way (oneway END_TRANSACTIONs on a busy machine)
	// land first: a check sent before one arrives is not asked again.
	time.Sleep(checkInterval)
	before := app.checkCounts()
	time.Sleep(3 * checkInterval)
	after := app.checkCounts()
	var again []string
	for k, n := range after {
		if n > before[k] && (before[k] > 0 || n > 1) {
			again = append(again, fmt.Sprintf("%s (%d checks, then %d)", k, before[k], n))
		}
	}
	sort.Strings(again)
	if len(again) > 0 {
		t.Errorf("the broker kept asking about decided transactions: %v", again)
	}
}

// TestTransactionProducer: the Go client's transaction producer sends
// transactions whose local transaction commits, rolls back, or does not
// know yet. Committed ones are consumed once and rolled-back ones never;
// the broker asks about the unknown ones only (one second after their
// halves, then every second while the answer is still unknown), and those
// the check commits are consumed once, those it rolls back never.
func TestTransactionProducer(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: txnBrokerSets})
	const topic, group, queues, n = "E2ETxn", "pg-txn", 4, 12
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)

	// unknown-i: the first check commits i%3 == 0 and rolls back
	// i%3 == 1; i%3 == 2 is still unknown at the first check and
	// committed at the second.
	app := newTxnApp(topic, func(key string) primitive.LocalTransactionState {
		switch {
		case strings.HasPrefix(key, "commit-"):
			return primitive.CommitMessageState
		case strings.HasPrefix(key, "rollback-"):
			return primitive.RollbackMessageState
		}
		return primitive.UnkonwnState
	}, func(key string, call int, _ bool) primitive.LocalTransactionState {
		if !strings.HasPrefix(key, "unknown-") {
			return primitive.UnkonwnState // decided keys are answered before resolve
		}
		switch i := keyIndex(key); {
		case i%3 == 0:
			return primitive.CommitMessageState
		case i%3 == 1:
			return primitive.RollbackMessageState
		case call >= 2:
			return primitive.CommitMessageState
		}
		return primitive.UnkonwnState
	})
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-txn", topic, consumer.MessageSelector{}, app.consume(got),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))

	start := time.Now()
	p := newTxnProducer(t, ns.addr, group, app)
	var want []string // every key that ends committed
	for i := 0; i < n; i++ {
		for _, k := range []string{fmt.Sprintf("commit-%d", i), fmt.Sprintf("rollback-%d", i), fmt.Sprintf("unknown-%d", i)} {
			mustSendTxn(t, p, topic, k, app.execute(k))
			if !strings.HasPrefix(k, "rollback-") && !(strings.HasPrefix(k, "unknown-") && i%3 == 1) {
				want = append(want, k)
			}
		}
	}
	sort.Strings(want)
	// A Go producer is known to the broker from its first heartbeat, one
	// second after it started (or 30 s later if it had not sent by then).
	waitAllConsumed(t, got, 45*time.Second, "every committed transaction consumed", func() []string { return want }, nil)
	t.Logf("every committed transaction consumed %v after the producer started", time.Since(start).Round(time.Millisecond))
	checksStop(t, app) // also the time a wrongly committed transaction has to arrive
	app.report(t)

	if c := app.committed(); strings.Join(c, ",") != strings.Join(want, ",") {
		t.Fatalf("the application committed %v, the test expected %v", c, want)
	}
	checkDelivered(t, app, got)
	checks := app.checkCounts()
	for i := 0; i < n; i++ {
		for _, k := range []string{fmt.Sprintf("commit-%d", i), fmt.Sprintf("rollback-%d", i)} {
			if checks[k] != 0 {
				t.Errorf("the broker asked %d times about %s, whose END_TRANSACTION it had", checks[k], k)
			}
		}
		k, atLeast := fmt.Sprintf("unknown-%d", i), 1
		if i%3 == 2 {
			atLeast = 2
		}
		if checks[k] < atLeast {
			t.Errorf("CheckLocalTransaction called %d times for %s, want at least %d", checks[k], k, atLeast)
		}
	}
	// The broker stored each committed message once and nothing else.
	if total := topicTotal(t, b.addr, topic, queues); total != int64(len(want)) {
		t.Errorf("%s holds %d messages, %d transactions were committed", topic, total, len(want))
	}
	if total := maxOffset(t, b.addr, halfTopic, 0); total != 3*n {
		t.Errorf("%s holds %d halves, %d transactions were sent", halfTopic, total, 3*n)
	}
	if total := maxOffset(t, b.addr, discardTopic, 0); total != 0 {
		t.Errorf("%d transactions given up in %s", total, discardTopic)
	}
}

// TestTransactionSurvivesKill: transactions are left open (their producer
// does not know yet and answers the broker's checks so) and a producer
// keeps sending transactions it commits or rolls back at once, when the
// broker is SIGKILLed and restarted on the same store. A commit or
// rollback of those last ones goes oneway and may be lost with the kill,
// and a half whose send failed in the producer may be stored all the
// same; the producer's application answers checks from what it decided
// (rollback for a transaction it has no record of). After the restart the
// open transactions are decided, and a second producer of the group
// starts. Whatever the kill cut: every transaction the application
// committed is consumed exactly once, none it rolled back is, and the
// broker stops asking.
func TestTransactionSurvivesKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: txnBrokerSets})
	const topic, group, queues, nOpen, nLate = "E2ETxnKill", "pg-txn-kill", 4, 16, 6
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)

	// open-i stays unknown until released, then commits for even i;
	// burst-i and late-i commit for even i, roll back for odd i, when the
	// local transaction runs.
	var released atomic.Bool
	app := newTxnApp(topic, func(key string) primitive.LocalTransactionState {
		switch {
		case strings.HasPrefix(key, "open-"):
			return primitive.UnkonwnState
		case keyIndex(key)%2 == 0:
			return primitive.CommitMessageState
		}
		return primitive.RollbackMessageState
	}, func(key string, _ int, executed bool) primitive.LocalTransactionState {
		switch {
		case !executed:
			return primitive.RollbackMessageState // the send failed: the application never did its part
		case !strings.HasPrefix(key, "open-"):
			return primitive.UnkonwnState // decided keys are answered before resolve
		case !released.Load():
			return primitive.UnkonwnState
		case keyIndex(key)%2 == 0:
			return primitive.CommitMessageState
		}
		return primitive.RollbackMessageState
	})
	app.crashes = true

	start := time.Now()
	p1 := newTxnProducer(t, ns.addr, group, app, producer.WithSendMsgTimeout(2*time.Second))
	for i := 0; i < nOpen; i++ {
		mustSendTxn(t, p1, topic, fmt.Sprintf("open-%d", i), primitive.UnkonwnState)
	}
	// The broker asks about them and hears that they are still open.
	waitUntil(t, 45*time.Second, "every open transaction checked before the kill", func() bool {
		c := app.checkCounts()
		for i := 0; i < nOpen; i++ {
			if c[fmt.Sprintf("open-%d", i)] == 0 {
				return false
			}
		}
		return true
	})

	burst := startSendLoop(t, "burst-", func(key string) (*primitive.SendResult, error) {
		res, err := sendTxn(p1, topic, key)
		if err != nil {
			return nil, err
		}
		return res.SendResult, nil
	})
	waitUntil(t, 30*time.Second, "30 transactions acknowledged before the kill", func() bool { return burst.ackedCount() >= 30 })
	// Somewhere in the next transaction: its half send, its local
	// transaction or its END_TRANSACTION.
	time.Sleep(time.Duration(rand.IntN(30000)) * time.Microsecond)
	b.kill()
	killedAt := burst.ackedCount()
	b.restart(t)
	waitUntil(t, 60*time.Second, "20 transactions acknowledged after the restart", func() bool { return burst.ackedCount() >= killedAt+20 })
	acked, failedSends := burst.stopAndResults()
	restartedAt := time.Now()

	// The open transactions are decided now. A second producer of the
	// group starts: the broker knows it from its first heartbeat, a second
	// after it started; the first producer registers with the restarted
	// broker only at its next heartbeat, up to 30 s later.
	released.Store(true)
	p2 := newTxnProducer(t, ns.addr, group, app)
	for i := 0; i < nLate; i++ {
		k := fmt.Sprintf("late-%d", i)
		mustSendTxn(t, p2, topic, k, app.execute(k))
	}
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-txn-kill", topic, consumer.MessageSelector{}, app.consume(got),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	waitAllConsumed(t, got, 45*time.Second, "every open transaction decided and every committed one consumed",
		app.committed, func() bool {
			for i := 0; i < nOpen; i++ {
				if _, ok := app.decision(fmt.Sprintf("open-%d", i)); !ok {
					return false
				}
			}
			return true
		})
	t.Logf("transactions resolved and consumed %v after the restart (%v after the first producer started)",
		time.Since(restartedAt).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	checksStop(t, app)
	app.report(t)
	checkDelivered(t, app, got)

	committed := app.committed()
	for i := 0; i < nOpen; i++ {
		k := fmt.Sprintf("open-%d", i)
		if s, _ := app.decision(k); s != app.resolve(k, 1, true) {
			t.Errorf("open transaction %s decided %d after the restart", k, s)
		}
	}
	if total := topicTotal(t, b.addr, topic, queues); total != int64(len(committed)) {
		t.Errorf("%s holds %d messages, %d transactions were committed", topic, total, len(committed))
	}
	sent := nOpen + len(acked) + nLate
	if halves := maxOffset(t, b.addr, halfTopic, 0); halves < int64(sent) {
		t.Errorf("%s holds %d halves, %d half sends were acknowledged", halfTopic, halves, sent)
	}
	if total := maxOffset(t, b.addr, discardTopic, 0); total != 0 {
		t.Errorf("%d transactions given up in %s", total, discardTopic)
	}

	// What the kill cut, for the log: decided transactions the broker
	// asked about (their END_TRANSACTION was lost) and halves of failed
	// sends it asked about.
	checks := app.checkCounts()
	var lostEnds, strays []string
	for k := range checks {
		if strings.HasPrefix(k, "open-") {
			continue
		}
		if app.wasExecuted(k) {
			lostEnds = append(lostEnds, k)
		} else {
			strays = append(strays, k)
		}
	}
	sort.Strings(lostEnds)
	sort.Strings(strays)
	t.Logf("%d transactions sent (%d acknowledged before the kill), %d sends failed, %d committed; "+
		"checked after their local transaction decided: %v; checked without a local transaction: %v",
		sent, killedAt, len(failedSends), len(committed), lostEnds, strays)
}
