package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// client dials the broker for the duration of the test.
func client(t *testing.T, addr string) *remoting.Client {
	t.Helper()
	c, err := remoting.Dial(context.Background(), addr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// request invokes one request and fails unless it succeeded.
func request(t *testing.T, c *remoting.Client, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatalf("request %d: %v", code, err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("request %d %v: code %d %s", code, ext, resp.Code, resp.Remark)
	}
	return resp
}

// send sends one message to a queue and returns its store time, read back
// from the record the message id points at.
func send(t *testing.T, c *remoting.Client, topic string, q int) int64 {
	t.Helper()
	resp := request(t, c, remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(q), "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
	}, []byte("body"))
	_, phy, err := commitlog.ParseMessageID(resp.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	view := request(t, c, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(phy, 10)}, nil)
	m, err := commitlog.Decode(view.Body)
	if err != nil {
		t.Fatal(err)
	}
	return m.StoreTimestamp
}

// rows returns the output's lines after the header line, split into
// fields.
func rows(out string) [][]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var r [][]string
	for _, l := range lines[1:] {
		r = append(r, strings.Fields(l))
	}
	return r
}

// waitIndexed waits until a queue's max offset reaches n (a send is
// answered before its message is indexed).
func waitIndexed(t *testing.T, c *remoting.Client, topic string, q int, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := request(t, c, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(q)}, nil)
		if r.ExtFields["offset"] == strconv.FormatInt(n, 10) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%d: max offset %s, want %d", topic, q, r.ExtFields["offset"], n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStatsCommands(t *testing.T) {
	_, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "Progress", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	c := client(t, br)
	var q0 []int64
	for i := 0; i < 3; i++ {
		q0 = append(q0, send(t, c, "Progress", 0))
	}
	waitIndexed(t, c, "Progress", 0, 3)
	// Offsets are committed for known groups only (RocketMQ's rule).
	request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"G","consumeEnable":true}`))
	request(t, c, remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "G", "topic": "Progress", "queueId": "0", "commitOffset": "1",
	}, nil)

	out, err := run(t, "topicStatus", "-b", br, "-t", "Progress")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"broker-a", "0", "0", "3", formatMillis(q0[2])},
		{"broker-a", "1", "0", "0", "-"},
	}
	if got := rows(out); !equalRows(got, want) {
		t.Fatalf("topicStatus:\n%s\nwant rows %v", out, want)
	}

	out, err = run(t, "consumerProgress", "-b", br, "-g", "G", "-t", "Progress")
	if err != nil {
		t.Fatal(err)
	}
	want = [][]string{
		{"Progress", "broker-a", "0", "3", "1", "2", formatMillis(q0[0])},
		{"Progress", "broker-a", "1", "0", "0", "0", "-"},
		{"total", "diff:", "2"},
	}
	if got := rows(out); !equalRows(got, want) {
		t.Fatalf("consumerProgress:\n%s\nwant rows %v", out, want)
	}
	// Without -t: the topics the group has offsets on.
	if out2, err := run(t, "consumerProgress", "-b", br, "-g", "G"); err != nil || out2 != out {
		t.Fatalf("consumerProgress without a topic:\n%s(%v)\nwant\n%s", out2, err, out)
	}

	// Every group of the broker, queues with a diff of at least -l.
	out, err = run(t, "brokerConsumeStats", "-b", br, "-l", "1")
	if err != nil {
		t.Fatal(err)
	}
	want = [][]string{
		{"Progress", "G", "broker-a", "0", "3", "1", "2", formatMillis(q0[0])},
		{"total", "diff:", "2"},
	}
	if got := rows(out); !equalRows(got, want) {
		t.Fatalf("brokerConsumeStats -l 1:\n%s\nwant rows %v", out, want)
	}
	if out, err = run(t, "brokerConsumeStats", "-b", br, "-o", "true"); err != nil || len(rows(out)) != 1 {
		t.Fatalf("brokerConsumeStats -o (no ordered topic):\n%s(%v)", out, err)
	}

	consumer := client(t, br)
	request(t, consumer, remoting.HeartBeat, nil, []byte(`{"clientID":"10.1.2.3@9","producerDataSet":[],"consumerDataSet":[`+
		`{"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"BROADCASTING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"Progress","subString":"x||y","expressionType":"TAG"}]}]}`))
	out, err = run(t, "consumerConnection", "-b", br, "-g", "G")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, line := range []string{
		"10.1.2.3@9 " + consumer.LocalAddr().String() + " GO " + strconv.Itoa(int(remoting.CurrentVersion)),
		"message model: BROADCASTING",
		"consume type: CONSUME_PASSIVELY",
		"consume from: CONSUME_FROM_LAST_OFFSET",
		"Progress TAG x||y",
	} {
		if !lines[line] {
			t.Errorf("consumerConnection lacks %q:\n%s", line, out)
		}
	}
	if _, err := run(t, "consumerConnection", "-b", br, "-g", "Nobody"); err == nil || !strings.Contains(err.Error(), "code 206") {
		t.Fatalf("offline group: %v", err)
	}
	if _, err := run(t, "topicStatus", "-b", br, "-t", "Nope"); err == nil || !strings.Contains(err.Error(), "code 17") {
		t.Fatalf("unknown topic: %v", err)
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], " ") != strings.Join(b[i], " ") {
			return false
		}
	}
	return true
}
