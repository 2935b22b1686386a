package grpcproxy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// sendMany sends msgs in one request as clientID and returns the answer,
// failing the test on a gRPC error.
func (c *testCluster) sendMany(t *testing.T, clientID string, msgs ...*rmqpb.Message) *rmqpb.SendMessageResponse {
	t.Helper()
	resp, err := c.rpc.SendMessage(callCtx(t, clientID, 10*time.Second), &rmqpb.SendMessageRequest{Messages: msgs})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	return resp
}

// Several messages in one request are one batch, as RocketMQ's proxy sends
// them (SEND_BATCH_MESSAGE to one queue): they land in one queue at
// consecutive offsets whatever their message groups, and the answer is
// one entry as RocketMQ's client library reads a batch's answer: the ids
// joined by commas, the first message's offset, the first message's id as
// the transaction id. Each message keeps its own body, id and properties,
// a gzip one inflated.
func TestSendMessageBatch(t *testing.T) {
	// Messages of a group on a NORMAL topic are FIFO messages to the
	// type check, which RocketMQ's proxy makes off (its
	// enableTopicMessageTypeCheck): the groups show that a batch does not
	// follow them.
	c := startTestCluster(t, func(cfg *Config) { cfg.CheckMessageType = false })
	const topic, group, client = "BatchT", "BatchGroup", "batch-client"
	const queues = 4
	c.createTopic(t, topic, queues, "")

	var msgs []*rmqpb.Message
	for i := range 5 {
		m := newMessage(topic, fmt.Sprintf("batch-%d", i))
		m.SystemProperties.MessageGroup = proto.String(fmt.Sprintf("group-%d", i)) // ignored: a batch goes to the next queue
		m.UserProperties["i"] = fmt.Sprint(i)
		msgs = append(msgs, m)
	}
	msgs[2].Body = gzipped(t, []byte("batch-2"))
	msgs[2].SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
	ids := func(ms []*rmqpb.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.GetSystemProperties().GetMessageId())
		}
		return out
	}

	resp := c.sendMany(t, client, msgs...)
	if resp.GetStatus().GetCode() != rmqpb.Code_OK || len(resp.GetEntries()) != 1 {
		t.Fatalf("batch send answered %v with entries %v, want OK with one entry", resp.GetStatus(), resp.GetEntries())
	}
	e := resp.GetEntries()[0]
	if want := strings.Join(ids(msgs), ","); e.GetStatus().GetCode() != rmqpb.Code_OK || e.GetMessageId() != want ||
		e.GetOffset() != 0 || e.GetTransactionId() != msgs[0].GetSystemProperties().GetMessageId() {
		t.Fatalf("batch entry %v, want OK, ids %s, offset 0, transaction id %s", e, want, msgs[0].GetSystemProperties().GetMessageId())
	}
	offsets := c.waitAnyQueue(t, topic, queues, 5)

	// A second batch lands in one queue too, after what that queue holds.
	more := []*rmqpb.Message{newMessage(topic, "batch-5"), newMessage(topic, "batch-6")}
	resp = c.sendMany(t, client, more...)
	if resp.GetStatus().GetCode() != rmqpb.Code_OK || len(resp.GetEntries()) != 1 {
		t.Fatalf("second batch answered %v with entries %v, want OK with one entry", resp.GetStatus(), resp.GetEntries())
	}
	e2 := resp.GetEntries()[0]
	if want := strings.Join(ids(more), ","); e2.GetMessageId() != want {
		t.Fatalf("second batch entry %v, want ids %s", e2, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.maxOffsets(t, topic, queues)
		grew := 0
		for q := range queues {
			if d := got[q] - offsets[q]; d == 2 && offsets[q] == e2.GetOffset() {
				grew++
			} else if d != 0 {
				grew = -1
				break
			}
		}
		if grew == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the second batch (entry offset %d) the queues hold %v, were %v: want one queue 2 more from that offset", e2.GetOffset(), got, offsets)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Each message comes back with its own id, body and properties, the
	// first batch's at offsets 0..4 of one queue, in the request's order.
	got := c.receiveN(t, client, receiveRequest(group, topic, 30*time.Second, time.Second), 7)
	var first []*rmqpb.Message
	for _, m := range got {
		if strings.HasPrefix(string(m.GetBody()), "batch-") && m.GetUserProperties()["i"] != "" {
			first = append(first, m)
		}
	}
	slices.SortFunc(first, func(a, b *rmqpb.Message) int {
		return int(a.GetSystemProperties().GetQueueOffset() - b.GetSystemProperties().GetQueueOffset())
	})
	if len(first) != 5 {
		t.Fatalf("received %d messages of the first batch, want 5", len(first))
	}
	for i, m := range first {
		sp := m.GetSystemProperties()
		if sp.GetQueueOffset() != int64(i) || sp.GetQueueId() != first[0].GetSystemProperties().GetQueueId() ||
			sp.GetMessageId() != msgs[i].GetSystemProperties().GetMessageId() || string(m.GetBody()) != fmt.Sprintf("batch-%d", i) ||
			m.GetUserProperties()["i"] != fmt.Sprint(i) || sp.GetMessageGroup() != fmt.Sprintf("group-%d", i) {
			t.Errorf("message %d of the batch came back as queue %d offset %d id %s body %q properties %v group %q",
				i, sp.GetQueueId(), sp.GetQueueOffset(), sp.GetMessageId(), m.GetBody(), m.GetUserProperties(), sp.GetMessageGroup())
		}
	}
}

// waitAnyQueue waits until exactly one of topic's queues holds n messages
// and the others none, and returns the queues' max offsets.
func (c *testCluster) waitAnyQueue(t *testing.T, topic string, queues int, n int64) []int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.maxOffsets(t, topic, queues)
		full, empty := 0, 0
		for _, o := range got {
			switch o {
			case n:
				full++
			case 0:
				empty++
			}
		}
		if full == 1 && empty == queues-1 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("max offsets of %s are %v, want one queue of %d and the others empty", topic, got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A request of several messages is refused as RocketMQ's proxy refuses it,
// and nothing of it is stored: messages of two topics are
// MESSAGE_CORRUPTED; on a topic of one type only the first message's type
// is checked; what a batch cannot carry (a transactional message, a
// delivery time, a retry topic) is INTERNAL_SERVER_ERROR, RocketMQ's code
// for its MessageBatch's and its broker's refusals of such a batch.
func TestSendMessageBatchRefusals(t *testing.T) {
	c := startTestCluster(t, nil)
	const normal, txn, fifo, retry, client = "BatchRefuseT", "BatchRefuseTxn", "BatchRefuseFifo", "%RETRY%BatchRefuseGroup", "batch-refuse"
	c.createTopic(t, normal, 1, "")
	c.createTopic(t, txn, 1, "+message.type=TRANSACTION")
	c.createTopic(t, fifo, 1, "+message.type=FIFO")
	c.createTopic(t, retry, 1, "")
	fifoMsg := func(body string) *rmqpb.Message {
		m := newMessage(fifo, body)
		m.SystemProperties.MessageType = rmqpb.MessageType_FIFO
		m.SystemProperties.MessageGroup = proto.String("g")
		return m
	}
	txnMsg := func(topic, body string) *rmqpb.Message {
		m := newMessage(topic, body)
		m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
		return m
	}
	delayMsg := func(body string) *rmqpb.Message {
		m := newMessage(normal, body)
		m.SystemProperties.MessageType = rmqpb.MessageType_DELAY
		m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(time.Hour))
		return m
	}
	for _, tc := range []struct {
		name string
		msgs []*rmqpb.Message
		want rmqpb.Code
	}{
		{"two topics", []*rmqpb.Message{newMessage(normal, "x"), newMessage(fifo, "y")}, rmqpb.Code_MESSAGE_CORRUPTED},
		{"first message of another type", []*rmqpb.Message{newMessage(fifo, "x"), fifoMsg("y")}, rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"transactional first", []*rmqpb.Message{txnMsg(txn, "x"), txnMsg(txn, "y")}, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"transactional second", []*rmqpb.Message{newMessage(normal, "x"), txnMsg(normal, "y")}, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"delivery time", []*rmqpb.Message{newMessage(normal, "x"), delayMsg("y")}, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"retry topic", []*rmqpb.Message{newMessage(retry, "x"), newMessage(retry, "y")}, rmqpb.Code_INTERNAL_SERVER_ERROR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.sendMany(t, client, tc.msgs...)
			if resp.GetStatus().GetCode() != tc.want || len(resp.GetEntries()) != 0 {
				t.Fatalf("SendMessage answered %v with entries %v, want %v without entries", resp.GetStatus(), resp.GetEntries(), tc.want)
			}
		})
	}
	// On a FIFO topic a batch whose first message is FIFO is taken, the
	// others' types unchecked, as RocketMQ's proxy takes it.
	if resp := c.sendMany(t, client, fifoMsg("a"), newMessage(fifo, "b")); resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("FIFO batch with a normal second message answered %v, want OK", resp.GetStatus())
	}
	c.waitMaxOffsets(t, fifo, []int64{2})
	// Nothing of the refused requests was stored.
	c.send(t, client, newMessage(normal, "accepted"))
	c.waitMaxOffsets(t, normal, []int64{1})
	c.waitMaxOffsets(t, txn, []int64{0})
	c.waitMaxOffsets(t, retry, []int64{0})
}

