package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/periodic"
)

// Cold-data read flow control, RocketMQ 5's ColdDataCgCtrService and its
// two strategies.
//
// Each pull counts the bytes of the cold records it read
// (getResult.coldBytes: records further behind the end of the CommitLog
// than accessMessageInMemoryHotRatio of the memory, and under
// coldDataScanEnable only those not in the page cache; see readCold)
// against its consumer group and the broker as a whole. A pass every
// coldPassEvery sets every count back to zero and forgets groups that
// read nothing cold for coldAccResideTimeout. Between passes a group
// whose count reached its threshold, or any group that read cold data
// while the broker's count reached globalColdReadThreshold, is limited:
// its pulls that start on a message in the cold area (by the distance
// alone, coldAt) are refused or held (broker/pull.go, coldpullhold.go).
//
// A group's threshold is the one an administrator set for it
// (UPDATE_COLD_DATA_FLOW_CTR_CONFIG), else, under coldCtrStrategyEnable,
// the one the strategy adapted for it (kept under the group's name with
// coldAdaptiveSuffix), else cgColdReadThreshold. Nothing of it is
// persisted: RocketMQ keeps it in memory too.

const (
	// coldPassEvery is the period of the accounting pass under
	// coldDataFlowControlEnable; coldPassIdle the period without it
	// (RocketMQ's 5 s and 180 s).
	coldPassEvery = 5 * time.Second
	coldPassIdle  = 180 * time.Second
	// coldAccResideTimeout: a group that read nothing cold for this long
	// leaves the runtime table (and loses its adapted threshold).
	coldAccResideTimeout = time.Minute
	// coldAdaptiveSuffix marks a threshold the strategy adapted, kept in
	// the same table as the administrators' under group+suffix.
	coldAdaptiveSuffix = "||adaptive"
	// coldMaxDecelerate is how many adapted thresholds one pass lowers.
	coldMaxDecelerate = 3
)

// coldAcc is one group's cold reads in the current period: RocketMQ's
// AccAndTimeStamp, whose JSON the info answer carries.
type coldAcc struct {
	acc      int64
	lastRead time.Time
	created  time.Time
}

// coldReads holds the cold-read counts and thresholds. Its methods are
// safe for concurrent use; one mutex guards everything (the strategies
// are called with it held).
type coldReads struct {
	cfg      func() *configs.Broker
	log      zerolog.Logger
	now      func() time.Time
	strategy coldStrategy
	// period, when positive, replaces coldPassEvery and coldPassIdle.
	period time.Duration

	mu      sync.Mutex
	runtime map[string]*coldAcc // group → its cold reads this period
	config  map[string]int64    // group or group+coldAdaptiveSuffix → threshold
	global  int64               // all groups' cold bytes this period
}

// newColdReads builds the accounting. The strategy is chosen once, from
// usePIDColdCtrStrategy at start, as RocketMQ chooses it.
func newColdReads(cfg func() *configs.Broker, log zerolog.Logger) *coldReads {
	c := &coldReads{cfg: cfg, log: log, now: time.Now,
		runtime: map[string]*coldAcc{}, config: map[string]int64{}}
	start := cfg()
	if start.UsePIDColdCtrStrategy {
		c.strategy = &pidColdStrategy{expect: int64(float64(start.GlobalColdReadThreshold) * 0.8)}
	} else {
		c.strategy = simpleColdStrategy{}
	}
	return c
}

// add counts n cold bytes read by group (RocketMQ's coldAcc). System
// groups are not counted: RocketMQ's store reports no cold bytes for them.
func (c *coldReads) add(group string, n int64) {
	if n <= 0 || sysPullGroup(group) {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.global += n
	a := c.runtime[group]
	if a == nil {
		c.runtime[group] = &coldAcc{acc: n, lastRead: now, created: now}
		return
	}
	a.acc += n
	a.lastRead = now
}

// limited reports whether group's pulls of cold messages are to be held
// back now (RocketMQ's isCgNeedColdDataFlowCtr): only under
// coldDataFlowControlEnable, never for a system group, and only for a
// group that read cold data in this period.
func (c *coldReads) limited(group string) bool {
	cur := c.cfg()
	if !cur.ColdDataFlowControlEnable || sysPullGroup(group) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.runtime[group]
	if a == nil {
		return false
	}
	if a.acc >= c.threshold(group, cur) {
		return true
	}
	return c.global >= cur.GlobalColdReadThreshold
}

// setGroups sets administrators' thresholds, group → bytes.
func (c *coldReads) setGroups(thresholds map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for g, v := range thresholds {
		c.config[g] = v
	}
}

// removeGroup drops the threshold kept under group (an administrator's,
// or an adapted one named with its suffix).
func (c *coldReads) removeGroup(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.config, group)
}

