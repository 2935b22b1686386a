package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestTimerMessagesSurviveKill: messages sent by the unchanged Go client
// with RocketMQ 5's TIMER_DELAY_MS property (how the Java 5 client's
// setDelayTimeMs sends them) wait in the timer topic; the broker is
// SIGKILLed while they wait and restarted; each is then delivered to its
// topic exactly once and not before its time.
func TestTimerMessagesSurviveKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"timerPrecisionMs=100"}})
	const topic, queues, n, delayMs = "E2ETimerKill", 2, 20, 4000
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-timer-kill")
	firstSend := time.Now()
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("timer-%d", i)))
		m.WithProperty("TIMER_DELAY_MS", fmt.Sprint(delayMs))
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	waitDispatched(t, b.addr, "rmq_sys_wheel_timer", 1, n)
	for q := 0; q < queues; q++ {
		// Only meaningful while no message can be due yet (a loaded
		// machine may take longer than the delay to get here).
		if got := maxOffset(t, b.addr, topic, q); got != 0 && time.Since(firstSend) < delayMs*time.Millisecond-500*time.Millisecond {
			t.Fatalf("queue %d holds %d messages before their time", q, got)
		}
	}
	b.kill()
	b.restart(t)

	// Never before its time, though TIMER_OUT_MS is rounded down to the
	// 100 ms precision: the slot is read once it has passed.
	consumeDelayed(t, ns.addr, "cg-timer-kill", topic, "timer-", n, func(int) int64 { return delayMs })
	if total := topicTotal(t, b.addr, topic, queues); total != n {
		t.Errorf("the topic holds %d messages, %d were sent: the timer delivered some twice or lost some", total, n)
	}
}
