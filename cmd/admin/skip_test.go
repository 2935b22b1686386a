package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// skipAccumulatedMessage moves a group's offsets to the end of every
// queue of the topic, on every broker group of its route.
func TestSkipAccumulatedMessage(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "SkT", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "updateSubGroup", "-b", br, "-g", "SkG"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "SkT")
	c := client(t, br)
	for range 3 {
		send(t, c, "SkT", 0)
	}
	send(t, c, "SkT", 1)
	waitIndexed(t, c, "SkT", 0, 3)
	waitIndexed(t, c, "SkT", 1, 1)
	out, err := run(t, "skipAccumulatedMessage", "-n", ns, "-g", "SkG", "-t", "SkT")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"broker-a", "0", "3"}, {"broker-a", "1", "1"}}
	if !strings.HasPrefix(out, "#brokerName") || !equalRows(rows(out), want) {
		t.Fatalf("skipAccumulatedMessage:\n%s\nwant rows %v", out, want)
	}
	if out, err := run(t, "consumerProgress", "-b", br, "-g", "SkG", "-t", "SkT"); err != nil || !strings.Contains(out, "total diff: 0") {
		t.Fatalf("consumerProgress after the skip: %q %v", out, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-g", "NoSuchGroup", "-t", "SkT"}, "NoSuchGroup"},
		{[]string{"-g", "SkG", "-t", "NoSuchTopic"}, "route of NoSuchTopic"},
		{[]string{"-t", "SkT"}, "group"},
	} {
		args := append([]string{"skipAccumulatedMessage", "-n", ns}, c.args...)
		if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want an error naming %q", strings.Join(args, " "), out, err, c.want)
		}
	}
}

// skipAccumulatedMessage sends mqadmin's reset: timestamp -1, queueId -1
// and offset -1 (ResetOffsetRequestHeader's fields as mqadmin fills them),
// isForce from -f (true by default); a broker that resets through live
// consumers only, with none online, has the offsets committed by the
// admin.
func TestSkipAccumulatedMessageRequest(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.InvokeBrokerToResetOffset: withBody(`{"offsetTable":{{"brokerName":"bk","queueId":0,"topic":"T"}:42}}`),
	})
	ns := fakeNamesrv(t, fakeRoute(addr, "bk", `{"brokerName":"bk","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}`))
	for _, c := range []struct {
		args  []string
		force string
	}{{nil, "true"}, {[]string{"-f", "false"}, "false"}} {
		out, err := run(t, append([]string{"skipAccumulatedMessage", "-n", ns, "-g", "G", "-t", "T"}, c.args...)...)
		if err != nil || !equalRows(rows(out), [][]string{{"bk", "0", "42"}}) {
			t.Fatalf("skipAccumulatedMessage %v: %q %v", c.args, out, err)
		}
		want := map[string]string{"group": "G", "topic": "T", "timestamp": "-1", "queueId": "-1", "offset": "-1", "isForce": c.force}
		got := log.last(remoting.InvokeBrokerToResetOffset)
		if len(got) != len(want) {
			t.Errorf("%v: header %v, want exactly %v", c.args, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%v: %s=%q, want %q (header %v)", c.args, k, got[k], v, got)
			}
		}
	}
	// A broker that resets through the group's clients, with none online:
	// the admin commits the offsets itself, as mqadmin's fallback
	// (resetOffsetByTimestampOld): each queue of the topic in the group's
	// consume stats to its end.
	offline, offlineLog := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.InvokeBrokerToResetOffset: func(req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.ConsumerNotOnline, "consumer not online")
		},
		remoting.GetConsumeStats: withBody(`{"consumeTps":0.0,"offsetTable":{` +
			`{"brokerName":"bk","queueId":0,"topic":"T"}:{"brokerOffset":9,"consumerOffset":2,"lastTimestamp":0,"pullOffset":2},` +
			`{"brokerName":"bk","queueId":0,"topic":"Other"}:{"brokerOffset":5,"consumerOffset":1,"lastTimestamp":0,"pullOffset":1}}}`),
		remoting.GetMaxOffset: func(req *remoting.Command) *remoting.Command {
			r := remoting.NewResponse(req, remoting.Success, "")
			r.ExtFields = map[string]string{"offset": "9"}
			return r
		},
	})
	out, err := run(t, "skipAccumulatedMessage", "-b", offline, "-g", "G", "-t", "T")
	if err != nil || !equalRows(rows(out), [][]string{{"bk", "0", "9"}}) {
		t.Fatalf("a broker with no consumer online: %q %v", out, err)
	}
	want := map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "9"}
	if got := offlineLog.last(remoting.UpdateConsumerOffset); fmt.Sprint(got) != fmt.Sprint(want) || offlineLog.count(remoting.UpdateConsumerOffset) != 1 {
		t.Errorf("offset commits %d, last %v; want one, %v", offlineLog.count(remoting.UpdateConsumerOffset), got, want)
	}
}

// skipAccumulatedMessage asks every broker group of the route when one
// fails: the offsets that moved are printed, the failed group is named.
func TestSkipAccumulatedMessageBrokerGroupFails(t *testing.T) {
	good, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.InvokeBrokerToResetOffset: withBody(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:7}}`),
	})
	bad, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.InvokeBrokerToResetOffset: func(req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.SystemError, "disk broken")
		},
	})
	route := `{"brokerDatas":[{"brokerAddrs":{"0":"` + bad + `"},"brokerName":"a","cluster":"C"},` +
		`{"brokerAddrs":{"0":"` + good + `"},"brokerName":"b","cluster":"C"}],` +
		`"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1},` +
		`{"brokerName":"b","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}`
	out, err := run(t, "skipAccumulatedMessage", "-n", fakeNamesrv(t, route), "-g", "G", "-t", "T")
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "disk broken") {
		t.Errorf("skipAccumulatedMessage with broker group a failing: %v, want an error naming %s", err, bad)
	}
	if !equalRows(rows(out), [][]string{{"b", "0", "7"}}) {
		t.Errorf("skipAccumulatedMessage left out the offsets broker group b moved:\n%s", out)
	}
}
