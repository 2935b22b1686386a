package meta

import "testing"

// AverageShare splits queues as RocketMQ's AllocateMessageQueueAveragely:
// runs in consumer order, the first n % consumers one longer, and nothing
// for consumers past the queues or indexes out of range.
func TestAverageShare(t *testing.T) {
	for _, tc := range []struct {
		n, consumers int
		want         [][2]int
	}{
		{8, 3, [][2]int{{0, 3}, {3, 6}, {6, 8}}},
		{6, 3, [][2]int{{0, 2}, {2, 4}, {4, 6}}},
		{2, 5, [][2]int{{0, 1}, {1, 2}, {0, 0}, {0, 0}, {0, 0}}},
		{0, 2, [][2]int{{0, 0}, {0, 0}}},
	} {
		for idx, want := range tc.want {
			if from, to := AverageShare(tc.n, tc.consumers, idx); [2]int{from, to} != want {
				t.Errorf("AverageShare(%d, %d, %d) = [%d, %d), want [%d, %d)", tc.n, tc.consumers, idx, from, to, want[0], want[1])
			}
		}
	}
	for _, idx := range []int{-1, 3} {
		if from, to := AverageShare(8, 3, idx); from != to {
			t.Errorf("AverageShare(8, 3, %d) = [%d, %d), want an empty run", idx, from, to)
		}
	}
}
