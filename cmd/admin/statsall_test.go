package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// statsAll reads the broker statistics through VIEW_BROKER_STATS_DATA:
// the messages in and out show once the broker's 10-second sampling has
// run.
func TestStatsAll(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "StatsT", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "StatsT")
	c := client(t, br)
	for i := 0; i < 5; i++ {
		send(t, c, "StatsT", 0)
	}
	waitIndexed(t, c, "StatsT", 0, 5)
	request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"G","consumeEnable":true}`))
	pulled := request(t, c, remoting.PullMessage, map[string]string{
		"consumerGroup": "G", "topic": "StatsT", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil)
	if pulled.Code != remoting.Success {
		t.Fatalf("pull: %v", pulled)
	}
	request(t, c, remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "G", "topic": "StatsT", "queueId": "0", "commitOffset": "3",
	}, nil)

	// Until the broker samples (every 10 s), the windows are empty.
	var fields []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := run(t, "statsAll", "-n", ns, "-t", "StatsT")
		if err != nil {
			t.Fatalf("statsAll: %v\n%s", err, out)
		}
		r := rows(out)
		if len(r) != 1 {
			t.Fatalf("statsAll rows %v, want one for group G", r)
		}
		fields = r[0]
		if fields[3] != "0.00" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sends never showed in statsAll: %v", fields)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// #Topic #Consumer Group #Accumulation #InTPS #OutTPS #InMsg24Hour
	// #OutMsg24Hour. The day columns fall back on the hour's and the
	// minute's sums before the hourly sampling, as mqadmin's do.
	if want := []string{"StatsT", "G", "2"}; !slices.Equal(fields[:3], want) || fields[5] != "5" || fields[6] != "5" {
		t.Fatalf("statsAll row %v, want StatsT G with 2 waiting, 5 in and 5 out over the day", fields)
	}
	// 5 messages in and out over the 10-20 s the first sample spans.
	for _, i := range []int{3, 4} {
		if v, err := strconv.ParseFloat(fields[i], 64); err != nil || v < 0.25 || v > 0.5 {
			t.Errorf("rate column %d is %q, want 5 messages over 10-20 s", i, fields[i])
		}
	}
	// A group ahead of the broker (offset past the queue's end) waits for
	// nothing rather than a negative count.
	request(t, c, remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "G", "topic": "StatsT", "queueId": "0", "commitOffset": "9",
	}, nil)
	if out, err := run(t, "statsAll", "-n", ns, "-t", "StatsT"); err != nil || rows(out)[0][2] != "0" {
		t.Fatalf("statsAll with the group ahead: %v\n%s", err, out)
	}
	// A topic nothing was sent to reads as zero traffic, and -a leaves it out.
	if _, err := run(t, "updateTopic", "-b", br, "-t", "Quiet", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "Quiet")
	out, err := run(t, "statsAll", "-n", ns, "-t", "Quiet")
	if err != nil || len(rows(out)) != 1 || strings.Join(rows(out)[0], " ") != "Quiet 0 0.00 0 NO_CONSUMER" {
		t.Fatalf("statsAll of a quiet topic: %v\n%s", err, out)
	}
	if out, err := run(t, "statsAll", "-n", ns, "-t", "Quiet", "-a"); err != nil || len(rows(out)) != 0 {
		t.Fatalf("statsAll -a of a quiet topic: %v\n%s", err, out)
	}
	// A topic without a route is skipped, the others still printed.
	if out, err := run(t, "statsAll", "-n", ns, "-t", "NoSuchTopic"); err != nil || len(rows(out)) != 0 {
		t.Fatalf("statsAll of a topic without a route: %v\n%s", err, out)
	}
}

// waitRoute waits until the name server has a route for topic (a broker
// registers a new topic a moment after creating it).
func waitRoute(t *testing.T, ns, topic string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := run(t, "topicRoute", "-n", ns, "-t", topic); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("no route of %s: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
