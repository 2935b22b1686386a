package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/e2e/gov5client/result"
)

// The tests of this file run RocketMQ 5's Go client
// (github.com/apache/rocketmq-clients/golang/v5 v5.1.4), unchanged,
// against a broker it reaches only through bin/proxy over gRPC. The
// client runs in gov5client, a program of its own built without the race
// detector (the client races with itself), which runs a scenario and
// prints what the client saw; the tests judge that and what the broker
// holds.

// goV5Build is the gov5client binary, built once per test run into a
// temporary directory that TestMain removes.
type goV5Build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// goV5 is the test binary's one build of gov5client.
var goV5 goV5Build

// path builds gov5client on first use and returns it.
func (g *goV5Build) path(t testing.TB) string {
	t.Helper()
	g.once.Do(func() {
		g.dir, g.err = os.MkdirTemp("", "rocketkv-e2e-gov5")
		if g.err != nil {
			return
		}
		g.bin = filepath.Join(g.dir, "gov5client")
		cmd := exec.Command("go", "build", "-o", g.bin, "./gov5client")
		if out, err := cmd.CombinedOutput(); err != nil {
			g.err = fmt.Errorf("build gov5client: %w\n%s", err, out)
		}
	})
	if g.err != nil {
		t.Fatal(g.err)
	}
	return g.bin
}

// remove deletes the build, if there was one.
func (g *goV5Build) remove() {
	if g.dir != "" {
		_ = os.RemoveAll(g.dir)
	}
}

// startV5Cluster starts a name server, a broker with brokerSets and a
// proxy in front of it, and creates the topics (name to mqadmin -a
// attributes, "" for none) with 4 queues each. The proxy (with
// proxySets too) lets receives
// ask for invisible times and long polls down to a second, so that the
// tests wait seconds, not RocketMQ's minimum 10, and tells push
// consumers to poll 3 s, not 20 (their shutdown waits for their polls).
func startV5Cluster(t *testing.T, brokerSets []string, topics map[string]string, proxySets ...string) (*brokerProc, *proxyProc) {
	t.Helper()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: brokerSets})
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		createTopicWithAttributes(t, b.addr, topic, 4, topics[topic])
	}
	for topic := range topics {
		waitRoute(t, ns.addr, topic, b.name)
	}
	px := startProxy(t, ns, append([]string{"minInvisibleTimeMillsForRecv=1000", "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
		"grpcClientConsumerMaxLongPollingTimeoutMillis=3000"}, proxySets...)...)
	return b, px
}

// runGoV5 runs gov5client's scenario against the proxy with env and
// returns its result; the client's errors fail the test. Its log goes to
// the test's directory (printed when the test fails) instead of
// $HOME/logs/rocketmq.
func runGoV5(t *testing.T, px *proxyProc, scenario string, env ...string) result.Result {
	t.Helper()
	bin := goV5.path(t)
	logDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, scenario)
	cmd.Env = append(os.Environ(), append([]string{"ENDPOINT=" + px.addr,
		"rocketmq.client.logRoot=" + logDir, "rocketmq.client.logLevel=info"}, env...)...)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gov5client %s output:\n%s", scenario, out)
			if b, err := os.ReadFile(filepath.Join(logDir, "rocketmq_client_go.log")); err == nil {
				lines := strings.Split(string(b), "\n")
				if len(lines) > 80 {
					lines = lines[len(lines)-80:]
				}
				t.Logf("--- last lines of the Go client's log:\n%s", strings.Join(lines, "\n"))
			}
		}
	})
	var r result.Result
	readNodeResult(t, "gov5client "+scenario, out, &r)
	for _, f := range r.Failures {
		t.Errorf("gov5client %s: %s", scenario, f)
	}
	if err != nil {
		t.Fatalf("gov5client %s failed: %v", scenario, err)
	}
	return r
}

