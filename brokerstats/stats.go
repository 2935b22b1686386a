package brokerstats

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/periodic"
)

// The statistics kept, under RocketMQ's names (BrokerStatsManager), with
// the key each is kept by.
const (
	// TopicPutNums counts messages stored per topic (one call per send).
	TopicPutNums = "TOPIC_PUT_NUMS"
	// TopicPutSize counts bytes stored per topic.
	TopicPutSize = "TOPIC_PUT_SIZE"
	// GroupGetNums counts messages delivered per "topic@group".
	GroupGetNums = "GROUP_GET_NUMS"
	// GroupGetSize counts bytes delivered per "topic@group".
	GroupGetSize = "GROUP_GET_SIZE"
	// SendBackPutNums counts consumer send-backs per "topic@group".
	SendBackPutNums = "SNDBCK_PUT_NUMS"
	// BrokerPutNums counts messages stored, under the cluster name.
	BrokerPutNums = "BROKER_PUT_NUMS"
	// BrokerGetNums counts messages delivered, under the cluster name.
	BrokerGetNums = "BROKER_GET_NUMS"
)

// stat says where a statistic is kept: a table, and which of its item's
// counters (the message count, or the size when size is set). The _NUMS
// and _SIZE statistics of a key share one item.
type stat struct {
	table *table
	size  bool
}

// GroupKey is the key of the per-group statistics: "topic@group".
func GroupKey(topic, group string) string { return topic + "@" + group }

// rateSamples is how many per-second samples the store rates keep: ten
// minutes and one (RocketMQ's StoreStatsService).
const rateSamples = 601

// rate is a cumulative counter sampled every second, for the
// "10 s, 1 min, 10 min" rates of GET_BROKER_RUNTIME_INFO.
type rate struct {
	total   atomic.Int64
	samples []rateSample // guarded by Stats.mu, oldest first
}

// rateSample is a rate's counter at one second.
type rateSample struct {
	at    time.Time
	value int64
}

// tps is the rate over the last seconds seconds, or false before that many
// seconds were sampled.
func (r *rate) tps(seconds int) (float64, bool) {
	n := len(r.samples)
	if n <= seconds {
		return 0, false
	}
	first, last := r.samples[n-1-seconds], r.samples[n-1]
	d := last.at.Sub(first.at)
	if d <= 0 {
		return 0, true
	}
	return float64(last.value-first.value) * float64(time.Second) / float64(d), true
}

// Stats is the broker's statistics: the items VIEW_BROKER_STATS_DATA reads,
// the store rates and day totals GET_BROKER_RUNTIME_INFO reports. It is
// safe for concurrent use. Run samples it; without Run the counters still
// count but every window stays empty.
type Stats struct {
	cluster string
	now     func() time.Time
	ticked  atomic.Int64 // the newest Tick's time, unix nanoseconds

	topicPut, groupGet, sendBack, brokerPut, brokerGet table
	stats                                              map[string]stat

	put, getFound, getMiss, transferred rate
	// timerIn and timerOut count the timer's records taken in and put
	// (TimerTook, TimerPut).
	timerIn, timerOut rate
	putBytes          atomic.Int64
	getMessages       atomic.Int64
	// The messages stored and delivered outside system topics, counted
	// as RocketMQ counts its BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC and
	// BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC: the day totals.
	userPut, userGet atomic.Int64
	// putTimes is the put latencies and the read maximum (puttimes.go).
	putTimes putTimes

	mu          sync.Mutex // guards the samples, the windows' schedules and the day totals
	levels      levels
	nextMinute  time.Time
	nextHour    time.Time
	nextDay     time.Time
	nextMorning time.Time
	// userPut and userGet at the last two local midnights (RocketMQ's
	// BrokerStats).
	putYesterdayMorning, putTodayMorning int64
	getYesterdayMorning, getTodayMorning int64
}

