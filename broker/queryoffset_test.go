package broker

import (
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// TestQueryConsumerOffsetNotFoundAnswers checks QUERY_CONSUMER_OFFSET for
// a group that never committed on a queue that holds messages, against
// RocketMQ 5.3's ConsumerManageProcessor.queryConsumerOffset: with
// setZeroIfNotFound=false, QUERY_NOT_FOUND with its own remark before any
// look at the queue; otherwise 0 only while the queue starts at 0 and its
// first message is in memory, else QUERY_NOT_FOUND.
func TestQueryConsumerOffsetNotFoundAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hotBytes int64 // 0: the broker's own
		ext      map[string]string
		code     int32
		remark   string
	}{
		{"young queue", 0, nil, remoting.Success, ""},
		{"setZeroIfNotFound=false", 0, map[string]string{"setZeroIfNotFound": "false"},
			remoting.QueryNotFound, "Not found, do not set to zero, maybe this group boot first"},
		{"first message not in memory", 1, nil,
			remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) {
				if tc.hotBytes > 0 {
					b.hotBytes = tc.hotBytes
				}
			})
			c := b.client(nil)
			createTopic(t, c, "QO", 1, 1)
			for i := 0; i < 3; i++ {
				mustSend(t, c, "QO", 0, "m", "")
			}
			b.caughtUp()
			h := map[string]string{"consumerGroup": "fresh", "topic": "QO", "queueId": "0"}
			for k, v := range tc.ext {
				h[k] = v
			}
			r := call(t, c, remoting.QueryConsumerOffset, h, nil)
			if r.Code != tc.code || r.Remark != tc.remark {
				t.Fatalf("%d %q, want %d %q", r.Code, r.Remark, tc.code, tc.remark)
			}
			if r.Code == remoting.Success && header(t, r, "offset") != 0 {
				t.Fatalf("offset %v, want 0", r.ExtFields)
			}
		})
	}
}