// createGroup creates a subscription group from its JSON fields.
func createGroup(t *testing.T, broker, group, fields string) {
	t.Helper()
	r, err := rawInvoke(broker, codeUpdateAndCreateSubscriptionGroup, nil,
		[]byte(`{"groupName":"`+group+`","consumeEnable":true,`+fields+`}`))
	if err != nil || r.Code != respSuccess {
		t.Fatalf("create group %s: %v %+v", group, err, r)
	}
}

// TestGoV5ProducerThroughProxy sends with the Go v5 client's producer
// through bin/proxy and checks what its simple consumers get: normal
// messages with their keys, tag and property (and the id the send
// answered); the messages of two message groups, sent interleaved to a
// FIFO topic, in order per group when received by an orderly group, each
// group's in one queue, and those of a third, not acknowledged, again in
// order once their invisible time is over; a delay message not before its delivery time and
// soon after it, while one recalled before its time never comes; and
// transactions: a committed one delivered, a rolled back one never, and
// two left open resolved by the producer's checker, asked through the
// proxy, as it says (one only after it answered UNKNOWN once); a message
// naming a system property is refused with ILLEGAL_MESSAGE_PROPERTY_KEY.
func TestGoV5ProducerThroughProxy(t *testing.T) {
	t.Parallel()
	const topic, fifoTopic, delayTopic, txnTopic, fifoGroup = "GoV5Normal", "GoV5Fifo", "GoV5Delay", "GoV5Txn", "gov5-fifo-cg"
	b, px := startV5Cluster(t, []string{"transactionTimeOut=1000", "transactionCheckInterval=1000", "recallMessageEnable=true"},
		map[string]string{topic: "+message.type=NORMAL", fifoTopic: "+message.type=FIFO",
			delayTopic: "+message.type=DELAY", txnTopic: "+message.type=TRANSACTION"})
	createGroup(t, b.addr, fifoGroup, `"consumeMessageOrderly":true`)
	r := runGoV5(t, px, "producer", "TOPIC="+topic, "FIFO_TOPIC="+fifoTopic, "DELAY_TOPIC="+delayTopic,
		"TXN_TOPIC="+txnTopic, "FIFO_GROUP="+fifoGroup)

	if len(r.Normal) != 5 {
		t.Errorf("normal messages received: %q, want the 5 sent", bodiesOf(r.Normal))
	}
	for _, m := range r.Normal {
		var i int
		if _, err := fmt.Sscanf(m.Body, "normal-%d", &i); err != nil {
			t.Errorf("received an unexpected message %q", m.Body)
			continue
		}
		if m.ID != r.SentIDs[m.Body] || m.ID == "" {
			t.Errorf("%s: message id %q, want the send's %q", m.Body, m.ID, r.SentIDs[m.Body])
		}
		if m.Tag != "TagN" {
			t.Errorf("%s: tag %q, want TagN", m.Body, m.Tag)
		}
		if keys, want := slices.Sorted(slices.Values(m.Keys)), []string{fmt.Sprintf("key-%d", i), "shared-key"}; !slices.Equal(keys, want) {
			t.Errorf("%s: keys %q, want %q", m.Body, keys, want)
		}
		if v := m.Props["seq"]; v != fmt.Sprint(i) || len(m.Props) != 1 {
			t.Errorf("%s: properties %v, want seq=%d only", m.Body, m.Props, i)
		}
		if m.Attempt != 1 {
			t.Errorf("%s: delivery attempt %d, want 1", m.Body, m.Attempt)
		}
		if m.Topic != topic {
			t.Errorf("%s: topic %q, want %q", m.Body, m.Topic, topic)
		}
		if want := r.SentOffsets[m.Body]; m.Offset != want {
			t.Errorf("%s: queue offset %d, want %d, the send's", m.Body, m.Offset, want)
		}
		if m.BornHost != r.Hostname {
			t.Errorf("%s: born host %q, want the producer's %q", m.Body, m.BornHost, r.Hostname)
		}
		if d := m.AtMs - m.BornMs; m.BornMs == 0 || d < 0 || d > 60_000 {
			t.Errorf("%s: born %d ms, received %d ms: want the send's time", m.Body, m.BornMs, m.AtMs)
		}
	}

	perGroup := map[string][]string{}
	for _, m := range r.Fifo {
		perGroup[m.Group] = append(perGroup[m.Group], m.Body)
	}
	for _, g := range []string{"order-a", "order-b"} {
		var want []string
		for i := range 6 {
			want = append(want, fmt.Sprintf("%s-%d", g, i))
		}
		if !slices.Equal(perGroup[g], want) {
			t.Errorf("message group %s received as %q, want %q", g, perGroup[g], want)
		}
	}
	if len(perGroup) != 2 {
		t.Errorf("FIFO messages came with the message groups %q, want order-a and order-b", slices.Sorted(maps.Keys(perGroup)))
	}
	// order-c-0 and order-c-1 came in one batch (an orderly pop takes
	// what the queue holds), were not acknowledged, and came again, in
	// order, as second attempts, once their invisible time (3 s) was over.
	if got := bodiesOf(r.FifoFirst); !slices.Equal(got, []string{"order-c-0", "order-c-1"}) {
		t.Errorf("the third message group first came as %q, want order-c-0, order-c-1", got)
	} else if again := r.FifoAgain; !slices.Equal(bodiesOf(again), []string{"order-c-0", "order-c-1"}) ||
		again[0].Attempt != 2 || again[1].Attempt != 2 {
		t.Errorf("the unacknowledged message group came again as %+v, want order-c-0, order-c-1 as attempt 2", again)
	} else if wait := again[0].AtMs - r.FifoFirst[0].AtMs; wait < 2500 {
		t.Errorf("the unacknowledged message group came again %d ms after the first receive, before its 3 s invisible time was over", wait)
	}
	queues := 0
	for q := range 4 {
		if n := maxOffset(t, b.addr, fifoTopic, q); n > 0 {
			queues++
			if n != 2 && n != 6 && n != 8 && n != 12 && n != 14 {
				t.Errorf("FIFO queue %d holds %d messages, want whole message groups (of 6, 6 and 2)", q, n)
			}
		}
	}
	if queues == 0 {
		t.Errorf("no queue of %s holds the FIFO messages", fifoTopic)
	}

	if r.RecallErr != "" {
		t.Errorf("recall of a delay message: %s", r.RecallErr)
	}
	if got := bodiesOf(r.Delay); !slices.Equal(got, []string{"delayed"}) {
		t.Errorf("delay consumer got %q, want delayed only (delay-recalled was recalled)", got)
	} else {
		if m := r.Delay[0]; m.AtMs < r.DelayAtMs {
			t.Errorf("the delay message came at %d ms, %d ms before its delivery time", m.AtMs, r.DelayAtMs-m.AtMs)
		}
		if m := r.Delay[0]; m.DeliveryMs != r.DelayAtMs {
			t.Errorf("the delay message came with the delivery timestamp %d ms, want %d", m.DeliveryMs, r.DelayAtMs)
		}
	}

	if got := slices.Sorted(slices.Values(bodiesOf(r.TxnDelivered))); !slices.Equal(got, []string{"txn-commit", "txn-open-commit"}) {
		t.Errorf("transaction consumer got %q, want txn-commit and txn-open-commit", got)
	}
	// As RocketMQ's broker commits the copy of the half its last check
	// stored, the message a check's answer committed tells how often it
	// was checked; one its producer committed unasked does not.
	for _, m := range r.TxnDelivered {
		times, ok := m.Props["TRANSACTION_CHECK_TIMES"]
		switch n, err := strconv.Atoi(times); {
		case m.Body == "txn-commit" && ok:
			t.Errorf("txn-commit, committed by its producer unchecked, carries TRANSACTION_CHECK_TIMES %q", times)
		case m.Body == "txn-open-commit" && (err != nil || n < 2 || n > r.TxnChecked[m.Body]):
			t.Errorf("txn-open-commit, committed answering its second check or a later one (%d checks), carries TRANSACTION_CHECK_TIMES %q, want that check's count",
				r.TxnChecked[m.Body], times)
		}
	}
	if n := r.TxnChecked["txn-open-commit"]; n < 2 {
		t.Errorf("the checker was asked %d times about txn-open-commit, want twice at least (UNKNOWN, then COMMIT)", n)
	}
	if r.TxnChecked["txn-open-rollback"] < 1 {
		t.Errorf("the checker was never asked about txn-open-rollback")
	}
	if n := r.TxnChecked["txn-commit"] + r.TxnChecked["txn-rollback"]; n != 0 {
		t.Errorf("the checker was asked about transactions the producer ended: %v", r.TxnChecked)
	}

	if !strings.Contains(r.Refused, "ILLEGAL_MESSAGE_PROPERTY_KEY") || !strings.Contains(r.Refused, "UNIQ_KEY") {
		t.Errorf("a message with the system property UNIQ_KEY was refused with %q, want ILLEGAL_MESSAGE_PROPERTY_KEY naming it", r.Refused)
	}
	if !r.SentAfter {
		t.Errorf("the producer did not send after the refusal")
	}
}

