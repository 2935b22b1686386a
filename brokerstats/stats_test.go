package brokerstats

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

func newTestStats() (*Stats, *testutil.Clock) {
	c := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
	return New("DefaultCluster", c.Now), c
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func checkWindow(t *testing.T, what string, got, want Window) {
	t.Helper()
	if got.Sum != want.Sum || !near(got.TPS, want.TPS) || !near(got.AvgPT, want.AvgPT) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func TestMinuteWindowFollowsRocketMQsArithmetic(t *testing.T) {
	s, c := newTestStats()
	s.Put("T", 4, 4000)
	s.Put("T", 6, 6000)
	s.Tick() // first sampling: preceded by a zero sample 10 s before
	lookup := func(name, key string) Windows {
		t.Helper()
		w, ok := s.Lookup(name, key)
		if !ok {
			t.Fatalf("no %s item for %s", name, key)
		}
		return w
	}
	checkWindow(t, "minute after the first sampling", lookup(TopicPutNums, "T").Minute, Window{Sum: 10, TPS: 1, AvgPT: 5})

	c.Advance(10 * time.Second)
	s.Put("T", 30, 30000)
	s.Tick()
	checkWindow(t, "minute after 10 s more", lookup(TopicPutNums, "T").Minute, Window{Sum: 40, TPS: 2, AvgPT: 40.0 / 3})
	checkWindow(t, "TOPIC_PUT_SIZE", lookup(TopicPutSize, "T").Minute, Window{Sum: 40000, TPS: 2000, AvgPT: 40000.0 / 3})
	// RocketMQ counts no calls for the BROKER_* statistics: avgpt 0.
	checkWindow(t, "BROKER_PUT_NUMS", lookup(BrokerPutNums, "DefaultCluster").Minute, Window{Sum: 40, TPS: 2})

	// Seven samples span a minute: once the adds are more than a minute
	// old, the window is empty again.
	for i := 0; i < 7; i++ {
		c.Advance(10 * time.Second)
		s.Tick()
	}
	checkWindow(t, "minute after a quiet minute", lookup(TopicPutNums, "T").Minute, Window{})
	// Ticks between samplings take no minute sample.
	c.Advance(time.Second)
	s.Put("T", 5, 1)
	s.Tick()
	checkWindow(t, "minute between samplings", lookup(TopicPutNums, "T").Minute, Window{})
}

func TestHourAndDayWindows(t *testing.T) {
	s, c := newTestStats()
	s.Tick()
	// 100 messages a second for two hours, ticking every second.
	for i := 0; i < 2*3600; i++ {
		c.Advance(time.Second)
		s.Put("T", 100, 100)
		s.Tick()
	}
	it, _ := s.Lookup(TopicPutNums, "T")
	// The hour window spans its 7 newest 10-minute samples: an hour.
	checkWindow(t, "hour", it.Hour, Window{Sum: 360000, TPS: 100, AvgPT: 100})
	// The item appeared after the first hourly sampling: its day window
	// is its samples at 1 h and 2 h after a zero sample an hour before
	// the first, 720,000 over two hours.
	checkWindow(t, "day", it.Day, Window{Sum: 720000, TPS: 100, AvgPT: 100})
	checkWindow(t, "minute", it.Minute, Window{Sum: 6000, TPS: 100, AvgPT: 100})
}

func TestGroupStatsAndTopicDeletion(t *testing.T) {
	s, _ := newTestStats()
	s.Get("G", "T", 8, 800)
	s.Get("G", "T2", 1, 100)
	s.SendBack("G", "T")
	s.Tick()
	if got := s.GroupTPS("G", "T"); !near(got, 0.8) {
		t.Errorf("consume rate of G on T %v, want 0.8 (8 in the 10 s before the first sampling)", got)
	}
	if got := s.GroupTPS("G", "NONE"); got != 0 {
		t.Errorf("consume rate of an unknown pair %v", got)
	}
	for _, name := range []string{GroupGetNums, GroupGetSize, SendBackPutNums} {
		if _, ok := s.Lookup(name, "T@G"); !ok {
			t.Fatalf("%s has no T@G item", name)
		}
	}
	s.Put("T", 1, 1)
	s.TopicDeleted("T")
	for _, name := range []string{TopicPutNums, TopicPutSize, GroupGetNums, GroupGetSize, SendBackPutNums} {
		for _, key := range []string{"T", "T@G"} {
			if _, ok := s.Lookup(name, key); ok {
				t.Errorf("%s %s survived the topic's deletion", name, key)
			}
		}
	}
	if _, ok := s.Lookup(GroupGetNums, "T2@G"); !ok {
		t.Error("deleting T dropped T2's item")
	}
	if _, ok := s.Lookup("NO_SUCH_STAT", "T2@G"); ok {
		t.Error("an unknown statistic answered")
	}
	// Deleting a group drops its items, not those of a group whose name
	// ends alike.
	s.Get("OtherG", "T2", 1, 1)
	s.SendBack("G", "T2")
	s.GroupDeleted("G")
	for _, key := range [][2]string{{GroupGetNums, "T2@G"}, {SendBackPutNums, "T2@G"}} {
		if _, ok := s.Lookup(key[0], key[1]); ok {
			t.Errorf("%s %s survived the group's deletion", key[0], key[1])
		}
	}
	if _, ok := s.Lookup(GroupGetNums, "T2@OtherG"); !ok {
		t.Error("deleting G dropped OtherG's item")
	}
}

func TestIdleItemsAreDropped(t *testing.T) {
	s, c := newTestStats()
	s.Put("busy", 1, 1)
	s.Put("idle", 1, 1)
	s.Tick()
	for h := 0; h < 26; h++ {
		c.Advance(time.Hour)
		s.Put("busy", 1, 1)
		s.Tick()
	}
	if _, ok := s.Lookup(TopicPutNums, "idle"); ok {
		t.Error("an item idle for 26 hours was kept")
	}
	busy, ok := s.Lookup(TopicPutNums, "busy")
	if !ok {
		t.Fatal("a busy item was dropped")
	}
	// 27 hourly samplings: the day window keeps the newest 25, 24 hours
	// apart, one message an hour.
	checkWindow(t, "day of the busy item", busy.Day, Window{Sum: 24, TPS: 24.0 / 86400, AvgPT: 1})
}

func TestRuntimeRatesAndDayTotals(t *testing.T) {
	s, c := newTestStats()
	table := map[string]string{}
	s.Tick()
	s.Runtime(table)
	if table["putTps"] != "  " || table["getTotalTps"] != "0.0 0.0 0.0" {
		t.Errorf("rates before any interval: putTps %q getTotalTps %q", table["putTps"], table["getTotalTps"])
	}
	// Each second 50 records are stored, 30 of them outside system topics
	// (the rest: halves, op messages, parked delayed messages), and 20
	// delivered, 15 of them of topics that are not system topics: the
	// rates count them all, the day totals only the others.
	for i := 0; i < 30; i++ {
		c.Advance(time.Second)
		s.Stored(50, 50)
		s.PutWithoutSystemTopic(30)
		s.Get("G", "T", 15, 15)
		s.GetWithoutSystemTopic(15)
		s.Get("G", "RMQ_SYS_TRANS_HALF_TOPIC", 5, 5)
		s.Miss()
		s.Tick()
	}
	s.Runtime(table)
	for key, want := range map[string]string{
		"putTps":              "50.0 ",
		"getTransferredTps":   "20.0 ",
		"getTransferedTps":    "20.0 ",
		"getFoundTps":         "2.0 ",
		"getMissTps":          "1.0 ",
		"getTotalTps":         "3.0 0.0 0.0",
		"msgPutTotalTodayNow": "900",
		"msgGetTotalTodayNow": "450",
	} {
		if !strings.HasPrefix(table[key], want) && table[key] != want {
			t.Errorf("%s = %q, want it to start with %q", key, table[key], want)
		}
	}
	// Over midnight the day totals move: today's morning is what was
	// stored before it, yesterday's what today's was.
	c.Advance(12 * time.Hour)
	s.Stored(7, 7)
	s.PutWithoutSystemTopic(7)
	s.Tick()
	s.Runtime(table)
	if table["msgPutTotalTodayMorning"] != "907" || table["msgPutTotalYesterdayMorning"] != "0" ||
		table["msgGetTotalTodayMorning"] != "450" {
		t.Errorf("after midnight: %v", table)
	}
	c.Advance(24 * time.Hour)
	s.Tick()
	s.Runtime(table)
	if table["msgPutTotalTodayMorning"] != "907" || table["msgPutTotalYesterdayMorning"] != "907" ||
		table["msgGetTotalYesterdayMorning"] != "450" || table["msgPutTotalTodayNow"] != "907" {
		t.Errorf("after a second midnight: %v", table)
	}
	if s.PutMessages() != 1507 || s.PutBytes() != 1507 || s.GetMessages() != 600 {
		t.Errorf("totals: put %d (%d bytes), get %d", s.PutMessages(), s.PutBytes(), s.GetMessages())
	}
}

func TestFormatRate(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 12: "12.0", 2.5: "2.5", 1234567.25: "1234567.25"} {
		if got := formatRate(v); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", v, got, want)
		}
	}
}

