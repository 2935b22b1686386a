package grpcproxy

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/pop"
)

// fuzzRPC is one MessagingService method a fuzzed message is sent to: req
// is a fresh request of its type, call sends it and drains the answer.
type fuzzRPC struct {
	name string
	req  func() proto.Message
	call func(ctx context.Context, c rmqpb.MessagingServiceClient, m proto.Message) error
}

// drain reads a server stream to its end.
func drain[T any](s interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// unary adapts a unary client method to fuzzRPC.call.
func unary[Req proto.Message, Resp any](m func(rmqpb.MessagingServiceClient) func(context.Context, Req, ...grpc.CallOption) (Resp, error)) func(context.Context, rmqpb.MessagingServiceClient, proto.Message) error {
	return func(ctx context.Context, c rmqpb.MessagingServiceClient, req proto.Message) error {
		_, err := m(c)(ctx, req.(Req))
		return err
	}
}

// fuzzRPCs are the proxy's methods, each fed the fuzzer's bytes decoded
// as its request message. PullMessage, UpdateOffset, GetOffset and
// QueryOffset are left out: the proxy answers them UNIMPLEMENTED before
// reading anything.
var fuzzRPCs = []fuzzRPC{
	{"QueryRoute", func() proto.Message { return &rmqpb.QueryRouteRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.QueryRouteRequest, ...grpc.CallOption) (*rmqpb.QueryRouteResponse, error) {
			return c.QueryRoute
		})},
	{"Heartbeat", func() proto.Message { return &rmqpb.HeartbeatRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.HeartbeatRequest, ...grpc.CallOption) (*rmqpb.HeartbeatResponse, error) {
			return c.Heartbeat
		})},
	{"SendMessage", func() proto.Message { return &rmqpb.SendMessageRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.SendMessageRequest, ...grpc.CallOption) (*rmqpb.SendMessageResponse, error) {
			return c.SendMessage
		})},
	{"QueryAssignment", func() proto.Message { return &rmqpb.QueryAssignmentRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.QueryAssignmentRequest, ...grpc.CallOption) (*rmqpb.QueryAssignmentResponse, error) {
			return c.QueryAssignment
		})},
	{"ReceiveMessage", func() proto.Message { return &rmqpb.ReceiveMessageRequest{} },
		func(ctx context.Context, c rmqpb.MessagingServiceClient, m proto.Message) error {
			s, err := c.ReceiveMessage(ctx, m.(*rmqpb.ReceiveMessageRequest))
			return drain[*rmqpb.ReceiveMessageResponse](s, err)
		}},
	{"AckMessage", func() proto.Message { return &rmqpb.AckMessageRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.AckMessageRequest, ...grpc.CallOption) (*rmqpb.AckMessageResponse, error) {
			return c.AckMessage
		})},
	{"ForwardMessageToDeadLetterQueue", func() proto.Message { return &rmqpb.ForwardMessageToDeadLetterQueueRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.ForwardMessageToDeadLetterQueueRequest, ...grpc.CallOption) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
			return c.ForwardMessageToDeadLetterQueue
		})},
	{"EndTransaction", func() proto.Message { return &rmqpb.EndTransactionRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.EndTransactionRequest, ...grpc.CallOption) (*rmqpb.EndTransactionResponse, error) {
			return c.EndTransaction
		})},
	{"Telemetry", func() proto.Message { return &rmqpb.TelemetryCommand{} },
		func(ctx context.Context, c rmqpb.MessagingServiceClient, m proto.Message) error {
			s, err := c.Telemetry(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(m.(*rmqpb.TelemetryCommand)); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if err := s.CloseSend(); err != nil {
				return err
			}
			return drain[*rmqpb.TelemetryCommand](s, nil)
		}},
	{"NotifyClientTermination", func() proto.Message { return &rmqpb.NotifyClientTerminationRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.NotifyClientTerminationRequest, ...grpc.CallOption) (*rmqpb.NotifyClientTerminationResponse, error) {
			return c.NotifyClientTermination
		})},
	{"ChangeInvisibleDuration", func() proto.Message { return &rmqpb.ChangeInvisibleDurationRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.ChangeInvisibleDurationRequest, ...grpc.CallOption) (*rmqpb.ChangeInvisibleDurationResponse, error) {
			return c.ChangeInvisibleDuration
		})},
	{"RecallMessage", func() proto.Message { return &rmqpb.RecallMessageRequest{} },
		unary(func(c rmqpb.MessagingServiceClient) func(context.Context, *rmqpb.RecallMessageRequest, ...grpc.CallOption) (*rmqpb.RecallMessageResponse, error) {
			return c.RecallMessage
		})},
}

