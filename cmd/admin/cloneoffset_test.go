package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

func TestCloneGroupOffset(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "CL", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	c := client(t, br)
	commit := func(group string, q int, off int64) {
		request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+group+`"}`))
		request(t, c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": "CL",
			"queueId": strconv.Itoa(q), "commitOffset": strconv.FormatInt(off, 10)}, nil)
	}
	// offsets reads a group's committed offsets of CL's two queues, "-"
	// for none.
	offsets := func(group string) string {
		var out []string
		for q := range 2 {
			ext := map[string]string{"consumerGroup": group, "topic": "CL", "queueId": strconv.Itoa(q), "setZeroIfNotFound": "false"}
			resp, err := c.Invoke(t.Context(), remoting.NewRequest(remoting.QueryConsumerOffset, ext, nil))
			switch {
			case err != nil:
				t.Fatal(err)
			case resp.Code == remoting.QueryNotFound:
				out = append(out, "-")
			case resp.Code != remoting.Success:
				t.Fatalf("query offset of %s on CL/%d: %d %s", group, q, resp.Code, resp.Remark)
			default:
				out = append(out, resp.ExtFields["offset"])
			}
		}
		return strings.Join(out, " ")
	}
	commit("src", 0, 5)
	commit("src", 1, 7)
	commit("dst", 0, 1)
	waitRoute(t, ns, "CL")

	out, err := run(t, "cloneGroupOffset", "-n", ns, "-s", "src", "-d", "dst", "-t", "CL")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(lines[0], br) || !strings.Contains(lines[0], "cloned") {
		t.Errorf("output, one line per broker:\n%s", out)
	}
	if got := offsets("dst"); got != "5 7" {
		t.Errorf("dst on CL after the clone: %s, want 5 7", got)
	}

	// One broker named with -b, offline given as mqadmin's flag.
	if out, err := run(t, "cloneGroupOffset", "-b", br, "-s", "src", "-d", "other", "-t", "CL", "-o", "true"); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("clone through -b: %v\n%s", err, out)
	}
	if got := offsets("other"); got != "5 7" {
		t.Errorf("other on CL after the clone through -b: %s, want 5 7", got)
	}

	if _, err := run(t, "cloneGroupOffset", "-n", ns, "-s", "src", "-d", "dst", "-t", "NoSuchTopic"); err == nil || !strings.Contains(err.Error(), "route of NoSuchTopic") {
		t.Errorf("clone on a topic without a route: %v", err)
	}
	if _, err := run(t, "cloneGroupOffset", "-n", ns, "-s", "src", "-t", "CL"); err == nil || !strings.Contains(err.Error(), "destGroup") {
		t.Errorf("clone without -d: %v", err)
	}
	out, err = run(t, "cloneGroupOffset", "-b", "127.0.0.1:1", "-s", "src", "-d", "dst", "-t", "CL", "--timeout", "2s")
	if err == nil || !strings.Contains(out, "127.0.0.1:1") || !strings.Contains(out, "failed") {
		t.Errorf("clone on a broker that does not answer: %v\n%s", err, out)
	}
}
