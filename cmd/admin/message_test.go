package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// The three message queries find what a producer sent: by a word of its
// KEYS on every master of the topic's route, by the offset id a send
// answered, and by the UNIQ_KEY a client shows.
func TestQueryMessages(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "MQ", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "MQ")
	sendKeyed := func(q, uniq, body string) string {
		resp := request(t, c, remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "MQ", "c": "TBW102", "d": "4", "e": q, "f": "0", "g": "1", "h": "0",
			"i": "KEYS\x01order-1 other\x02UNIQ_KEY\x01" + uniq + "\x02TAGS\x01tagA\x02",
		}, []byte(body))
		return resp.ExtFields["msgId"]
	}
	offsetID := sendKeyed("0", "UNIQ-A", "first body")
	sendKeyed("1", "UNIQ-B", "second body")
	waitIndexed(t, c, "MQ", 0, 1)
	waitIndexed(t, c, "MQ", 1, 1)

	out, err := run(t, "queryMsgByKey", "-n", ns, "-t", "MQ", "-k", "order-1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "#Message ID") || !strings.Contains(out, "UNIQ-A") || !strings.Contains(out, "UNIQ-B") {
		t.Fatalf("queryMsgByKey order-1:\n%s", out)
	}
	// Nothing found fails, before the table, as mqadmin's (MQAdminImpl's
	// queryMessage throws "query message by key finished, but no
	// message.").
	if out, err := run(t, "queryMsgByKey", "-n", ns, "-t", "MQ", "-k", "no-such-key"); err == nil ||
		!strings.Contains(err.Error(), "query message by key finished, but no message.") || !strings.Contains(err.Error(), "no-such-key") || out != "" {
		t.Fatalf("queryMsgByKey of a key nobody sent: %q %v, want mqadmin's failure and no table", out, err)
	}
	// The store-time window leaves out what was stored before it.
	future := time.Now().Add(time.Hour).UnixMilli()
	if out, err := run(t, "queryMsgByKey", "-n", ns, "-t", "MQ", "-k", "order-1", "--beginTimestamp", strconv.FormatInt(future, 10), "-e", strconv.FormatInt(future+1, 10)); err == nil ||
		!strings.Contains(err.Error(), "query message by key finished, but no message.") || strings.Contains(out, "UNIQ") {
		t.Fatalf("queryMsgByKey in a window after the sends: %q %v", out, err)
	}

	// The id names the broker's store host; this one listens on another
	// port than its listenPort (0), so -b says where it is.
	out, err = run(t, "queryMsgById", "-b", b.Addr(), "-i", offsetID, "--body")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OffsetID:            " + offsetID, "Topic:               MQ", "Tags:                [tagA]",
		"Keys:                [order-1 other]", "Queue ID:            0", "Queue Offset:        0", "UNIQ_KEY=UNIQ-A", "Body:                first body"} {
		if !strings.Contains(out, want) {
			t.Errorf("queryMsgById lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "queryMsgById", "-i", "not-a-message-id"); err == nil || !strings.Contains(err.Error(), "not-a-message-id") {
		t.Errorf("queryMsgById of a malformed id: %v", err)
	}

	out, err = run(t, "queryMsgByUniqueKey", "-n", ns, "-t", "MQ", "-i", "UNIQ-B")
	if err != nil || !strings.Contains(out, "Queue ID:            1") || strings.Contains(out, "Body:") {
		t.Fatalf("queryMsgByUniqueKey UNIQ-B: %q %v", out, err)
	}
	if _, err := run(t, "queryMsgByUniqueKey", "-n", ns, "-t", "MQ", "-i", "UNIQ-NONE"); err == nil || !strings.Contains(err.Error(), "UNIQ-NONE") ||
		!strings.Contains(err.Error(), "query message by key finished, but no message.") {
		t.Errorf("queryMsgByUniqueKey of an id nobody sent: %v", err)
	}
}

// sendMessage sends as a producer: to a queue of the topic's route, to a
// chosen queue of a broker group, or through TBW102's route to a topic the
// broker then creates; what it sent is found by the id it printed.
func TestSendMessage(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "ST", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "ST")
	waitRoute(t, ns, "TBW102")
	idOf := func(out string) string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "#Broker Name") || !strings.Contains(lines[1], "SEND_OK") {
			t.Fatalf("sendMessage printed:\n%s", out)
		}
		f := strings.Fields(lines[1])
		return f[len(f)-1]
	}
	out, err := run(t, "sendMessage", "-n", ns, "-t", "ST", "-p", "hello rocketkv", "-k", "k1", "-c", "tagX", "-b", "broker-a", "-i", "1")
	if err != nil {
		t.Fatal(err)
	}
	id := idOf(out)
	if !strings.Contains(strings.Split(out, "\n")[1], "broker-a") || strings.Fields(strings.Split(out, "\n")[1])[1] != "1" {
		t.Fatalf("sendMessage to queue 1 of broker-a printed:\n%s", out)
	}
	waitIndexed(t, c, "ST", 1, 1)
	found, err := run(t, "queryMsgByUniqueKey", "-n", ns, "-t", "ST", "-i", id, "--body")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Queue ID:            1", "Tags:                [tagX]", "Keys:                [k1]", "Body:                hello rocketkv"} {
		if !strings.Contains(found, want) {
			t.Errorf("the message sendMessage sent lacks %q:\n%s", want, found)
		}
	}

	// A topic the name server does not know goes by TBW102's route, to one
	// of its first four queues (the queues the broker creates it with;
	// TBW102 has eight, and the queue is picked at random: eight topics
	// make a pick past the fourth all but certain if the cap is lost).
	for i := range 8 {
		topic := "BornBySend" + strconv.Itoa(i)
		if _, err := run(t, "sendMessage", "-n", ns, "-t", topic, "-p", "first"); err != nil {
			t.Fatal(err)
		}
		if out, err := run(t, "topicStatus", "-b", b.Addr(), "-t", topic); err != nil {
			t.Fatalf("topic created by the send: %q %v", out, err)
		}
	}

	if _, err := run(t, "sendMessage", "-n", ns, "-t", "ST", "-p", "x", "-i", "0"); err == nil || !strings.Contains(err.Error(), "--broker-name") {
		t.Errorf("-i without --broker-name: %v", err)
	}
	if _, err := run(t, "sendMessage", "-n", ns, "-t", "ST", "-p", "x", "--broker-name", "no-such-broker"); err == nil || !strings.Contains(err.Error(), "no-such-broker") {
		t.Errorf("an unknown broker group: %v", err)
	}
}

