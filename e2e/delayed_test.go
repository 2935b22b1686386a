package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// problems collects what consumer callbacks find wrong, to be reported on
// the test's goroutine.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// report fails the test with every problem collected.
func (p *problems) report(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.list {
		t.Error(e)
	}
}

// consumeDelayed consumes the n messages <prefix><i> of a topic with a
// push consumer of group, from the first offset, and fails the test for
// any stored less than minDelay(i) ms after it was born (delivered
// early by the scheduler or the timer).
func consumeDelayed(t *testing.T, ns, group, topic, prefix string, n int, minDelay func(i int) int64) {
	t.Helper()
	var p problems
	got := newCollector()
	startPushConsumerFunc(t, ns, group, topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				var i int
				if _, err := fmt.Sscanf(string(m.Body), prefix+"%d", &i); err != nil {
					p.add("unexpected body %q", m.Body)
				} else if d := m.StoreTimestamp - m.BornTimestamp; d < minDelay(i) {
					p.add("%s stored %d ms after it was born, before its delay of %d ms", m.Body, d, minDelay(i))
				}
				got.add(string(m.Body))
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, n, 60*time.Second)
	checkBodies(t, got, prefix, n)
	p.report(t)
}
