package broker

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/remoting"
)

// The hot share is ratio % of the memory computed as RocketMQ's
// checkInColdAreaByCommitOffset computes it: a double product cast to a
// long, so truncated toward zero and saturated at the long's bounds.
func TestColdAreaBytes(t *testing.T) {
	for _, c := range []struct {
		mem   int64
		ratio int
		want  int64
	}{
		{100_000, 26, 26_000},
		{16 << 30, 26, 4_466_765_987}, // 4466765987.84
		{1001, 33, 330},               // 330.33
		{100_000, 0, 0},
		{100_000, -5, -5000},
		{100_000, 150, 150_000},
		{1 << 40, math.MaxInt32, math.MaxInt64},
		{1 << 40, math.MinInt32, math.MinInt64},
	} {
		if got := coldAreaBytes(c.mem, c.ratio); got != c.want {
			t.Errorf("coldAreaBytes(%d, %d) = %d, want %d", c.mem, c.ratio, got, c.want)
		}
	}
}

// What cold-data flow control takes as cold, as RocketMQ 5 decides it.
// The broker's memory is set to 100,000 bytes, so the default
// accessMessageInMemoryHotRatio of 26 makes the last 26,000 bytes of the
// CommitLog hot. FAR's messages lie more than that behind the end, NEAR's
// at the end.
//
//   - coldDataScanEnable=false (the default): every record read in the
//     cold area counts as cold, cached or not; none in the hot area does.
//   - A pull starts on a cold message (coldAt, RocketMQ's
//     isMsgInColdArea) by the distance alone, whatever coldDataScanEnable
//     says.
//   - accessMessageInMemoryHotRatio and coldDataScanEnable change at run
//     time (UPDATE_BROKER_CONFIG); the ratio moves the border, a record
//     exactly the hot share behind the end being hot.
//   - coldDataScanEnable=true: a record in the cold area counts only when
//     its pages are not in the page cache, and a record in the hot area
//     does not count even when they are not.
func TestColdReadDistanceAndScan(t *testing.T) {
	const mem = 100_000
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"mappedFileSizeCommitLog": "65536", "coldDataFlowControlEnable": "true"},
		func(b *Broker) {
			b.memBytes = mem
			b.coldCheckPeriod = time.Hour // the test makes the passes
		})
	c := b.client(nil)
	for _, topic := range []string{"FAR", "NEAR", "FILL"} {
		createTopic(t, c, topic, 1, 1)
	}
	for i := 0; i < 3; i++ {
		mustSend(t, c, "FAR", 0, strings.Repeat("c", 1000), "")
	}
	for i := 0; i < 20; i++ { // into the next segment
		mustSend(t, c, "FILL", 0, strings.Repeat("f", 4096), "")
	}
	for i := 0; i < 3; i++ {
		mustSend(t, c, "NEAR", 0, "h", "")
	}
	b.caughtUp()
	entries := func(topic string) ([]cq.Entry, int64) {
		t.Helper()
		es, err := b.cqs.Get(topic, 0, 0, 3)
		if err != nil || len(es) != 3 {
			t.Fatalf("%s's entries: %v %v", topic, es, err)
		}
		var size int64
		for _, e := range es {
			size += int64(e.Size)
		}
		return es, size
	}
	far, farSize := entries("FAR")
	_, nearSize := entries("NEAR")
	end := b.clog.MaxOffset()
	if d := end - far[2].PhyOffset; d <= mem*26/100 || d > mem {
		t.Fatalf("FAR's last message is %d bytes behind the end, want more than %d and at most %d", d, mem*26/100, mem)
	}
	coldBytes := func(topic string) int64 {
		t.Helper()
		r, err := b.getMessages(topic, 0, 0, 32, 0, nil)
		if err != nil || r.count != 3 {
			t.Fatalf("read %s: %d messages, %v", topic, r.count, err)
		}
		return r.coldBytes
	}
	cached := func() {
		t.Helper()
		v, err := b.clog.Read(far[0].PhyOffset, int32(far[2].PhyOffset+int64(far[2].Size)-far[0].PhyOffset))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		var sum byte
		for _, x := range v.Data { // fault the pages in
			sum += x
		}
		_ = sum
		if in, err := v.Resident(); err != nil || !in {
			t.Skipf("FAR's pages are not in the page cache after a read (%v)", err)
		}
	}

	// By the distance alone: FAR is cold though cached, NEAR is not.
	cached()
	if got := coldBytes("FAR"); got != farSize {
		t.Fatalf("cached records in the cold area counted %d cold bytes, want %d (all of them)", got, farSize)
	}
	if got := coldBytes("NEAR"); got != 0 {
		t.Fatalf("records in the hot area counted %d cold bytes, want 0 (of %d)", got, nearSize)
	}
	if !b.coldAt("FAR", 0, 0) || b.coldAt("NEAR", 0, 0) {
		t.Fatalf("a pull from FAR's start cold %v, from NEAR's %v; want true and false", b.coldAt("FAR", 0, 0), b.coldAt("NEAR", 0, 0))
	}

	// The ratio, changed at run time, moves the border: with a hot share
	// of exactly FAR's first message's distance that message is hot, with
	// a smaller one it is cold. (The ratio's 1 % is 1,000 bytes here.)
	d := end - far[0].PhyOffset
	below := (d - 1) / 1000
	updateConfig(t, c, "accessMessageInMemoryHotRatio="+strconv.FormatInt(below+1, 10))
	if b.current().AccessMessageInMemoryHotRatio != int(below+1) {
		t.Fatalf("accessMessageInMemoryHotRatio %d after the update to %d", b.current().AccessMessageInMemoryHotRatio, below+1)
	}
	if b.coldAt("FAR", 0, 0) {
		t.Fatalf("FAR's first message, %d bytes behind the end, cold with a hot share of %d", d, (below+1)*1000)
	}
	updateConfig(t, c, "accessMessageInMemoryHotRatio="+strconv.FormatInt(below, 10))
	if !b.coldAt("FAR", 0, 0) {
		t.Fatalf("FAR's first message, %d bytes behind the end, hot with a hot share of %d", d, below*1000)
	}
	updateConfig(t, c, "accessMessageInMemoryHotRatio=0") // everything behind the end is cold
	if got := coldBytes("NEAR"); got != nearSize {
		t.Fatalf("with a hot share of 0, NEAR counted %d cold bytes, want %d", got, nearSize)
	}
	updateConfig(t, c, "accessMessageInMemoryHotRatio=26")

	// With the scan: until a pass covered FAR's segment, its records count
	// as cached (RocketMQ's lookup without a table).
	updateConfig(t, c, "coldDataScanEnable=true")
	if !dropSegmentFromPageCache(t, b, far[0].PhyOffset) {
		t.Skip("the page cache kept the first segment's pages")
	}
	if got := coldBytes("FAR"); got != 0 {
		t.Fatalf("with coldDataScanEnable and no scan yet, records in the cold area counted %d cold bytes, want 0", got)
	}
	// Cached at a pass: not cold, but a pull from there still starts
	// cold (the distance alone).
	cached()
	b.coldScan.scan()
	if got := coldBytes("FAR"); got != 0 {
		t.Fatalf("with coldDataScanEnable, cached records in the cold area counted %d cold bytes, want 0", got)
	}
	if !b.coldAt("FAR", 0, 0) {
		t.Fatal("with coldDataScanEnable, a pull from FAR's start, cached but in the cold area, is not cold")
	}
	// Dropped from the page cache: cold once a pass saw it, all three
	// records (they start in the segment's first group of sampleSteps
	// pages, judged by its first page as the pass found it, whatever the
	// reads fault in since).
	if !dropSegmentFromPageCache(t, b, far[0].PhyOffset) {
		t.Skip("the page cache kept the first segment's pages")
	}
	if got := coldBytes("FAR"); got != 0 {
		t.Fatalf("dropped after the pass that found them cached, FAR's records counted %d cold bytes, want 0", got)
	}
	if !dropSegmentFromPageCache(t, b, far[0].PhyOffset) {
		t.Skip("the page cache kept the first segment's pages")
	}
	b.coldScan.scan()
	if got := coldBytes("FAR"); got != farSize {
		t.Fatalf("with coldDataScanEnable, records in the cold area out of the page cache at the pass counted %d cold bytes, want %d", got, farSize)
	}
	// The distance comes first: in the hot area, records out of the page
	// cache are not cold.
	updateConfig(t, c, "accessMessageInMemoryHotRatio=100")
	if got := coldBytes("FAR"); got != 0 {
		t.Fatalf("records in the hot area out of the page cache counted %d cold bytes, want 0", got)
	}

	// And back to the distance alone at run time: the next pass drops
	// the table.
	updateConfig(t, c, "coldDataScanEnable=false")
	updateConfig(t, c, "accessMessageInMemoryHotRatio=26")
	cached()
	if got := coldBytes("FAR"); got != farSize {
		t.Fatalf("coldDataScanEnable back to false: cached records in the cold area counted %d cold bytes, want %d", got, farSize)
	}
	b.coldScan.tick()
	b.coldScan.mu.RLock()
	left := len(b.coldScan.table)
	b.coldScan.mu.RUnlock()
	if left != 0 {
		t.Fatalf("a pass with coldDataScanEnable off kept a table of %d segments", left)
	}
}