// coldAccJSON is RocketMQ's AccAndTimeStamp as fastjson writes it.
type coldAccJSON struct {
	ColdAcc               int64 `json:"coldAcc"`
	LastColdReadTimeMills int64 `json:"lastColdReadTimeMills"`
	CreateTimeMills       int64 `json:"createTimeMills"`
}

// coldInfoJSON is the body of the GET_COLD_DATA_FLOW_CTR_INFO answer.
type coldInfoJSON struct {
	RuntimeTable            map[string]coldAccJSON `json:"runtimeTable"`
	ConfigTable             map[string]int64       `json:"configTable"`
	CgColdReadThreshold     int64                  `json:"cgColdReadThreshold"`
	GlobalColdReadThreshold int64                  `json:"globalColdReadThreshold"`
	GlobalAcc               int64                  `json:"globalAcc"`
}

// info returns the JSON mqadmin getColdDataFlowCtrInfo prints: the
// runtime and configured tables, the two thresholds in force and the
// broker's cold bytes in this period.
func (c *coldReads) info() ([]byte, error) {
	cur := c.cfg()
	c.mu.Lock()
	out := coldInfoJSON{RuntimeTable: make(map[string]coldAccJSON, len(c.runtime)), ConfigTable: make(map[string]int64, len(c.config)),
		CgColdReadThreshold: cur.CgColdReadThreshold, GlobalColdReadThreshold: cur.GlobalColdReadThreshold, GlobalAcc: c.global}
	for g, a := range c.runtime {
		out.RuntimeTable[g] = coldAccJSON{ColdAcc: a.acc, LastColdReadTimeMills: a.lastRead.UnixMilli(), CreateTimeMills: a.created.UnixMilli()}
	}
	for k, v := range c.config {
		out.ConfigTable[k] = v
	}
	c.mu.Unlock()
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the cold-data flow control info: %w", err)
	}
	return body, nil
}

// run makes the accounting passes until ctx ends: every coldPassEvery
// under coldDataFlowControlEnable, every coldPassIdle without it (the
// setting is read again before each wait).
func (c *coldReads) run(ctx context.Context) {
	periodic.RunVarying(ctx, func() time.Duration {
		switch {
		case c.period > 0:
			return c.period
		case c.cfg().ColdDataFlowControlEnable:
			return coldPassEvery
		}
		return coldPassIdle
	}, func(context.Context) { c.pass() })
}

// pass is one accounting pass (RocketMQ's clearDataAcc, then
// clearAdaptiveConfig when the strategy is off): it forgets the groups
// idle for coldAccResideTimeout, lets the strategy raise the threshold of
// groups that reached theirs and lower the highest adapted ones, and
// sets every count back to zero.
func (c *coldReads) pass() {
	cur := c.cfg()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	adapt := cur.ColdCtrStrategyEnable
	if adapt {
		c.strategy.collect(c.global)
	}
	groups := make([]string, 0, len(c.runtime))
	for g := range c.runtime {
		groups = append(groups, g)
	}
	sort.Strings(groups) // a stable log order
	for _, g := range groups {
		a := c.runtime[g]
		switch {
		case !now.Before(a.lastRead.Add(coldAccResideTimeout)):
			if adapt {
				delete(c.config, g+coldAdaptiveSuffix)
			}
			delete(c.runtime, g)
		case a.acc >= c.threshold(g, cur):
			c.log.Info().Str("group", g).Int64("coldBytes", a.acc).Int64("threshold", c.threshold(g, cur)).
				Msg("consumer group reached its cold-read threshold")
			if adapt && !c.globalOver(cur) && !c.adminSet(g) {
				c.strategy.promote(c, g+coldAdaptiveSuffix, c.threshold(g, cur), cur)
			}
		}
		a.acc = 0
	}
	if c.globalOver(cur) {
		c.log.Info().Int64("coldBytes", c.global).Int64("threshold", cur.GlobalColdReadThreshold).
			Msg("the broker is over its global cold-read threshold")
	}
	if adapt {
		c.decelerate(cur)
	}
	c.global = 0
	if !adapt {
		for k := range c.config {
			if strings.HasSuffix(k, coldAdaptiveSuffix) {
				delete(c.config, k)
			}
		}
	}
}

// decelerate offers the strategy the highest thresholds that are not an
// administrator's, coldMaxDecelerate of them (RocketMQ's
// sortAndDecelerate). Called with mu held.
func (c *coldReads) decelerate(cur *configs.Broker) {
	keys := make([]string, 0, len(c.config))
	for k := range c.config {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c.config[keys[i]] != c.config[keys[j]] {
			return c.config[keys[i]] > c.config[keys[j]]
		}
		return keys[i] < keys[j]
	})
	left := coldMaxDecelerate
	for _, k := range keys {
		if left == 0 {
			break
		}
		if c.adminSet(k) {
			continue
		}
		c.strategy.decelerate(c, k, c.threshold(k, cur), cur)
		left--
	}
}

