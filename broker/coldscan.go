package broker

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/periodic"
)

// The page-cache scan of cold-data flow control under coldDataScanEnable
// (RocketMQ 5's CommitLog.ColdDataCheckService). While both
// coldDataFlowControlEnable and coldDataScanEnable are on, a pass every
// timerColdDataCheckIntervalMs asks the kernel (mincore) which pages of
// every CommitLog segment are in the page cache and keeps, per segment,
// the answer for the first page of each group of sampleSteps pages. A
// read in the cold area is then judged by the page that starts its
// group, as of the last pass (readCold). While either switch is off the
// table is dropped and the loop looks again every coldCheckIdle.

const (
	// coldCheckIdle is the period of the scan loop while it has nothing
	// to do (RocketMQ's 180 s).
	coldCheckIdle = 180 * time.Second
	// defaultSampleSteps replaces a sampleSteps of 0 or below.
	defaultSampleSteps = 32
)

// segmentResidency is one segment's sampled residency.
type segmentResidency struct {
	start  int64
	sample []byte // a byte per group of steps pages; bit 0: in the page cache
}

// coldScan holds the last pass's residency table. Its loop (run) is owned
// by the broker's background group; inCache may be called from any
// goroutine.
type coldScan struct {
	clog *commitlog.Log
	cfg  func() *configs.Broker
	log  zerolog.Logger
	// steps is sampleSteps as the broker started with it (RocketMQ reads
	// it once too); pageSize is commitlog.PageSize.
	steps    int64
	pageSize int64
	// period, when positive (tests), replaces the loop's periods.
	period time.Duration

	mu    sync.RWMutex
	table []segmentResidency // by start; nil: no pass since the switches went on
}

func newColdScan(clog *commitlog.Log, cfg func() *configs.Broker, log zerolog.Logger) *coldScan {
	steps := cfg().SampleSteps
	if steps <= 0 {
		steps = defaultSampleSteps
	}
	return &coldScan{clog: clog, cfg: cfg, log: log, steps: int64(steps), pageSize: commitlog.PageSize()}
}

// on reports whether the scan is wanted: coldDataFlowControlEnable and
// coldDataScanEnable.
func (s *coldScan) on() bool {
	cur := s.cfg()
	return cur.ColdDataFlowControlEnable && cur.ColdDataScanEnable
}

// wait is the time to the loop's next look: timerColdDataCheckIntervalMs
// while the scan is wanted, coldCheckIdle otherwise.
func (s *coldScan) wait() time.Duration {
	switch {
	case s.period > 0:
		return s.period
	case s.on():
		return s.cfg().TimerColdDataCheckInterval
	}
	return coldCheckIdle
}

// run makes a pass at once, as RocketMQ's service does when it is built,
// then one every wait until ctx ends.
func (s *coldScan) run(ctx context.Context) {
	s.tick()
	periodic.RunVarying(ctx, s.wait, func(context.Context) { s.tick() })
}

// tick makes a pass when the scan is wanted and drops the table when not.
func (s *coldScan) tick() {
	if !s.on() {
		s.mu.Lock()
		s.table = nil
		s.mu.Unlock()
		return
	}
	s.scan()
}

// scan replaces the table with the residency of every segment now. A
// segment whose mincore fails counts as all in the page cache, as
// RocketMQ counts it, with an error logged.
func (s *coldScan) scan() {
	began := time.Now()
	var table []segmentResidency
	err := s.clog.SampledResidency(int(s.steps), func(start int64, sample []byte) {
		table = append(table, segmentResidency{start: start, sample: sample})
	})
	if err != nil {
		s.log.Error().Err(err).Msg("page-cache scan of cold-data flow control: segments whose residency is unknown count as cached")
	}
	s.mu.Lock()
	s.table = table
	s.mu.Unlock()
	s.log.Debug().Int("segments", len(table)).Dur("took", time.Since(began)).Msg("page-cache scan of cold-data flow control")
}

// inCache reports whether the last pass found the page that starts the
// group of phy's page in the page cache (RocketMQ's lookup in
// isDataInPageCache): true when no pass covered phy's segment.
func (s *coldScan) inCache(phy int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := sort.Search(len(s.table), func(i int) bool { return s.table[i].start > phy }) - 1
	if i < 0 {
		return true
	}
	seg := s.table[i]
	g := (phy - seg.start) / s.pageSize / s.steps
	if g >= int64(len(seg.sample)) {
		return true // past the segment: in one created since the pass
	}
	return seg.sample[g]&1 != 0
}
