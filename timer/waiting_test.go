package timer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/storetest"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// waiting returns the service's count by topic, failing unless it is
// counted.
func (f *fixture) waiting() map[string]int64 {
	f.t.Helper()
	rows, _, ok := f.svc.Waiting(1000)
	if !ok {
		f.t.Fatal("waiting timer messages not counted")
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Topic] = r.Messages
	}
	return got
}

func (f *fixture) wantWaiting(want map[string]int64) {
	f.t.Helper()
	if got := f.waiting(); fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Fatalf("waiting %v, want %v", got, want)
	}
}

func (f *fixture) countWaiting() int {
	f.t.Helper()
	n, err := f.svc.CountWaiting(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// The count by topic is RocketMQ's TimerMetrics timingCount: CountWaiting
// counts what the index holds (a message 1, a cancel -1 to the topic it
// names), the hook adds what it indexes after, and a round subtracts
// what it delivers or cancels.
func TestWaitingCountsMessagesByTopicFromTheIndexThenFollowsThem(t *testing.T) {
	f := newFixture(t)
	if _, _, ok := f.svc.Waiting(10); ok {
		t.Fatal("a count before CountWaiting")
	}
	f.park("a1", "A", 0, 5, "")
	f.park("a2", "A", 1, 50, "")
	f.park("b1", "B", 0, 50, "")
	f.caughtUp()
	if n := f.countWaiting(); n != 3 {
		t.Fatalf("CountWaiting read %d entries, want 3", n)
	}
	f.wantWaiting(map[string]int64{"A": 2, "B": 1})

	f.park("b2", "B", 0, 20, "")
	// A cancel of b1, due when it is: B counts 2 - 1.
	f.park("cancel-b1", "B", 0, 50, "TIMER_DEL_UNIQKEY\x01B+b1\x02")
	f.caughtUp()
	f.wantWaiting(map[string]int64{"A": 2, "B": 1})

	f.at(6)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want a1", n)
	}
	f.wantWaiting(map[string]int64{"A": 1, "B": 1})
	f.at(60)
	f.roundOK()
	f.wantDelivered("a1", "a2", "b2")
	f.wantWaiting(map[string]int64{})
}

// Every start counts the index again: the count after a restart is the
// one before it.
func TestWaitingIsCountedAgainAfterARestart(t *testing.T) {
	f := newFixture(t)
	f.park("a1", "A", 0, 50, "")
	f.park("b1", "B", 0, 50, "")
	f.park("b2", "B", 0, 50, "")
	f.caughtUp()
	// A new service over the same index (a restart).
	svc := New(f.db.Timers(), f.store, Options{Dispatched: f.disp.Dispatched}, zerolog.Nop())
	if _, err := svc.CountWaiting(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, topics, ok := svc.Waiting(1)
	if !ok || topics != 2 || fmt.Sprint(rows) != "[{B 2}]" {
		t.Fatalf("after a restart: %v of %d topics (ok %v), want B's 2 first of 2 topics", rows, topics, ok)
	}
}

// A rolled message stays counted once: its entry leaves at the roll point
// and its rolled copy is indexed.
func TestWaitingCountsARolledMessageOnce(t *testing.T) {
	f := newFixture(t)
	f.svc.rollWindowMs = 20_000 // due in 30 s: indexed at 20 s, parked again then
	f.countWaiting()
	p := f.park("far", "A", 0, 30, "")
	f.caughtUp()
	f.wantWaiting(map[string]int64{"A": 1})
	f.at(21)
	if n := f.roundOK(); n != 0 {
		t.Fatalf("delivered %d at the roll point", n)
	}
	f.caughtUp()
	if f.pendingAt(p.phy) || len(f.pending()) != 1 {
		t.Fatalf("after the roll point: entries %v, want the rolled copy's alone", f.pending())
	}
	f.wantWaiting(map[string]int64{"A": 1})
	f.at(31)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d at its time, want 1", n)
	}
	f.wantWaiting(map[string]int64{})
}

// A slave forgets what its master delivered, and the count with it.
func TestWaitingFollowsForgetDelivered(t *testing.T) {
	f := newFixture(t)
	f.park("a1", "A", 0, 5, "")
	f.park("a2", "A", 0, 50, "")
	f.caughtUp()
	f.countWaiting()
	n, err := f.svc.ForgetDelivered(Watermark{CursorMs: base + 10_000, BelowPhy: f.log.MaxOffset()})
	if err != nil || n != 1 {
		t.Fatalf("forgot %d, %v; want a1", n, err)
	}
	f.wantWaiting(map[string]int64{"A": 1})
}

// A dispatch batch that fails after the hook indexed a parked record is
// dispatched again: the record is counted once, as taken in
// (Options.Enqueued) and as waiting.
func TestARetriedDispatchBatchCountsItsTimerMessagesOnce(t *testing.T) {
	f := &fixture{t: t}
	f.nowMs.Store(base)
	f.st = storetest.OpenWithClock(t, func() time.Time { return time.UnixMilli(f.nowMs.Load()) })
	f.log, f.db = f.st.Log, f.st.DB
	f.store = &fakeStore{f: f, Offsets: storetest.Offsets{}}
	var enqueued atomic.Int64
	// CountWaiting reads the dispatched offset before the dispatcher
	// starts, the round never.
	dispatched := func() int64 {
		if f.disp == nil {
			return 0
		}
		return f.disp.Dispatched()
	}
	f.svc = New(f.db.Timers(), f.store, Options{Dispatched: dispatched,
		Enqueued: func(string, time.Duration) { enqueued.Add(1) }}, zerolog.Nop())
	f.svc.now = func() time.Time { return time.UnixMilli(f.nowMs.Load()) }
	var failed atomic.Bool
	fail := kvindex.HookFunc(func(*pebble.Batch, *commitlog.Message) error {
		if failed.CompareAndSwap(false, true) {
			return errors.New("index write failed")
		}
		return nil
	})
	if _, err := f.svc.CountWaiting(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Both records before the dispatcher starts: one batch.
	f.park("a1", "A", 0, 50, "")
	if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{Topic: "Fail", Body: []byte("x")}, Assigner: f.store}); err != nil {
		t.Fatal(err)
	}
	f.disp = f.st.StartDispatcher(t, kvindex.DispatcherOptions{Hooks: map[string]kvindex.Hook{meta.TimerTopic: f.svc.Hook(), "Fail": fail}})
	f.caughtUp()
	if !failed.Load() {
		t.Fatal("the batch did not fail")
	}
	f.wantWaiting(map[string]int64{"A": 1})
	if n := enqueued.Load(); n != 1 {
		t.Fatalf("taken in %d times, want 1", n)
	}
}

