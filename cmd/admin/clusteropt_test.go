package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// mqadmin's -c on brokerStatus, cleanExpiredCQ, cleanUnusedTopic,
// deleteExpiredCommitLog, setCommitLogReadAheadMode and haStatus: without
// -b, every broker of the cluster (every master for haStatus), -b winning
// when both are given; the clean-ups without either ask every cluster.
func TestClusterVariantsOfBrokerCommands(t *testing.T) {
	ns, a, b := startTwoMasters(t)
	out := out0(t, "brokerStatus", "-n", ns, "-c", "DefaultCluster")
	for _, addr := range []string{a, b} {
		if !strings.Contains(out, addr+strings.Repeat(" ", 24-len(addr))+" brokerVersionDesc") {
			t.Errorf("brokerStatus -c lacks %s's lines:\n%s", addr, out)
		}
	}
	if out := out0(t, "brokerStatus", "-n", ns, "-c", "DefaultCluster", "-b", a); strings.Contains(out, b) || strings.HasPrefix(out, a) {
		t.Errorf("brokerStatus -b -c: -b wins, its lines unprefixed:\n%s", out)
	}
	for _, action := range []string{"cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"} {
		for _, args := range [][]string{{"-c", "DefaultCluster"}, {"--cluster", "DefaultCluster"}, nil} {
			out := out0(t, append([]string{action, "-n", ns}, args...)...)
			if !strings.Contains(out, "success: "+a+" ") || !strings.Contains(out, "success: "+b+" ") {
				t.Errorf("%s %v: not both brokers:\n%s", action, args, out)
			}
		}
		if out := out0(t, action, "-n", ns, "-c", "DefaultCluster", "-b", a); strings.Contains(out, b) {
			t.Errorf("%s -b -c: -b wins:\n%s", action, out)
		}
		if _, err := run(t, action, "-n", ns, "-c", "OtherCluster"); err == nil || !strings.Contains(err.Error(), "OtherCluster") {
			t.Errorf("%s -c OtherCluster: %v", action, err)
		}
	}
	out = out0(t, "setCommitLogReadAheadMode", "-n", ns, "-c", "DefaultCluster", "-m", "1")
	for _, addr := range []string{a, b} {
		if !strings.Contains(out, "============Master: "+addr+"============\n"+addr+": set commitlog readahead mode success, mode: 1\n") {
			t.Errorf("setCommitLogReadAheadMode -c lacks %s:\n%s", addr, out)
		}
	}
	out = out0(t, "haStatus", "-n", ns, "-c", "DefaultCluster")
	for _, addr := range []string{a, b} {
		if fields := strings.Fields(out); !strings.Contains(strings.Join(fields, " "), "#MasterAddr "+addr+" ") {
			t.Errorf("haStatus -c lacks %s:\n%s", addr, out)
		}
	}
}

