package grpcproxy

import (
	"cmp"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// Each converter answers a broker's code with the status code RocketMQ
// 5.3's proxy gives it: ResponseBuilder's few codes, the send statuses
// of SendMessageActivity, POLLING_FULL of a pop, NO_EXIST of an ack, and
// INTERNAL_SERVER_ERROR for everything else.
func TestBrokerCodesAsRocketMQProxy(t *testing.T) {
	type conv func(string, *remoting.Command) error
	for _, tc := range []struct {
		name string
		f    conv
		code int32
		want rmqpb.Code
	}{
		{"any: TOPIC_NOT_EXIST", remotingFailure, remoting.TopicNotExist, rmqpb.Code_TOPIC_NOT_FOUND},
		{"any: SUBSCRIPTION_GROUP_NOT_EXIST", remotingFailure, remoting.SubscriptionGroupNotExist, rmqpb.Code_CONSUMER_GROUP_NOT_FOUND},
		{"any: SYSTEM_BUSY", remotingFailure, remoting.SystemBusy, rmqpb.Code_TOO_MANY_REQUESTS},
		{"any: REQUEST_CODE_NOT_SUPPORTED", remotingFailure, remoting.RequestCodeNotSupported, rmqpb.Code_NOT_IMPLEMENTED},
		{"any: NO_PERMISSION", remotingFailure, remoting.NoPermission, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"any: MESSAGE_ILLEGAL", remotingFailure, remoting.MessageIllegal, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"any: SERVICE_NOT_AVAILABLE", remotingFailure, remoting.ServiceNotAvailable, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"any: FLUSH_DISK_TIMEOUT", remotingFailure, remoting.FlushDiskTimeout, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"any: POLLING_FULL", remotingFailure, remoting.PollingFull, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"send: FLUSH_DISK_TIMEOUT", sendFailure, remoting.FlushDiskTimeout, rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT},
		{"send: FLUSH_SLAVE_TIMEOUT", sendFailure, remoting.FlushSlaveTimeout, rmqpb.Code_SLAVE_PERSISTENCE_TIMEOUT},
		{"send: SLAVE_NOT_AVAILABLE", sendFailure, remoting.SlaveNotAvailable, rmqpb.Code_HA_NOT_AVAILABLE},
		{"send: TOPIC_NOT_EXIST", sendFailure, remoting.TopicNotExist, rmqpb.Code_TOPIC_NOT_FOUND},
		{"send: NO_PERMISSION", sendFailure, remoting.NoPermission, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"pop: POLLING_FULL", popFailure, remoting.PollingFull, rmqpb.Code_TOO_MANY_REQUESTS},
		{"pop: SUBSCRIPTION_PARSE_FAILED", popFailure, remoting.SubscriptionParseFailed, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"ack: NO_MESSAGE", ackFailure, remoting.NoMessage, rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"ack: TOPIC_NOT_EXIST", ackFailure, remoting.TopicNotExist, rmqpb.Code_INTERNAL_SERVER_ERROR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(tc.f("call", &remoting.Command{Code: tc.code, Remark: "remark"}))
			if st.GetCode() != tc.want {
				t.Fatalf("broker code %d answered %v, want %v", tc.code, st, tc.want)
			}
		})
	}
}

