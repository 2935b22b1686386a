package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// queryByKey asks a broker for the messages of topic indexed under key
// (QUERY_MESSAGE; uniq asks for the unique-key index, as mqadmin
// queryMsgById does).
func queryByKey(t testing.TB, broker, topic, key string, uniq bool) []*primitive.MessageExt {
	t.Helper()
	ext := map[string]string{
		"topic": topic, "key": key, "maxNum": "32",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10),
	}
	if uniq {
		ext["_UNIQUE_KEY_QUERY"] = "true"
	}
	r, err := rawInvoke(broker, 12 /* QUERY_MESSAGE */, ext, nil)
	if err != nil {
		t.Fatalf("query %s by key %s: %v", topic, key, err)
	}
	if r.Code == respSuccess {
		return primitive.DecodeMessage(r.Body)
	}
	if r.Code != respQueryNotFound {
		t.Fatalf("query %s by key %s: code %d %s", topic, key, r.Code, r.Remark)
	}
	return nil
}

// TestCompressionAndBatches: a producer that compresses bodies over 100
// bytes at level 9 sends single messages under and over the threshold, a
// batch mixing small and 200 KiB bodies (the Go client never compresses a
// batch), and a batch with SendOneWay. A push consumer receives every body
// as sent, the single large ones flagged compressed as they were stored,
// the batch members not; a lookup by key finds a compressed message with
// its original body.
func TestCompressionAndBatches(t *testing.T) {
	t.Parallel()
	const topic = "E2ECompress"
	ns, b := startWithTopic(t, topic, 2)
	p := newProducer(t, ns.addr, "pg-compress",
		producer.WithCompressMsgBodyOverHowmuch(100), producer.WithCompressLevel(9),
		producer.WithSendMsgTimeout(20*time.Second))

	body := func(id string, size int) []byte {
		// Compressible: repeated text after a readable id.
		b := []byte(id + ":" + strings.Repeat("rocketkv compresses nothing, the client does. ", size/46+1))
		return b[:max(size, len(id)+1)]
	}
	want := map[string][]byte{}     // id -> body
	compressed := map[string]bool{} // id -> sent compressed
	msg := func(id string, size int) *primitive.Message {
		m := primitive.NewMessage(topic, body(id, size))
		m.WithKeys([]string{"ck-" + id})
		m.WithProperty("id", id)
		want[id] = m.Body
		return m
	}
	for i, size := range []int{50, 100, 5000, 1 << 20} {
		id := fmt.Sprintf("single-%d", i)
		if _, err := p.SendSync(context.Background(), msg(id, size)); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
		compressed[id] = size >= 100
	}
	var batch []*primitive.Message
	for i, size := range []int{10, 200 << 10, 30, 200 << 10, 5} {
		batch = append(batch, msg(fmt.Sprintf("batch-%d", i), size))
	}
	res, err := p.SendSync(context.Background(), batch...)
	if err != nil {
		t.Fatalf("send batch: %v", err)
	}
	if ids := strings.Split(res.OffsetMsgID, ","); len(ids) != len(batch) {
		t.Errorf("batch send answered %d offset message ids, want %d", len(ids), len(batch))
	}
	var oneway []*primitive.Message
	for i, size := range []int{20, 150 << 10, 40} {
		oneway = append(oneway, msg(fmt.Sprintf("oneway-%d", i), size))
	}
	if err := p.SendOneWay(context.Background(), oneway...); err != nil {
		t.Fatalf("send one-way batch: %v", err)
	}

	type received struct {
		body    []byte
		sysFlag int32
	}
	var mu sync.Mutex
	gotMsgs := map[string]received{}
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-compress", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				id := m.GetProperty("id")
				mu.Lock()
				gotMsgs[id] = received{append([]byte(nil), m.Body...), m.SysFlag}
				mu.Unlock()
				got.add(id)
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, len(want), 60*time.Second)
	mu.Lock()
	for id, w := range want {
		r := gotMsgs[id]
		if !bytes.Equal(r.body, w) {
			t.Errorf("%s: sent %d bytes, received %d, different", id, len(w), len(r.body))
		}
		if isC := int(r.sysFlag)&primitive.CompressedFlag != 0; isC != compressed[id] {
			t.Errorf("%s: stored with sys flag %#x, compressed %v, want %v", id, r.sysFlag, isC, compressed[id])
		}
	}
	mu.Unlock()

	for _, id := range []string{"single-2", "batch-1"} {
		var found []*primitive.MessageExt
		waitUntil(t, 10*time.Second, "key index of ck-"+id, func() bool {
			found = queryByKey(t, b.addr, topic, "ck-"+id, false)
			return len(found) > 0
		})
		if len(found) != 1 || !bytes.Equal(found[0].Body, want[id]) {
			t.Errorf("lookup of ck-%s found %d messages, first body equal: %v", id, len(found), len(found) > 0 && bytes.Equal(found[0].Body, want[id]))
		}
	}
}

