package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// consumerProgress without -g lists every group that has a retry topic:
// its online clients, lowest version, type, model, TPS and total diff, or
// OFFLINE.
func TestConsumerProgressAllGroups(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "AllG", "-r", "2", "-w", "2"); err != nil {
		t.Fatal(err)
	}
	c := client(t, br)
	for range 3 {
		send(t, c, "AllG", 0)
	}
	waitIndexed(t, c, "AllG", 0, 3)
	for _, grp := range []string{"Online", "Gone"} {
		request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+grp+`","consumeEnable":true}`))
		request(t, c, remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": grp, "topic": "AllG", "queueId": "0", "commitOffset": "1",
		}, nil)
	}
	heartbeat := func(id, grp, ctype string) *remoting.Client {
		hc := client(t, br)
		request(t, hc, remoting.HeartBeat, nil, []byte(`{"clientID":"`+id+`","producerDataSet":[],"consumerDataSet":[`+
			`{"groupName":"`+grp+`","consumeType":"`+ctype+`","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
			`"subscriptionDataSet":[{"topic":"AllG","subString":"*","expressionType":"TAG"}]}]}`))
		return hc
	}
	heartbeat("10.0.0.1@1", "Online", "CONSUME_PASSIVELY")
	heartbeat("10.0.0.2@2", "Online", "CONSUME_PASSIVELY")
	gone := heartbeat("10.0.0.3@3", "Gone", "CONSUME_ACTIVELY")
	waitRoute(t, ns, "%RETRY%Online")
	waitRoute(t, ns, "%RETRY%Gone")
	_ = gone.Close()
	// The broker drops a closed connection's consumer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := run(t, "consumerConnection", "-b", br, "-g", "Gone")
		if err != nil && strings.Contains(err.Error(), "code 206") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group Gone still online: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	out, err := run(t, "consumerProgress", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "#Group") || !strings.Contains(out, "#Diff Total") {
		t.Fatalf("header:\n%s", out)
	}
	version := remoting.VersionName(int(remoting.CurrentVersion))
	want := map[string]string{
		"Online": "Online 2 " + version + " PUSH CLUSTERING 0 2",
		"Gone":   "Gone 0 OFFLINE 0 2",
	}
	for _, r := range rows(out) {
		if w, ok := want[r[0]]; ok {
			if got := strings.Join(r, " "); got != w {
				t.Errorf("line %q, want %q", got, w)
			}
			delete(want, r[0])
		}
	}
	if len(want) != 0 {
		t.Errorf("groups missing: %v\n%s", want, out)
	}
	if _, err := run(t, "consumerProgress", "-n", ns, "-t", "AllG"); err == nil || !strings.Contains(err.Error(), "needs -g") {
		t.Errorf("-t without -g: %v", err)
	}
}

// mqadmin consumerProgress without -g prints at most the first 64
// characters of a group's name (UtilAll.frontStringAtLeast), so the
// columns after it stay where its header puts them.
func TestConsumerProgressAllGroupsCutsLongNames(t *testing.T) {
	long := strings.Repeat("G", 70)
	ns, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetAllTopicListFromNameServer: withBody(`{"topicList":["%RETRY%` + long + `"]}`),
		remoting.GetRouteInfoByTopic: func(req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.TopicNotExist, "no route")
		},
	})
	out, err := run(t, "consumerProgress", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	r := rows(out)
	if len(r) != 1 || strings.Join(r[0], " ") != long[:64]+" 0 OFFLINE 0 0" {
		t.Fatalf("consumerProgress of a group of 70 characters:\n%s\nwant its first 64, 0 OFFLINE 0 0", out)
	}
}