// Adds from many goroutines while the sampler runs lose nothing.
func TestConcurrentAddsAndSampling(t *testing.T) {
	s, c := newTestStats()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				s.Put("T", 1, 10)
				s.Stored(1, 10)
				s.Get("G", "T", 1, 10)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			c.Advance(time.Second)
			s.Tick()
			s.Runtime(map[string]string{})
		}
	}()
	wg.Wait()
	<-done
	c.Advance(10 * time.Second)
	s.Tick()
	// Everything was added within the item's first 200 s; the minute
	// window may have slid past some of it, the day window has it all.
	c.Advance(time.Hour)
	s.Tick()
	it, _ := s.Lookup(TopicPutNums, "T")
	if got := it.Day.Sum; got != 8000 {
		t.Fatalf("day sum %d, want 8000", got)
	}
	if s.PutMessages() != 8000 || s.GetMessages() != 8000 {
		t.Fatalf("totals put %d get %d", s.PutMessages(), s.GetMessages())
	}
}

// Counting, sampling, reading and deleting items from many goroutines at
// once is free of races (run under -race): producers' and consumers'
// counts, topic and group deletions, and the lookups of the admin
// requests, while the sampler ticks across midnight.
func TestConcurrentUseWithDeletionsAndReads(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 23, 59, 0, 0, time.Local)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := New("c", clock)
	s.Tick()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				topic := "t" + strconv.Itoa(i%50)
				s.Put(topic, 1, 10)
				s.Stored(1, 10)
				s.Get("g"+strconv.Itoa(w), topic, 2, 20)
				s.Miss()
				s.SendBack("g", topic)
				if i%97 == 0 {
					s.TopicDeleted(topic)
					s.GroupDeleted("g" + strconv.Itoa(w))
				}
				s.Lookup(TopicPutNums, topic)
				s.GroupTPS("g", topic)
				s.TopicPutTPS(topic)
			}
		}(w)
	}
	for i := 0; i < 3000; i++ {
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		s.Tick()
		if i%100 == 0 {
			s.Runtime(map[string]string{})
		}
	}
	close(stop)
	wg.Wait()
}

