package main

import (
	"testing"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/namesrv"
)

// allocateMQ prints the average strategy's share of each client, over the
// route's read queues.
func TestAllocateMQ(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "AQ", "-r", "5", "-w", "5"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "AQ")
	q := func(id string) string { return `{"brokerName":"broker-a","queueId":` + id + `,"topic":"AQ"}` }
	for _, c := range []struct{ ips, want string }{
		{"10.0.0.1,10.0.0.2", `{"result":{"10.0.0.1":[` + q("0") + "," + q("1") + "," + q("2") + `],"10.0.0.2":[` + q("3") + "," + q("4") + `]}}` + "\n"},
		{"b, a", `{"result":{"a":[` + q("3") + "," + q("4") + `],"b":[` + q("0") + "," + q("1") + "," + q("2") + `]}}` + "\n"},
		{"x", `{"result":{"x":[` + q("0") + "," + q("1") + "," + q("2") + "," + q("3") + "," + q("4") + `]}}` + "\n"},
	} {
		out, err := run(t, "allocateMQ", "-n", ns, "-t", "AQ", "-i", c.ips)
		if err != nil || out != c.want {
			t.Errorf("allocateMQ -i %s: %v\n%s\nwant\n%s", c.ips, err, out, c.want)
		}
	}
	if _, err := run(t, "allocateMQ", "-n", ns, "-t", "AQ", "-i", " , "); err == nil {
		t.Error("allocateMQ with no client succeeded")
	}
}

// The average strategy as RocketMQ's AllocateMessageQueueAveragely: runs
// of equal size, the first len%n clients one more; more clients than
// queues leave the last ones without.
func TestAllocateAveragely(t *testing.T) {
	mqs := subscribeQueuesOf(7)
	for _, c := range []struct {
		queues, clients int
		want            [][]int32
	}{
		{7, 3, [][]int32{{0, 1, 2}, {3, 4}, {5, 6}}},
		{6, 3, [][]int32{{0, 1}, {2, 3}, {4, 5}}},
		{2, 3, [][]int32{{0}, {1}, {}}},
		{3, 3, [][]int32{{0}, {1}, {2}}},
		{0, 2, [][]int32{{}, {}}},
	} {
		for i := range c.clients {
			got := allocateAveragely(mqs[:c.queues], i, c.clients)
			ids := []int32{}
			for _, mq := range got {
				ids = append(ids, mq.QueueID)
			}
			if len(ids) != len(c.want[i]) {
				t.Errorf("%d queues, %d clients, client %d: %v, want %v", c.queues, c.clients, i, ids, c.want[i])
				continue
			}
			for j := range ids {
				if ids[j] != c.want[i][j] {
					t.Errorf("%d queues, %d clients, client %d: %v, want %v", c.queues, c.clients, i, ids, c.want[i])
					break
				}
			}
		}
	}
}

// subscribeQueuesOf returns queues 0..n-1 of one broker group.
func subscribeQueuesOf(n int) []adminbody.MessageQueue {
	var mqs []adminbody.MessageQueue
	for i := range n {
		mqs = append(mqs, adminbody.MessageQueue{Topic: "T", BrokerName: "b", QueueID: int32(i)})
	}
	return mqs
}

// More clients than queues: the clients past the queues get none, also
// when the queue list has no spare capacity (as subscribeQueues builds
// it), where a start index past the list's end must not be sliced.
func TestAllocateAveragelyMoreClientsThanQueues(t *testing.T) {
	mqs := subscribeQueues(namesrv.TopicRouteData{QueueDatas: []namesrv.QueueData{
		{BrokerName: "b", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6},
	}}, "T")
	mqs = mqs[:len(mqs):len(mqs)]
	for i, want := range []int{1, 1, 0, 0, 0} {
		if got := allocateAveragely(mqs, i, 5); len(got) != want {
			t.Errorf("2 queues, 5 clients, client %d: %v, want %d queues", i, got, want)
		}
	}
}
