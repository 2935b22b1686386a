package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A slave's catch-up report, step by step: a new HA connection far
// behind the master's end begins it (the master asked once per
// connection, again after a failed ask), progress is logged with the
// share, rate and time left while the dispatcher works through it, and
// its end once the dispatcher reaches the master's end as asked; a
// connection with little to catch up logs nothing.
func TestSlaveCatchUpSteps(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	t0 := time.Now()
	st := ha.ClientStatus{Connected: true, ConnectedAt: t0, ConnectedFrom: 1000}
	dispatched := int64(1000)
	masterEnd, asks := int64(1000+200<<20), 0
	var askErr error
	c := &slaveCatchUp{
		from:       64 << 20,
		status:     func() ha.ClientStatus { return st },
		dispatched: func() int64 { return dispatched },
		minOffset:  func() int64 { return 0 },
		masterEnd: func(context.Context) (int64, error) {
			asks++
			return masterEnd, askErr
		},
		log: zerolog.New(logs),
	}
	ctx := context.Background()

	askErr = errors.New("master unreachable")
	c.step(ctx, t0.Add(time.Second))
	if asks != 1 || c.active != nil || strings.Contains(logs.String(), `"level":"info"`) {
		t.Fatalf("after a failed ask: %d asks, active %v, logged %q", asks, c.active, logs.String())
	}
	askErr = nil
	c.step(ctx, t0.Add(2*time.Second))
	began := logLines(logs, "indexing the master's CommitLog tail while serving")
	if asks != 2 || len(began) != 1 || began[0]["tailBytes"] != float64(200<<20) || began[0]["masterEnd"] != float64(masterEnd) {
		t.Fatalf("begin: %d asks, logged %v; want a line with tailBytes %d", asks, began, 200<<20)
	}

	dispatched = 1000 + 50<<20 // a quarter in 10 s
	c.step(ctx, t0.Add(10*time.Second))
	progress := logLines(logs, "indexing the master's CommitLog tail")
	p := progress[len(progress)-1]
	if p["percent"] != float64(25) || p["mibPerSecond"] != float64(5) || p["left"] == nil {
		t.Fatalf("progress line %v, want percent 25, mibPerSecond 5 and the time left", p)
	}
	if asks != 2 {
		t.Fatalf("the master asked %d times during one catch-up, want 2", asks)
	}

	dispatched = masterEnd + 10 // the master appended meanwhile: not counted
	c.step(ctx, t0.Add(40*time.Second))
	ended := logLines(logs, "indexed the master's CommitLog tail")
	if len(ended) != 1 || ended[0]["percent"] != float64(100) || c.active != nil {
		t.Fatalf("end logged %v (active %v), want one line with percent 100", ended, c.active)
	}

	// The same connection: not asked again; a new one close to the
	// master's end: asked, nothing logged.
	n := strings.Count(logs.String(), "\n")
	c.step(ctx, t0.Add(50*time.Second))
	st.ConnectedAt, st.ConnectedFrom = t0.Add(60*time.Second), masterEnd
	masterEnd += 1 << 20
	c.step(ctx, t0.Add(70*time.Second))
	c.step(ctx, t0.Add(80*time.Second))
	if asks != 3 || strings.Count(logs.String(), "\n") != n {
		t.Fatalf("after the catch-up: %d asks (want 3), logged %q", asks, logs.String())
	}
}

// A slave that reconnects to its master after the master took a long
// stretch of sends reports its indexing of them while it serves: a line
// when it begins, with the stretch's bytes from its end, and one when it
// reached the master's end.
func TestSlaveReportsALongCatchUp(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slaveStore := t.TempDir()
	kv := withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": master.haServerAddr()})
	slave := startTestBrokerAt(t, slaveStore, kv)
	c := master.client(nil)
	mustSend(t, c, "SlaveCatchUp", 0, "first", "")
	waitReplicated(t, master, slave)
	from := slave.clog.MaxOffset()
	slave.stop()

	items := make([]batchItem, 64)
	for i := range items {
		items[i] = batchItem{body: strings.Repeat("x", 1024)}
	}
	for range 40 {
		mustSendBatch(t, c, "SlaveCatchUp", items)
	}
	end := master.clog.MaxOffset()

	logs := &testutil.SyncBuffer{}
	slave = startTestBrokerWith(t, slaveStore, kv, func(b *Broker) {
		b.log = zerolog.New(logs)
		b.catchUpFrom = 1 << 20
		b.catchUpEvery = 5 * time.Millisecond
		a := master.Addr() // the name servers' answer, which this test has none of
		b.repl.masterAddr.Store(&a)
	})
	waitReplicated(t, master, slave)
	for deadline := time.Now().Add(20 * time.Second); len(logLines(logs, "indexed the master's CommitLog tail")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no end of the catch-up logged: %s", logs.String())
		}
	}
	began := logLines(logs, "indexing the master's CommitLog tail while serving")
	if len(began) != 1 || began[0]["tailBytes"] != float64(end-from) || began[0]["masterEnd"] != float64(end) {
		t.Fatalf("begin of the catch-up logged %v, want one line with tailBytes %d and masterEnd %d", began, end-from, end)
	}
	ended := logLines(logs, "indexed the master's CommitLog tail")
	if len(ended) != 1 || ended[0]["percent"] != float64(100) || ended[0]["tailBytes"] != float64(end-from) {
		t.Fatalf("end of the catch-up logged %v, want one line with percent 100", ended)
	}
}
