package kvindex

import (
	"fmt"
	"slices"
	"testing"
)

// A replica's master deleted T (whose T/2 got one more record just
// before, still on its way to the replica's index) and created it again
// with a record in T/0; the replica asked for the topic table, which no
// longer had T, when its log ended just past the late record. Whether
// the table is applied while dispatch still holds the late record and
// the new one, or once both are indexed (T/0 then started anew), every
// layout ends with T/0 holding the new record only, T/1 and T/2 empty:
// the late record is left out, not indexed in the emptied queue. A reopen
// changes nothing, and a new record of T/1 starts it at 0.
func TestDeleteReplicaTopic(t *testing.T) {
	for _, tc := range []struct {
		name        string
		held        bool
		wantDropped []int32
	}{
		{"while dispatch holds the late record", true, []int32{0, 1, 2}},
		{"after T/0 started anew", false, []int32{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newDispatchGate()
			root := t.TempDir()
			replica := func(o *DispatcherOptions) { o.Replica = true }
			s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile, g.on("Gate"), replica)
			for _, q := range []struct {
				qid int32
				off int64
			}{{0, 0}, {0, 1}, {1, 0}, {2, 0}} {
				appendAt(t, s, "T", q.qid, q.off, fmt.Sprintf("old-%d-%d", q.qid, q.off))
			}
			s.catchUp(t)
			g.armed.Store(true)
			appendAt(t, s, "Gate", 0, 0, "gate")
			g.waitHeld(t)
			appendAt(t, s, "T", 2, 1, "old-2-1")
			below := s.log.MaxOffset()
			new0 := appendAt(t, s, "T", 0, 0, "new-0-0")
			if !tc.held {
				close(g.release)
				s.catchUp(t)
			}
			dropped, err := s.disp.DeleteReplicaTopic("T", below, []int32{0, 1, 2})
			if err != nil {
				t.Fatal(err)
			}
			if tc.held {
				close(g.release)
				s.catchUp(t)
			}
			if !slices.Equal(dropped, tc.wantDropped) {
				t.Errorf("dropped %v, want %v", dropped, tc.wantDropped)
			}
			empty := fmt.Sprint([2]int64{0, 0}, []int64(nil))
			want := []string{fmt.Sprint([2]int64{0, 1}, []int64{new0}), empty, empty}
			wantQueuesOfT(t, s, LayoutKV, LayoutFile, "applied", want...)
			s.close(t)
			s = openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile, replica)
			defer s.close(t)
			wantQueuesOfT(t, s, LayoutKV, LayoutFile, "reopened", want...)
			want[1] = fmt.Sprint([2]int64{0, 1}, []int64{appendAt(t, s, "T", 1, 0, "new-1-0")})
			s.catchUp(t)
			wantQueuesOfT(t, s, LayoutKV, LayoutFile, "one more", want...)
		})
	}
}