// New returns empty statistics for a broker of cluster; now is the clock
// (time.Now when nil).
func New(cluster string, now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	s := &Stats{cluster: cluster, now: now, levels: levels{
		minute: level{period: minutePeriod, max: minuteSamples},
		hour:   level{period: hourPeriod, max: hourSamples},
		day:    level{period: dayPeriod, max: daySamples},
	}}
	s.ticked.Store(now().UnixNano())
	s.putTimes.current.Store(new(putMinute))
	for _, t := range s.tables() {
		t.ticked = &s.ticked
	}
	s.stats = map[string]stat{
		TopicPutNums:    {table: &s.topicPut},
		TopicPutSize:    {table: &s.topicPut, size: true},
		GroupGetNums:    {table: &s.groupGet},
		GroupGetSize:    {table: &s.groupGet, size: true},
		SendBackPutNums: {table: &s.sendBack},
		BrokerPutNums:   {table: &s.brokerPut},
		BrokerGetNums:   {table: &s.brokerGet},
	}
	return s
}

func (s *Stats) tables() []*table {
	return []*table{&s.topicPut, &s.groupGet, &s.sendBack, &s.brokerPut, &s.brokerGet}
}

// Lookup returns statistic name (TOPIC_PUT_NUMS, ...) of key over its
// three windows, or false when nothing was counted under key (or it was
// dropped) or no statistic has that name: VIEW_BROKER_STATS_DATA answers
// "not exist".
func (s *Stats) Lookup(name, key string) (Windows, bool) {
	st, ok := s.stats[name]
	if !ok {
		return Windows{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.table.windows(key, st.size, &s.levels)
}

// Put records a producer's send of msgs messages (bytes in all) to topic,
// once stored: the per-topic and broker statistics. Stored counts the
// store's side of it.
func (s *Stats) Put(topic string, msgs int, bytes int64) {
	s.topicPut.add(topic, int64(msgs), bytes, false)
	s.brokerPut.add(s.cluster, int64(msgs), 0, true)
}

// Stored records msgs messages (bytes in all) appended to the CommitLog,
// whoever put them (sends, retries, timers, transactions): the store's put
// rate and totals. The day totals count apart (PutWithoutSystemTopic).
func (s *Stats) Stored(msgs int, bytes int64) {
	s.put.total.Add(int64(msgs))
	s.putBytes.Add(bytes)
}

// PutWithoutSystemTopic records msgs messages stored in a topic that is
// not a system topic, by a put RocketMQ counts in
// BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC (BrokerStatsManager.
// incBrokerPutNumsWithoutSystemTopic): the msgPutTotal day totals of
// GET_BROKER_RUNTIME_INFO. Which topics are system topics, and which puts
// count, is the caller's to tell.
func (s *Stats) PutWithoutSystemTopic(msgs int) { s.userPut.Add(int64(msgs)) }

// GetWithoutSystemTopic records msgs messages delivered to a consumer of
// a topic that is not a system topic (RocketMQ's
// BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC): the msgGetTotal day totals of
// GET_BROKER_RUNTIME_INFO.
func (s *Stats) GetWithoutSystemTopic(msgs int) { s.userGet.Add(int64(msgs)) }

// Get records a read (pull or pop) that delivered msgs messages (bytes in
// all) of topic to group.
func (s *Stats) Get(group, topic string, msgs int, bytes int64) {
	s.groupGet.add(GroupKey(topic, group), int64(msgs), bytes, false)
	s.brokerGet.add(s.cluster, int64(msgs), 0, true)
	s.getFound.total.Add(1)
	s.transferred.total.Add(int64(msgs))
	s.getMessages.Add(int64(msgs))
}

// TimerTook records n records the timer took in from its topic (a message
// parked, a cancel, a rolled copy), RocketMQ's enqueue_put perf counter:
// timerEnqueueTps.
func (s *Stats) TimerTook(n int) { s.timerIn.total.Add(int64(n)) }

// TimerPut records n messages the timer put when due, to their topic or
// parked again (rolled), RocketMQ's dequeue_put perf counter:
// timerDequeueTps.
func (s *Stats) TimerPut(n int) { s.timerOut.total.Add(int64(n)) }

// TimerTPS returns timerEnqueueTps and timerDequeueTps as RocketMQ's
// runtime info writes them (Java's Float.toString): the rates of
// TimerTook and TimerPut over the last 10 s, RocketMQ's perf counter
// window; 0.0 until 10 s were sampled.
func (s *Stats) TimerTPS() (enqueue, dequeue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, _ := s.timerIn.tps(10)
	out, _ := s.timerOut.tps(10)
	return formatFloat(in), formatFloat(out)
}

// formatFloat writes v as Java's Float.toString writes the float it
// rounds to, for the values rates take (0.0 rather than 0).
func formatFloat(v float64) string {
	str := strconv.FormatFloat(float64(float32(v)), 'f', -1, 32)
	if strings.ContainsRune(str, '.') {
		return str
	}
	return str + ".0"
}

// ScheduleGot records msgs delayed messages (bytes in all) the schedule
// service read from topic and delivered, which RocketMQ counts as got by
// group SCHEDULE_CONSUMER (GROUP_GET_NUMS and GROUP_GET_SIZE of
// "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER"): no read by a consumer, so not
// in the store's get rates nor in BROKER_GET_NUMS.
func (s *Stats) ScheduleGot(group, topic string, msgs int, bytes int64) {
	s.groupGet.add(GroupKey(topic, group), int64(msgs), bytes, false)
}

// Miss records a read that found nothing to deliver.
func (s *Stats) Miss() { s.getMiss.total.Add(1) }

// SendBack records a consumer's send-back of a message of topic.
func (s *Stats) SendBack(group, topic string) {
	s.sendBack.add(GroupKey(topic, group), 1, 0, false)
}

// TopicDeleted drops the items of a deleted topic, as RocketMQ does.
func (s *Stats) TopicDeleted(topic string) {
	s.topicPut.deleteKey(topic)
	s.groupGet.deletePrefix(topic + "@")
	s.sendBack.deletePrefix(topic + "@")
}

// GroupDeleted drops the items of a deleted consumer group, as RocketMQ
// does.
func (s *Stats) GroupDeleted(group string) {
	s.groupGet.deleteSuffix("@" + group)
	s.sendBack.deleteSuffix("@" + group)
}

// GroupTPS is the rate at which group got messages of topic over the last
// minute (GET_CONSUME_STATS' consumeTps).
func (s *Stats) GroupTPS(group, topic string) float64 {
	w, _ := s.Lookup(GroupGetNums, GroupKey(topic, group))
	return w.Minute.TPS
}

// TopicPutTPS is the rate at which producers stored messages in topic
// over the last minute: RocketMQ's BrokerStatsManager.tpsTopicPutNums,
// GET_TOPIC_STATS_INFO's topicPutTps. 0 for a topic without puts.
func (s *Stats) TopicPutTPS(topic string) float64 {
	w, _ := s.Lookup(TopicPutNums, topic)
	return w.Minute.TPS
}

// PutMessages is the number of messages stored since start.
func (s *Stats) PutMessages() int64 { return s.put.total.Load() }

// PutBytes is the number of message bytes stored since start.
func (s *Stats) PutBytes() int64 { return s.putBytes.Load() }

// GetMessages is the number of messages delivered since start.
func (s *Stats) GetMessages() int64 { return s.getMessages.Load() }

// Run samples the statistics every second until ctx ends. The first
// sample is the caller's Tick, or Run's a second after it starts.
func (s *Stats) Run(ctx context.Context) {
	periodic.Run(ctx, time.Second, func(context.Context) { s.Tick() })
}

// Tick takes the samples due at the clock's time: the store rates every
// call (Run calls it every second), the put latencies every minute, the
// minute windows every 10 s, the hour
// windows every 10 min, the day windows every hour, and the day totals at
// local midnight. The first call takes every sample.
func (s *Stats) Tick() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticked.Store(now.UnixNano())
	for _, r := range []*rate{&s.put, &s.getFound, &s.getMiss, &s.transferred, &s.timerIn, &s.timerOut} {
		r.samples = append(r.samples, rateSample{at: now, value: r.total.Load()})
		if len(r.samples) > rateSamples {
			r.samples = append(r.samples[:0], r.samples[len(r.samples)-rateSamples:]...)
		}
	}
	s.tickPutTimes(now)
	if s.nextMorning.IsZero() {
		s.nextMorning = nextMidnight(now)
	}
	for !now.Before(s.nextMorning) {
		s.putYesterdayMorning, s.putTodayMorning = s.putTodayMorning, s.userPut.Load()
		s.getYesterdayMorning, s.getTodayMorning = s.getTodayMorning, s.userGet.Load()
		s.nextMorning = nextMidnight(s.nextMorning.Add(time.Hour))
	}
	if !now.Before(s.nextMinute) {
		s.levels.minute.record(now)
		for _, t := range s.tables() {
			t.sampleMinute()
		}
		s.nextMinute = nextSampling(s.nextMinute, now, minutePeriod)
	}
	if !now.Before(s.nextHour) {
		s.levels.hour.record(now)
		for _, t := range s.tables() {
			t.sampleHour()
		}
		s.nextHour = nextSampling(s.nextHour, now, hourPeriod)
	}
	if !now.Before(s.nextDay) {
		s.levels.day.record(now)
		for _, t := range s.tables() {
			t.sampleDay(now)
		}
		s.nextDay = nextSampling(s.nextDay, now, dayPeriod)
	}
}

// nextSampling is when a window samples next after the sampling due at
// prev ran at now: a period after prev, so the ticks' jitter does not add
// up (10 s apart, not 11), or a period after now when the clock jumped
// past that (no burst of catch-up samplings).
func nextSampling(prev, now time.Time, period time.Duration) time.Time {
	if next := prev.Add(period); !prev.IsZero() && next.After(now) {
		return next
	}
	return now.Add(period)
}

// nextMidnight is the first local midnight after t.
func nextMidnight(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, t.Location())
}

