package broker

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// The reasons configs gives for two inert queue keys quote the bounds in
// force: the sends waiting for the index (maxAdmitWaiters) and the
// worker queue (remoting.DefaultQueueSize, written "10,000").
func TestInertQueueReasonsQuoteTheBounds(t *testing.T) {
	if remoting.DefaultQueueSize != 10_000 {
		t.Fatalf("the worker queue holds %d; configs' reasonQueueCapacity says 10,000", remoting.DefaultQueueSize)
	}
	loaded, err := configs.LoadBroker("", map[string]string{"sendThreadPoolQueueCapacity": "1", "pullThreadPoolQueueCapacity": "1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sendThreadPoolQueueCapacity": strconv.Itoa(maxAdmitWaiters), "pullThreadPoolQueueCapacity": "10,000"}
	for _, k := range loaded.InertKeys {
		if n, ok := want[k.Key]; ok {
			if !strings.Contains(k.Reason, n) {
				t.Errorf("%s: reason %q does not quote %s", k.Key, k.Reason, n)
			}
			delete(want, k.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("not reported inert: %v", want)
	}
}