// The scan's table judges an offset by the first page of its group of
// sampleSteps pages in its segment; an offset in a segment the pass did
// not see counts as cached.
func TestColdScanLookup(t *testing.T) {
	const page = 4096
	s := &coldScan{steps: 4, pageSize: page, table: []segmentResidency{
		{start: 1 << 20, sample: []byte{1, 0, 1}},      // 12 pages
		{start: 1<<20 + 12*page, sample: []byte{0, 1}}, // the next segment, 8 pages
	}}
	for _, c := range []struct {
		phy  int64
		want bool
	}{
		{0, true},                     // before the table: a segment not scanned
		{1 << 20, true},               // group 0
		{1<<20 + 4*page - 1, true},    // still group 0
		{1<<20 + 4*page, false},       // group 1
		{1<<20 + 8*page + 100, true},  // group 2
		{1<<20 + 12*page, false},      // the next segment's group 0
		{1<<20 + 16*page, true},       // its group 1
		{1<<20 + 20*page, true},       // past it: a segment created since
		{1<<20 + 12*page - 1, true},   // last byte of the first segment
		{1<<20 + 12*page + 10, false}, // next segment again
	} {
		if got := s.inCache(c.phy); got != c.want {
			t.Errorf("inCache(%d) = %v, want %v", c.phy, got, c.want)
		}
	}
	s.steps = 1 // the same table read with a step of one page
	if s.inCache(1<<20+page) || !s.inCache(1<<20+2*page) {
		t.Errorf("step 1: page 1 cached %v, page 2 %v; want false, true", s.inCache(1<<20+page), s.inCache(1<<20+2*page))
	}
}

