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
