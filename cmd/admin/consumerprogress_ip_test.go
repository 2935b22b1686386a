package main

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// consumerProgress -s true adds the IP of the client each queue is
// allocated to, from the online clients' running info (N/A for a queue no
// client holds); -s false, as mqadmin's, does not.
func TestConsumerProgressShowClientIP(t *testing.T) {
	ns, br := startCluster(t)
	out0(t, "updateTopic", "-b", br, "-t", "IpT", "-r", "2", "-w", "2")
	c := client(t, br)
	request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"IpG","consumeEnable":true}`))
	for _, q := range []string{"0", "1"} {
		request(t, c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "IpG", "topic": "IpT", "queueId": q, "commitOffset": "0"}, nil)
	}
	fakeConsumer(t, ns, br, "IpG", "10.0.0.7@ip", "IpT", "CONSUME_PASSIVELY", `{{"brokerName":"broker-a","queueId":1,"topic":"IpT"}:{"commitOffset":0}}`)

	out := out0(t, "consumerProgress", "-n", ns, "-g", "IpG", "-t", "IpT", "-s", "true")
	want := [][]string{
		{"TOPIC", "BROKER", "QUEUE", "BROKER", "OFFSET", "CONSUMER", "OFFSET", "CLIENT", "IP", "DIFF", "LAST", "TIME"},
		{"IpT", "broker-a", "0", "0", "0", "N/A", "0", "-"},
		{"IpT", "broker-a", "1", "0", "0", "10.0.0.7", "0", "-"},
		{"total", "diff:", "0"},
	}
	var got [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.Fields(l))
	}
	if !equalRows(got, want) {
		t.Fatalf("consumerProgress -s true:\n%s", out)
	}
	if out := out0(t, "consumerProgress", "-n", ns, "-g", "IpG", "-t", "IpT", "-s", "false"); strings.Contains(out, "CLIENT IP") {
		t.Fatalf("consumerProgress -s false:\n%s", out)
	}
}

// consumerProgress -c: an LMQ, which has no route, is asked of the brokers
// of the cluster's route; -c does not change the route of another topic.
func TestConsumerProgressClusterForLMQ(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	c := client(t, br)
	request(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"LmqG","consumeEnable":true}`))
	if _, err := run(t, "consumerProgress", "-n", ns, "-g", "LmqG", "-t", "%LMQ%q1"); err == nil || !strings.Contains(err.Error(), "route of %LMQ%q1") {
		t.Fatalf("an LMQ without -c: %v", err)
	}
	out, err := run(t, "consumerProgress", "-n", ns, "-g", "LmqG", "-t", "%LMQ%q1", "-c", "DefaultCluster")
	if err != nil || !strings.Contains(out, "total diff: 0") {
		t.Fatalf("an LMQ with -c (asked of the cluster's brokers): %q %v", out, err)
	}
	if _, err := run(t, "consumerProgress", "-n", ns, "-g", "LmqG", "-t", "NoSuchTopic", "-c", "DefaultCluster"); err == nil || !strings.Contains(err.Error(), "route of NoSuchTopic") {
		t.Fatalf("-c on a plain topic: %v", err)
	}
}