// The count reads the index a page at a time while the rounds go on: an
// entry a round deletes after its page was read is subtracted, one whose
// page is not read yet is not (the count does not see it).
func TestWaitingCountsWhileARoundDeletes(t *testing.T) {
	f := newFixture(t)
	f.svc.countPage = 2
	f.park("a1", "A", 0, 5, "")
	f.park("a2", "A", 0, 6, "")
	f.park("a3", "A", 0, 7, "") // due with a1 and a2, on the next page
	f.park("a4", "A", 0, 50, "")
	f.park("b1", "B", 0, 50, "")
	f.caughtUp()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.svc.properties = func(phy int64) (string, bool, error) {
		once.Do(func() { close(entered); <-release }) // inside the first page
		return logStore{f.st}.properties(phy)
	}
	counted := make(chan error, 1)
	go func() {
		_, err := f.svc.CountWaiting(context.Background())
		counted <- err
	}()
	<-entered
	f.at(8)
	if n := f.roundOK(); n != 3 {
		t.Fatalf("delivered %d while the count read, want a1 to a3", n)
	}
	close(release)
	if err := <-counted; err != nil {
		t.Fatal(err)
	}
	f.wantWaiting(map[string]int64{"A": 1, "B": 1})
}

// Waiting's limit keeps the topics with the most messages.
func TestWaitingKeepsTheLargestTopicsWithinItsLimit(t *testing.T) {
	f := newFixture(t)
	f.countWaiting()
	for i, topic := range []string{"C", "A", "B", "B", "A", "A"} {
		f.park(strconv.Itoa(i), topic, 0, 50, "")
	}
	f.caughtUp()
	rows, topics, _ := f.svc.Waiting(2)
	if topics != 3 || fmt.Sprint(rows) != "[{A 3} {B 2}]" {
		t.Fatalf("Waiting(2) = %v of %d topics", rows, topics)
	}
}

