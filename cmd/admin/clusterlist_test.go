package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

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
	for _, part := range []string{"(0,0ms)", "(0,0ms|N,Nms)", "0-0(0.0w, 0.0, 0.0)"} {
		if !strings.Contains(lines[1], part) {
			t.Errorf("broker line lacks %q: %q", part, lines[1])
		}
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
