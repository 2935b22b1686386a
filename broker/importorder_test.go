package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// writeRocketMQConfig writes one of RocketMQ's config files under
// store/config.
func writeRocketMQConfig(t *testing.T, store, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(store, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "config", name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRocketMQStoreKeepsOrderlyPopBatches moves a store on which
// orderly POP consumers of RocketMQ 5 had batches in flight
// (consumerOrderInfo.json, as fastjson writes it) and checks that each
// batch carries on: a batch inside its invisible time keeps the queue
// locked and is acknowledged with RocketMQ's receipt handle; an expired
// one is delivered again with its messages' counts one higher, unless a
// change of invisible time holds it; a batch without an invisible time of
// its own is judged by the pop's; and the
// batches RocketMQ would drop are not imported.
func TestOpenRocketMQStoreKeepsOrderlyPopBatches(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	for q, n := range []int{5, 3, 2, 1} {
		for i := range n {
			mustSend(t, c, "OrdT", int32(q), fmt.Sprintf("q%d-m%d", q, i), "")
		}
	}
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}

	now := time.Now().UnixMilli()
	inFlight, expired, noInvisible := now-1_000, now-120_000, now-1_000
	ms := func(v int64) string { return strconv.FormatInt(v, 10) }
	writeRocketMQConfig(t, store, "topics.json", `{"topicConfigTable":{
		"OrdT":{"topicName":"OrdT","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","order":true}}}`)
	writeRocketMQConfig(t, store, "subscriptionGroup.json", `{"subscriptionGroupTable":{
		"cg-ord":{"groupName":"cg-ord","consumeMessageOrderly":true,"consumeEnable":true},
		"cg-idle":{"groupName":"cg-idle","consumeEnable":true},
		"cg-done":{"groupName":"cg-done","consumeEnable":true}}}`)
	// RocketMQ commits an orderly batch up to its first unacknowledged
	// message: offset 1 of queue 0 is acknowledged, so the group is at 2.
	writeRocketMQConfig(t, store, "consumerOffset.json", `{"offsetTable":{"OrdT@cg-ord":{0:2,1:0,2:0,3:0}}}`)
	writeRocketMQConfig(t, store, "consumerOrderInfo.json", `{"table":{
		"OrdT@cg-ord":{
			0:{"a":"att-1","cm":1,"i":60000,"l":`+ms(inFlight)+`,"o":[1,1,2],"oc":{2:1,3:1},"popTime":`+ms(inFlight)+`},
			1:{"cm":0,"i":60000,"l":`+ms(expired)+`,"o":[0,1],"oc":{0:2},"popTime":`+ms(expired)+`},
			2:{"cm":0,"l":`+ms(noInvisible)+`,"o":[0,1],"popTime":`+ms(noInvisible)+`},
			3:{"cm":0,"i":60000,"l":`+ms(expired)+`,"o":[0],"ot":{0:`+ms(now+60_000)+`},"popTime":`+ms(expired)+`},
			7:{"cm":0,"i":60000,"l":`+ms(inFlight)+`,"o":[0],"popTime":`+ms(inFlight)+`}},
		"OrdT@cg-idle":{0:{"cm":0,"i":60000,"l":`+ms(now-25*3600_000)+`,"o":[0],"popTime":`+ms(inFlight)+`}},
		"OrdT@cg-done":{0:{"cm":3,"i":60000,"l":`+ms(inFlight)+`,"o":[0,1],"popTime":`+ms(inFlight)+`}},
		"OrdT@cg-gone":{0:{"cm":0,"i":60000,"l":`+ms(inFlight)+`,"o":[0],"popTime":`+ms(inFlight)+`}},
		"Gone@cg-ord":{0:{"cm":0,"i":60000,"l":`+ms(inFlight)+`,"o":[0],"popTime":`+ms(inFlight)+`}}}}`)

	b = startTestBrokerAt(t, store, nil)
	for _, skipped := range []struct {
		group, topic string
		queue        int32
	}{{"cg-ord", "OrdT", 7}, {"cg-idle", "OrdT", 0}, {"cg-done", "OrdT", 0}, {"cg-gone", "OrdT", 0}, {"cg-ord", "Gone", 0}} {
		if st, ok, err := b.db.Pop().Order(skipped.group, skipped.topic, skipped.queue); err != nil || ok {
			t.Errorf("batch of %+v imported: %+v %v", skipped, st, err)
		}
	}
	pc, rc := popClient(b)
	orderly := func(queue int32, attempt string, invisible time.Duration) popclient.PopResult {
		return mustPop(t, pc, popclient.PopRequest{Group: "cg-ord", Topic: "OrdT", QueueID: queue, MaxMsgNums: 2,
			InvisibleTime: invisible, Order: true, AttemptID: attempt})
	}

	// Queue 0: locked while the batch is in flight.
	if res := orderly(0, "att-2", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("pop of the queue RocketMQ's batch locks: %d %v", res.Code, bodies(res.Messages))
	}
	// The client acks message 2 with the handle RocketMQ gave it.
	h := pop.Handle{CKOffset: 1, PopTime: inFlight, InvisibleTime: 60_000, ReviveQID: pop.OrderReviveQueue,
		RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: 0, QueueOffset: 2}
	r := call(t, rc, remoting.AckMessage, map[string]string{"consumerGroup": "cg-ord", "topic": "OrdT", "queueId": "0",
		"extraInfo": h.String(), "offset": "2"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("ack with RocketMQ's handle: %d %s", r.Code, r.Remark)
	}
	if got := committedOffset(t, rc, "cg-ord", "OrdT", 0); got != 3 {
		t.Fatalf("committed offset after the ack: %d, want 3", got)
	}
	if res := orderly(0, "att-2", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("queue unlocked with message 3 still in flight: %d %v", res.Code, bodies(res.Messages))
	}

	// Queue 1: the expired batch comes again, its counts carried on.
	res := orderly(1, "", time.Minute)
	if fmt.Sprint(bodies(res.Messages)) != "[q1-m0 q1-m1]" {
		t.Fatalf("expired batch: %d %v", res.Code, bodies(res.Messages))
	}
	if got := res.Header["orderCountInfo"]; got != "0 qo1%0 3;0 qo1%1 1;0 1 1" {
		t.Fatalf("orderCountInfo %q, want RocketMQ's counts plus one", got)
	}

	// Queue 3: expired by its pop time, but its message's invisible time
	// was changed since.
	if res := orderly(3, "", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("pop of the queue whose message got a later deadline: %d %v", res.Code, bodies(res.Messages))
	}

	// Queue 2: no invisible time of its own, popped a second ago: a pop
	// that asks for a minute finds it in flight, one that asks for half a
	// second finds it expired.
	st, ok, err := b.db.Pop().Order("cg-ord", "OrdT", 2)
	if err != nil || !ok || st.InvisibleTime != 0 {
		t.Fatalf("imported batch of queue 2: %+v %v %v", st, ok, err)
	}
	if res := orderly(2, "", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("batch without invisible time, pop of a minute: %d %v", res.Code, bodies(res.Messages))
	}
	if res := orderly(2, "", 500*time.Millisecond); fmt.Sprint(bodies(res.Messages)) != "[q2-m0 q2-m1]" {
		t.Fatalf("batch without invisible time, pop of 500 ms: %d %v", res.Code, bodies(res.Messages))
	}
}

// importOrderFile imports a consumerOrderInfo.json of one topic (OrdC, 2
// read queues) and group (cg-c) into a fresh index, as the first open of
// a RocketMQ store does, and returns the index.
func importOrderFile(t *testing.T, orderInfo string, now int64) (*kvindex.DB, error) {
	t.Helper()
	root := t.TempDir()
	writeRocketMQConfig(t, root, "topics.json", `{"topicConfigTable":{"OrdC":{"topicName":"OrdC","readQueueNums":2,"writeQueueNums":2,"perm":6}}}`)
	writeRocketMQConfig(t, root, "subscriptionGroup.json", `{"subscriptionGroupTable":{"cg-c":{"groupName":"cg-c","consumeEnable":true}}}`)
	writeRocketMQConfig(t, root, "consumerOrderInfo.json", orderInfo)
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c, err := rmqconfig.Read(root)
	if err != nil {
		return db, err
	}
	_, err = importConfig(db, c, now)
	return db, err
}

// RocketMQ's OrderInfo.mergeOffsetConsumedCount keeps, for a pop
// repeating the attemptId, the whole count table of the batch it
// replaces: "oc" may hold offsets "o" no longer has. The import keeps
// those as the batch's carried counts (kvindex.OrderState.Carried), the
// counts of the batch's own offsets on its messages; a count of 0 or less
// counts nothing (RocketMQ writes counts above 0 only). More carried
// counts than a batch can have (64; RocketMQ's batches hold at most 32)
// are no RocketMQ file's: the import fails, naming the file.
func TestImportOrderInfoCarriedCounts(t *testing.T) {
	now := time.Now().UnixMilli()
	ms := strconv.FormatInt(now-1_000, 10)
	batch := func(o, oc string) string {
		return `{"table":{"OrdC@cg-c":{0:{"a":"att","cm":0,"i":60000,"l":` + ms + `,"o":` + o + `,"oc":` + oc + `,"popTime":` + ms + `}}}}`
	}
	many := func(n int) string { // counts of 1 for offsets 100 to 100+n-1
		parts := make([]string, n)
		for i := range parts {
			parts[i] = strconv.Itoa(100+i) + ":1"
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for _, tc := range []struct {
		name     string
		file     string
		messages []kvindex.OrderMessage
		carried  []kvindex.OrderCount
		wantErr  string
	}{
		{name: "counts of the batch only", file: batch(`[5,1]`, `{5:2,6:1}`),
			messages: []kvindex.OrderMessage{{QueueOffset: 5, Consumed: 2}, {QueueOffset: 6, Consumed: 1}}},
		{name: "counts of offsets the batch no longer holds", file: batch(`[5]`, `{5:2,6:2,7:1}`),
			messages: []kvindex.OrderMessage{{QueueOffset: 5, Consumed: 2}},
			carried:  []kvindex.OrderCount{{QueueOffset: 6, Consumed: 2}, {QueueOffset: 7, Consumed: 1}}},
		{name: "carried counts below the batch", file: batch(`[8,1]`, `{3:4,9:1}`),
			messages: []kvindex.OrderMessage{{QueueOffset: 8}, {QueueOffset: 9, Consumed: 1}},
			carried:  []kvindex.OrderCount{{QueueOffset: 3, Consumed: 4}}},
		{name: "counts of 0 or less carry nothing", file: batch(`[5]`, `{6:0,7:-1,8:3}`),
			messages: []kvindex.OrderMessage{{QueueOffset: 5}},
			carried:  []kvindex.OrderCount{{QueueOffset: 8, Consumed: 3}}},
		{name: "64 carried counts", file: batch(`[5]`, many(64)),
			messages: []kvindex.OrderMessage{{QueueOffset: 5}},
			carried: func() []kvindex.OrderCount {
				var cs []kvindex.OrderCount
				for i := range int64(64) {
					cs = append(cs, kvindex.OrderCount{QueueOffset: 100 + i, Consumed: 1})
				}
				return cs
			}()},
		{name: "65 carried counts", file: batch(`[5]`, many(65)), wantErr: "consumerOrderInfo.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := importOrderFile(t, tc.file, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "outside the batch") {
					t.Fatalf("import: %v, want an error naming %s and the counts outside the batch", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, ok, err := db.Pop().Order("cg-c", "OrdC", 0)
			if err != nil || !ok {
				t.Fatalf("imported batch: %v %v", ok, err)
			}
			if !reflect.DeepEqual(st.Messages, tc.messages) || !reflect.DeepEqual(st.Carried, tc.carried) {
				t.Fatalf("imported batch: messages %+v carried %+v\nwant messages %+v carried %+v", st.Messages, st.Carried, tc.messages, tc.carried)
			}
		})
	}
}

// A batch's counts come back to RocketMQ as they came: imported from
// consumerOrderInfo.json, exported again (kvdump export-rocketmq's
// rmqconfig.StoreOrderInfos and EncodeOrderInfos), "oc" still holds the
// counts of offsets outside "o".
func TestImportExportOrderInfoKeepsCarriedCounts(t *testing.T) {
	now := time.Now().UnixMilli()
	ms := strconv.FormatInt(now-1_000, 10)
	db, err := importOrderFile(t, `{"table":{"OrdC@cg-c":{
		0:{"a":"att-0","cm":1,"i":60000,"l":`+ms+`,"o":[5,1],"oc":{3:1,5:2,6:2,9:1},"ot":{6:`+strconv.FormatInt(now+60_000, 10)+`},"popTime":`+ms+`},
		1:{"cm":0,"i":60000,"l":`+ms+`,"o":[0],"popTime":`+ms+`}}}}`, now)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := rmqconfig.StoreOrderInfos(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	data, err := rmqconfig.EncodeOrderInfos(infos)
	if err != nil {
		t.Fatal(err)
	}
	back := t.TempDir()
	writeRocketMQConfig(t, back, rmqconfig.OrderInfosFile, string(data))
	c, err := rmqconfig.Read(back)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OrderInfos) != 2 {
		t.Fatalf("exported order infos: %+v", c.OrderInfos)
	}
	if got, want := c.OrderInfos[0].Consumed, map[int64]int32{3: 1, 5: 2, 6: 2, 9: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("exported oc of queue 0: %v, want %v\n%s", got, want, data)
	}
	if got := c.OrderInfos[1].Consumed; len(got) != 0 {
		t.Fatalf("exported oc of queue 1: %v, want none\n%s", got, data)
	}
}

// After the move, the consumer's retry of the same attempt delivering the
// offsets the imported batch no longer held finds their counts, as it
// would have on RocketMQ: the carried counts are reported in
// orderCountInfo, and the queue's count is the smallest of them.
func TestOpenRocketMQStoreCarriesCountsOfTheAttempt(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	for i := range 3 {
		mustSend(t, c, "OrdC", 0, fmt.Sprintf("m%d", i), "")
	}
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	ms := strconv.FormatInt(time.Now().UnixMilli()-1_000, 10)
	writeRocketMQConfig(t, store, "topics.json", `{"topicConfigTable":{"OrdC":{"topicName":"OrdC","readQueueNums":1,"writeQueueNums":1,"perm":6,"order":true}}}`)
	writeRocketMQConfig(t, store, "subscriptionGroup.json", `{"subscriptionGroupTable":{"cg-c":{"groupName":"cg-c","consumeMessageOrderly":true,"consumeEnable":true}}}`)
	writeRocketMQConfig(t, store, "consumerOffset.json", `{"offsetTable":{"OrdC@cg-c":{0:0}}}`)
	// Popped as 0-2 twice, then as 0 alone by a retry of attempt att.
	writeRocketMQConfig(t, store, "consumerOrderInfo.json", `{"table":{"OrdC@cg-c":{
		0:{"a":"att","cm":0,"i":60000,"l":`+ms+`,"o":[0],"oc":{0:1,1:1,2:1},"popTime":`+ms+`}}}}`)

	b = startTestBrokerAt(t, store, nil)
	pc, _ := popClient(b)
	res := mustPop(t, pc, popclient.PopRequest{Group: "cg-c", Topic: "OrdC", QueueID: 0, MaxMsgNums: 3,
		InvisibleTime: time.Minute, Order: true, AttemptID: "att"})
	if fmt.Sprint(bodies(res.Messages)) != "[m0 m1 m2]" {
		t.Fatalf("retry of the attempt: %d %v", res.Code, bodies(res.Messages))
	}
	if got, want := res.Header["orderCountInfo"], "0 qo0%0 1;0 qo0%1 1;0 qo0%2 1;0 0 1"; got != want {
		t.Fatalf("orderCountInfo %q, want %q (the counts RocketMQ kept for the attempt)", got, want)
	}
}