// sampleSteps is read at start (0 or below is 32); the scan's period is
// timerColdDataCheckIntervalMs while coldDataFlowControlEnable and
// coldDataScanEnable are on, read anew before each wait, and 180 s
// otherwise.
func TestColdScanSettings(t *testing.T) {
	cfg := configs.DefaultBroker()
	cfg.SampleSteps = -3
	cur := cfg
	s := newColdScan(nil, func() *configs.Broker { c := cur; return &c }, zerolog.Nop())
	if s.steps != 32 {
		t.Fatalf("sampleSteps -3 taken as %d, want 32", s.steps)
	}
	cfg.SampleSteps = 8
	if s := newColdScan(nil, func() *configs.Broker { return &cfg }, zerolog.Nop()); s.steps != 8 {
		t.Fatalf("sampleSteps 8 taken as %d", s.steps)
	}
	if got := s.wait(); got != coldCheckIdle {
		t.Fatalf("period with the flow control off: %v", got)
	}
	cur.ColdDataFlowControlEnable = true
	if got := s.wait(); got != coldCheckIdle {
		t.Fatalf("period without coldDataScanEnable: %v", got)
	}
	cur.ColdDataScanEnable = true
	if got := s.wait(); got != time.Minute {
		t.Fatalf("period with the scan on: %v, want timerColdDataCheckIntervalMs's default 60 s", got)
	}
	cur.TimerColdDataCheckInterval = 5 * time.Second
	if got := s.wait(); got != 5*time.Second {
		t.Fatalf("period after timerColdDataCheckIntervalMs became 5000: %v", got)
	}
}

// timerColdDataCheckIntervalMs changes at run time; sampleSteps does not.
func TestColdScanLiveKeys(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	updateConfig(t, c, "coldDataFlowControlEnable=true\ncoldDataScanEnable=true\ntimerColdDataCheckIntervalMs=7000")
	if got := b.coldScan.wait(); got != 7*time.Second {
		t.Fatalf("scan period after the update to 7000 ms: %v", got)
	}
	r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("sampleSteps=4"))
	if r.Code == remoting.Success || b.coldScan.steps != 32 {
		t.Fatalf("sampleSteps changed at run time: %d %q, steps %d", r.Code, r.Remark, b.coldScan.steps)
	}
}
