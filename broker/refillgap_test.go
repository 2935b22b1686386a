package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// A light message queue's entries come from the records of the topic
// they were sent to, which name the queue in INNER_MULTI_DISPATCH (as the
// dispatcher writes them): a run of its consume queue files missing in
// the middle is written again from those records, not refused as held
// by no record (nor written blank below the CommitLog's minimum, which
// would skip the messages whose records are still there).
func TestRefillConsumeQueueGapOfALightMessageQueue(t *testing.T) {
	clog, err := commitlog.Open(commitlog.Config{Dir: t.TempDir(), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer clog.Close()
	const lmq = "%LMQ%orders"
	var offs, ends []int64
	for i := range 10 {
		m := &commitlog.Message{Topic: "TopicL", QueueID: 2, QueueOffset: int64(i + 100), Body: []byte(fmt.Sprint("m", i)),
			Properties: commitlog.FormatProperties(map[string]string{
				commitlog.PropertyMultiDispatch:    lmq,
				commitlog.PropertyMultiQueueOffset: fmt.Sprint(i),
			})}
		res, err := clog.Append(context.Background(), commitlog.AppendRequest{Message: m})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, res.PhyOffset)
		ends = append(ends, res.PhyOffset+res.WroteBytes)
	}
	g := filecq.Gap{Topic: lmq, QueueID: 0, From: 3, To: 7, PhyFrom: ends[2], PhyTo: offs[7]}
	es, err := refillConsumeQueueGap(clog, g, nil)
	if err != nil {
		t.Fatalf("refill of %s/0: %v", lmq, err)
	}
	if len(es) != 4 {
		t.Fatalf("refill of %s/0 gave %d entries, want 4: %+v", lmq, len(es), es)
	}
	for i, e := range es {
		if e.QueueOffset != int64(3+i) || e.PhyOffset != offs[3+i] {
			t.Errorf("entry %d: %+v, want offset %d at %d", i, e, 3+i, offs[3+i])
		}
	}
}
