package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestMain lets the test binary act as bin/admin, so the signal test runs
// the real main in a child process.
func TestMain(m *testing.M) {
	testutil.RunAsMainOr(m, "ADMIN_TEST_AS_MAIN", main)
}

// monitoredConsumer connects as client id of group with a heartbeat of
// the given client version, subscribed to topic, and answers
// GET_CONSUMER_RUNNING_INFO as a push consumer started long ago whose
// queue 0 of topic holds cached messages it has not consumed for an hour,
// subscribed to subs. It returns how many times it was asked.
func monitoredConsumer(t *testing.T, broker, group, id, topic, subs string, version int32) *atomic.Int32 {
	t.Helper()
	var asked atomic.Int32
	stale := time.Now().Add(-time.Hour).UnixMilli()
	info := fmt.Sprintf(`{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMEORDERLY":"false","PROP_CONSUMER_START_TIMESTAMP":"1",`+
		`"consumerGroup":"%s"},"subscriptionSet":[%s],`+
		`"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"%s"}:{"commitOffset":1,"cachedMsgCount":3,"lastConsumeTimestamp":%d}},"statusTable":{}}`,
		group, subs, topic, stale)
	c, err := remoting.Dial(context.Background(), broker, remoting.ClientOptions{Handler: func(_ context.Context, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetConsumerRunningInfo {
			return nil
		}
		asked.Add(1)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(info)
		return resp
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	hb := remoting.NewRequest(remoting.HeartBeat, nil, []byte(`{"clientID":"`+id+`","producerDataSet":[],"consumerDataSet":[{"groupName":"`+group+`",`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"`+topic+`","subString":"*","expressionType":"TAG"}]}]}`))
	hb.Version = version
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := c.Invoke(ctx, hb); err != nil || resp.Code != remoting.Success {
		t.Fatalf("heartbeat of %s: %v %v", id, resp, err)
	}
	return &asked
}

// startMonitoringCluster starts a broker with topic MonT (2 queues) and
// group MonG lagging on queue 0 (5 messages, 1 consumed) and up to date on
// queue 1, with two online clients of current versions subscribing
// differently and one too old to be asked; group MonOff lags with no
// client online. It returns the name server, the broker, the store delay
// the monitor must find (newest minus last consumed store time of queue
// 0), and the old client's ask counter.
func startMonitoringCluster(t *testing.T) (ns, br string, delay int64, oldAsked *atomic.Int32) {
	t.Helper()
	ns, br = startCluster(t)
	out0(t, "updateTopic", "-b", br, "-t", "MonT", "-r", "2", "-w", "2")
	out0(t, "updateTopic", "-b", br, "-t", "%RETRY%MonOff", "-r", "1", "-w", "1")
	c := client(t, br)
	var q0 []int64
	for range 5 {
		q0 = append(q0, send(t, c, "MonT", 0))
		time.Sleep(2 * time.Millisecond) // distinct store times, so the delay is not 0
	}
	send(t, c, "MonT", 1)
	send(t, c, "MonT", 1)
	waitIndexed(t, c, "MonT", 0, 5)
	waitIndexed(t, c, "MonT", 1, 2)
	for _, g := range []string{"MonG", "MonOff"} {
		request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`","consumeEnable":true}`))
		for q, off := range []string{"1", "2"} {
			request(t, c, remoting.UpdateConsumerOffset, map[string]string{
				"consumerGroup": g, "topic": "MonT", "queueId": fmt.Sprint(q), "commitOffset": off}, nil)
		}
	}
	monitoredConsumer(t, br, "MonG", "10.0.0.7@a", "MonT", `{"classFilterMode":false,"subString":"*","topic":"MonT"}`, remoting.CurrentVersion)
	monitoredConsumer(t, br, "MonG", "10.0.0.8@b", "MonT", `{"classFilterMode":false,"subString":"TagB","topic":"MonT"}`, remoting.CurrentVersion)
	oldAsked = monitoredConsumer(t, br, "MonG", "10.0.0.9@old", "MonT", `{"classFilterMode":false,"subString":"*","topic":"MonT"}`, 61)
	waitRoute(t, ns, "MonT")
	waitRoute(t, ns, "%RETRY%MonG")
	waitRoute(t, ns, "%RETRY%MonOff")
	return ns, br, q0[4] - q0[0], oldAsked
}

