package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
)

// TestDemotedMasterRejoinsAfterTheCut walks RocketMQ's manual failover
// with the binaries and the unchanged Go client, where it used to leave a
// broker with two histories in one CommitLog. A master and its slave take
// 30 messages; the slave is killed, the master takes 10 more and is
// killed; the slave is promoted and takes 30 others. The old master,
// started as the new master's slave, refuses to replicate and logs where
// the logs part (cutAt); started once with --cut-commitlog-at it
// replicates the new master. Promoted in turn, it delivers exactly the 30
// shared and the 30 new messages, nothing of the 10 only it had.
func TestDemotedMasterRejoinsAfterTheCut(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	dirA, dirB := t.TempDir()+"/a", t.TempDir()+"/b"
	const topic = "E2ERejoin"

	a := startBroker(t, ns, brokerOpts{store: dirA, sets: fastHA})
	b := startSlave(t, ns, dirB)
	createTopic(t, a.addr, topic, 1)
	waitRoute(t, ns.addr, topic, a.name)
	sendN(t, newProducer(t, ns.addr, "pg-rejoin-1"), topic, "both-", 30)
	waitSlaveMax(t, b.addr, topic, 30)
	waitTopicConfig(t, b.addr, topic) // the slave's metadata sync
	b.kill()
	sendN(t, newProducer(t, ns.addr, "pg-rejoin-2"), topic, "orph-", 10)
	a.kill()

	promoted := startBroker(t, ns, brokerOpts{store: dirB, sets: fastHA})
	waitRoute(t, ns.addr, topic, promoted.name)
	sendN(t, newProducer(t, ns.addr, "pg-rejoin-3"), topic, "news-", 30)

	rejoined := startSlave(t, ns, dirA)
	rejoined.waitLog(t, "replication refused", 30*time.Second)
	cut := loggedInt(t, rejoined.proc, "replication refused", "cutAt")
	rejoined.stop(t)
	mended := startSlave(t, ns, dirA, "--cut-commitlog-at="+strconv.FormatInt(cut, 10))
	mended.waitLog(t, "slave's CommitLog cut", 30*time.Second)
	waitSlaveMax(t, mended.addr, topic, 60)
	if n := mended.countLog("replication refused"); n != 0 {
		t.Fatalf("the mended slave was refused %d times", n)
	}
	mended.stop(t)
	promoted.stop(t)

	final := startBroker(t, ns, brokerOpts{store: dirA, sets: fastHA})
	waitRoute(t, ns.addr, topic, final.name)
	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-rejoin", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, 60, 60*time.Second)
	time.Sleep(time.Second) // anything more would come now
	seen := got.snapshot()
	for i := range 30 {
		for _, body := range []string{"both-" + strconv.Itoa(i), "news-" + strconv.Itoa(i)} {
			if seen[body] == 0 {
				t.Errorf("%s missing", body)
			}
		}
	}
	for body := range seen {
		if strings.HasPrefix(body, "orph-") {
			t.Errorf("%s delivered: it was cut", body)
		}
	}
}

// waitSlaveMax waits until a broker's queue 0 of topic holds want
// messages (GET_MAX_OFFSET, which a slave answers).
func waitSlaveMax(t *testing.T, broker, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for maxOffset(t, broker, topic, 0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s/0 holds %d messages, want %d", broker, topic, maxOffset(t, broker, topic, 0), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTopicConfig waits until a broker has topic's config
// (GET_TOPIC_CONFIG).
func waitTopicConfig(t *testing.T, broker, topic string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := rawInvoke(broker, 351, map[string]string{"topic": topic}, nil)
		if err == nil && r.Code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no config of %s after 30 s (%v, %+v)", broker, topic, err, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loggedInt returns the integer field of the first JSON log line of p
// that contains msg.
func loggedInt(t *testing.T, p *proc, msg, field string) int64 {
	t.Helper()
	f, err := os.Open(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), msg) {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		v, ok := line[field].(float64)
		if !ok {
			t.Fatalf("log line %q has no number %s", sc.Text(), field)
		}
		return int64(v)
	}
	t.Fatalf("%s logged no line with %q", p.name, msg)
	return 0
}