// A send the broker refuses (its maxMessageSize is below the proxy's) is
// answered INTERNAL_SERVER_ERROR, as RocketMQ's proxy answers an
// MQBrokerException of MESSAGE_ILLEGAL, one message or several; acks and changes of invisible
// time the broker refuses (an offset past the queue's end: NO_MESSAGE; a
// queue the topic does not have: MESSAGE_ILLEGAL) are
// INTERNAL_SERVER_ERROR, which a client retries, not
// INVALID_RECEIPT_HANDLE, which it gives up on.
func TestBrokerRefusalsAnsweredAsRocketMQProxy(t *testing.T) {
	c := startTestClusterWith(t, map[string]string{"maxMessageSize": "1024"}, nil)
	const topic, group = "StatusRefused", "GroupStatusRefused"
	c.createTopic(t, topic, 1, "")

	// RocketMQ's proxy answers the refusal (its client library's
	// MQBrokerException) in the response's status, without entries; a
	// batch (SEND_BATCH_MESSAGE) is answered as a single message.
	for _, msgs := range [][]*rmqpb.Message{
		{newMessage(topic, strings.Repeat("x", 2048))},
		{newMessage(topic, "small"), newMessage(topic, strings.Repeat("x", 2048))},
	} {
		resp, err := c.rpc.SendMessage(callCtx(t, "status-client", 10*time.Second), &rmqpb.SendMessageRequest{Messages: msgs})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		if resp.GetStatus().GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR || len(resp.GetEntries()) != 0 {
			t.Fatalf("send of %d messages the broker refuses answered %v, entries %v; want INTERNAL_SERVER_ERROR without entries",
				len(msgs), resp.GetStatus(), resp.GetEntries())
		}
	}
	c.waitMaxOffsets(t, topic, []int64{0})

	now := time.Now().UnixMilli()
	handle := func(queueID int32, offset int64) string {
		return Handle{Handle: pop.Handle{PopTime: now, InvisibleTime: 60_000, RetryFlag: "0", BrokerName: c.brokerName,
			QueueID: queueID, QueueOffset: offset}, CommitLogOffset: 0}.String()
	}
	for _, tc := range []struct {
		name   string
		handle string
	}{
		{"offset past the queue's end", handle(0, 1000)},
		{"queue the topic does not have", handle(7, 0)},
	} {
		t.Run("ack of "+tc.name, func(t *testing.T) {
			if st := c.ack(t, "status-client", group, topic, "01NOPE", tc.handle); st.GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR {
				t.Fatalf("ack the broker refuses answered %v, want INTERNAL_SERVER_ERROR", st)
			}
		})
		t.Run("change of invisible time of "+tc.name, func(t *testing.T) {
			resp, err := c.rpc.ChangeInvisibleDuration(callCtx(t, "status-client", 10*time.Second), &rmqpb.ChangeInvisibleDurationRequest{
				Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
				ReceiptHandle: tc.handle, InvisibleDuration: durationpb.New(10 * time.Second), MessageId: "01NOPE",
			})
			if err != nil {
				t.Fatalf("ChangeInvisibleDuration: %v", err)
			}
			if resp.GetStatus().GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR {
				t.Fatalf("change the broker refuses answered %v, want INTERNAL_SERVER_ERROR", resp.GetStatus())
			}
		})
	}
}

