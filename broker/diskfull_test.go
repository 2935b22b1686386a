package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/remoting"
)

// Above diskSpaceWarningLevelRatio a broker refuses sends with
// SERVICE_NOT_AVAILABLE (RocketMQ's disk-full flag; clients retry another
// broker), and takes them again once the level is raised with
// UPDATE_BROKER_CONFIG (or retention frees space). The level is set just
// under the real disk's use, so the refusal is the real check's.
func TestSendsRefusedAboveDiskWarningLevel(t *testing.T) {
	store := t.TempDir()
	usage, err := vfs.OS{}.Statfs(store)
	if err != nil {
		t.Fatal(err)
	}
	used := int(usage.UsedRatio())
	if used < 37 {
		t.Skipf("the disk holding %s is %d%% used: no warning level (35..100, as RocketMQ bounds it) below it to test with", store, used)
	}
	b := startTestBrokerAt(t, store, map[string]string{
		"diskSpaceWarningLevelRatio": strconv.Itoa(used - 1),
		"cleanResourceInterval":      "20",
	})
	c := b.client(nil)
	r := sendV2(t, c, "DiskT", 0, "m", "")
	if r.Code != remoting.ServiceNotAvailable || !strings.Contains(r.Remark, "warning level") {
		t.Fatalf("send at %d%% used with the level at %d%%: %d %q, want SERVICE_NOT_AVAILABLE naming the warning level", used, used-1, r.Code, r.Remark)
	}
	if max := b.clog.MaxOffset(); max != 0 {
		t.Fatalf("a refused send wrote to the CommitLog (end %d)", max)
	}
	updateConfig(t, c, "diskSpaceWarningLevelRatio=100")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := sendV2(t, c, "DiskT", 0, "m", "")
		if r.Code == remoting.Success {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sends still refused after the warning level was raised: %d %s", r.Code, r.Remark)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The disk ratios are bounded as RocketMQ bounds them, but for the
// warning level's 100 (the refusal off): a broker.conf with
// diskMaxUsedSpaceRatio=98 or diskSpaceCleanForciblyRatio=95 runs as it
// runs there, instead of failing to start or never cleaning forcibly.
func TestDiskRatiosAreBoundedAsRocketMQBoundsThem(t *testing.T) {
	for _, tc := range []struct {
		max, force, warning int
		want                commitlog.Retention
	}{
		{98, 95, 100, commitlog.Retention{DiskMaxUsedSpaceRatio: 95, DiskForceCleanRatio: 85, DiskWarningLevelRatio: 100}},
		{5, 10, 20, commitlog.Retention{DiskMaxUsedSpaceRatio: 10, DiskForceCleanRatio: 30, DiskWarningLevelRatio: 35}},
		{75, 85, 90, commitlog.Retention{DiskMaxUsedSpaceRatio: 75, DiskForceCleanRatio: 85, DiskWarningLevelRatio: 90}},
	} {
		loaded, err := configs.LoadBroker("", map[string]string{"diskMaxUsedSpaceRatio": strconv.Itoa(tc.max),
			"diskSpaceCleanForciblyRatio": strconv.Itoa(tc.force), "diskSpaceWarningLevelRatio": strconv.Itoa(tc.warning)})
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		got := retentionOf(&loaded.Broker)
		if got.DiskMaxUsedSpaceRatio != tc.want.DiskMaxUsedSpaceRatio || got.DiskForceCleanRatio != tc.want.DiskForceCleanRatio ||
			got.DiskWarningLevelRatio != tc.want.DiskWarningLevelRatio {
			t.Errorf("%d/%d/%d: ratios %v/%v/%v, want %v/%v/%v", tc.max, tc.force, tc.warning, got.DiskMaxUsedSpaceRatio, got.DiskForceCleanRatio,
				got.DiskWarningLevelRatio, tc.want.DiskMaxUsedSpaceRatio, tc.want.DiskForceCleanRatio, tc.want.DiskWarningLevelRatio)
		}
	}
}
