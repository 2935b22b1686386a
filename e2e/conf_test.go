package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestRocketMQTunedBrokerConf: a broker.conf as RocketMQ users tune one
// (configs/testdata: storeType=default, RocketMQ's store, Netty and thread
// pool keys written out) starts a broker, with command-line settings
// winning over it, that the Go client produces to and consumes from; no
// key of the file is reported unknown.
func TestRocketMQTunedBrokerConf(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{conf: "../configs/testdata/rocketmq-tuned-broker.conf",
		sets: []string{"storePathCommitLog="}})
	if n := b.countLog("unknown configuration key"); n != 0 {
		t.Fatalf("%d keys of the file reported unknown (log below)", n)
	}
	// The line naming the store type ends Start, which may log it after
	// the first registration startBroker waits for.
	b.waitLog(t, `"message":"broker started"`, 30*time.Second)
	if b.countLog(`"storeType":"file"`) == 0 {
		t.Fatal("storeType=default did not start the file ConsumeQueue (log below)")
	}
	const topic, n = "E2ETunedConf", 10
	createTopic(t, b.addr, topic, 4)
	waitRoute(t, ns.addr, topic, b.name)
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-tuned-conf", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got.add(string(m.Body))
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	p := newProducer(t, ns.addr, "pg-tuned-conf")
	for i := range n {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, fmt.Appendf(nil, "m%d", i))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	got.waitDistinct(t, n, 30*time.Second)

	// The command line's mappedFileSizeCommitLog wins over the file's
	// mapedFileSizeCommitLog (1 GiB).
	segs, err := filepath.Glob(filepath.Join(b.store, "commitlog", "0*"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no CommitLog segment: %v", err)
	}
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() != 64<<20 {
		t.Fatalf("segment %s: %v %v, want 64 MiB", segs[0], fi.Size(), err)
	}
}
