package brokerstats

import (
	"strconv"
	"testing"
	"time"
)

// The put latencies follow StoreStatsService: 13 coarse buckets reported
// for the last whole minute, percentiles interpolated in the fine buckets
// of that minute, maxima and failures since the start.
func TestPutLatenciesOfTheLastMinute(t *testing.T) {
	s, c := newTestStats()
	s.Tick()
	// 1,000 puts: 900 under a millisecond, 90 of 15 ms, 10 of 700 ms (3
	// of them refused), and one read of 42 ms.
	for range 900 {
		s.PutTook(400*time.Microsecond, false)
	}
	for range 90 {
		s.PutTook(15*time.Millisecond+300*time.Microsecond, false)
	}
	for i := range 10 {
		s.PutTook(700*time.Millisecond, i < 3)
	}
	s.GetTook(time.Now().Add(-42 * time.Millisecond))

	table := map[string]string{}
	s.Runtime(table)
	zeros := "[<=0ms]:0 [0~10ms]:0 [10~50ms]:0 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 " +
		"[1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:0 "
	for k, want := range map[string]string{
		// The minute has not ended: nothing to report yet.
		"putMessageDistributeTime": zeros, "putLatency99": "0.00", "putLatency999": "0.00",
		// The maxima and failures count from the start.
		"putMessageEntireTimeMax": "700", "putMessageFailedTimes": "3",
	} {
		if table[k] != want {
			t.Errorf("within the first minute %s = %q, want %q", k, table[k], want)
		}
	}
	if ms, err := strconv.Atoi(table["getMessageEntireTimeMax"]); err != nil || ms < 42 || ms > 1000 {
		t.Errorf("getMessageEntireTimeMax %q, want the 42 ms read", table["getMessageEntireTimeMax"])
	}

	c.Advance(59 * time.Second)
	s.Tick()
	s.Runtime(table)
	if table["putMessageDistributeTime"] != zeros {
		t.Errorf("59 s in: putMessageDistributeTime %q, want the minute still running", table["putMessageDistributeTime"])
	}
	c.Advance(time.Second)
	s.Tick()
	s.PutTook(5*time.Second, false) // counts in the next minute
	s.Runtime(table)
	for k, want := range map[string]string{
		"putMessageDistributeTime": "[<=0ms]:900 [0~10ms]:0 [10~50ms]:90 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 " +
			"[500ms~1s]:10 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:0 ",
		// p99: position 990 of 1,000 falls at the end of the 90 puts in
		// (14, 15] ms: 14 + 1 * (990-900)/90.
		"putLatency99": "15.00",
		// p99.9: position 999 is the 9th of the 10 in (600, 700] ms:
		// 600 + 100 * (999-990)/10.
		"putLatency999":           "690.00",
		"putMessageEntireTimeMax": "5000",
		"putMessageFailedTimes":   "3",
	} {
		if table[k] != want {
			t.Errorf("after the first minute %s = %q, want %q", k, table[k], want)
		}
	}

	c.Advance(time.Minute)
	s.Tick()
	s.Runtime(table)
	if want := "[<=0ms]:0 [0~10ms]:0 [10~50ms]:0 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 " +
		"[1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:1 [10s~]:0 "; table["putMessageDistributeTime"] != want {
		t.Errorf("the second minute: putMessageDistributeTime %q, want %q", table["putMessageDistributeTime"], want)
	}
	// One put of 5 s: position int(1 * 0.99) = 0 is reached at the first
	// bucket, empty, so RocketMQ's arithmetic gives 0.
	if table["putLatency99"] != "0.00" {
		t.Errorf("the second minute: putLatency99 %q, want 0.00", table["putLatency99"])
	}
}

// Each bound of the coarse buckets belongs to the bucket above it, as in
// StoreStatsService.setPutMessageEntireTimeMax; the fine buckets take a
// time up to and including their bound (TreeMap.ceilingEntry).
func TestPutBucketBounds(t *testing.T) {
	for _, tc := range []struct {
		ms           int64
		coarse, fine int
	}{
		{-3, 0, 0}, {0, 0, 0}, {1, 1, 0}, {9, 1, 8}, {10, 2, 9}, {20, 2, 19}, {21, 2, 20}, {22, 2, 20}, {49, 2, 34},
		{50, 3, 34}, {99, 3, 44}, {100, 4, 44}, {101, 4, 45}, {499, 5, 60}, {500, 6, 60}, {999, 6, 65},
		{1000, 7, 65}, {1999, 7, 66}, {2000, 8, 66}, {9999, 11, 74}, {10000, 12, 74}, {10001, 12, 75}, {1 << 40, 12, 75},
	} {
		var m putMinute
		m.add(tc.ms)
		if m.coarse[tc.coarse].Load() != 1 {
			t.Errorf("%d ms: not in coarse bucket %s", tc.ms, coarseNames[tc.coarse])
		}
		if m.fine[tc.fine].Load() != 1 {
			t.Errorf("%d ms: not in fine bucket %d (up to %d ms)", tc.ms, tc.fine, fineBounds[tc.fine])
		}
	}
}

// An unknown key in a runtime table is harmless, but one missing is not:
// every key RocketMQ's getRuntimeInfo writes for put latencies is there
// from the start.
func TestPutLatencyKeysFromTheStart(t *testing.T) {
	s, _ := newTestStats()
	table := map[string]string{}
	s.Runtime(table)
	for _, k := range []string{"putMessageDistributeTime", "putLatency99", "putLatency999", "putMessageEntireTimeMax",
		"getMessageEntireTimeMax", "putMessageFailedTimes"} {
		if table[k] == "" {
			t.Errorf("%s missing before anything was put", k)
		}
	}
}
