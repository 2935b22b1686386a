package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// sendMsgStatus sends to the topic named after the broker, after a first
// message of 16 bytes, and prints each send's time and SendResult.
func TestSendMsgStatus(t *testing.T) {
	ns, _ := startCluster(t)
	waitRoute(t, ns, "broker-a")
	out, err := run(t, "sendMsgStatus", "-n", ns, "-b", "broker-a", "-s", "30", "-c", "3")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=([0-9A-F]{32}), offsetMsgId=[0-9A-F]{32}, ` +
		`messageQueue=MessageQueue \[topic=broker-a, brokerName=broker-a, queueId=0\], queueOffset=(\d+), recallHandle=null\]$`)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("sendMsgStatus -c 3:\n%s", out)
	}
	var ids []string
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil || m[2] != strconv.Itoa(i+1) {
			t.Fatalf("line %q: want SEND_OK at queue offset %d (the first message takes 0)", l, i+1)
		}
		ids = append(ids, m[1])
	}
	// The messages are stored: the first of 16 bytes, then three of 33
	// ("hello jodie" three times for -s 30).
	out, err = run(t, "printMsgByQueue", "-n", ns, "-t", "broker-a", "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(got) != 4 || !strings.HasSuffix(got[0], " BODY: "+strings.Repeat("hello jodie", 2)) {
		t.Fatalf("stored messages:\n%s", out)
	}
	for i, l := range got[1:] {
		if !strings.HasPrefix(l, "MSGID: "+ids[i]+" ") || !strings.HasSuffix(l, " BODY: "+strings.Repeat("hello jodie", 3)) {
			t.Errorf("message %d: %q", i+1, l)
		}
	}
}

// checkMsgSendRT sends the i-th message to the i-th queue and prints each
// send and the average of all but the first.
func TestCheckMsgSendRT(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "RT", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "RT")
	out, err := run(t, "checkMsgSendRT", "-n", ns, "-t", "RT", "-a", "5", "-s", "10")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 7 || strings.Join(strings.Fields(lines[0]), " ") != "#Broker Name #QID #Send Result #RT" {
		t.Fatalf("checkMsgSendRT -a 5:\n%s", out)
	}
	var sum int64
	for i, l := range lines[1:6] {
		f := strings.Fields(l)
		rt, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if len(f) != 4 || f[0] != "broker-a" || f[1] != strconv.Itoa(i%2) || f[2] != "true" || err != nil {
			t.Fatalf("send %d: %q, want broker-a %d true <ms>", i, l, i%2)
		}
		if i > 0 {
			sum += rt
		}
	}
	if want := "Avg RT: " + strconv.FormatFloat(float64(sum)/4, 'f', 2, 64); lines[6] != want {
		t.Fatalf("%q, want %q", lines[6], want)
	}
	c := client(t, br)
	waitIndexed(t, c, "RT", 0, 3)
	waitIndexed(t, c, "RT", 1, 2)
	out, err = run(t, "printMsgByQueue", "-n", ns, "-t", "RT", "-a", "broker-a", "-i", "1", "-p", "true", "-d", "true")
	if err != nil || strings.Count(out, " BODY: aaaaaaaaaa\n") != 2 {
		t.Fatalf("bodies of -s 10: %v\n%s", err, out)
	}
}

// clusterRT sends -a messages to each broker's topic and prints the
// average and the counts, or with -p true a log line.
func TestClusterRT(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	waitRoute(t, ns, "broker-a")
	out, err := run(t, "clusterRT", "-n", ns, "-a", "3", "-s", "8", "--rounds", "1")
	if err != nil {
		t.Fatal(err)
	}
	r := rows(out)
	if len(r) != 1 || len(r[0]) != 5 || r[0][0] != "DefaultCluster" || r[0][1] != "broker-a" || r[0][3] != "3" || r[0][4] != "0" {
		t.Fatalf("clusterRT:\n%s\nwant DefaultCluster broker-a <rt> 3 0", out)
	}
	if _, err := strconv.ParseFloat(r[0][2], 64); err != nil || !strings.Contains(r[0][2], ".") {
		t.Fatalf("#RT %q: want a decimal", r[0][2])
	}
	out, err = run(t, "clusterRT", "-n", ns, "-a", "2", "-p", "true", "-m", "room1", "--rounds", "1")
	if err != nil || !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|DefaultCluster\|broker-a\|\d+\n$`).MatchString(out) {
		t.Fatalf("clusterRT -p true: %v\n%q", err, out)
	}
	// 3 + 2 messages in the broker's topic.
	waitIndexed(t, client(t, br), "broker-a", 0, 5)
	if _, err := run(t, "clusterRT", "-n", ns, "-c", "Other", "--rounds", "1"); err == nil || !strings.Contains(err.Error(), "cluster [Other] not exist") {
		t.Fatalf("clusterRT -c Other: %v", err)
	}
}

// A send the broker refuses is a false line of checkMsgSendRT, not the
// end of the run; a stored message answered FLUSH_DISK_TIMEOUT is that
// status in sendMsgStatus's SendResult. The requests are mqadmin's.
func TestSendProbesRequests(t *testing.T) {
	var mu sync.Mutex
	sends := 0
	code := remoting.Success
	br, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.SendMessageV2: func(req *remoting.Command) *remoting.Command {
			mu.Lock()
			defer mu.Unlock()
			sends++
			c := code
			if c == remoting.Success && sends%2 == 0 {
				c = remoting.SystemBusy
			}
			r := remoting.NewResponse(req, c, "")
			r.ExtFields = map[string]string{"msgId": "7F00000100002A9F0000000000000000", "queueId": req.ExtFields["e"], "queueOffset": strconv.Itoa(sends)}
			return r
		},
	})
	ns := fakeNamesrv(t, fakeRoute(br, "b", `{"brokerName":"b","perm":6,"readQueueNums":2,"writeQueueNums":2}`))
	out, err := run(t, "checkMsgSendRT", "-n", ns, "-t", "T", "-a", "4", "-s", "3")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows(out)[:4] {
		got = append(got, strings.Join(r[:3], " "))
	}
	if strings.Join(got, ",") != "b 0 true,b 1 false,b 0 true,b 1 false" {
		t.Fatalf("checkMsgSendRT against a broker refusing every other send:\n%s", out)
	}
	h := log.last(remoting.SendMessageV2)
	if _, err := strconv.ParseInt(h["a"], 10, 64); err != nil || h["b"] != "T" || h["e"] != "1" || !strings.Contains(h["i"], "UNIQ_KEY\x01") {
		t.Fatalf("the last send's header %v: want a producer group of the time in ms, topic T, queue 1, a UNIQ_KEY", h)
	}

	mu.Lock()
	code = remoting.FlushDiskTimeout
	mu.Unlock()
	out, err = run(t, "sendMsgStatus", "-n", ns, "-b", "b", "-c", "1")
	if err != nil || !strings.Contains(out, "SendResult=SendResult [sendStatus=FLUSH_DISK_TIMEOUT, ") {
		t.Fatalf("sendMsgStatus against a broker timing out its flush: %v\n%s", err, out)
	}
	if h := log.last(remoting.SendMessageV2); h["a"] != "PID_SMSC" || h["b"] != "b" {
		t.Fatalf("sendMsgStatus's header %v: want group PID_SMSC, topic b", h)
	}
}
