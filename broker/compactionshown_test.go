package broker

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// A pull of a compacted dead-letter queue reads the compaction store's
// copies, and shows them as the other read paths show a record: without
// the POP revive's own property (kvindex.AppendShown), which the copy
// keeps as stored.
func TestPullOfACompactedDLQHidesTheRevivesProperty(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	gc, _ := b.groupConfig("gcd", true)
	gc.RetryMaxTimes = 0 // the first revive moves the message to the DLQ
	if err := b.groups.Put(gc); err != nil {
		t.Fatal(err)
	}
	createCompactedTopic(t, rc, "%DLQ%gcd")
	mustSend(t, rc, "CDT", 0, "payload", "KEYS\x01k1\x02")
	b.caughtUp()
	if res := mustPop(t, c, popclient.PopRequest{Group: "gcd", Topic: "CDT", QueueID: -1, MaxMsgNums: 1, InvisibleTime: 100 * time.Millisecond}); len(res.Messages) != 1 {
		t.Fatalf("pop: code %d, %d messages", res.Code, len(res.Messages))
	}
	waitFor(t, "the revive's move to the DLQ", func() bool {
		n, err := b.cqs.MaxOffset("%DLQ%gcd", 0)
		return err == nil && n == 1
	})
	b.caughtUp()
	stored := storedRecords(t, b, "%DLQ%gcd", 0)
	if len(stored) != 1 {
		t.Fatalf("%d records stored in the DLQ, want 1", len(stored))
	}
	if _, ok := commitlog.LookupProperty(stored[0].Properties, kvindex.PropertyRevivedFrom); !ok {
		t.Fatalf("the stored DLQ record has no %s: %q", kvindex.PropertyRevivedFrom, stored[0].Properties)
	}
	r := call(t, rc, remoting.PullMessage, pullReq("dlq-reader", "%DLQ%gcd", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull of the DLQ: %d %s", r.Code, r.Remark)
	}
	got := decodeRecords(t, r.Body)
	if len(got) != 1 || string(got[0].Body) != "payload" {
		t.Fatalf("pulled %+v, want the dead letter", got)
	}
	if v, ok := commitlog.LookupProperty(got[0].Properties, kvindex.PropertyRevivedFrom); ok {
		t.Errorf("the pulled dead letter carries %s=%q", kvindex.PropertyRevivedFrom, v)
	}
	want := commitlog.RewriteProperties(stored[0].Properties, []string{kvindex.PropertyRevivedFrom})
	if got[0].Properties != want || got[0].PhyOffset != stored[0].PhyOffset || got[0].QueueOffset != 0 {
		t.Errorf("pulled %+v, want the stored %+v without %s", got[0], stored[0], kvindex.PropertyRevivedFrom)
	}
}
