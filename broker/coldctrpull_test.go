package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// pullHeartbeat registers group as RocketMQ's pull consumers do
// (CONSUME_ACTIVELY), subscribed to topics.
func pullHeartbeat(t *testing.T, c *remoting.Client, clientID, group string, topics ...string) {
	t.Helper()
	var subs []string
	for _, topic := range topics {
		subs = append(subs, `{"topic":"`+topic+`","subString":"*","subVersion":42,"expressionType":"TAG"}`)
	}
	heartbeat(t, c, []byte(`{"clientID":"`+clientID+`","producerDataSet":[],"consumerDataSet":[{"groupName":"`+group+
		`","consumeType":"CONSUME_ACTIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",`+
		`"subscriptionDataSet":[`+strings.Join(subs, ",")+`]}]}`))
}

// Cold-data read flow control on pulls, as RocketMQ 5.3's pull processor
// applies it. The broker's memory is set to 100,000 bytes, so that with
// the default accessMessageInMemoryHotRatio (26) and coldDataScanEnable
// (false) COLD's messages, more than 26,000 bytes behind the end of the
// CommitLog, are cold (in the page cache or not) and HOT's, at the end,
// are not. A group's cold reads are not counted while
// coldDataFlowControlEnable is off; once on (at run time) they are, and a
// group that read cold data with the broker at its global threshold (0
// here, so that the counts' periodic reset cannot interfere) is limited:
// a push consumer group's pull of COLD is refused SYSTEM_BUSY, a pull
// consumer group's is held at least 3 s and then served one message,
// while their pulls of HOT are served at once.
func TestColdDataPullFlowControl(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"mappedFileSizeCommitLog": "65536", "globalColdReadThreshold": "0"},
		func(b *Broker) {
			b.coldPassPeriod = time.Hour // no reset of the counts while the test looks at them
			b.coldScanPeriod = 200 * time.Millisecond
			b.memBytes = 100_000
		})
	c := b.client(nil)
	for _, topic := range []string{"COLD", "HOT", "FILL"} {
		createTopic(t, c, topic, 1, 1)
	}
	for i := 0; i < 3; i++ {
		mustSend(t, c, "COLD", 0, strings.Repeat("c", 1000), "")
	}
	for i := 0; i < 20; i++ { // into the next segment
		mustSend(t, c, "FILL", 0, strings.Repeat("f", 4096), "")
	}
	for i := 0; i < 3; i++ {
		mustSend(t, c, "HOT", 0, "h", "")
	}
	b.caughtUp()
	cold, err := b.cqs.Get("COLD", 0, 0, 3)
	if err != nil || len(cold) != 3 {
		t.Fatalf("COLD's entries: %v %v", cold, err)
	}
	var coldSize int64
	for _, e := range cold {
		coldSize += int64(e.Size)
	}
	pushC, pullC := b.client(nil), b.client(nil)
	heartbeat(t, pushC, heartbeatBody("push-client", "", "pushg", map[string]string{"COLD": "*", "HOT": "*"}))
	pullHeartbeat(t, pullC, "pull-client", "pullg", "COLD", "HOT")
	pull := func(c *remoting.Client, group, topic string) *remoting.Command {
		t.Helper()
		return call(t, c, remoting.PullMessage, pullReq(group, topic, 0, 0, 0, 0, "*"), nil)
	}
	served := func(r *remoting.Command, want int) {
		t.Helper()
		if r.Code != remoting.Success {
			t.Fatalf("pull answered %d %q, want SUCCESS", r.Code, r.Remark)
		}
		if got := len(decodeRecords(t, r.Body)); got != want {
			t.Fatalf("pull served %d messages, want %d", got, want)
		}
	}

	// Off: nothing counted, nothing limited.
	served(pull(pushC, "pushg", "COLD"), 3)
	if info := coldInfo(t, c); len(info.RuntimeTable) != 0 || info.GlobalAcc != 0 {
		t.Fatalf("cold reads counted with the flow control off: %+v", info)
	}

	updateConfig(t, c, "coldDataFlowControlEnable=true")
	served(pull(pushC, "pushg", "COLD"), 3) // not limited yet: it had read nothing cold
	info := coldInfo(t, c)
	acc, ok := info.RuntimeTable["pushg"]
	first := int64(cold[0].Size)
	if !ok || acc.ColdAcc != coldSize || info.GlobalAcc != acc.ColdAcc ||
		acc.LastColdReadTimeMills <= 0 || acc.CreateTimeMills <= 0 {
		t.Fatalf("after a pull of %d cold bytes: %+v", coldSize, info)
	}
	served(pull(pushC, "pushg", "HOT"), 3)
	if got := coldInfo(t, c).RuntimeTable["pushg"].ColdAcc; got != acc.ColdAcc {
		t.Fatalf("a pull of hot messages counted: %d cold bytes, want %d", got, acc.ColdAcc)
	}

	// The push consumer group is limited now.
	r := pull(pushC, "pushg", "COLD")
	if r.Code != remoting.SystemBusy || r.Remark != coldCtrRemark {
		t.Fatalf("limited push group's pull of cold data: %d %q", r.Code, r.Remark)
	}
	served(pull(pushC, "pushg", "HOT"), 3)

	// The pull consumer group: counted by a first pull, held by the next.
	served(pull(pullC, "pullg", "COLD"), 3)
	sent := time.Now()
	answer := make(chan pullAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := pullC.Invoke(ctx, remoting.NewRequest(remoting.PullMessage, pullReq("pullg", "COLD", 0, 0, 0, 0, "*"), nil))
		answer <- pullAnswer{resp: resp, err: err, at: time.Now()}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.coldHolds.size() == 0 {
		select {
		case a := <-answer:
			t.Fatalf("limited pull group's pull of cold data answered at once: %v", a)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the pull of cold data was not held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	served(pull(pullC, "pullg", "HOT"), 3) // while the other is held
	a := <-answer
	if a.err != nil {
		t.Fatalf("held pull: %v", a.err)
	}
	if waited := a.at.Sub(sent); waited < coldHoldFor {
		t.Fatalf("held pull answered after %v, before %v", waited, coldHoldFor)
	}
	served(a.resp, 1)
	if next := header(t, a.resp, "nextBeginOffset"); next != 1 {
		t.Fatalf("held pull's nextBeginOffset %d, want 1", next)
	}
	if got := coldInfo(t, c).RuntimeTable["pullg"].ColdAcc; got != coldSize+first {
		t.Fatalf("pullg's cold bytes %d, want two pulls' (%d)", got, coldSize+first)
	}
}