// TestGoV5SimpleConsumerThroughProxy receives with the Go v5 client's
// simple consumer through bin/proxy: a tag filter gets only its tags, a
// SQL92 filter (the broker with enablePropertyFilter) only the messages
// its selector matches (and so does a push consumer's); an acknowledged message does not come again once
// its invisible time is over, and one made invisible for 6 s with
// ChangeInvisibleDuration and not acknowledged comes again after the new
// duration, no sooner, as its second delivery attempt, while one
// acknowledged with the handle its ChangeInvisibleDuration answered does
// not.
func TestGoV5SimpleConsumerThroughProxy(t *testing.T) {
	t.Parallel()
	const tagTopic, sqlTopic, ackTopic, pushSQLTopic = "GoV5Tags", "GoV5Sql", "GoV5Ack", "GoV5PushSql"
	_, px := startV5Cluster(t, []string{"enablePropertyFilter=true"},
		map[string]string{tagTopic: "", sqlTopic: "", ackTopic: "", pushSQLTopic: ""})
	t.Run("push consumer's SQL92 filter", func(t *testing.T) {
		t.Parallel()
		r := runGoV5(t, px, "pushsql", "TOPIC="+pushSQLTopic, "GROUP=gov5-pushsql-cg")
		if got := slices.Sorted(slices.Values(bodiesOf(r.Consumed))); !slices.Equal(got, []string{"sql-3", "sql-4", "sql-5"}) {
			t.Errorf("a push consumer subscribed with n >= 3 consumed %q, want sql-3, sql-4, sql-5", got)
		}
	})
	t.Run("simple consumer", func(t *testing.T) {
		t.Parallel()
		r := runGoV5(t, px, "simple", "TAG_TOPIC="+tagTopic, "SQL_TOPIC="+sqlTopic, "ACK_TOPIC="+ackTopic)

		if got, want := slices.Sorted(slices.Values(r.Tagged)), []string{"TagA-0", "TagA-3", "TagA-6", "TagC-2", "TagC-5", "TagC-8"}; !slices.Equal(got, want) {
			t.Errorf("tag filter TagA || TagC received %q, want %q", got, want)
		}
		// red is an even n; n > 2: 4, 6, 8; TagB is n%3 == 1: 4.
		if got, want := slices.Sorted(slices.Values(r.Selected)), []string{"sql-6", "sql-8"}; !slices.Equal(got, want) {
			t.Errorf("SQL92 filter received %q, want %q", got, want)
		}

		if got := slices.Sorted(slices.Values(bodiesOf(r.FirstReceived))); !slices.Equal(got, []string{"acked", "changed-acked", "put-back"}) {
			t.Fatalf("first received %q, want acked, changed-acked and put-back", got)
		}
		if got := bodiesOf(r.Again); !slices.Equal(got, []string{"put-back"}) {
			t.Fatalf("after the change received %q, want put-back only (acked and changed-acked were acknowledged)", got)
		}
		again := r.Again[0]
		if back := time.Duration(again.AtMs-r.ChangedAtMs) * time.Millisecond; back < 5*time.Second {
			t.Errorf("put-back came again %v after its invisible time was changed to 6 s", back)
		}
		if again.Attempt != 2 {
			t.Errorf("put-back came again as delivery attempt %d, want 2", again.Attempt)
		}
		var first result.Message
		for _, m := range r.FirstReceived {
			if m.Body == "put-back" {
				first = m
			}
		}
		if first.Attempt != 1 || again.ID != first.ID {
			t.Errorf("put-back came first as attempt %d with id %s, again with id %s: want attempt 1 and one id", first.Attempt, first.ID, again.ID)
		}
		if r.AckAfterChange != "" {
			t.Errorf("acknowledging changed-acked with the handle its change answered: %s", r.AckAfterChange)
		}
		if len(r.Leftover) != 0 {
			t.Errorf("after acknowledging all received %q", r.Leftover)
		}
	})
}

