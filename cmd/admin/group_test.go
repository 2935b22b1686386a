package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// groupOf reads a group's config from the broker; ok is false when the
// broker does not know the group.
func groupOf(t *testing.T, c *remoting.Client, group string) (meta.SubscriptionGroupConfig, bool) {
	t.Helper()
	return configOf[meta.SubscriptionGroupConfig](t, c, remoting.GetSubscriptionGroupConfig, map[string]string{"group": group}, remoting.SubscriptionGroupNotExist)
}

// updateSubGroup starts from RocketMQ's defaults with broadcast and
// consume-from-min off, as mqadmin does, applies the settings given as
// text, and replaces the group's config on the -b broker or every master
// of a -c cluster.
func TestUpdateSubGroup(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	out, err := run(t, "updateSubGroup", "-b", b.Addr(), "-g", "GA", "-r", "3", "-s", "false", "-q", "2", "-a", "FALSE", "-w", "0")
	if err != nil || !strings.Contains(out, "create subscription group to "+b.Addr()+" success.") {
		t.Fatalf("updateSubGroup -b: %q %v", out, err)
	}
	gc, ok := groupOf(t, c, "GA")
	if !ok || gc.RetryMaxTimes != 3 || gc.ConsumeEnable || gc.RetryQueueNums != 2 || gc.NotifyConsumerIdsChangedEnable ||
		gc.WhichBrokerWhenConsumeSlowly != 0 || gc.ConsumeBroadcastEnable || gc.ConsumeFromMinEnable || gc.BrokerID != 0 || gc.ConsumeMessageOrderly {
		t.Fatalf("group GA after updateSubGroup -r 3 -s false -q 2 -a FALSE -w 0: %+v (found %v)", gc, ok)
	}
	// Again through the cluster, with other settings: the rest goes back to
	// the defaults, as with mqadmin.
	out, err = run(t, "updateSubGroup", "-c", "DefaultCluster", "-n", ns, "-g", "GA", "-d", "true", "-o", "true", "-i", "1")
	if err != nil || !strings.Contains(out, "create subscription group to "+b.Addr()+" success.") {
		t.Fatalf("updateSubGroup -c: %q %v", out, err)
	}
	if gc, _ := groupOf(t, c, "GA"); !gc.ConsumeBroadcastEnable || !gc.ConsumeMessageOrderly || gc.BrokerID != 1 || gc.RetryMaxTimes != 16 || !gc.ConsumeEnable {
		t.Fatalf("group GA after updateSubGroup -c: %+v", gc)
	}
	// -p gives the group a retry policy of its own, as mqadmin's -p.
	policy := `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":2000,"max":60000,"multiplier":3}}`
	if out, err := run(t, "updateSubGroup", "-b", b.Addr(), "-g", "GA", "-p", policy); err != nil {
		t.Fatalf("updateSubGroup -p: %q %v", out, err)
	}
	gc, _ = groupOf(t, c, "GA")
	if p := gc.GroupRetryPolicy; p == nil || p.Type != "EXPONENTIAL" || p.Exponential == nil || *p.Exponential != (meta.ExponentialRetryPolicy{Initial: 2000, Max: 60000, Multiplier: 3}) {
		t.Fatalf("group GA after updateSubGroup -p %s: retry policy %+v", policy, gc.GroupRetryPolicy)
	}
	for _, bad := range [][]string{{"-q", "two"}, {"-i", "x"}, {"-p", "{type:"}, {"-p", `{"type":"LINEAR"}`}} {
		if _, err := run(t, append([]string{"updateSubGroup", "-b", b.Addr(), "-g", "GB"}, bad...)...); err == nil || !strings.Contains(err.Error(), bad[1]) {
			t.Errorf("updateSubGroup %v: %v, want an error naming the value", bad, err)
		}
	}
	if _, err := run(t, "updateSubGroup", "-c", "NoSuchCluster", "-n", ns, "-g", "GB"); err == nil || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Errorf("updateSubGroup of an unknown cluster: %v", err)
	}
	if _, ok := groupOf(t, c, "GB"); ok {
		t.Error("a refused updateSubGroup created the group")
	}
}

