package broker

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// runtimeInfo asks GET_BROKER_RUNTIME_INFO and returns its table.
func runtimeInfo(t *testing.T, c *remoting.Client) map[string]string {
	t.Helper()
	r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("runtime info: code %d %s", r.Code, r.Remark)
	}
	var body struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("runtime info body %q: %v", r.Body, err)
	}
	return body.Table
}

// Under indexWalSync=interval (the default with ASYNC_FLUSH) durable index
// writes are answered before they reach the disk; the broker's sync loop
// must fdatasync the index's log every indexWalSyncIntervalMillis while it
// runs, not only at shutdown, or a power failure loses more than that.
func TestIndexWALSyncedEveryInterval(t *testing.T) {
	b := startTestBroker(t, map[string]string{"indexWalSyncIntervalMillis": "50"})
	c := b.client(nil)
	mustSend(t, c, "Walsync", 0, "m", "")
	b.caughtUp()
	info := runtimeInfo(t, c)
	if info["indexWalSync"] != "interval" {
		t.Fatalf("indexWalSync %q under ASYNC_FLUSH, want interval", info["indexWalSync"])
	}
	syncs := func() int64 {
		n, err := strconv.ParseInt(runtimeInfo(t, c)["indexWalSyncs"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ensureGroup(t, c, "wg")
	before := syncs()
	// 1.5 s of offset commits, each leaving the log unsynced: about 30
	// periods of 50 ms. The sync loop's default period (1 s) would give
	// at most 2 syncs.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		upd := map[string]string{"consumerGroup": "wg", "topic": "Walsync", "queueId": "0", "commitOffset": "1"}
		if r := call(t, c, remoting.UpdateConsumerOffset, upd, nil); r.Code != remoting.Success {
			t.Fatal(r.Remark)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := syncs() - before; n < 5 {
		t.Fatalf("%d syncs of the index log in 1.5 s at a 50 ms period", n)
	}

	// SYNC_FLUSH makes every durable index write sync the log itself.
	s := startTestBroker(t, map[string]string{"flushDiskType": "SYNC_FLUSH"})
	if mode := runtimeInfo(t, s.client(nil))["indexWalSync"]; mode != "always" {
		t.Fatalf("indexWalSync %q under SYNC_FLUSH, want always", mode)
	}
}