// TestGoV5NamespaceThroughProxy sends and receives with the Go v5
// client configured with a namespace, and the proxy's endpoint given by
// host name: its topic and group are the brokers' "ns%name", and its
// consumer gets the messages under the client's name of the topic and
// acknowledges them.
func TestGoV5NamespaceThroughProxy(t *testing.T) {
	t.Parallel()
	const ns, topic, group = "gons", "GoV5Ns", "gov5-ns-cg"
	b, px := startV5Cluster(t, nil, map[string]string{ns + "%" + topic: ""})
	// By name, not address: the client's endpoints are then a domain
	// name, which the proxy's routes answer with.
	_, port, err := net.SplitHostPort(px.addr)
	if err != nil {
		t.Fatal(err)
	}
	r := runGoV5(t, px, "namespace", "ENDPOINT=localhost:"+port, "NAMESPACE="+ns, "TOPIC="+topic, "GROUP="+group)
	if got := slices.Sorted(slices.Values(bodiesOf(r.Received))); !slices.Equal(got, []string{"ns-0", "ns-1", "ns-2"}) {
		t.Errorf("received %q, want ns-0, ns-1 and ns-2", got)
	}
	for _, m := range r.Received {
		if m.Topic != topic {
			t.Errorf("%s came from topic %q, want the client's name %q", m.Body, m.Topic, topic)
		}
	}
	if len(r.Leftover) != 0 {
		t.Errorf("after acknowledging all received %q", r.Leftover)
	}
	if n := topicTotal(t, b.addr, ns+"%"+topic, 4); n != 3 {
		t.Errorf("%s%%%s holds %d messages, want 3", ns, topic, n)
	}
}