// BenchmarkCountWaiting times CountWaiting over a million parked
// messages of 100 topics (ROCKETKV_BENCH_PARKED sets another number):
// the work the count adds to a broker's start with metrics on, reading
// each record whole (Read) or its properties alone (Properties, as the
// broker does); Census is the scan of the index keys a scrape makes
// already, for comparison. Parking and indexing are not timed. Run it
// with -benchtime=3x or so: the index compacts the setup's writes
// meanwhile.
func BenchmarkCountWaiting(b *testing.B) {
	parked := 1_000_000
	if v := os.Getenv("ROCKETKV_BENCH_PARKED"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		parked = n
	}
	f := newFixture(b)
	now := time.UnixMilli(f.nowMs.Load())
	body := make([]byte, 100)
	batch := make([]*commitlog.Message, 0, 256)
	for i := range parked {
		deliver := strconv.FormatInt(base+int64(10+i%3600)*1000, 10)
		m := &commitlog.Message{Topic: "Topic" + strconv.Itoa(i%100), BornTimestamp: now.UnixMilli(), Body: body,
			Properties: "UNIQ_KEY\x01" + strconv.Itoa(i) + "\x02TIMER_DELIVER_MS\x01" + deliver + "\x02"}
		if ok, err := Park(m, now, DefaultConfig()); err != nil || !ok {
			b.Fatalf("park: %v %v", ok, err)
		}
		if batch = append(batch, m); len(batch) == cap(batch) || i == parked-1 {
			if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Batch: batch, Assigner: f.store}); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	f.caughtUp()
	for _, c := range []struct {
		name       string
		properties func(int64) (string, bool, error)
	}{
		{"Read", nil}, // the fixture's store counts its reads: read the log
		{"Properties", logStore{f.st}.properties},
		{"Census", nil}, // not a count
	} {
		b.Run(c.name, func(b *testing.B) {
			f.svc.store, f.svc.properties = logStore{f.st}, c.properties
			if c.name == "Census" {
				for b.Loop() {
					if _, err := f.db.Timers().Census(base, []int64{1000}); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			for b.Loop() {
				n, err := f.svc.CountWaiting(context.Background())
				if err != nil || n != parked {
					b.Fatalf("counted %d, %v; want %d", n, err, parked)
				}
			}
			b.StopTimer()
			if rows, topics, _ := f.svc.Waiting(1000); topics != 100 || rows[0].Messages != int64(parked/100) {
				b.Fatalf("%d topics, first %v", topics, rows[0])
			}
		})
	}
}

// logStore reads the records of a test store, as the broker reads them
// (a copy, decoded).
type logStore struct{ st *storetest.Store }

func (s logStore) PutBatch(context.Context, []*commitlog.Message) error {
	return errors.New("read only")
}

func (s logStore) Read(phy int64) (commitlog.Message, bool, error) { return s.st.ReadMessage(phy) }

// properties reads the properties of the record at phy, as the broker's
// Options.Properties does.
func (s logStore) properties(phy int64) (string, bool, error) {
	v, err := s.st.Log.ReadRecord(phy)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer v.Release()
	m, err := commitlog.DecodeWith(v.Data, commitlog.DecodeOptions{Topics: func([]byte) string { return meta.TimerTopic }})
	return m.Properties, err == nil, err
}