// haStatus -i prints again every -i seconds until interrupted.
func TestHAStatusInterval(t *testing.T) {
	_, br := startCluster(t)
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs([]string{"haStatus", "-b", br, "-i", "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "#MasterAddr"); n < 2 {
		t.Fatalf("haStatus -i 1 for 2.5 s printed %d times, want it again each second:\n%s", n, out.String())
	}
	if _, err := run(t, "haStatus", "-b", br, "-i", "0"); err == nil {
		t.Fatal("haStatus -i 0 accepted")
	}
}

// topicRoute -l prints mqadmin's list format; topicStatus -c asks the
// brokers of the cluster's route (the way to an LMQ's queues, which have
// no route of their own).
func TestTopicRouteListAndTopicStatusByCluster(t *testing.T) {
	ns, a, b := startTwoMasters(t)
	out0(t, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "RL", "-r", "2", "-w", "3")
	waitRoute(t, ns, "RL")
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for {
		out = out0(t, "topicRoute", "-n", ns, "-t", "RL", "-l")
		if strings.Contains(out, "broker-b") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := fmt.Sprintf(routeListFormat, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm") +
		fmt.Sprintf(routeListFormat, "DefaultCluster", "broker-a", "{0="+a+"}", "2", "3", "6") +
		fmt.Sprintf(routeListFormat, "DefaultCluster", "broker-b", "{0="+b+"}", "2", "3", "6") +
		strings.Repeat("-", 158) + "\n" +
		fmt.Sprintf(routeListFormat, "Total:", "2", "", "4", "6", "")
	if out != want {
		t.Fatalf("topicRoute -l:\n%s\nwant\n%s", out, want)
	}

	out = out0(t, "topicStatus", "-n", ns, "-t", "RL", "-c", "DefaultCluster")
	if strings.Count(out, "broker-a") != 3 || strings.Count(out, "broker-b") != 3 {
		t.Fatalf("topicStatus -c: not every queue of both groups:\n%s", out)
	}
	if _, err := run(t, "topicStatus", "-n", ns, "-t", "RL", "-c", "OtherCluster"); err == nil || !strings.Contains(err.Error(), "OtherCluster") {
		t.Fatalf("topicStatus -c OtherCluster: %v", err)
	}
}

// topicList -c prints mqadmin's cluster model: a row per topic and
// consumer group with the topic's cluster, an empty group for a topic
// nobody consumes, the %RETRY% and %DLQ% topics left out.
func TestTopicListClusterModel(t *testing.T) {
	ns, br := startCluster(t)
	out0(t, "updateTopic", "-b", br, "-t", "TL", "-r", "2", "-w", "2")
	out0(t, "updateTopic", "-b", br, "-t", "TLIdle", "-r", "1", "-w", "1")
	out0(t, "updateTopic", "-b", br, "-t", "%RETRY%TLG", "-r", "1", "-w", "1")
	c := client(t, br)
	for _, group := range []string{"TLG", "TLG2"} {
		request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+group+`","consumeEnable":true}`))
		request(t, c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": "TL", "queueId": "0", "commitOffset": "0"}, nil)
	}
	waitRoute(t, ns, "TL")
	waitRoute(t, ns, "TLIdle")
	waitRoute(t, ns, "%RETRY%TLG")
	out := out0(t, "topicList", "-n", ns, "-c")
	row := func(topic, group string) string {
		return fmt.Sprintf("%-20s  %-64s  %-64s\n", "DefaultCluster", topic, group)
	}
	for _, want := range []string{
		fmt.Sprintf("%-20s  %-48s  %-48s\n", "#Cluster Name", "#Topic", "#Consumer Group"),
		row("TL", "TLG") + row("TL", "TLG2") + row("TLIdle", ""),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("topicList -c lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "%RETRY%") {
		t.Errorf("topicList -c lists a %%RETRY%% topic:\n%s", out)
	}
	if out := out0(t, "topicList", "-n", ns); !strings.Contains(out, "%RETRY%TLG\n") {
		t.Errorf("topicList without -c lacks the %%RETRY%% topic:\n%s", out)
	}
}

// exportPopRecord -d reads its value as mqadmin's ExportPopRecordCommand:
// "false" is the dry run, which names the broker and sends nothing; any
// other value (or none) sends POP_ROLLBACK.
func TestExportPopRecordDryRun(t *testing.T) {
	addr, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerConfig: withBody("brokerName=broker-x\n"),
	})
	if out := out0(t, "exportPopRecord", "-b", addr, "-d", "false"); out != "Export broker records, brokerName=broker-x, brokerAddr="+addr+", dryRun=true\n" {
		t.Fatalf("exportPopRecord -d false: %q", out)
	}
	if n := log.count(remoting.PopRollback); n != 0 {
		t.Fatalf("the dry run sent %d POP_ROLLBACK", n)
	}
	for i, args := range [][]string{{"-d", "true"}, nil} {
		if out := out0(t, append([]string{"exportPopRecord", "-b", addr}, args...)...); !strings.Contains(out, "success: "+addr) {
			t.Fatalf("exportPopRecord %v: %q", args, out)
		}
		if n := log.count(remoting.PopRollback); n != i+1 {
			t.Fatalf("exportPopRecord %v: %d POP_ROLLBACK in all, want %d", args, n, i+1)
		}
	}
}