// TestGoV5PushConsumerThroughProxy consumes with the Go v5 client's push
// consumer through bin/proxy: every message sent is consumed once, and
// the one the listener fails comes again, as its second delivery attempt
// after the group's retry pause, and is consumed then.
func TestGoV5PushConsumerThroughProxy(t *testing.T) {
	t.Parallel()
	const topic, group, count = "GoV5Push", "gov5-push-cg", 10
	b, px := startV5Cluster(t, nil, map[string]string{topic: ""})
	// The group retries after a second, not RocketMQ's default 10 s.
	createGroup(t, b.addr, group, `"retryMaxTimes":3,"groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,1000,1000]}}`)
	r := runGoV5(t, px, "push", "TOPIC="+topic, "GROUP="+group, fmt.Sprintf("COUNT=%d", count), "FAIL_BODY=push-3")
	attempts := map[string][]int32{}
	for _, m := range r.Consumed {
		attempts[m.Body] = append(attempts[m.Body], m.Attempt)
	}
	for i := range count {
		body := fmt.Sprintf("push-%d", i)
		want := []int32{1}
		if i == 3 {
			want = []int32{1, 2}
		}
		if !slices.Equal(attempts[body], want) {
			t.Errorf("%s consumed as delivery attempts %v, want %v", body, attempts[body], want)
		}
	}
	if len(attempts) != count {
		t.Errorf("consumed %q, want push-0..push-%d", slices.Sorted(maps.Keys(attempts)), count-1)
	}
	if !slices.Equal(r.Failed, []string{"push-3"}) {
		t.Errorf("the listener failed %q, want push-3 once", r.Failed)
	}
}

