package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/uniqid"
	"github.com/rocketkv/rocketkv/remoting"
)

// queryMsgByOffset reads the message at one offset of one queue of a
// broker group named by -b, and says which flag is wrong otherwise.
func TestQueryMsgByOffset(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "OT", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "OT")
	for _, body := range []string{"zero", "one", "two"} {
		if _, err := run(t, "sendMessage", "-n", ns, "-t", "OT", "-p", body, "-k", "key-"+body, "--broker-name", "broker-a", "-i", "1"); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, c, "OT", 1, 3)
	out, err := run(t, "queryMsgByOffset", "-n", ns, "-t", "OT", "-b", "broker-a", "-i", "1", "-o", "1", "-f", "UTF-8")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Topic:               OT\n", "Keys:                [key-one]\n", "Queue ID:            1\n",
		"Queue Offset:        1\n", "Body:                one\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("queryMsgByOffset lacks %q:\n%s", want, out)
		}
	}
	// Nothing was committed for the tool's group.
	resp := request(t, c, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "TOOLS_CONSUMER", "topic": "OT", "queueId": "1"}, nil)
	if off := resp.ExtFields["offset"]; off != "0" {
		t.Errorf("TOOLS_CONSUMER's offset of OT/1 after queryMsgByOffset: %s, want none (0)", off)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-b", "broker-a", "-i", "1", "-o", "3"}, "-o 3"},
		{[]string{"-b", "broker-a", "-i", "0", "-o", "0"}, "-o 0"},
		{[]string{"-b", "broker-z", "-i", "1", "-o", "0"}, "-b broker-z"},
		{[]string{"-b", "broker-a", "-i", "1", "-o", "0", "-f", "GBK"}, "-f"},
		{[]string{"-b", "broker-a", "-i", "-1", "-o", "0"}, "-i -1"},
		{[]string{"-b", "broker-a", "-i", "1"}, "offset"},
	} {
		args := append([]string{"queryMsgByOffset", "-n", ns, "-t", "OT"}, c.args...)
		if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want an error naming %q", strings.Join(args, " "), out, err, c.want)
		}
	}
}

// queryMsgByOffset sends the PULL_MESSAGE of mqadmin's pull consumer: one
// message, subscription "*", no commit, no suspend (the flag; the time is
// DefaultMQPullConsumer's 20 s), no byte limit, group TOOLS_CONSUMER.
func TestQueryMsgByOffsetRequest(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.PullMessage: func(req *remoting.Command) *remoting.Command {
			r := remoting.NewResponse(req, remoting.PullNotFound, "")
			r.ExtFields = map[string]string{"nextBeginOffset": req.ExtFields["queueOffset"], "minOffset": "0", "maxOffset": "0", "suggestWhichBrokerId": "0"}
			return r
		},
	})
	ns := fakeNamesrv(t, fakeRoute(addr, "bk", `{"brokerName":"bk","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}`))
	_, err := run(t, "queryMsgByOffset", "-n", ns, "-t", "T", "-b", "bk", "-i", "2", "-o", "7", "--timeout", "3s")
	if err == nil || !strings.Contains(err.Error(), "no message") {
		t.Fatalf("an offset the broker has no message at: %v", err)
	}
	want := map[string]string{"consumerGroup": "TOOLS_CONSUMER", "topic": "T", "queueId": "2", "queueOffset": "7", "maxMsgNums": "1",
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "20000", "maxMsgBytes": "2147483647", "subscription": "*", "expressionType": "TAG",
		"subVersion": "0", "bname": "bk"}
	got := log.last(remoting.PullMessage)
	if len(got) != len(want) {
		t.Errorf("PULL_MESSAGE header %v, want exactly %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("PULL_MESSAGE %s=%q, want %q (header %v)", k, got[k], v, got)
		}
	}
}

// DecodeMessageId reads the host and the time out of a client's message
// id without asking anyone.
func TestDecodeMessageId(t *testing.T) {
	before := time.Now()
	id := uniqid.New([4]byte{10, 1, 2, 3}).Next()
	for _, name := range []string{"DecodeMessageId", "decodeMessageId"} {
		out, err := run(t, name, "-i", id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || lines[0] != "ip=10.1.2.3" || !strings.HasPrefix(lines[1], "date=") {
			t.Fatalf("%s printed %q", name, out)
		}
		at, ok := parseMQAdminTime(strings.TrimPrefix(lines[1], "date="))
		if !ok || at.Before(before.Truncate(time.Millisecond)) || at.After(time.Now()) {
			t.Errorf("%s: date %s, want the time the id was made (%v)", name, lines[1], before)
		}
	}
	// An IPv6 host's id: the address in full, as mqadmin's ipToIPv6Str.
	if out, err := run(t, "DecodeMessageId", "-i", "20010DB8000000000000000000000001"+strings.Repeat("0", 24)); err != nil ||
		!strings.HasPrefix(out, "ip=2001:0db8:0000:0000:0000:0000:0000:0001\ndate=") {
		t.Errorf("an IPv6 id: %q %v", out, err)
	}
	if _, err := run(t, "DecodeMessageId", "-i", "7F00000100002A9F00000000000004"); err == nil || !strings.Contains(err.Error(), "-i") {
		t.Errorf("a malformed id: %v", err)
	}
}
