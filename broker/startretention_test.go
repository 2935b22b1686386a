package broker

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// Segments retention deletes while the broker starts, before the index
// follows the CommitLog's minimum (the cleaner runs from the moment the
// log opens; a start in the deleteWhen hour or on a full disk deletes at
// its first pass), still move the queues' minimum offsets: a consumer is
// not told its queue starts at records that are gone.
func TestADeletionWhileTheBrokerStartsReachesTheIndex(t *testing.T) {
	store := t.TempDir()
	settings := map[string]string{"mappedFileSizeCommitLog": "65536",
		"deleteWhen": strconv.Itoa((time.Now().Hour() + 12) % 24), "diskMaxUsedSpaceRatio": "95"}
	b := startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	filler := strings.Repeat("x", 4096)
	for range 40 {
		mustSend(t, c, "Early", 0, filler, "")
	}
	b.caughtUp()
	b.stop()

	var once sync.Once
	b = startTestBrokerWith(t, store, settings, func(nb *Broker) {
		nb.recoveryStep = func(step string) {
			if step == kvindex.StepDispatchedSet {
				once.Do(func() {
					if _, err := nb.clog.DeleteExpired(time.Now().Add(1000*time.Hour), true); err != nil {
						t.Errorf("delete segments while the broker starts: %v", err)
					}
				})
			}
		}
	})
	logMin := b.clog.MinOffset()
	if logMin == 0 {
		t.Fatal("no segment was deleted while the broker started")
	}
	c = b.client(nil)
	first := header(t, call(t, c, remoting.GetMinOffset, map[string]string{"topic": "Early", "queueId": "0"}, nil), "offset")
	if first == 0 {
		t.Fatalf("queue's minimum offset still 0 after its first segments (to %d) were deleted while the broker started", logMin)
	}
	pulled := call(t, c, remoting.PullMessage, pullReq("sg", "Early", 0, first, 0, 0, "*"), nil)
	if pulled.Code != remoting.Success {
		t.Fatalf("pull from the queue's minimum %d: %d %s", first, pulled.Code, pulled.Remark)
	}
	if recs := decodeRecords(t, pulled.Body); len(recs) == 0 || recs[0].QueueOffset != first || recs[0].PhyOffset < logMin {
		t.Errorf("pull from the minimum %d: first record %+v, want queue offset %d at or past the CommitLog's minimum %d", first, recs[:min(1, len(recs))], first, logMin)
	}
}