// TestGoV5FifoPushConsumerThroughProxy consumes a message group with the
// Go v5 client's push consumer of an orderly group whose listener always
// fails one message: the proxy tells the client the group is FIFO and its
// retry policy, so the client consumes the batch in order, tries the
// failing message as often as the group allows (retryMaxTimes + 1) and
// then forwards it to the dead-letter queue through the proxy, which puts
// it there.
//
// The client v5.1.4 does not hold the rest of the group back while it
// retries a message (its fifoConsumeService goes on with the next one as
// soon as eraseFifoMessage has scheduled the retry), so the retries come
// after later messages of the group; the test checks the first attempts'
// order only.
func TestGoV5FifoPushConsumerThroughProxy(t *testing.T) {
	t.Parallel()
	const topic, group = "GoV5PushFifo", "gov5-pushfifo-cg"
	b, px := startV5Cluster(t, nil, map[string]string{topic: "+message.type=FIFO"})
	createGroup(t, b.addr, group, `"consumeMessageOrderly":true,"retryMaxTimes":2,"groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[500,500,500]}}`)
	r := runGoV5(t, px, "pushfifo", "TOPIC="+topic, "GROUP="+group)
	var firsts []string
	var failing []int32
	for _, m := range r.Consumed {
		if m.Attempt == 1 {
			firsts = append(firsts, m.Body)
		}
		if m.Body == "fifo-2" {
			failing = append(failing, m.Attempt)
		}
	}
	if want := []string{"fifo-0", "fifo-1", "fifo-2", "fifo-3", "fifo-4", "fifo-5"}; !slices.Equal(firsts, want) {
		t.Errorf("first consumed %q, want %q", firsts, want)
	}
	// retryMaxTimes 2: three attempts in all.
	if !slices.Equal(failing, []int32{1, 2, 3}) {
		t.Errorf("fifo-2 was consumed as delivery attempts %v, want 1, 2, 3", failing)
	}
	if len(r.Consumed) != 8 {
		t.Errorf("%d consumptions, want 8: each message once, fifo-2 three times", len(r.Consumed))
	}
	// The client goes on with fifo-3 once the proxy answered its
	// forward, after the broker stored the copy.
	if n := maxOffset(t, b.addr, "%DLQ%"+group, 0); n != 1 {
		t.Errorf("%%DLQ%%%s holds %d messages, want fifo-2", group, n)
	}
}

// TestGoV5PushConsumerRenewThroughProxy consumes with the Go v5 client's
// push consumer a message its listener takes 7 s over, while the proxy
// makes auto-renewed messages invisible for 4 s only, renewing them 2 s
// before that runs out: the proxy renews it, so it is not delivered
// again while being consumed, and the client's ack, with the handle the
// receive gave, acknowledges it (nothing comes again after).
func TestGoV5PushConsumerRenewThroughProxy(t *testing.T) {
	t.Parallel()
	const topic, group = "GoV5PushSlow", "gov5-pushslow-cg"
	_, px := startV5Cluster(t, nil, map[string]string{topic: ""},
		"defaultInvisibleTimeMills=4000", "renewAheadTimeMillis=2000", "renewSchedulePeriodMillis=500")
	r := runGoV5(t, px, "pushslow", "TOPIC="+topic, "GROUP="+group, "SLOW_MS=7000")
	var got []string
	for _, m := range r.Consumed {
		got = append(got, fmt.Sprintf("%s#%d", m.Body, m.Attempt))
	}
	slices.Sort(got)
	if want := []string{"fast-1#1", "slow-0#1"}; !slices.Equal(got, want) {
		t.Errorf("consumed %q, want %q: each once", got, want)
	}
}

// bodiesOf are the bodies of ms, in order.
func bodiesOf(ms []result.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}