// Blank is Java's StringUtils.isBlank, as RocketMQ's proxy checks it:
// U+00A0, U+2007 and U+202F are no whitespace to Java (a message id, tag,
// key or message group of them is sent), U+2003 and U+3000 are (a
// message id of them is ILLEGAL_MESSAGE_ID, a born host of them is none:
// the caller's address stands for it).
func TestBlankAsJava(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "BlankJava", "GroupBlankJava"
	c.createTopic(t, topic, 1, "")
	c.createTopic(t, "BlankJavaFifo", 1, "+message.type=FIFO")
	send := func(m *rmqpb.Message) *rmqpb.SendMessageResponse {
		t.Helper()
		resp, err := c.rpc.SendMessage(callCtx(t, "blank-client", 10*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		return resp
	}
	for _, tc := range []struct {
		name   string
		mutate func(*rmqpb.SystemProperties)
		want   rmqpb.Code
		topic  string // BlankJava when empty
	}{
		{"message id of a no-break space", func(sp *rmqpb.SystemProperties) { sp.MessageId = "\u00a0" }, rmqpb.Code_OK, ""},
		{"tag of a figure space", func(sp *rmqpb.SystemProperties) { sp.Tag = proto.String("\u2007") }, rmqpb.Code_OK, ""},
		{"key of a narrow no-break space", func(sp *rmqpb.SystemProperties) { sp.Keys = []string{"\u202f"} }, rmqpb.Code_OK, ""},
		{"message group of a no-break space", func(sp *rmqpb.SystemProperties) { sp.MessageGroup = proto.String("\u00a0") }, rmqpb.Code_OK, "BlankJavaFifo"},
		{"message id of an em space", func(sp *rmqpb.SystemProperties) { sp.MessageId = "\u2003" }, rmqpb.Code_ILLEGAL_MESSAGE_ID, ""},
		{"message id of an information separator", func(sp *rmqpb.SystemProperties) { sp.MessageId = "\x1c" }, rmqpb.Code_ILLEGAL_MESSAGE_ID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage(cmp.Or(tc.topic, topic), tc.name)
			tc.mutate(m.SystemProperties)
			if resp := send(m); resp.GetStatus().GetCode() != tc.want {
				t.Fatalf("send answered %v, want %v", resp.GetStatus(), tc.want)
			}
		})
	}
	// Drain what the cases stored, then send one with a blank born host.
	c.receiveN(t, "blank-client", receiveRequest(group, topic, 30*time.Second, time.Second), 3)
	m := newMessage(topic, "born")
	m.SystemProperties.BornHost = "\u3000"
	if resp := send(m); resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("send with a blank born host answered %v", resp.GetStatus())
	}
	got := c.receiveN(t, "blank-client", receiveRequest(group, topic, 30*time.Second, time.Second), 1)[0]
	if bh := got.GetSystemProperties().GetBornHost(); !strings.HasPrefix(bh, "127.0.0.1:") {
		t.Fatalf("born host %q, want the client's address for a blank one", bh)
	}
}

// A receipt handle naming a broker group the topic does not have is
// INVALID_RECEIPT_HANDLE for an ack, a change of invisible time and a
// dead-letter forward, as RocketMQ's proxy refuses a handle whose broker
// it cannot resolve.
func TestHandleOfUnknownBroker(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "UnknownBroker", "GroupUnknownBroker"
	c.createTopic(t, topic, 1, "")
	handle := Handle{Handle: pop.Handle{PopTime: time.Now().UnixMilli(), InvisibleTime: 60_000, RetryFlag: "0",
		BrokerName: "broker-x", QueueID: 0, QueueOffset: 0}, CommitLogOffset: 0}.String()
	if st := c.ack(t, "unknown-client", group, topic, "01NOPE", handle); st.GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Errorf("ack answered %v, want INVALID_RECEIPT_HANDLE", st)
	}
	ch, err := c.rpc.ChangeInvisibleDuration(callCtx(t, "unknown-client", 10*time.Second), &rmqpb.ChangeInvisibleDurationRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		ReceiptHandle: handle, InvisibleDuration: durationpb.New(10 * time.Second), MessageId: "01NOPE",
	})
	if err != nil || ch.GetStatus().GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Errorf("change of invisible time answered %v %v, want INVALID_RECEIPT_HANDLE", ch.GetStatus(), err)
	}
	fw, err := c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, "unknown-client", 10*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic}, ReceiptHandle: handle, MessageId: "01NOPE",
	})
	if err != nil || fw.GetStatus().GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Errorf("forward answered %v %v, want INVALID_RECEIPT_HANDLE", fw.GetStatus(), err)
	}
}

