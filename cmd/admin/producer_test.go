package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

func TestProducer(t *testing.T) {
	_, br := startCluster(t)
	out, err := run(t, "producer", "-b", br)
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Split(strings.TrimSpace(out), "\n"); len(rows) != 1 || !strings.HasPrefix(rows[0], "GROUP") {
		t.Fatalf("no producers: want the header alone, got\n%s", out)
	}

	p1, p2 := client(t, br), client(t, br)
	request(t, p1, remoting.HeartBeat, nil, []byte(`{"clientID":"10.1.2.3@9","producerDataSet":[{"groupName":"PG"}],"consumerDataSet":[]}`))
	request(t, p2, remoting.HeartBeat, nil, []byte(`{"clientID":"10.1.2.4@7","producerDataSet":[{"groupName":"PG"},{"groupName":"Other"}],"consumerDataSet":[]}`))
	out, err = run(t, "producer", "-b", br)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) != 6 || !strings.HasPrefix(f[5], "20") {
			t.Errorf("row %q: want 6 columns ending with the heartbeat time", l)
			continue
		}
		rows = append(rows, strings.Join(f[:5], " "))
	}
	version := strconv.Itoa(int(remoting.CurrentVersion))
	want := []string{
		"Other 10.1.2.4@7 /" + p2.LocalAddr().String() + " GO " + version,
		"PG 10.1.2.3@9 /" + p1.LocalAddr().String() + " GO " + version,
		"PG 10.1.2.4@7 /" + p2.LocalAddr().String() + " GO " + version,
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("producer rows\n got %q\nwant %q\noutput:\n%s", rows, want, out)
	}
}

// producerConnection lists a producer group's live clients as a broker of
// the topic's route knows them, in mqadmin's columns.
func TestProducerConnection(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "PCT"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "PCT")
	p1, p2 := client(t, br), client(t, br)
	request(t, p1, remoting.HeartBeat, nil, []byte(`{"clientID":"10.1.2.3@9","producerDataSet":[{"groupName":"PCG"}],"consumerDataSet":[]}`))
	request(t, p2, remoting.HeartBeat, nil, []byte(`{"clientID":"10.1.2.4@7","producerDataSet":[{"groupName":"PCG"}],"consumerDataSet":[]}`))
	out, err := run(t, "producerConnection", "-n", ns, "-g", "PCG", "-t", "PCT")
	if err != nil {
		t.Fatal(err)
	}
	version := remoting.VersionName(int(remoting.CurrentVersion))
	want := [][]string{
		{"0001", "10.1.2.3@9", p1.LocalAddr().String(), "GO", version},
		{"0002", "10.1.2.4@7", p2.LocalAddr().String(), "GO", version},
	}
	if got := rows("\n" + out); !equalRows(got, want) {
		t.Fatalf("producerConnection:\n%s\nwant rows %v", out, want)
	}
	if _, err := run(t, "producerConnection", "-n", ns, "-g", "NoSuchGroup", "-t", "PCT"); err == nil || !strings.Contains(err.Error(), "NoSuchGroup") {
		t.Errorf("a producer group nobody runs: %v", err)
	}
	if _, err := run(t, "producerConnection", "-n", ns, "-g", "PCG"); err == nil || !strings.Contains(err.Error(), "topic") {
		t.Errorf("no -t: %v", err)
	}
}

// producerConnection sends GET_PRODUCER_CONNECTION_LIST with mqadmin's
// producerGroup, and an empty answer is an error as mqadmin's.
func TestProducerConnectionRequest(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetProducerConnectionList: withBody(`{"connectionSet":[]}`),
	})
	ns := fakeNamesrv(t, fakeRoute(addr, "bk", `{"brokerName":"bk","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}`))
	if _, err := run(t, "producerConnection", "-n", ns, "-g", "PG", "-t", "T"); err == nil || !strings.Contains(err.Error(), "not found the producer group connection") {
		t.Errorf("no client online: %v", err)
	}
	if got := log.last(remoting.GetProducerConnectionList); len(got) != 1 || got["producerGroup"] != "PG" {
		t.Errorf("GET_PRODUCER_CONNECTION_LIST header %v, want producerGroup=PG", got)
	}
}
