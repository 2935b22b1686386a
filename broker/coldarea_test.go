package broker

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
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
		func(b *Broker) { b.memBytes = mem })
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

	// With the scan: cached records in the cold area are not cold, but a
	// pull from there still starts cold (the distance alone).
	updateConfig(t, c, "coldDataScanEnable=true")
	cached()
	if got := coldBytes("FAR"); got != 0 {
		t.Fatalf("with coldDataScanEnable, cached records in the cold area counted %d cold bytes, want 0", got)
	}
	if !b.coldAt("FAR", 0, 0) {
		t.Fatal("with coldDataScanEnable, a pull from FAR's start, cached but in the cold area, is not cold")
	}
	// Dropped from the page cache, they are cold (at least the first: its
	// read may fault the next ones in).
	if !dropSegmentFromPageCache(t, b, far[0].PhyOffset) {
		t.Skip("the page cache kept the first segment's pages")
	}
	if got := coldBytes("FAR"); got < int64(far[0].Size) || got > farSize {
		t.Fatalf("with coldDataScanEnable, uncached records in the cold area counted %d cold bytes, want %d to %d", got, far[0].Size, farSize)
	}
	// The distance comes first: in the hot area, uncached records are not
	// cold.
	updateConfig(t, c, "accessMessageInMemoryHotRatio=100")
	if !dropSegmentFromPageCache(t, b, far[0].PhyOffset) {
		t.Skip("the page cache kept the first segment's pages")
	}
	if got := coldBytes("FAR"); got != 0 {
		t.Fatalf("uncached records in the hot area counted %d cold bytes, want 0", got)
	}

	// And back to the distance alone at run time.
	updateConfig(t, c, "coldDataScanEnable=false")
	updateConfig(t, c, "accessMessageInMemoryHotRatio=26")
	cached()
	if got := coldBytes("FAR"); got != farSize {
		t.Fatalf("coldDataScanEnable back to false: cached records in the cold area counted %d cold bytes, want %d", got, farSize)
	}
}
