package main

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// topicClusterList names the clusters of a topic's broker groups, and
// getConsumerConfig prints a group's config on every broker group that
// has it.
func TestTopicClusterListAndGetConsumerConfig(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "TCT"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "TCT")
	if out, err := run(t, "topicClusterList", "-n", ns, "-t", "TCT"); err != nil || out != "DefaultCluster\n" {
		t.Fatalf("topicClusterList: %q %v", out, err)
	}
	if _, err := run(t, "topicClusterList", "-n", ns, "-t", "NoSuchTopic"); err == nil || !strings.Contains(err.Error(), "route of NoSuchTopic") {
		t.Errorf("topicClusterList of an unknown topic: %v", err)
	}

	if _, err := run(t, "updateSubGroup", "-b", br, "-g", "CfgG", "-r", "5", "-o", "true"); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "getConsumerConfig", "-n", ns, "-g", "CfgG")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 16 || lines[0] != "=============================DefaultCluster:broker-a=============================" {
		t.Fatalf("getConsumerConfig: want the banner and 15 fields:\n%s", out)
	}
	for _, want := range []string{
		"groupName                               =  CfgG",
		"consumeMessageOrderly                   =  true",
		"retryMaxTimes                           =  5",
		"groupRetryPolicy                        =  GroupRetryPolicy{type=CUSTOMIZED, exponentialRetryPolicy=null, customizedRetryPolicy=null}",
		"attributes                              =  {}",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("getConsumerConfig lacks %q:\n%s", want, out)
		}
	}
	if out, err := run(t, "getConsumerConfig", "-n", ns, "-g", "NoSuchGroup"); err != nil || out != "" {
		t.Errorf("getConsumerConfig of a group no broker has: %q %v, want nothing", out, err)
	}
	if _, err := run(t, "getConsumerConfig", "-n", ns); err == nil || !strings.Contains(err.Error(), "groupName") {
		t.Errorf("getConsumerConfig without -g: %v", err)
	}
}

// getConsumerConfig reads every group of a broker as mqadmin does
// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), through a Java name server's
// cluster info, and a slave stands in for a group without a master.
func TestGetConsumerConfigRequest(t *testing.T) {
	table := `{"subscriptionGroupTable":{"G":{"groupName":"G","consumeEnable":true,"retryMaxTimes":16,` +
		`"groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":2}},` +
		`"subscriptionDataSet":[{"topic":"T","expressionType":"TAG","expression":"*","version":0}],"attributes":{"k":"v"}}},"dataVersion":{"counter":1,"timestamp":1}}`
	slave, log := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetAllSubscriptionGroupConfig: withBody(table),
	})
	info := `{"brokerAddrTable":{"bk":{"brokerAddrs":{1:"` + slave + `"},"brokerName":"bk","cluster":"C1"}},"clusterAddrTable":{"C1":["bk"]}}`
	ns, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: withBody(info),
	})
	out, err := run(t, "getConsumerConfig", "-n", ns, "-g", "G")
	if err != nil {
		t.Fatal(err)
	}
	if log.last(remoting.GetAllSubscriptionGroupConfig) == nil {
		t.Fatal("the slave was not asked for its subscription groups")
	}
	for _, want := range []string{
		"=============================C1:bk=============================\n",
		"groupRetryPolicy                        =  GroupRetryPolicy{type=EXPONENTIAL, exponentialRetryPolicy=ExponentialRetryPolicy{initial=1000, max=60000, multiplier=2}, customizedRetryPolicy=null}\n",
		"subscriptionDataSet                     =  [SimpleSubscriptionData{topic=T, expressionType=TAG, expression=*, version=0}]\n",
		"attributes                              =  {k=v}\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("getConsumerConfig lacks %q:\n%s", want, out)
		}
	}
}

// getConsumerConfig prints the broker groups that answer when another
// fails, and names the one that failed in its error.
func TestGetConsumerConfigBrokerGroupFails(t *testing.T) {
	good, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetAllSubscriptionGroupConfig: withBody(`{"subscriptionGroupTable":{"G":{"groupName":"G"}}}`),
	})
	bad, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetAllSubscriptionGroupConfig: func(req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.SystemError, "disk broken")
		},
	})
	info := `{"brokerAddrTable":{"a":{"brokerAddrs":{0:"` + bad + `"},"brokerName":"a","cluster":"C1"},` +
		`"b":{"brokerAddrs":{0:"` + good + `"},"brokerName":"b","cluster":"C1"}},"clusterAddrTable":{"C1":["a","b"]}}`
	ns, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: withBody(info),
	})
	out, err := run(t, "getConsumerConfig", "-n", ns, "-g", "G")
	if err == nil || !strings.Contains(err.Error(), "subscription groups of a") || !strings.Contains(err.Error(), "disk broken") {
		t.Errorf("getConsumerConfig with broker group a failing: %v, want an error naming a", err)
	}
	if !strings.Contains(out, "=============================C1:b=============================\n") {
		t.Errorf("getConsumerConfig left out broker group b, which answered:\n%s", out)
	}
}