// The broker's answer to a send is read as RocketMQ's client library and
// proxy read it: SUCCESS is an OK entry with the queue offset and the
// broker's transaction id; the three send statuses of a stored message
// without the durability it asked for are an entry with their own code
// and no offset; any other code (and a failed call) is an error, which
// SendMessage answers in the response's status without entries.
func TestSendAnswerAsRocketMQProxy(t *testing.T) {
	q := writeQueue{broker: "broker-a", addr: "127.0.0.1:1", queueID: 3}
	answer := func(code int32, ext map[string]string) *remoting.Command {
		return &remoting.Command{Code: code, Remark: "remark", ExtFields: ext}
	}
	e, rh, err := sendAnswer(q, answer(remoting.Success, map[string]string{"queueOffset": "42", "transactionId": "T1", "msgId": "X"}), nil)
	if err != nil || rh == nil || e.GetStatus().GetCode() != rmqpb.Code_OK || e.GetOffset() != 42 || e.GetTransactionId() != "T1" {
		t.Fatalf("SUCCESS read as %v, %v, %v", e, rh, err)
	}
	for code, want := range map[int32]rmqpb.Code{
		remoting.FlushDiskTimeout:  rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT,
		remoting.FlushSlaveTimeout: rmqpb.Code_SLAVE_PERSISTENCE_TIMEOUT,
		remoting.SlaveNotAvailable: rmqpb.Code_HA_NOT_AVAILABLE,
	} {
		e, rh, err := sendAnswer(q, answer(code, map[string]string{"queueOffset": "42"}), nil)
		if err != nil || rh != nil || e.GetStatus().GetCode() != want || e.GetOffset() != 0 || e.GetMessageId() != "" {
			t.Errorf("code %d read as %v, %v, %v; want an entry of %v only", code, e, rh, err, want)
		}
	}
	for _, code := range []int32{remoting.MessageIllegal, remoting.SystemError, remoting.TopicNotExist} {
		if e, _, err := sendAnswer(q, answer(code, nil), nil); err == nil || e != nil {
			t.Errorf("code %d read as %v, %v; want an error", code, e, err)
		}
	}
	if e, _, err := sendAnswer(q, nil, remoting.ErrTimeout); statusOf(err).GetCode() != rmqpb.Code_PROXY_TIMEOUT || e != nil {
		t.Errorf("a timed out call read as %v, %v; want PROXY_TIMEOUT", e, err)
	}
}