// Every call without a client id (no x-mq-client-id, or a blank one) is
// refused with CLIENT_ID_REQUIRED before its handler, as RocketMQ's proxy
// refuses it.
func TestCallsNeedClientID(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "NeedsClientID", "GroupNeedsClientID"
	c.createTopic(t, topic, 1, "")
	for _, id := range []string{"", "  "} {
		ctx := func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(cancel)
			if id == "" {
				return ctx
			}
			return metadata.AppendToOutgoingContext(ctx, mdClientID, id)
		}
		codes := map[string]rmqpb.Code{}
		if r, err := c.rpc.QueryRoute(ctx(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}}); err == nil {
			codes["QueryRoute"] = r.GetStatus().GetCode()
		}
		if r, err := c.rpc.SendMessage(ctx(), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "x")}}); err == nil {
			codes["SendMessage"] = r.GetStatus().GetCode()
		}
		if r, err := c.rpc.QueryAssignment(ctx(), &rmqpb.QueryAssignmentRequest{Topic: &rmqpb.Resource{Name: topic}, Group: &rmqpb.Resource{Name: group}}); err == nil {
			codes["QueryAssignment"] = r.GetStatus().GetCode()
		}
		if r, err := c.rpc.RecallMessage(ctx(), &rmqpb.RecallMessageRequest{Topic: &rmqpb.Resource{Name: topic}, RecallHandle: "x"}); err == nil {
			codes["RecallMessage"] = r.GetStatus().GetCode()
		}
		if stream, err := c.rpc.ReceiveMessage(ctx(), receiveRequest(group, topic, 10*time.Second, time.Second)); err == nil {
			if r, err := stream.Recv(); err == nil {
				codes["ReceiveMessage"] = r.GetStatus().GetCode()
			}
		}
		for _, m := range []string{"QueryRoute", "SendMessage", "QueryAssignment", "RecallMessage", "ReceiveMessage"} {
			if code, ok := codes[m]; !ok || code != rmqpb.Code_CLIENT_ID_REQUIRED {
				t.Errorf("%s with client id %q answered %v (answered: %v), want CLIENT_ID_REQUIRED", m, id, code, ok)
			}
		}
	}
	// Nothing was stored.
	if got := c.maxOffsets(t, topic, 1); got[0] != 0 {
		t.Fatalf("a send without a client id was stored: max offset %d", got[0])
	}
}

// A receive whose deadline leaves too little time for the shortest long
// polling is ILLEGAL_POLLING_TIME for clients of version 5.0.3 on, and
// BAD_REQUEST for older ones and those that name no version, compared as
// RocketMQ's proxy compares versions (as strings); the polling time is
// checked before the topic and group.
func TestIllegalPollingTimeByClientVersion(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic = "PollVersion"
	c.createTopic(t, topic, 1, "")
	for _, tc := range []struct {
		version, topic string
		want           rmqpb.Code
	}{
		{"5.0.3", topic, rmqpb.Code_ILLEGAL_POLLING_TIME},
		{"5.3.1", "bad topic", rmqpb.Code_ILLEGAL_POLLING_TIME},
		{"5.0.2", topic, rmqpb.Code_BAD_REQUEST},
		{"5.0.10", topic, rmqpb.Code_BAD_REQUEST},
		{"", topic, rmqpb.Code_BAD_REQUEST},
	} {
		t.Run(tc.version+" "+tc.topic, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
			defer cancel()
			md := []string{mdClientID, "poll-client"}
			if tc.version != "" {
				md = append(md, mdVersion, tc.version)
			}
			stream, err := c.rpc.ReceiveMessage(metadata.AppendToOutgoingContext(ctx, md...), receiveRequest("GroupPollVersion", tc.topic, 10*time.Second, time.Second))
			if err != nil {
				t.Fatalf("ReceiveMessage: %v", err)
			}
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("ReceiveMessage: %v", err)
			}
			if r.GetStatus().GetCode() != tc.want {
				t.Fatalf("receive answered %v, want %v", r.GetStatus(), tc.want)
			}
		})
	}
}

// An ack without entries is INTERNAL_SERVER_ERROR, as RocketMQ's proxy
// answers an ack with no result ("ack message result is empty").
func TestAckWithoutEntries(t *testing.T) {
	c := startTestCluster(t, nil)
	resp, err := c.rpc.AckMessage(callCtx(t, "empty-ack", 5*time.Second), &rmqpb.AckMessageRequest{
		Group: &rmqpb.Resource{Name: "GroupEmptyAck"}, Topic: &rmqpb.Resource{Name: "EmptyAck"}})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR || len(resp.GetEntries()) != 0 {
		t.Fatalf("ack without entries answered %v %v, want INTERNAL_SERVER_ERROR", resp, err)
	}
}

