package broker

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// BenchmarkPullCommit pulls one message at a time with the commit flag
// set, as a push consumer's pulls carry its offset, from every processor
// at once: a pull round trip with its offset commit (under the topic's
// fence since a2de686).
func BenchmarkPullCommit(b *testing.B) {
	tb := startTestBroker(b, nil)
	ctx := context.Background()
	c, err := remoting.Dial(ctx, tb.Addr(), remoting.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range 8 {
		h := map[string]string{"a": "bg", "b": "BenchPull", "c": "TBW102", "d": "4", "e": strconv.Itoa(i % 4), "f": "0", "g": "0", "h": "0", "i": ""}
		if resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, h, fmt.Appendf(nil, "m%d", i))); err != nil || resp.Code != remoting.Success {
			b.Fatalf("send: %v %v", resp, err)
		}
	}
	tb.caughtUp()
	b.SetParallelism(8) // 16 pulls in flight on two processors
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		q := 0
		for pb.Next() {
			h := pullReq("benchPullGroup", "BenchPull", int32(q%4), 0, pullCommitOffset, 0, "*")
			h["maxMsgNums"], h["commitOffset"] = "1", "1"
			resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.PullMessage, h, nil))
			if err != nil || resp.Code != remoting.Success {
				b.Errorf("pull: %v %v", resp, err)
				return
			}
			q++
		}
	})
}
