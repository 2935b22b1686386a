package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
)

// testColdReads is cold-read accounting over a configuration the test
// changes and a clock it moves.
func testColdReads(t *testing.T, adjust func(*configs.Broker)) (*coldReads, *configs.Broker, *time.Time) {
	t.Helper()
	cfg := configs.DefaultBroker()
	cfg.ColdDataFlowControlEnable = true
	if adjust != nil {
		adjust(&cfg)
	}
	now := time.UnixMilli(1_700_000_000_000)
	c := newColdReads(func() *configs.Broker { return &cfg }, zerolog.Nop())
	c.now = func() time.Time { return now }
	return c, &cfg, &now
}

// The keys' defaults are RocketMQ 5.3.3's (BrokerConfig,
// MessageStoreConfig).
func TestColdCtrDefaults(t *testing.T) {
	d := configs.DefaultBroker()
	if d.ColdDataFlowControlEnable || d.ColdCtrStrategyEnable || !d.UsePIDColdCtrStrategy ||
		d.CgColdReadThreshold != 3*1024*1024 || d.GlobalColdReadThreshold != 100*1024*1024 ||
		d.AccessMessageInMemoryHotRatio != 26 || d.ColdDataScanEnable || d.SampleSteps != 32 || d.TimerColdDataCheckInterval != time.Minute {
		t.Fatalf("defaults %v %v %v %d %d %d %v %d %v", d.ColdDataFlowControlEnable, d.ColdCtrStrategyEnable, d.UsePIDColdCtrStrategy,
			d.CgColdReadThreshold, d.GlobalColdReadThreshold, d.AccessMessageInMemoryHotRatio, d.ColdDataScanEnable,
			d.SampleSteps, d.TimerColdDataCheckInterval)
	}
}

// A group is limited once its cold bytes of the period reach its
// threshold (an administrator's before cgColdReadThreshold), or while
// the broker's reach globalColdReadThreshold and the group read cold
// data; never a system group, nor anyone without
// coldDataFlowControlEnable.
func TestColdReadsLimited(t *testing.T) {
	c, cfg, _ := testColdReads(t, func(b *configs.Broker) {
		b.CgColdReadThreshold = 1000
		b.GlobalColdReadThreshold = 5000
	})
	c.add("g", 999)
	if c.limited("g") {
		t.Fatal("limited below its threshold")
	}
	c.add("g", 1)
	if !c.limited("g") {
		t.Fatal("not limited at its threshold")
	}
	c.setGroups(map[string]int64{"g": 2000})
	if c.limited("g") {
		t.Fatal("limited below the threshold an administrator set")
	}
	c.removeGroup("g")
	if !c.limited("g") {
		t.Fatal("the removed threshold still applies")
	}
	if c.limited("idle") {
		t.Fatal("a group that read nothing cold is limited")
	}
	c.add("other", 4000) // the broker: 5000
	c.add("small", 1)
	if !c.limited("small") {
		t.Fatal("a group under its threshold not limited while the broker is over the global one")
	}
	c.add("TOOLS_CONSUMER", 1<<20)
	if c.limited("TOOLS_CONSUMER") {
		t.Fatal("a system group is limited")
	}
	cfg.ColdDataFlowControlEnable = false
	if c.limited("g") {
		t.Fatal("limited with coldDataFlowControlEnable off")
	}
}

// A pass sets the counts back to zero and forgets, after a minute
// without cold reads, a group and its adapted threshold.
func TestColdReadsPass(t *testing.T) {
	c, _, now := testColdReads(t, func(b *configs.Broker) { b.CgColdReadThreshold = 1000 })
	c.add("g", 1500)
	c.add("h", 10)
	*now = now.Add(30 * time.Second)
	c.add("h", 10)
	c.pass()
	if c.limited("g") {
		t.Fatal("still limited after a pass")
	}
	var info coldInfoJSON
	body, err := c.info()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.RuntimeTable) != 2 || info.RuntimeTable["g"].ColdAcc != 0 || info.GlobalAcc != 0 {
		t.Fatalf("after a pass: %s", body)
	}
	*now = now.Add(31 * time.Second) // g: 61 s since its last cold read, h: 31 s
	c.pass()
	if body, _ := c.info(); len(c.runtime) != 1 || c.runtime["h"] == nil {
		t.Fatalf("after a minute: %s", body)
	}
}

// Under coldCtrStrategyEnable with the simple strategy, a group that
// reached its threshold gets one half as large again, an administrator's
// group keeps its own, and while the broker is over the global threshold
// the adapted thresholds shrink by a fifth, not below
// cgColdReadThreshold. Without the strategy the adapted ones go.
func TestColdReadsSimpleStrategy(t *testing.T) {
	c, cfg, _ := testColdReads(t, func(b *configs.Broker) {
		b.CgColdReadThreshold = 1000
		b.GlobalColdReadThreshold = 1 << 30
		b.ColdCtrStrategyEnable = true
		b.UsePIDColdCtrStrategy = false
	})
	c.setGroups(map[string]int64{"admin": 10})
	c.add("g", 1000)
	c.add("admin", 10)
	c.pass()
	if got := c.config["g"+coldAdaptiveSuffix]; got != 1500 {
		t.Fatalf("adapted threshold %d, want 1500 (%v)", got, c.config)
	}
	if _, ok := c.config["admin"+coldAdaptiveSuffix]; ok || c.config["admin"] != 10 {
		t.Fatalf("an administrator's group adapted: %v", c.config)
	}
	c.add("g", 1499)
	if c.limited("g") {
		t.Fatal("limited under its adapted threshold")
	}
	c.pass()
	cfg.GlobalColdReadThreshold = 100
	c.add("g", 200) // under 1500; the broker over 100
	c.pass()
	if got := c.config["g"+coldAdaptiveSuffix]; got != 1200 {
		t.Fatalf("lowered threshold %d, want 1200 (%v)", got, c.config)
	}
	for i := 0; i < 5; i++ {
		c.add("g", 200)
		c.pass()
	}
	if got := c.config["g"+coldAdaptiveSuffix]; got != 1000 {
		t.Fatalf("lowered threshold %d, want the floor 1000", got)
	}
	cfg.ColdCtrStrategyEnable = false
	c.pass()
	if len(c.config) != 1 || c.config["admin"] != 10 {
		t.Fatalf("without the strategy: %v", c.config)
	}
}

// The PID strategy decides nothing before it has ten periods; with the
// broker under 80% of the global threshold it raises a group's
// threshold, and over it lowers the adapted ones.
func TestColdReadsPIDStrategy(t *testing.T) {
	c, _, _ := testColdReads(t, func(b *configs.Broker) {
		b.CgColdReadThreshold = 1000
		b.GlobalColdReadThreshold = 10_000 // expect 8000
		b.ColdCtrStrategyEnable = true
		b.UsePIDColdCtrStrategy = true
	})
	for i := 0; i < pidHistory-1; i++ {
		c.add("g", 1000)
		c.pass()
	}
	if len(c.config) != 0 {
		t.Fatalf("adapted before ten periods: %v", c.config)
	}
	c.add("g", 1000)
	c.pass()
	if got := c.config["g"+coldAdaptiveSuffix]; got != 1500 {
		t.Fatalf("adapted threshold %d, want 1500", got)
	}
	for i := 0; i < pidHistory; i++ {
		c.add("heavy", 9000) // over 8000 and the global 10,000 together with g's
		c.add("g", 1500)
		c.pass()
	}
	if got := c.config["g"+coldAdaptiveSuffix]; got >= 1500 {
		t.Fatalf("threshold %d not lowered while the broker reads too much cold data", got)
	}
}
