package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

func TestResetOffsetByTime(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "RT", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	c := client(t, br)
	send := func(q int) {
		request(t, c, remoting.SendMessageV2, map[string]string{"a": "pg", "b": "RT", "c": "TBW102", "d": "2",
			"e": strconv.Itoa(q), "f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": ""}, []byte("m"))
	}
	for range 3 {
		send(0)
	}
	send(1)
	request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"rg"}`))

	offsetOf := func(q int) string {
		resp := request(t, c, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "rg", "topic": "RT",
			"queueId": strconv.Itoa(q), "setZeroIfNotFound": "false"}, nil)
		return resp.ExtFields["offset"]
	}
	// Through the name server's route; the broker registers with it at start.
	deadline := time.Now().Add(10 * time.Second)
	var out string
	var err error
	for {
		out, err = run(t, "resetOffsetByTime", "-n", ns, "-g", "rg", "-t", "RT", "-s", "-1")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], " 3") || !strings.HasSuffix(lines[2], " 1") {
		t.Fatalf("output of a reset to the end:\n%s", out)
	}
	if offsetOf(0) != "3" || offsetOf(1) != "1" {
		t.Fatalf("committed offsets %s %s after a reset to the end", offsetOf(0), offsetOf(1))
	}
	// One broker, one queue, one offset.
	if out, err = run(t, "resetOffsetByTime", "-b", br, "-g", "rg", "-t", "RT", "-s", "now", "-q", "0", "-o", "1"); err != nil {
		t.Fatal(err)
	}
	if offsetOf(0) != "1" || offsetOf(1) != "1" || strings.Count(out, "\n") != 2 {
		t.Fatalf("after a reset of queue 0 to 1: %s %s\n%s", offsetOf(0), offsetOf(1), out)
	}
	// One queue without -o: its offset at -s, looked up on the broker
	// (mqadmin's -b -q without -o); the other queue keeps its offset.
	if out, err = run(t, "resetOffsetByTime", "-b", br, "-g", "rg", "-t", "RT", "-s", "-1", "-q", "0"); err != nil {
		t.Fatal(err)
	}
	if offsetOf(0) != "3" || offsetOf(1) != "1" {
		t.Fatalf("after a reset of queue 0 to its end: %s %s\n%s", offsetOf(0), offsetOf(1), out)
	}
	if out, err = run(t, "resetOffsetByTime", "-b", br, "-g", "rg", "-t", "RT", "-s", "2000-01-01#00:00:00:000", "-q", "0"); err != nil {
		t.Fatal(err)
	}
	if offsetOf(0) != "0" || offsetOf(1) != "1" {
		t.Fatalf("after a reset of queue 0 to 2000: %s %s\n%s", offsetOf(0), offsetOf(1), out)
	}
	// A time before everything: the start of each queue.
	if _, err = run(t, "resetOffsetByTime", "-b", br, "-g", "rg", "-t", "RT", "-s", "2000-01-01#00:00:00:000"); err != nil {
		t.Fatal(err)
	}
	if offsetOf(0) != "0" || offsetOf(1) != "0" {
		t.Fatalf("committed offsets %s %s after a reset to 2000", offsetOf(0), offsetOf(1))
	}
	for _, args := range [][]string{
		{"-s", "yesterday"},
		{"-s", "now", "-o", "0"},
		{"-s", "-1", "-t", "NoSuchTopic"},
	} {
		base := []string{"resetOffsetByTime", "-b", br, "-g", "rg", "-t", "RT"}
		if _, err := run(t, append(base, args...)...); err == nil {
			t.Errorf("resetOffsetByTime %v succeeded", args)
		}
	}
	// Through the name server, a topic it has no route for.
	if _, err := run(t, "resetOffsetByTime", "-n", ns, "-g", "rg", "-t", "NoSuchTopic", "-s", "-1"); err == nil || !strings.Contains(err.Error(), "route of NoSuchTopic") {
		t.Errorf("reset of a topic without a route: %v", err)
	}
}

func TestParseResetTime(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	local := time.Date(2026, 11, 30, 12, 0, 1, 2_000_000, time.Local).UnixMilli()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"now", now.UnixMilli(), true},
		{"-1", -1, true},
		{"1700000000000", 1_700_000_000_000, true},
		{"2026-11-30#12:00:01:002", local, true},
		{"2026-11-30T12:00:01.002Z", time.Date(2026, 11, 30, 12, 0, 1, 2_000_000, time.UTC).UnixMilli(), true},
		{"", 0, false},
		{"-2", 0, false},
		{"2026-11-30 12:00", 0, false},
	} {
		got, err := parseResetTime(tc.in, now)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseResetTime(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// Against a broker with useServerSideResetOffset=false, resetOffsetByTime
// prints what the broker pushed to the group's online consumers (and the
// broker's offsets stay theirs to commit); with none online the broker
// answers CONSUMER_NOT_ONLINE and the admin commits the offsets itself,
// as mqadmin's fallback resetOffsetByTimeOld: a queue moves when -f is
// true or the time's offset is not past the group's.
func TestResetOffsetByTimeThroughClients(t *testing.T) {
	_, b := startClusterWith(t, map[string]string{"useServerSideResetOffset": "false"})
	br := b.Addr()
	if _, err := run(t, "updateTopic", "-b", br, "-t", "CRT", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "updateSubGroup", "-b", br, "-g", "crg"); err != nil {
		t.Fatal(err)
	}
	c := client(t, br)
	for range 3 {
		send(t, c, "CRT", 0)
	}
	send(t, c, "CRT", 1)
	waitIndexed(t, c, "CRT", 0, 3)
	waitIndexed(t, c, "CRT", 1, 1)
	commitAt := func(q int, off int64) {
		request(t, c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "crg", "topic": "CRT",
			"queueId": strconv.Itoa(q), "commitOffset": strconv.FormatInt(off, 10)}, nil)
	}
	offsetOf := func(q int) string {
		resp := request(t, c, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "crg", "topic": "CRT",
			"queueId": strconv.Itoa(q), "setZeroIfNotFound": "false"}, nil)
		return resp.ExtFields["offset"]
	}
	commitAt(0, 1)
	commitAt(1, 0)
	reset := func(args ...string) [][]string {
		t.Helper()
		out, err := run(t, append([]string{"resetOffsetByTime", "-b", br, "-g", "crg", "-t", "CRT"}, args...)...)
		if err != nil {
			t.Fatalf("resetOffsetByTime %v: %v", args, err)
		}
		return rows(out)
	}
	// No consumer online: without force the group's offsets are ahead of
	// nothing, so they stay; with it they move to the end.
	if got := reset("-s", "-1", "-f", "false"); !equalRows(got, [][]string{{"broker-a", "0", "1"}, {"broker-a", "1", "0"}}) ||
		offsetOf(0) != "1" || offsetOf(1) != "0" {
		t.Fatalf("reset to the end without force: rows %v, offsets %s %s", got, offsetOf(0), offsetOf(1))
	}
	if got := reset("-s", "-1"); !equalRows(got, [][]string{{"broker-a", "0", "3"}, {"broker-a", "1", "1"}}) ||
		offsetOf(0) != "3" || offsetOf(1) != "1" {
		t.Fatalf("reset to the end: rows %v, offsets %s %s", got, offsetOf(0), offsetOf(1))
	}
	if got := reset("-s", "2000-01-01#00:00:00:000", "-f", "false"); !equalRows(got, [][]string{{"broker-a", "0", "0"}, {"broker-a", "1", "0"}}) ||
		offsetOf(0) != "0" || offsetOf(1) != "0" {
		t.Fatalf("reset to 2000 without force: rows %v, offsets %s %s", got, offsetOf(0), offsetOf(1))
	}

	// A consumer online: the broker pushes the offsets to it; the admin
	// prints them and commits nothing.
	pushed := make(chan *remoting.Command, 1)
	cons, err := remoting.Dial(context.Background(), br, remoting.ClientOptions{Handler: func(_ context.Context, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.ResetConsumerClientOffset {
			pushed <- req
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close() })
	request(t, cons, remoting.HeartBeat, nil, []byte(`{"clientID":"10.0.0.1@crg","producerDataSet":[],"consumerDataSet":[{"groupName":"crg",`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"CRT","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}`))
	if got := reset("-s", "-1"); !equalRows(got, [][]string{{"broker-a", "0", "3"}, {"broker-a", "1", "1"}}) ||
		offsetOf(0) != "0" || offsetOf(1) != "0" {
		t.Fatalf("reset to the end with a consumer online: rows %v, offsets %s %s", got, offsetOf(0), offsetOf(1))
	}
	select {
	case req := <-pushed:
		if req.ExtFields["group"] != "crg" || req.ExtFields["topic"] != "CRT" || req.ExtFields["timestamp"] != "-1" {
			t.Fatalf("pushed header %v", req.ExtFields)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer was not told of the reset")
	}
}
