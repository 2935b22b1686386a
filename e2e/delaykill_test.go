package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestDelayedDeliverySurvivesKills: in three waves, the unchanged Go
// producer sends messages with delay level 1 and with TIMER_DELAY_MS
// 1000, and the broker is SIGKILLed at a random moment while the
// scheduler and the timer deliver the wave, then restarted. Every message
// reaches its topic, none before its delay: a kill between a delivery and
// the record of the progress past it may deliver a message twice (at
// least once, as RocketMQ), never lose it.
func TestDelayedDeliverySurvivesKills(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"timerPrecisionMs=100"}})
	const topic, waves, perWave = "E2EDelayKill", 3, 60
	createTopic(t, b.addr, topic, 2)
	waitRoute(t, ns.addr, topic, b.name)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	midWave := 0 // kills that found their wave partly delivered
	for w := 0; w < waves; w++ {
		p := newProducer(t, ns.addr, fmt.Sprintf("pg-delay-kill-%d", w))
		first := time.Now()
		for i := 0; i < perWave; i++ {
			k := w*perWave + i
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("dk-%d", k)))
			if k%2 == 0 {
				m.WithDelayTimeLevel(1)
			} else {
				m.WithProperty("TIMER_DELAY_MS", "1000")
			}
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send dk-%d: %v", k, err)
			}
			time.Sleep(10 * time.Millisecond) // deliveries spread over the wave's last ~0.6 s
		}
		// The wave is due from 1 s after its first send: kill inside it,
		// at a random moment after its first delivery.
		for int(topicTotal(t, b.addr, topic, 2)) <= w*perWave && time.Since(first) < 30*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		before := int(topicTotal(t, b.addr, topic, 2)) - w*perWave
		b.kill()
		if before > 0 && before < perWave {
			midWave++
		}
		t.Logf("wave %d: about %d of its %d messages delivered when the broker was killed", w, before, perWave)
		b.restart(t)
		_ = p.Shutdown()
	}
	if midWave == 0 {
		t.Errorf("no kill came while its wave was being delivered: the test did not test delivery under a kill")
	}
	// Level 1 is exactly 1 s; the timer rounds down to its 100 ms slot.
	consumeDelayed(t, ns.addr, "cg-delay-kill", topic, "dk-", waves*perWave, func(int) int64 { return 1000 - 200 })
	if total := int(topicTotal(t, b.addr, topic, 2)); total < waves*perWave {
		t.Errorf("the topic holds %d messages, %d were sent", total, waves*perWave)
	} else {
		t.Logf("%d messages sent, %d stored in the topic after %d kills (%d delivered twice)", waves*perWave, total, waves, total-waves*perWave)
	}
}