// consumeMessage prints what the queues hold, within the offsets or store
// times asked, and commits nothing.
func TestConsumeMessage(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "CT", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "CT")
	for i := range 8 {
		q := strconv.Itoa(i % 2)
		if _, err := run(t, "sendMessage", "-n", ns, "-t", "CT", "-p", "m"+strconv.Itoa(i), "--broker-name", "broker-a", "-i", q); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, c, "CT", 0, 4)
	waitIndexed(t, c, "CT", 1, 4)
	sent := time.Now().UnixMilli()

	for _, tc := range []struct {
		args  []string
		count int
		want  []string
	}{
		{nil, 8, []string{"CT/0@0", "CT/0@3", "CT/1@3"}},
		{[]string{"-b", "broker-a", "-i", "1", "-o", "2", "--body"}, 2, []string{"CT/1@2", "CT/1@3", "Body:                m7"}},
		{[]string{"-c", "3"}, 3, []string{"CT/0@2"}},
		{[]string{"-s", strconv.FormatInt(sent+60_000, 10)}, 0, nil},
		{[]string{"-e", strconv.FormatInt(sent+60_000, 10)}, 8, nil},
	} {
		out, err := run(t, append([]string{"consumeMessage", "-n", ns, "-t", "CT"}, tc.args...)...)
		if err != nil {
			t.Fatalf("consumeMessage %v: %v", tc.args, err)
		}
		if !strings.HasSuffix(out, strconv.Itoa(tc.count)+" messages\n") || strings.Count(out, "OffsetID:") != tc.count {
			t.Errorf("consumeMessage %v printed %d messages, want %d:\n%s", tc.args, strings.Count(out, "OffsetID:"), tc.count, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("consumeMessage %v lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	// Nothing was committed for the tool's group.
	resp := request(t, c, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "TOOLS_CONSUMER", "topic": "CT", "queueId": "0"}, nil)
	if off := resp.ExtFields["offset"]; off != "0" {
		t.Errorf("TOOLS_CONSUMER's offset of CT/0 after consumeMessage: %s, want none (0)", off)
	}
	// -g pulls as that group: one that may not consume is refused.
	request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"NoConsumeG","consumeEnable":false}`))
	if out, err := run(t, "consumeMessage", "-n", ns, "-t", "CT", "-g", "NoConsumeG"); err == nil || !strings.Contains(err.Error(), "NoConsumeG") {
		t.Errorf("consumeMessage -g NoConsumeG: %q %v", out, err)
	}
	if out, err := run(t, "consumeMessage", "-n", ns, "-t", "CT", "-g", "OtherG", "-c", "2"); err != nil || !strings.HasSuffix(out, "2 messages\n") {
		t.Errorf("consumeMessage -g OtherG: %q %v", out, err)
	}
	if _, err := run(t, "consumeMessage", "-n", ns, "-t", "CT", "-i", "0"); err == nil || !strings.Contains(err.Error(), "--broker-name") {
		t.Errorf("-i without --broker-name: %v", err)
	}
}

// TestPrintMessageTagsAndKeysAsMqadmin: queryMsgById, queryMsgByUniqueKey,
// queryMsgByOffset and consumeMessage print a message's tags and keys as
// mqadmin's queryMsgById does, "[" + msg.getTags() + "]": a message without
// the property (a send with no tag, or no key) shows [null], as Java
// concatenates a null String, and one with it shows its value.
func TestPrintMessageTagsAndKeysAsMqadmin(t *testing.T) {
	for _, c := range []struct {
		props      string
		tags, keys string
	}{
		{"", "[null]", "[null]"},
		{"TAGS\x01tagA\x02", "[tagA]", "[null]"},
		{"KEYS\x01k1 k2\x02", "[null]", "[k1 k2]"},
	} {
		var out bytes.Buffer
		printMessage(&out, &commitlog.Message{Topic: "T", Properties: c.props}, false)
		for _, want := range []string{"Tags:                " + c.tags + "\n", "Keys:                " + c.keys + "\n"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("properties %q: want %q in\n%s", c.props, want, out.String())
			}
		}
	}
}
