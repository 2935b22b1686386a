package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// updateTopicPerm changes a topic's permission on a master (-b) or every
// master of a cluster (-c), and the route follows.
func TestUpdateTopicPerm(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "PT", "-r", "3", "-w", "3"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "PT")
	waitPerm := func(perm string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := run(t, "topicRoute", "-n", ns, "-t", "PT")
			if err == nil && strings.Contains(out, `"perm":`+perm+`,`) && strings.Contains(out, `"readQueueNums":3`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("route of PT never had perm %s: %s %v", perm, out, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	out, err := run(t, "updateTopicPerm", "-n", ns, "-b", br, "-t", "PT", "-p", "4")
	if err != nil || !strings.Contains(out, "update topic perm from 6 to 4 in "+br+" success.\n") ||
		!strings.Contains(out, "TopicConfig [topicName=PT, readQueueNums=3, writeQueueNums=3, perm=R--,") {
		t.Fatalf("updateTopicPerm -b: %q %v", out, err)
	}
	waitPerm("4")
	if out, err := run(t, "updateTopicPerm", "-n", ns, "-b", br, "-t", "PT", "-p", "4"); err != nil || out != "new perm equals to the old one!\n" {
		t.Fatalf("updateTopicPerm to the same perm: %q %v", out, err)
	}
	out, err = run(t, "updateTopicPerm", "-n", ns, "-c", "DefaultCluster", "-t", "PT", "-p", "6")
	if err != nil || out != "update topic perm from 4 to 6 in "+br+" success.\n" {
		t.Fatalf("updateTopicPerm -c: %q %v", out, err)
	}
	waitPerm("6")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "PT", "-p", "4"}, "-b"},
		{[]string{"-b", br, "-t", "PT", "-p", "9"}, "-p 9"},
		{[]string{"-b", "127.0.0.1:1", "-t", "PT", "-p", "4"}, "-b 127.0.0.1:1"},
		{[]string{"-c", "OtherCluster", "-t", "PT", "-p", "4"}, "-c OtherCluster"},
		{[]string{"-b", br, "-t", "NoSuchTopic", "-p", "4"}, "route of NoSuchTopic"},
		{[]string{"-b", br, "-t", "PT"}, "perm"},
	} {
		args := append([]string{"updateTopicPerm", "-n", ns}, c.args...)
		if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q %v, want an error naming %q", strings.Join(args, " "), out, err, c.want)
		}
	}
}

// updateTopicPerm sends the UPDATE_AND_CREATE_TOPIC mqadmin sends: the
// route's queue counts and system flag, the new perm, order false and no
// attribute modifications.
func TestUpdateTopicPermRequest(t *testing.T) {
	addr, log := fakeBroker(t, nil)
	ns := fakeNamesrv(t, fakeRoute(addr, "bk", `{"brokerName":"bk","perm":6,"readQueueNums":5,"topicSysFlag":1,"writeQueueNums":3}`))
	if out, err := run(t, "updateTopicPerm", "-n", ns, "-b", addr, "-t", "T", "-p", "2"); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	want := map[string]string{"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "5", "writeQueueNums": "3", "perm": "2",
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "1", "order": "false", "attributes": ""}
	got := log.last(remoting.UpdateAndCreateTopic)
	for k, v := range want {
		if w, ok := got[k]; !ok || w != v {
			t.Errorf("UPDATE_AND_CREATE_TOPIC %s=%q, want %q (header %v)", k, got[k], v, got)
		}
	}
}