// deleteSubGroup deletes the group (its offsets with -r true); with -c it
// also deletes the group's retry and DLQ topics.
func TestDeleteSubGroup(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	c := client(t, b.Addr())
	commitOffset := func(group string) {
		request(t, c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": "DT", "queueId": "0", "commitOffset": "1"}, nil)
	}
	// hasOffset reports whether the committed offset 1 is there (with none,
	// a queue without messages answers offset 0, as RocketMQ's does).
	hasOffset := func(group string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": "DT", "queueId": "0"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Code == remoting.Success && resp.ExtFields["offset"] == "1"
	}
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "DT", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"GK", "GD"} {
		if _, err := run(t, "updateSubGroup", "-b", b.Addr(), "-g", g); err != nil {
			t.Fatal(err)
		}
		commitOffset(g)
	}
	out, err := run(t, "deleteSubGroup", "-b", b.Addr(), "-g", "GK")
	if err != nil || !strings.Contains(out, "delete subscription group [GK] from broker ["+b.Addr()+"] success.") {
		t.Fatalf("deleteSubGroup: %q %v", out, err)
	}
	if _, ok := groupOf(t, c, "GK"); ok || !hasOffset("GK") {
		t.Fatalf("after deleteSubGroup without -r: group kept %v, offset kept %v; want the group gone and its offset kept", ok, hasOffset("GK"))
	}

	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", meta.RetryTopic("GD"), "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "deleteSubGroup", "-c", "DefaultCluster", "-n", ns, "-g", "GD", "-r", "true"); err != nil {
		t.Fatal(err)
	}
	if _, ok := groupOf(t, c, "GD"); ok || hasOffset("GD") {
		t.Fatalf("after deleteSubGroup -r true: group kept %v, offset kept %v; want both gone", ok, hasOffset("GD"))
	}
	// The broker no longer has the retry topic (the name server was told
	// too, but a registration of the broker may still be on its way).
	if out, err := run(t, "topicStatus", "-b", b.Addr(), "-t", meta.RetryTopic("GD")); err == nil {
		t.Fatalf("the retry topic of the deleted group is still on the broker:\n%s", out)
	}
	if _, err := run(t, "topicStatus", "-b", b.Addr(), "-t", "DT"); err != nil {
		t.Fatalf("topic DT: %v", err)
	}
}

// groupForbidden forbids, shows and allows a group's reads of a topic,
// on one broker or a cluster's masters.
func TestGroupForbidden(t *testing.T) {
	ns, b := startClusterWith(t, nil)
	out, err := run(t, "groupForbidden", "-b", b.Addr(), "-g", "GF", "-t", "FT")
	if err != nil || out != "group [GF] may read topic [FT] on broker ["+b.Addr()+"]\n" {
		t.Fatalf("groupForbidden before any change: %q %v", out, err)
	}
	// The cluster's masters come from the name server once the broker
	// registered: a topic's route says it did.
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "FT", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "FT")
	out, err = run(t, "groupForbidden", "-c", "DefaultCluster", "-n", ns, "-g", "GF", "-t", "FT", "-r", "FALSE")
	if err != nil || out != "group [GF] is forbidden to read topic [FT] on broker ["+b.Addr()+"]\n" {
		t.Fatalf("groupForbidden -r false: %q %v", out, err)
	}
	if out, err := run(t, "groupForbidden", "-b", b.Addr(), "-g", "GF", "-t", "FT"); err != nil || !strings.Contains(out, "is forbidden to read") {
		t.Fatalf("groupForbidden after forbidding: %q %v", out, err)
	}
	if _, err := run(t, "groupForbidden", "-b", b.Addr(), "-g", "GF", "-t", "FT", "-r", "maybe"); err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("groupForbidden -r maybe: %v, want an error naming the value", err)
	}
	if out, err := run(t, "groupForbidden", "-b", b.Addr(), "-g", "GF", "-t", "FT", "-r", "true"); err != nil || !strings.Contains(out, "may read") {
		t.Fatalf("groupForbidden -r true: %q %v", out, err)
	}
}