// TopicPutTPS is a topic's TOPIC_PUT_NUMS rate over the last minute
// (RocketMQ's tpsTopicPutNums, GET_TOPIC_STATS_INFO's topicPutTps), 0 for
// a topic without puts.
func TestTopicPutTPS(t *testing.T) {
	s, c := newTestStats()
	s.Tick()
	s.Put("T", 3, 300)
	s.Put("T", 1, 100)
	s.Put("Other", 50, 50)
	if got := s.TopicPutTPS("T"); got != 0 {
		t.Errorf("rate of T %v before any sampling, want 0", got)
	}
	c.Advance(10 * time.Second)
	s.Tick()
	if got := s.TopicPutTPS("T"); !near(got, 0.4) {
		t.Errorf("rate of T %v, want 0.4 (4 puts in 10 s)", got)
	}
	if got := s.TopicPutTPS("NONE"); got != 0 {
		t.Errorf("rate of a topic without puts %v", got)
	}
}

// Samplings keep their period although the ticks that run them come late
// by varying amounts (RocketMQ samples at a fixed rate): seven minute
// samplings span 60 s, not 66.
func TestSamplingsKeepTheirPeriodDespiteJitter(t *testing.T) {
	s, c := newTestStats()
	s.Tick() // samplings due at t0+10 s, t0+20 s, ...
	s.Put("T", 1, 1)
	jitter := []time.Duration{700, 100, 900, 300, 800, 200, 600} // ms late
	at := time.Duration(0)
	for i, j := range jitter {
		// The first tick at or after the due time, as a 1 s ticker gives.
		next := time.Duration(i+1)*10*time.Second + j*time.Millisecond
		c.Advance(next - at)
		at = next
		s.Tick()
	}
	w, _ := s.Lookup(TopicPutNums, "T")
	// Seven samplings kept: the newest at 70.6 s, the oldest at 10.7 s
	// (the zero point at 0.7 s was dropped); the put came before all of
	// them, so the window holds nothing: what matters is that there are
	// exactly seven samplings in 60 s, which the next put shows.
	if w.Minute.Sum != 0 {
		t.Fatalf("minute window %+v, want empty", w.Minute)
	}
	s.Put("T", 6, 6)
	c.Advance(10*time.Second - 600*time.Millisecond + 50*time.Millisecond) // 80.05 s
	s.Tick()
	w, _ = s.Lookup(TopicPutNums, "T")
	// Oldest kept sampling at 20.1 s, newest at 80.05 s: 6 over 59.95 s.
	checkWindow(t, "minute after jittered ticks", w.Minute, Window{Sum: 6, TPS: 6 / 59.95, AvgPT: 6})
}

// The timer's rates are those of its records taken in and put over the
// last 10 s, written as Java writes a float: 0.0 until 10 s were sampled.
func TestTimerRates(t *testing.T) {
	s, c := newTestStats()
	s.Tick()
	if in, out := s.TimerTPS(); in != "0.0" || out != "0.0" {
		t.Errorf("timer rates before any interval: %q %q, want 0.0 0.0", in, out)
	}
	for i := 0; i < 12; i++ {
		c.Advance(time.Second)
		s.TimerTook(5)
		s.TimerPut(2)
		if i%2 == 0 {
			s.TimerPut(1)
		}
		s.Tick()
	}
	if in, out := s.TimerTPS(); in != "5.0" || out != "2.5" {
		t.Errorf("timer rates %q %q, want 5.0 (taken in) and 2.5 (put)", in, out)
	}
}
