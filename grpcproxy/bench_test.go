package grpcproxy

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// BenchmarkSend compares a 1 KiB send through the proxy (gRPC
// SendMessage, then SEND_MESSAGE_V2 to the broker) with the same send
// straight to the broker over Remoting, in the same process and run, both
// with 4 x GOMAXPROCS senders: the ratio of the two is the proxy's cost.
// proxy-10 sends ten such messages a request (one SEND_BATCH_MESSAGE).
func BenchmarkSend(b *testing.B) {
	c := startTestCluster(b, nil)
	const topic = "BenchSend"
	c.createTopic(b, topic, 8, "")
	body := make([]byte, 1024)
	var seq atomic.Int64
	b.Run("proxy", func(b *testing.B) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), mdClientID, "bench-proxy")
		waitRoute(b, c, ctx, topic)
		b.SetBytes(int64(len(body)))
		b.SetParallelism(4)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := &rmqpb.Message{Topic: &rmqpb.Resource{Name: topic}, Body: body,
					SystemProperties: &rmqpb.SystemProperties{MessageId: fmt.Sprintf("BENCH%012d", seq.Add(1)), MessageType: rmqpb.MessageType_NORMAL}}
				resp, err := c.rpc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
				if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
					b.Errorf("send through the proxy: %v %v", resp.GetStatus(), err)
					return
				}
			}
		})
	})
	// Ten messages a request: one SEND_BATCH_MESSAGE each, as RocketMQ's
	// proxy sends them; ns/msg against the proxy's one-message requests
	// above is what batching saves.
	b.Run("proxy-10", func(b *testing.B) {
		const n = 10
		ctx := metadata.AppendToOutgoingContext(context.Background(), mdClientID, "bench-proxy-10")
		waitRoute(b, c, ctx, topic)
		b.SetBytes(n * int64(len(body)))
		b.SetParallelism(4)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			msgs := make([]*rmqpb.Message, n)
			for pb.Next() {
				for i := range msgs {
					msgs[i] = &rmqpb.Message{Topic: &rmqpb.Resource{Name: topic}, Body: body,
						SystemProperties: &rmqpb.SystemProperties{MessageId: fmt.Sprintf("BENCH%012d", seq.Add(1)), MessageType: rmqpb.MessageType_NORMAL}}
				}
				resp, err := c.rpc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: msgs})
				if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
					b.Errorf("send of %d messages through the proxy: %v %v", n, resp.GetStatus(), err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
	})
	b.Run("remoting", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.SetParallelism(4)
		var q atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				props := commitlog.FormatProperties(map[string]string{"UNIQ_KEY": fmt.Sprintf("BENCH%012d", seq.Add(1)), "WAIT": "true"})
				h := map[string]string{"a": topic, "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(int(q.Add(1) % 8)),
					"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := c.pool.Invoke(ctx, c.brokerAddr, remoting.NewRequest(remoting.SendMessageV2, h, body))
				cancel()
				if err != nil || resp.Code != remoting.Success {
					b.Errorf("send to the broker: %v %v", resp, err)
					return
				}
			}
		})
	})
}

// waitRoute waits until the proxy finds topic's route (the broker
// registers it with the name server after creating it).
func waitRoute(b *testing.B, c *testCluster, ctx context.Context, topic string) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.rpc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}})
		if err == nil && resp.GetStatus().GetCode() == rmqpb.Code_OK {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no route of %s after 20 s: %v %v", topic, resp.GetStatus(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