// A round of startMonitoring reports what RocketMQ's DefaultMonitorListener
// logs: the lagging group's undone messages per topic (total, worst
// queue, store delay of the newest message behind the last consumed
// one), a NOTIFY for its clients' different subscriptions and one for the
// client whose queue looks blocked; nothing for a group without a client
// online, and no running info asked of a client older than 3.1.8.
func TestStartMonitoringReportsALaggingGroup(t *testing.T) {
	ns, _, delay, oldAsked := startMonitoringCluster(t)
	out, err := run(t, "startMonitoring", "-n", ns, "--delay", "0s", "--rounds", "1")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		_, msg, ok := strings.Cut(l, " MonitorService - ")
		if !ok || !strings.Contains(l[:len(l)-len(msg)], " INFO ") {
			t.Fatalf("line without the log's time, level and thread: %q", l)
		}
		lines = append(lines, msg)
	}
	want := []string{
		"[MONITOR] =========================================beginRound",
		fmt.Sprintf("[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup=MonG, topic=MonT, undoneMsgsTotal=4, undoneMsgsSingleMQ=4, undoneMsgsDelayTimeMills=%d]", delay),
		"[MONITOR]  [NOTIFY] reportConsumerRunningInfo: ConsumerGroup: MonG, Subscription different",
		"[MONITOR]  [NOTIFY] reportConsumerRunningInfo: ConsumerGroup: MonG, ClientId: 10.0.0.7@a, 10.0.0.7@a MessageQueue [topic=MonT, brokerName=broker-a, queueId=0] can't consume for a while, maybe blocked, ",
		"[MONITOR]  [NOTIFY] reportConsumerRunningInfo: ConsumerGroup: MonG, ClientId: 10.0.0.8@b, 10.0.0.8@b MessageQueue [topic=MonT, brokerName=broker-a, queueId=0] can't consume for a while, maybe blocked, ",
		"[MONITOR] =========================================endRound",
		"Execute one round monitor work, spent timemills: ",
	}
	at := 0
	for _, w := range want {
		for at < len(lines) && !strings.HasPrefix(lines[at], w) {
			at++
		}
		if at == len(lines) {
			t.Fatalf("no line %q in order in:\n%s", w, out)
		}
	}
	if strings.Contains(out, "MonOff") || strings.Contains(out, "10.0.0.9@old") || oldAsked.Load() != 0 {
		t.Fatalf("a group without clients or a client before 3.1.8 reported (old client asked %d times):\n%s", oldAsked.Load(), out)
	}
	if strings.Count(out, "reportUndoneMsgs: UndoneMsgs [consumerGroup=MonG, topic=MonT,") != 1 {
		t.Fatalf("MonG's MonT reported other than once:\n%s", out)
	}
}

// --rounds runs that many rounds, --interval apart; a name server that
// cannot be reached ends a round after beginRound with the exception, as
// RocketMQ's monitor logs it, and the rounds go on.
func TestStartMonitoringRoundsAndFailures(t *testing.T) {
	ns, _ := startCluster(t)
	out, err := run(t, "startMonitoring", "-n", ns, "--delay", "0s", "--interval", "10ms", "--rounds", "3")
	if err != nil || strings.Count(out, "beginRound") != 3 || strings.Count(out, "endRound") != 3 {
		t.Fatalf("three rounds: %v\n%s", err, out)
	}
	out, err = run(t, "startMonitoring", "-n", deadAddr(t), "--timeout", "2s", "--delay", "0s", "--interval", "10ms", "--rounds", "2")
	if err != nil || strings.Count(out, "beginRound") != 2 || strings.Count(out, " ERROR MonitorService - doMonitorWork Exception: ") != 2 ||
		strings.Contains(out, "endRound") {
		t.Fatalf("rounds without a name server: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--interval", "0s"}, {"--delay", "-1s"}, {"--rounds", "-1"}} {
		if _, err := run(t, append([]string{"startMonitoring", "-n", ns}, args...)...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// bin/admin startMonitoring runs until SIGINT or SIGTERM, then exits 0
// (RocketMQ's monitor runs until the JVM is stopped).
func TestStartMonitoringStopsOnSignal(t *testing.T) {
	ns, _ := startCluster(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := testutil.StartMain(t, "ADMIN_TEST_AS_MAIN=1", "startMonitoring", "-n", ns, "--delay", "0s", "--interval", "1h")
			stdout, stderr := p.Stdout, p.Stderr
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(stdout.String(), "endRound") {
				if time.Now().After(deadline) {
					t.Fatalf("no round finished:\n%s\n%s", stdout.String(), stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p.Stop(ctx, t, sig)
		})
	}
}