// globalOver reports whether the broker read more cold bytes this period
// than globalColdReadThreshold (RocketMQ's isGlobalColdCtr: strictly
// more, where limited asks for at least). Called with mu held.
func (c *coldReads) globalOver(cur *configs.Broker) bool {
	return c.global > cur.GlobalColdReadThreshold
}

// adminSet reports whether an administrator set the threshold of key's
// group (key with or without the adaptive suffix). RocketMQ strips the
// suffix with String.split, which takes it as a regular expression that
// matches the empty string and so keeps only the name's first character;
// the suffix is stripped as meant here. Called with mu held.
func (c *coldReads) adminSet(key string) bool {
	_, ok := c.config[strings.TrimSuffix(key, coldAdaptiveSuffix)]
	return ok
}

// threshold returns the cold-read threshold of key (a group, or a group
// with the adaptive suffix): an administrator's, else an adapted one
// under coldCtrStrategyEnable, else cgColdReadThreshold (RocketMQ's
// getThresholdByConsumerGroup). Called with mu held.
func (c *coldReads) threshold(key string, cur *configs.Broker) int64 {
	if v, ok := c.config[strings.TrimSuffix(key, coldAdaptiveSuffix)]; ok {
		return v
	}
	if cur.ColdCtrStrategyEnable {
		adaptive := key
		if !strings.HasSuffix(key, coldAdaptiveSuffix) {
			adaptive = key + coldAdaptiveSuffix
		}
		if v, ok := c.config[adaptive]; ok {
			return v
		}
	}
	return cur.CgColdReadThreshold
}

// coldStrategy adapts the thresholds of groups (RocketMQ's
// ColdCtrStrategy). Its methods are called with coldReads.mu held.
type coldStrategy interface {
	// collect takes the broker's cold bytes of the period ending.
	collect(global int64)
	// promote may raise key's threshold from cur.
	promote(c *coldReads, key string, cur int64, cfg *configs.Broker)
	// decelerate may lower key's threshold from cur.
	decelerate(c *coldReads, key string, cur int64, cfg *configs.Broker)
}

// raised and lowered are the strategies' steps: half as much again, and a
// fifth less but not below cgColdReadThreshold (Java's long casts
// truncate likewise).
func raised(cur int64) int64 { return int64(float64(cur) * 1.5) }

func lowered(cur int64, cfg *configs.Broker) int64 {
	return max(int64(float64(cur)*0.8), cfg.CgColdReadThreshold)
}

// simpleColdStrategy raises a threshold every time a group reaches it
// and lowers the highest ones while the broker is over its global
// threshold (RocketMQ's SimpleColdCtrStrategy).
type simpleColdStrategy struct{}

func (simpleColdStrategy) collect(int64) {}

func (simpleColdStrategy) promote(c *coldReads, key string, cur int64, _ *configs.Broker) {
	c.config[key] = raised(cur)
}

func (simpleColdStrategy) decelerate(c *coldReads, key string, cur int64, cfg *configs.Broker) {
	if !c.globalOver(cfg) {
		return
	}
	c.config[key] = lowered(cur, cfg)
}

// pidHistory is how many periods the PID strategy remembers; it decides
// nothing until it has them all.
const pidHistory = 10

// pidColdStrategy decides from a PID controller over the error between
// the broker's cold bytes per period and expect (80% of
// globalColdReadThreshold at start): a positive output (room left) lets
// thresholds rise, a negative one lowers them (RocketMQ's
// PIDAdaptiveColdCtrStrategy, weights 0.5, 0.3, 0.2).
type pidColdStrategy struct {
	expect  int64
	errs    []int64 // the last pidHistory errors, oldest first
	lastErr int64
}

func (s *pidColdStrategy) collect(global int64) {
	s.lastErr = s.expect - global
	s.errs = append(s.errs, s.lastErr)
	if len(s.errs) > pidHistory {
		s.errs = s.errs[len(s.errs)-pidHistory:]
	}
}

// factor is the controller's output, 0 until the history is full.
func (s *pidColdStrategy) factor() float64 {
	if len(s.errs) < pidHistory {
		return 0
	}
	n := len(s.errs)
	var sum float64
	for _, e := range s.errs {
		sum += float64(e)
	}
	return 0.5*float64(s.lastErr) + 0.3*sum + 0.2*float64(s.errs[n-1]-s.errs[n-2])
}

func (s *pidColdStrategy) promote(c *coldReads, key string, cur int64, _ *configs.Broker) {
	if s.factor() > 0 {
		c.config[key] = raised(cur)
	}
}

func (s *pidColdStrategy) decelerate(c *coldReads, key string, cur int64, cfg *configs.Broker) {
	if s.factor() < 0 {
		c.config[key] = lowered(cur, cfg)
	}
}