// Runtime adds the statistics GET_BROKER_RUNTIME_INFO reports, under
// RocketMQ's names, to table: putTps, getFoundTps, getMissTps, getTotalTps
// and getTransferredTps as "10s 1min 10min" rates (a rate not yet
// measurable is left out of its string, as RocketMQ does), and the day
// totals msgPutTotalTodayNow, msgPutTotalTodayMorning,
// msgPutTotalYesterdayMorning and their msgGet counterparts. The rates
// count every message the store took in or gave out (RocketMQ's
// StoreStatsService), the day totals only those outside system topics
// (PutWithoutSystemTopic, GetWithoutSystemTopic; RocketMQ's BrokerStats).
// It also adds the put latencies of the last whole minute
// (putMessageDistributeTime, putLatency99, putLatency999), the slowest
// put and read since the start (putMessageEntireTimeMax,
// getMessageEntireTimeMax) and putMessageFailedTimes; see PutTook.
func (s *Stats) Runtime(table map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	table["putTps"] = s.put.tpsText()
	table["getFoundTps"] = s.getFound.tpsText()
	table["getMissTps"] = s.getMiss.tpsText()
	table["getTransferredTps"] = s.transferred.tpsText()
	// RocketMQ before 4.9 spelled it so; older tools read this key.
	table["getTransferedTps"] = table["getTransferredTps"]
	var total []string
	for _, sec := range []int{10, 60, 600} {
		found, _ := s.getFound.tps(sec)
		miss, _ := s.getMiss.tps(sec)
		total = append(total, formatRate(found+miss))
	}
	table["getTotalTps"] = strings.Join(total, " ")
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	table["msgPutTotalTodayNow"] = itoa(s.userPut.Load())
	table["msgPutTotalTodayMorning"] = itoa(s.putTodayMorning)
	table["msgPutTotalYesterdayMorning"] = itoa(s.putYesterdayMorning)
	table["msgGetTotalTodayNow"] = itoa(s.userGet.Load())
	table["msgGetTotalTodayMorning"] = itoa(s.getTodayMorning)
	table["msgGetTotalYesterdayMorning"] = itoa(s.getYesterdayMorning)
	s.putRuntime(table)
}

// tpsText is the "10s 1min 10min" string of a rate; the caller holds
// Stats.mu.
func (r *rate) tpsText() string {
	parts := make([]string, 0, 3)
	for _, sec := range []int{10, 60, 600} {
		v, ok := r.tps(sec)
		if !ok {
			parts = append(parts, "")
			continue
		}
		parts = append(parts, formatRate(v))
	}
	return strings.Join(parts, " ")
}

// formatRate writes a rate as Java's Double.toString does.
func formatRate(v float64) string { return string(adminbody.AppendDouble(nil, v)) }
