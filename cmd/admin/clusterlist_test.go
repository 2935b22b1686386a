package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// clusterList prints mqadmin's table, a line per broker from its runtime
// info; -m the day totals; --json the name server's answer.
func TestClusterList(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "CL", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	c := client(t, br)
	for range 3 {
		send(t, c, "CL", 0)
	}
	out, err := run(t, "clusterList", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("clusterList: want a header and one broker:\n%s", out)
	}
	for _, col := range []string{"#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s: %q", col, lines[0])
		}
	}
	f := strings.Fields(lines[1])
	version := remoting.VersionName(int(remoting.CurrentVersion))
	if len(f) < 5 || f[0] != "DefaultCluster" || f[1] != "broker-a" || f[2] != "0" || f[3] != br || f[4] != version || f[len(f)-1] != "true" {
		t.Fatalf("broker line %q: want DefaultCluster broker-a 0 %s %s ... true", lines[1], br, version)
	}
	// The send queue, the pull and ack queues (N: rocketkv has no ack
	// pool), the timer's backlog and the page cache wait, as mqadmin
	// formats them.
	for _, part := range []string{"(0,0ms)", "(0,0ms|N,Nms)"} {
		if !strings.Contains(lines[1], part) {
			t.Errorf("broker line lacks %q: %q", part, lines[1])
		}
	}
	// The timer's read time is the start of the slot of its last round
	// (1 s slots), so on an idle broker it reads 0 or 1 s behind, as
	// RocketMQ's currReadTimeMs does; nothing waits.
	if !regexp.MustCompile(`\s[01]-0\(0\.0w, 0\.0, 0\.0\)\s`).MatchString(lines[1]) {
		t.Errorf("broker line lacks an idle timer's 0-0(0.0w, 0.0, 0.0) or 1-0(...): %q", lines[1])
	}
	// Hours since the earliest message (just sent) and the disk ratio.
	if h, err := strconv.ParseFloat(f[len(f)-3], 64); err != nil || h < 0 || h > 1 {
		t.Errorf("#Hour %q: want the few seconds since the first message (%v)", f[len(f)-3], err)
	}
	if s, err := strconv.ParseFloat(f[len(f)-2], 64); err != nil || s <= 0 || s > 1 || len(f[len(f)-2]) != 6 {
		t.Errorf("#SPACE %q: want the disk ratio with 4 decimals (%v)", f[len(f)-2], err)
	}

	out, err = run(t, "clusterList", "-n", ns, "-m")
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(out); len(got) != 1 || strings.Join(got[0], " ") != "DefaultCluster broker-a 0 0 3 0" {
		t.Fatalf("clusterList -m:\n%s\nwant DefaultCluster broker-a 0 0 3 0 (3 messages put today)", out)
	}
	out, err = run(t, "clusterList", "-n", ns, "-c", "OtherCluster")
	if err != nil || len(rows(out)) != 0 {
		t.Fatalf("clusterList -c OtherCluster: want the header alone:\n%s(%v)", out, err)
	}
	out, err = run(t, "clusterList", "-n", ns, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.ClusterAddrTable["DefaultCluster"]) != 1 {
		t.Fatalf("clusterList --json: %q (%v)", out, err)
	}
}

// clusterList formats each broker's runtime info as mqadmin does (the
// first of the rates, the queues, the timer, hours and disk ratio), by
// broker id, and prints a broker it cannot read with its columns empty.
func TestClusterListFormatsRuntimeInfo(t *testing.T) {
	earliest := time.Now().Add(-90 * time.Minute).UnixMilli()
	table := `{"table":{"brokerVersionDesc":"V5_3_3","putTps":"12.5 10.0 9.0","getTransferredTps":"3.25 1.0 1.0",` +
		`"sendThreadPoolQueueSize":"7","sendThreadPoolQueueHeadWaitTimeMills":"2","pullThreadPoolQueueSize":"1",` +
		`"pullThreadPoolQueueHeadWaitTimeMills":"4","ackThreadPoolQueueSize":"5","ackThreadPoolQueueHeadWaitTimeMills":"6",` +
		`"timerReadBehind":"8","timerOffsetBehind":"9","timerCongestNum":"25000","timerEnqueueTps":"1.5","timerDequeueTps":"2.5",` +
		`"pageCacheLockTimeMills":"3","earliestMessageTimeStamp":"` + strconv.FormatInt(earliest, 10) + `",` +
		`"commitLogDiskRatio":"0.123456","brokerActive":"false",` +
		`"msgPutTotalYesterdayMorning":"10","msgPutTotalTodayMorning":"30","msgPutTotalTodayNow":"35",` +
		`"msgGetTotalYesterdayMorning":"1","msgGetTotalTodayMorning":"2","msgGetTotalTodayNow":"6"}}`
	master, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{remoting.GetBrokerRuntimeInfo: withBody(table)})
	dead := deadAddr(t)
	info := `{"brokerAddrTable":{"bk":{"brokerAddrs":{1:"` + dead + `",0:"` + master + `"},"brokerName":"bk","cluster":"C1"}},` +
		`"clusterAddrTable":{"C1":["bk"]}}`
	ns, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{remoting.GetBrokerClusterInfo: withBody(info)})
	out, err := run(t, "clusterList", "-n", ns, "--timeout", "3s")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("clusterList:\n%s", out)
	}
	want := []string{"C1", "bk", "0", master, "V5_3_3", "12.50(7,2ms)", "3.25(1,4ms|5,6ms)", "8-9(2.5w,", "1.5,", "2.5)", "3", "1.50", "0.1235", "false"}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("master line %q\nwant fields %q", lines[1], want)
	}
	// The slave cannot be reached: its line has no version nor queues.
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "C1 bk 1 "+dead+" 0.00(,ms) 0.00(,ms|,ms) 0-0(0.0w, 0.0, 0.0) 0.00 0.0000 false" {
		t.Fatalf("unreachable slave's line %q", lines[2])
	}
	out, err = run(t, "clusterList", "-n", ns, "-m", "--timeout", "3s")
	if err != nil {
		t.Fatal(err)
	}
	if r := rows(out); len(r) != 2 || strings.Join(r[0], " ") != "C1 bk 20 1 5 4" || strings.Join(r[1], " ") != "C1 bk 0 0 0 0" {
		t.Fatalf("clusterList -m:\n%s", out)
	}
}