// TestQueueSelectorsKeysAndLookups: the Go producer's queue selectors put
// messages where they say (round robin cycles through the queues, manual
// obeys the message's queue, hash keeps a sharding key on one queue), and
// the broker reports the queue the selector chose; a message sent with
// keys and tags is found by each key and by its unique id
// (_UNIQUE_KEY_QUERY), with keys, tags and body intact, and by its offset
// message id (VIEW_MESSAGE_BY_ID).
func TestQueueSelectorsKeysAndLookups(t *testing.T) {
	t.Parallel()
	const topic, queues = "E2ESelect", 4
	ns, b := startWithTopic(t, topic, queues)

	rr := newProducer(t, ns.addr, "pg-select-rr", producer.WithQueueSelector(producer.NewRoundRobinQueueSelector()))
	var seq []int
	for i := 0; i < 2*queues; i++ {
		res, err := rr.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("rr-%d", i))))
		if err != nil {
			t.Fatalf("round robin send %d: %v", i, err)
		}
		seq = append(seq, res.MessageQueue.QueueId)
	}
	for i := 1; i < len(seq); i++ {
		if seq[i] != (seq[i-1]+1)%queues {
			t.Errorf("round robin sent to queues %v, want each next queue in turn", seq)
			break
		}
	}

	manual := newProducer(t, ns.addr, "pg-select-manual", producer.WithQueueSelector(producer.NewManualQueueSelector()))
	// The max offset counts dispatched messages, which may trail the
	// answered sends: wait for the round robin's before reading it.
	waitDispatched(t, b.addr, topic, queues, 2*queues)
	next := maxOffset(t, b.addr, topic, 3)
	for i := 0; i < 5; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("manual-%d", i)))
		m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: 3}
		res, err := manual.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("manual send %d: %v", i, err)
		}
		if res.MessageQueue.QueueId != 3 || res.QueueOffset != next {
			t.Errorf("manual send %d to queue 3 (next offset %d) answered queue %d offset %d", i, next, res.MessageQueue.QueueId, res.QueueOffset)
		}
		next++
	}

	hash := newProducer(t, ns.addr, "pg-select-hash", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	queueOf := map[string]int{}
	for i := 0; i < 24; i++ {
		key := fmt.Sprintf("order-%d", i%6)
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("hash-%d", i)))
		m.WithShardingKey(key)
		res, err := hash.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("hash send %d: %v", i, err)
		}
		if q, ok := queueOf[key]; ok && q != res.MessageQueue.QueueId {
			t.Errorf("%s sent to queues %d and %d", key, q, res.MessageQueue.QueueId)
		}
		queueOf[key] = res.MessageQueue.QueueId
	}

	m := primitive.NewMessage(topic, []byte("keyed body"))
	m.WithTag("TagK")
	m.WithKeys([]string{"alpha-key", "beta-key"})
	res, err := rr.SendSync(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	check := func(how string, found []*primitive.MessageExt) {
		t.Helper()
		if len(found) != 1 {
			t.Errorf("lookup by %s found %d messages, want 1", how, len(found))
			return
		}
		f := found[0]
		if string(f.Body) != "keyed body" || f.GetTags() != "TagK" || f.GetKeys() != "alpha-key beta-key" ||
			f.Topic != topic || f.QueueOffset != res.QueueOffset {
			t.Errorf("lookup by %s: body %q tags %q keys %q topic %q offset %d; sent to offset %d",
				how, f.Body, f.GetTags(), f.GetKeys(), f.Topic, f.QueueOffset, res.QueueOffset)
		}
		if f.MsgId != res.MsgID && f.OffsetMsgId != res.OffsetMsgID {
			t.Errorf("lookup by %s: ids %s/%s, sent as %s/%s", how, f.MsgId, f.OffsetMsgId, res.MsgID, res.OffsetMsgID)
		}
	}
	waitUntil(t, 10*time.Second, "the key index", func() bool { return len(queryByKey(t, b.addr, topic, "beta-key", false)) > 0 })
	check("first key", queryByKey(t, b.addr, topic, "alpha-key", false))
	check("second key", queryByKey(t, b.addr, topic, "beta-key", false))
	check("unique key", queryByKey(t, b.addr, topic, res.MsgID, true))
	if found := queryByKey(t, b.addr, topic, "alpha", false); len(found) != 0 {
		t.Errorf("lookup by a prefix of a key found %d messages", len(found))
	}

	id, err := primitive.UnmarshalMsgID([]byte(res.OffsetMsgID))
	if err != nil {
		t.Fatalf("offset message id %s: %v", res.OffsetMsgID, err)
	}
	r, err := rawInvoke(b.addr, 33 /* VIEW_MESSAGE_BY_ID */, map[string]string{"offset": strconv.FormatInt(id.Offset, 10)}, nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("view message by id: %v %+v", err, r)
	}
	check("offset message id", primitive.DecodeMessage(r.Body))
}

