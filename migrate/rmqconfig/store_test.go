package rmqconfig

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/meta"
)

// fakeQueues holds queue 0 of a few topics: min is the first offset
// retention left, phys the CommitLog offsets of the entries from there.
type fakeQueues map[string]struct {
	min  int64
	phys []int64
}

func (f fakeQueues) MaxOffset(topic string, _ int32) (int64, error) {
	return f[topic].min + int64(len(f[topic].phys)), nil
}

func (f fakeQueues) MinOffset(topic string, _ int32) (int64, error) { return f[topic].min, nil }

func (f fakeQueues) Get(topic string, _ int32, from int64, max int) ([]cq.Entry, error) {
	q := f[topic]
	var out []cq.Entry
	for off := from; off >= q.min && off < q.min+int64(len(q.phys)) && len(out) < max; off++ {
		out = append(out, cq.Entry{QueueOffset: off, PhyOffset: q.phys[off-q.min], Size: 100})
	}
	return out, nil
}

// RocketMQ's checker reads the ops from the first one stored after the
// first open half: every op of a half from there on, none before.
func TestTransCheckFrom(t *testing.T) {
	// Halves at queue offsets 0-3 (CommitLog 100, 200, 400, 600); ops
	// after them at 150, 300, 450, 700 (op queue offsets 0-3).
	halves := []int64{100, 200, 400, 600}
	ops := []int64{150, 300, 450, 700}
	type queue = struct {
		min  int64
		phys []int64
	}
	for _, tc := range []struct {
		name             string
		q                fakeQueues
		firstOpen        int64
		wantHalf, wantOp int64
		wantErr          string
	}{
		{"none open: both ends", fakeQueues{meta.TransHalfTopic: queue{0, halves}, meta.TransOpHalfTopic: queue{0, ops}}, -1, 4, 4, ""},
		{"first half open", fakeQueues{meta.TransHalfTopic: queue{0, halves}, meta.TransOpHalfTopic: queue{0, ops}}, 0, 0, 0, ""},
		{"third half open", fakeQueues{meta.TransHalfTopic: queue{0, halves}, meta.TransOpHalfTopic: queue{0, ops}}, 2, 2, 2, ""},
		{"last half open, no op after it", fakeQueues{meta.TransHalfTopic: queue{0, halves[:4]}, meta.TransOpHalfTopic: queue{0, ops[:3]}}, 3, 3, 3, ""},
		{"ops trimmed by retention", fakeQueues{meta.TransHalfTopic: queue{2, halves[2:]}, meta.TransOpHalfTopic: queue{1, ops[1:]}}, 2, 2, 2, ""},
		{"no ops at all (an older rocketkv)", fakeQueues{meta.TransHalfTopic: queue{0, halves}}, 1, 1, 0, ""},
		{"open half without an entry", fakeQueues{meta.TransHalfTopic: queue{2, halves[2:]}, meta.TransOpHalfTopic: queue{0, ops}}, 1, 0, 0, "has no ConsumeQueue entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			half, op, err := transCheckFrom(tc.q, tc.firstOpen)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || half != tc.wantHalf || op != tc.wantOp {
				t.Fatalf("transCheckFrom = %d, %d, %v; want %d, %d", half, op, err, tc.wantHalf, tc.wantOp)
			}
		})
	}
}