// fuzzRPCIndex is the index of the method named name in fuzzRPCs.
func fuzzRPCIndex(tb testing.TB, name string) uint8 {
	for i, r := range fuzzRPCs {
		if r.name == name {
			return uint8(i)
		}
	}
	tb.Fatalf("no fuzzed method %s", name)
	return 0
}

// FuzzRPCRequests sends arbitrary protobuf bytes, decoded as the request
// of each MessagingService method, to a proxy in front of a broker: the
// embedded fields (receipt handles, message ids, property maps, bodies and
// their encodings, filter expressions, transaction and recall handles,
// telemetry settings) are all the client's. Every call is answered within
// its deadline (long polls are capped at a second) and no handler panics:
// the proxy's recovery interceptor would turn a panic into the error
// "grpcproxy: <method> failed", which fails the input.
func FuzzRPCRequests(f *testing.F) {
	const topic, group = "FuzzRPCTopic", "FuzzRPCGroup"
	handle := Handle{Handle: pop.Handle{CKOffset: 0, PopTime: 1_700_000_001_000, InvisibleTime: 30000,
		ReviveQID: 0, RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: 0, QueueOffset: 0}, CommitLogOffset: 0}.String()
	res := func(name string) *rmqpb.Resource { return &rmqpb.Resource{Name: name} }
	seeds := map[string][]proto.Message{
		"QueryRoute":      {&rmqpb.QueryRouteRequest{Topic: res(topic)}},
		"Heartbeat":       {&rmqpb.HeartbeatRequest{Group: res(group), ClientType: rmqpb.ClientType_SIMPLE_CONSUMER}},
		"SendMessage":     {&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "fuzz")}}},
		"QueryAssignment": {&rmqpb.QueryAssignmentRequest{Topic: res(topic), Group: res(group)}},
		"ReceiveMessage":  {receiveRequest(group, topic, 10*time.Second, time.Second)},
		"AckMessage": {&rmqpb.AckMessageRequest{Group: res(group), Topic: res(topic),
			Entries: []*rmqpb.AckMessageEntry{{MessageId: "01TEST0000000001", ReceiptHandle: handle}}}},
		"ForwardMessageToDeadLetterQueue": {&rmqpb.ForwardMessageToDeadLetterQueueRequest{Group: res(group), Topic: res(topic),
			ReceiptHandle: handle, MessageId: "01TEST0000000001", DeliveryAttempt: 2, MaxDeliveryAttempts: 16}},
		"EndTransaction": {&rmqpb.EndTransactionRequest{Topic: res(topic), MessageId: "01TEST0000000001",
			TransactionId: "01TEST0000000001", Resolution: rmqpb.TransactionResolution_COMMIT}},
		"Telemetry": {&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
			ClientType: rmqpb.ClientType_SIMPLE_CONSUMER.Enum(),
			PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: res(group),
				Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: res(topic), Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "a||b"}}}}}}}}},
		"NotifyClientTermination": {&rmqpb.NotifyClientTerminationRequest{Group: res(group)}},
		"ChangeInvisibleDuration": {&rmqpb.ChangeInvisibleDurationRequest{Group: res(group), Topic: res(topic), ReceiptHandle: handle,
			InvisibleDuration: durationpb.New(time.Minute), MessageId: "01TEST0000000001"}},
		"RecallMessage": {&rmqpb.RecallMessageRequest{Topic: res(topic), RecallHandle: "djEgVCBicm9rZXItYSAxIHg"}},
	}
	for name, ms := range seeds {
		for _, m := range ms {
			b, err := proto.Marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(fuzzRPCIndex(f, name), b)
		}
	}
	c := startTestCluster(f, func(cfg *Config) { cfg.MaxLongPolling = time.Second })
	c.createTopic(f, topic, 2, "")
	f.Fuzz(func(t *testing.T, which uint8, msg []byte) {
		r := fuzzRPCs[int(which)%len(fuzzRPCs)]
		req := r.req()
		if proto.Unmarshal(msg, req) != nil {
			return // the gRPC layer refuses it before any handler
		}
		d := 8 * time.Second
		if r.name == "Telemetry" {
			d = 2 * time.Second // the stream stays open while the client's does
		}
		err := r.call(callCtx(t, "fuzz-client", d), c.rpc, req)
		st := status.Convert(err)
		if msg := st.Message(); strings.HasPrefix(msg, "grpcproxy: /") && strings.HasSuffix(msg, " failed") {
			t.Fatalf("%s %v: the handler panicked: %v", r.name, req, err)
		}
		if st.Code() == codes.DeadlineExceeded && r.name != "Telemetry" {
			t.Fatalf("%s %v: no answer within %v", r.name, req, d)
		}
	})
}
