package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// ckBody and ackBody are RocketMQ 5's PopCheckPoint and AckMsg as fastjson
// writes them.
func ckBody(start, popTime int64, diffs string, n int) string {
	return fmt.Sprintf(`{"bm":0,"bn":"broker-a","c":"cg-pop","d":[%s],"it":60000,"n":%d,"pt":%d,"q":0,"rp":"0","so":%d,"t":"PopT"}`,
		diffs, n, popTime, start)
}

func ackBody(start, popTime, ackOffset int64) string {
	return fmt.Sprintf(`{"ao":%d,"bn":"broker-a","c":"cg-pop","pt":%d,"q":0,"so":%d,"t":"PopT"}`, ackOffset, popTime, start)
}

// TestOpenRocketMQStoreKeepsPopInFlight builds what RocketMQ 5's classic
// POP leaves in a store (messages, check-point and ack messages in the
// revive topic, some parked in the timer, the revive progress and the
// group's pop offset in consumerOffset.json), reopens it with a fresh
// index, and checks that the messages popped and not acked stay in flight:
// due ones are revived, the others are acked with RocketMQ's receipt
// handles, and nothing RocketMQ revived already or acked comes again.
func TestOpenRocketMQStoreKeepsPopInFlight(t *testing.T) {
	// The revive topic is named by RocketMQ's cluster; a broker opening
	// the store under another brokerClusterName imports it all the same.
	for _, cluster := range []string{"DefaultCluster", "MovedCluster"} {
		t.Run(cluster, func(t *testing.T) { testOpenRocketMQStorePop(t, cluster) })
	}
}

func testOpenRocketMQStorePop(t *testing.T, cluster string) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	for i := 0; i < 5; i++ {
		mustSend(t, c, "PopT", 0, "m"+strconv.Itoa(i), "")
	}
	const revive = "rmq_sys_REVIVE_LOG_DefaultCluster"
	now := time.Now().UnixMilli()
	p1, p2, p3 := now-10_000, now-120_000, now-300_000
	at := func(ms int64) string { return "\x02TIMER_DELIVER_MS\x01" + strconv.FormatInt(ms, 10) }
	// Revived by RocketMQ already (below its revive progress): message 0.
	mustSend(t, c, revive, 0, ckBody(0, p3, "0", 1), "TAGS\x01ck")
	// Due, delivered to the revive topic by RocketMQ's timer, not revived
	// yet: messages 3 and 4.
	mustSend(t, c, revive, 0, ckBody(3, p2, "0,1", 2), "TAGS\x01ck")
	// In flight for 50 s more, parked in the timer with its ack of 1:
	// messages 0, 1 and 2 popped again (after RocketMQ's revive of 0).
	mustSend(t, c, revive, 0, ckBody(0, p1, "0,1,2", 3), "TAGS\x01ck"+at(p1+59_000))
	mustSend(t, c, revive, 0, ackBody(0, p1, 1), "TAGS\x01ack"+at(p1+60_000))
	b.caughtUp()
	b.stop()

	// The store as RocketMQ leaves it: CommitLog and config files.
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	writeRocketMQConfig(t, store, "topics.json", `{"topicConfigTable":{
		"PopT":{"topicName":"PopT","readQueueNums":1,"writeQueueNums":1,"perm":6,"topicFilterType":"SINGLE_TAG"},
		"`+revive+`":{"topicName":"`+revive+`","readQueueNums":8,"writeQueueNums":8,"perm":6,"topicFilterType":"SINGLE_TAG"}}}`)
	writeRocketMQConfig(t, store, "subscriptionGroup.json", `{"subscriptionGroupTable":{"cg-pop":{"groupName":"cg-pop","retryMaxTimes":16,"retryQueueNums":1,"consumeEnable":true}}}`)
	writeRocketMQConfig(t, store, "messageRequestMode.json", `{"messageRequestModeMap":{"PopT":{"cg-pop":{"consumerGroup":"cg-pop","mode":"POP","popShareQueueNum":0,"topic":"PopT"}}}}`)
	writeRocketMQConfig(t, store, "consumerOffset.json", `{"offsetTable":{"PopT@cg-pop":{0:5},"`+revive+`@CID_RMQ_SYS_REVIVE_GROUP":{0:0}}}`)

	b = startTestBrokerAt(t, store, map[string]string{"brokerClusterName": cluster})
	c = b.client(nil)
	ck, ok, err := b.db.Pop().Checkpoint("cg-pop", "PopT", 0, 0, p1)
	if err != nil || !ok || fmt.Sprint(ck.Offsets) != "[0 2]" || ck.VisibleAt != p1+60_000 || ck.InvisibleTime != 60_000 {
		t.Fatalf("the parked check-point: %+v %v %v, want offsets [0 2] visible at %d", ck, ok, err, p1+60_000)
	}
	if due, err := b.db.Timers().Due(now+time.Hour.Milliseconds(), 10); err != nil || len(due) != 0 {
		t.Fatalf("check-point and ack still parked in the timer: %+v %v", due, err)
	}
	// The due check-point is revived into the group's pop-retry topic:
	// messages 3 and 4, not message 0, which RocketMQ revived before.
	retry := pop.RetryTopicV1("PopT", "cg-pop")
	revived := func() []string {
		// Revive creates the pop-retry topic with its first message; until
		// then the topic does not exist and nothing is revived.
		if _, ok, err := b.topics.get(retry); err != nil || !ok {
			return nil
		}
		var out []string
		for _, m := range pullAll(t, b, c, retry, 0) {
			out = append(out, string(m.Body))
		}
		return out
	}
	waitFor(t, "the due check-point revived", func() bool { return len(revived()) >= 2 })
	time.Sleep(200 * time.Millisecond) // two revive rounds more
	if got := revived(); fmt.Sprint(got) != "[m3 m4]" {
		t.Fatalf("revived %v, want [m3 m4]", got)
	}
	// A client acks message 0 with the receipt handle RocketMQ gave it.
	h := pop.Handle{CKOffset: 0, PopTime: p1, InvisibleTime: 60_000, ReviveQID: 0, RetryFlag: pop.FlagNormal,
		BrokerName: "broker-a", QueueID: 0, QueueOffset: 0}
	r := call(t, c, remoting.AckMessage, map[string]string{"consumerGroup": "cg-pop", "topic": "PopT", "queueId": "0",
		"extraInfo": h.String(), "offset": "0"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("ack with RocketMQ's handle: %d %s", r.Code, r.Remark)
	}
	if ck, _, _ := b.db.Pop().Checkpoint("cg-pop", "PopT", 0, 0, p1); fmt.Sprint(ck.Offsets) != "[2]" {
		t.Fatalf("after the ack the check-point holds %v, want [2]", ck.Offsets)
	}
	if got := committedOffset(t, c, "cg-pop", "PopT", 0); got != 5 {
		t.Fatalf("the group's offset is %d, want RocketMQ's 5", got)
	}
	// The group stays in POP mode (messageRequestMode.json).
	if r := call(t, c, remoting.GetAllMessageRequestMode, nil, nil); r.Code != remoting.Success ||
		!strings.Contains(string(r.Body), `"mode":"POP"`) || !strings.Contains(string(r.Body), `"cg-pop"`) {
		t.Fatalf("request modes after the import: %d %s", r.Code, r.Body)
	}
}
