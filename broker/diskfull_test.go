package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

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
	if used < 11 {
		t.Skipf("the disk holding %s is %d%% used: no warning level (10..100) below it to test with", store, used)
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
