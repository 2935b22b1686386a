package broker

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// connectTimeoutMillis's reason quotes the bounds in force: connections
// dialled within 3 s (the name server pool's dial bound, a slave's
// masterCallTimeout) and the scan of the name servers every
// nameServerScanPeriod. It used to say a connection was bounded by the
// timeout of the request that opens it.
func TestConnectTimeoutReasonQuotesTheDialBoundAndTheScan(t *testing.T) {
	for name, d := range map[string]time.Duration{"nameServerScanPeriod": nameServerScanPeriod, "masterCallTimeout": masterCallTimeout} {
		if d != 3*time.Second {
			t.Fatalf("%s is %v; configs' connectTimeoutMillis reason says 3 s", name, d)
		}
	}
	loaded, err := configs.LoadBroker("", map[string]string{"connectTimeoutMillis": "10000"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(loaded.InertKeys, func(k configs.InertKey) bool { return k.Key == "connectTimeoutMillis" })
	if i < 0 {
		t.Fatal("connectTimeoutMillis not reported inert")
	}
	reason := loaded.InertKeys[i].Reason
	for _, want := range []string{"dialled within RocketMQ's default, 3 s", "scanned every 3 s"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}
}