// A message whose receipt handle expired is forwarded to the dead-letter
// queue all the same, as RocketMQ's proxy forwards it: a FIFO push
// consumer would send the forward again, at once and without end, while
// it is answered anything but OK.
func TestForwardWithExpiredHandle(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group, client = "ForwardExpired", "GroupForwardExpired", "forward-expired"
	c.createTopic(t, topic, 1, "")
	c.send(t, client, newMessage(topic, "late"))
	got := c.receiveN(t, client, receiveRequest(group, topic, time.Second, time.Second), 1)[0]
	h, err := ParseHandle(got.GetSystemProperties().GetReceiptHandle())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.UnixMilli(h.PopTime+h.InvisibleTime)) + 100*time.Millisecond)
	resp, err := c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, client, 10*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		ReceiptHandle: got.GetSystemProperties().GetReceiptHandle(), MessageId: got.GetSystemProperties().GetMessageId(),
	})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("forward with an expired handle answered %v %v, want OK", resp.GetStatus(), err)
	}
	c.waitMaxOffsets(t, "%DLQ%"+group, []int64{1})
}

// A heartbeat and a termination take the client's type from its settings,
// as RocketMQ's proxy does: without settings they are
// UNRECOGNIZED_CLIENT_TYPE, a consumer's without a legal group
// ILLEGAL_CONSUMER_GROUP.
func TestHeartbeatAndTerminationByClientSettings(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "HeartbeatSettings", "GroupHeartbeatSettings"
	c.createTopic(t, topic, 1, "")
	consumer := &rmqpb.Settings{ClientType: rmqpb.ClientType_SIMPLE_CONSUMER.Enum(),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic}}}}}}
	producer := &rmqpb.Settings{ClientType: rmqpb.ClientType_PRODUCER.Enum(),
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}}}
	c.telemetryOnce(t, "hb-consumer", consumer)
	c.telemetryOnce(t, "hb-producer", producer)
	heartbeat := func(client string, group *rmqpb.Resource) rmqpb.Code {
		t.Helper()
		resp, err := c.rpc.Heartbeat(callCtx(t, client, 10*time.Second), &rmqpb.HeartbeatRequest{Group: group, ClientType: rmqpb.ClientType_SIMPLE_CONSUMER})
		if err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		return resp.GetStatus().GetCode()
	}
	terminate := func(client string, group *rmqpb.Resource) rmqpb.Code {
		t.Helper()
		resp, err := c.rpc.NotifyClientTermination(callCtx(t, client, 10*time.Second), &rmqpb.NotifyClientTerminationRequest{Group: group})
		if err != nil {
			t.Fatalf("NotifyClientTermination: %v", err)
		}
		return resp.GetStatus().GetCode()
	}
	for _, tc := range []struct {
		name string
		got  rmqpb.Code
		want rmqpb.Code
	}{
		{"heartbeat without settings", heartbeat("hb-unknown", &rmqpb.Resource{Name: group}), rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE},
		{"consumer's heartbeat without a group", heartbeat("hb-consumer", nil), rmqpb.Code_ILLEGAL_CONSUMER_GROUP},
		{"consumer's heartbeat", heartbeat("hb-consumer", &rmqpb.Resource{Name: group}), rmqpb.Code_OK},
		{"producer's heartbeat", heartbeat("hb-producer", nil), rmqpb.Code_OK},
		{"termination without settings", terminate("hb-unknown", &rmqpb.Resource{Name: group}), rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE},
		{"consumer's termination", terminate("hb-consumer", &rmqpb.Resource{Name: group}), rmqpb.Code_OK},
		{"producer's termination", terminate("hb-producer", nil), rmqpb.Code_OK},
	} {
		if tc.got != tc.want {
			t.Errorf("%s answered %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