// TestInterceptors: producer and consumer interceptors wrap each send and
// each consumption: the producer's sees the broker's send result, the
// consumer's sees the messages and the callback's result.
func TestInterceptors(t *testing.T) {
	t.Parallel()
	const topic, n = "E2EIntercept", 6
	ns, _ := startWithTopic(t, topic, 2)
	var mu sync.Mutex
	var sendResults []*primitive.SendResult
	var consumed, results []string
	p := newProducer(t, ns.addr, "pg-intercept", producer.WithInterceptor(
		func(ctx context.Context, req, reply interface{}, next primitive.Invoker) error {
			if m, ok := req.(*primitive.Message); ok {
				m.WithProperty("intercepted", "yes")
			}
			err := next(ctx, req, reply)
			if r, ok := reply.(*primitive.SendResult); ok && err == nil {
				mu.Lock()
				sendResults = append(sendResults, r)
				mu.Unlock()
			}
			return err
		}))
	sendN(t, p, topic, "icpt-", n)
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-intercept", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				if m.GetProperty("intercepted") != "yes" {
					t.Errorf("%s arrived without the property the producer interceptor set", m.Body)
				}
				got.add(string(m.Body))
			}
			return consumer.ConsumeSuccess, nil
		},
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithInterceptor(func(ctx context.Context, req, reply interface{}, next primitive.Invoker) error {
			err := next(ctx, req, reply)
			mu.Lock()
			defer mu.Unlock()
			if msgs, ok := req.([]*primitive.MessageExt); ok {
				for _, m := range msgs {
					consumed = append(consumed, string(m.Body))
				}
			}
			if h, ok := reply.(*consumer.ConsumeResultHolder); ok {
				results = append(results, fmt.Sprint(h.ConsumeResult))
			}
			return err
		}))
	got.waitDistinct(t, n, 30*time.Second)
	waitUntil(t, 5*time.Second, "the consumer interceptor saw every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(consumed) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	if len(sendResults) != n {
		t.Errorf("producer interceptor saw %d send results, want %d", len(sendResults), n)
	}
	for _, r := range sendResults {
		if r.Status != primitive.SendOK || r.MsgID == "" || r.MessageQueue == nil {
			t.Errorf("producer interceptor saw %+v", r)
		}
	}
	for _, r := range results {
		if r != fmt.Sprint(consumer.ConsumeSuccess) {
			t.Errorf("consumer interceptor saw result %s", r)
		}
	}
}
