package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/remoting"
)

// readExport decodes an exported JSON file.
func readExport(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
}

// exportedConfig is the fields of an exported topic or group config the
// tests look at.
type exportedConfig struct {
	TopicName      string `json:"topicName"`
	GroupName      string `json:"groupName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	RetryQueueNums int    `json:"retryQueueNums"`
	Perm           int    `json:"perm"`
}

// exportedMetadata is the shape of exportMetadata's files.
type exportedMetadata struct {
	TopicConfigTable       map[string]exportedConfig `json:"topicConfigTable"`
	SubscriptionGroupTable map[string]exportedConfig `json:"subscriptionGroupTable"`
	DataVersion            *struct {
		Counter int64 `json:"counter"`
	} `json:"dataVersion"`
	ExportTime int64 `json:"exportTime"`
}

// startTwoMasters starts a name server with two broker groups of
// DefaultCluster, broker-a and broker-b, and waits until the name server
// lists both.
func startTwoMasters(t *testing.T) (ns string, a, b string) {
	t.Helper()
	ns, ba := startClusterWith(t, map[string]string{"brokerName": "broker-a"})
	bb, _ := clustertest.StartBroker(t, ns, map[string]string{"brokerName": "broker-b"})
	waitClusterMember(t, ns, ba.Addr())
	waitClusterMember(t, ns, bb.Addr())
	return ns, ba.Addr(), bb.Addr()
}

// exportMetadata writes mqadmin's files: with -b and -t the broker's user
// topics and its dataVersion (system, %RETRY% and %DLQ% topics left out,
// the latter kept with -s), with -b and -g its user groups (system and
// predefined groups left out), with -c the masters' tables merged, queue
// counts added up, and exportTime; -b alone writes the broker's
// metadata.json. An unknown cluster and a folder that cannot be made are
// errors.
func TestExportMetadata(t *testing.T) {
	ns, a, b := startTwoMasters(t)
	for _, c := range []struct {
		addr, queues, retry string
	}{{a, "4", "1"}, {b, "2", "3"}} {
		for _, args := range [][]string{
			{"updateTopic", "-b", c.addr, "-t", "TA", "-r", c.queues, "-w", c.queues},
			{"updateTopic", "-b", c.addr, "-t", "%RETRY%GA", "-r", "1", "-w", "1"},
			{"updateSubGroup", "-b", c.addr, "-g", "GA", "-q", c.retry},
		} {
			if out, err := run(t, args...); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
	}
	if _, err := run(t, "updateTopic", "-b", b, "-t", "OnlyB", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	out, err := run(t, "exportMetadata", "-b", a, "-t", "-f", dir)
	path := filepath.Join(dir, "topic.json")
	if err != nil || out != "export "+path+" success\n" {
		t.Fatalf("exportMetadata -b -t: %q %v", out, err)
	}
	var md exportedMetadata
	readExport(t, path, &md)
	if len(md.TopicConfigTable) != 1 || md.TopicConfigTable["TA"].ReadQueueNums != 4 || md.TopicConfigTable["TA"].TopicName != "TA" ||
		md.DataVersion == nil || md.DataVersion.Counter == 0 || md.SubscriptionGroupTable != nil {
		t.Fatalf("topic.json of broker-a: %+v", md)
	}
	if _, err := run(t, "exportMetadata", "-b", a, "-t", "-s", "-f", dir); err != nil {
		t.Fatal(err)
	}
	md = exportedMetadata{}
	readExport(t, path, &md)
	if _, ok := md.TopicConfigTable["%RETRY%GA"]; !ok || len(md.TopicConfigTable) != 2 {
		t.Fatalf("topic.json of broker-a with -s: %+v", md.TopicConfigTable)
	}

	if _, err := run(t, "exportMetadata", "-b", b, "-g", "-f", dir); err != nil {
		t.Fatal(err)
	}
	md = exportedMetadata{}
	readExport(t, filepath.Join(dir, "subscriptionGroup.json"), &md)
	if len(md.SubscriptionGroupTable) != 1 || md.SubscriptionGroupTable["GA"].RetryQueueNums != 3 || md.DataVersion == nil {
		t.Fatalf("subscriptionGroup.json of broker-b (its system groups left out): %+v", md)
	}

	before := time.Now().UnixMilli()
	out, err = run(t, "exportMetadata", "-n", ns, "-c", "DefaultCluster", "-f", dir)
	path = filepath.Join(dir, "metadata.json")
	if err != nil || out != "export "+path+" success\n" {
		t.Fatalf("exportMetadata -c: %q %v", out, err)
	}
	md = exportedMetadata{}
	readExport(t, path, &md)
	if ta := md.TopicConfigTable["TA"]; len(md.TopicConfigTable) != 2 || ta.ReadQueueNums != 6 || ta.WriteQueueNums != 6 || ta.Perm != 6 ||
		md.TopicConfigTable["OnlyB"].ReadQueueNums != 1 || len(md.SubscriptionGroupTable) != 1 || md.SubscriptionGroupTable["GA"].RetryQueueNums != 4 ||
		md.ExportTime < before || md.DataVersion != nil {
		t.Fatalf("metadata.json of the cluster: %+v", md)
	}
	if _, err := run(t, "exportMetadata", "-n", ns, "-c", "DefaultCluster", "-g", "-f", dir); err != nil {
		t.Fatal(err)
	}
	md = exportedMetadata{}
	readExport(t, filepath.Join(dir, "subscriptionGroup.json"), &md)
	if md.TopicConfigTable != nil || md.SubscriptionGroupTable["GA"].RetryQueueNums != 4 || md.ExportTime < before {
		t.Fatalf("subscriptionGroup.json of the cluster: %+v", md)
	}
	alone := filepath.Join(dir, "alone")
	if _, err := run(t, "exportMetadata", "-b", b, "-f", alone); err != nil {
		t.Fatal(err)
	}
	md = exportedMetadata{}
	readExport(t, filepath.Join(alone, "metadata.json"), &md)
	if len(md.TopicConfigTable) != 2 || md.TopicConfigTable["TA"].ReadQueueNums != 2 || md.SubscriptionGroupTable["GA"].RetryQueueNums != 3 {
		t.Fatalf("metadata.json of broker-b alone: %+v", md)
	}

	if _, err := run(t, "exportMetadata", "-n", ns, "-c", "NoSuchCluster", "-f", dir); err == nil || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Errorf("exportMetadata of an unknown cluster: %v", err)
	}
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "exportMetadata", "-b", a, "-t", "-f", filepath.Join(blocker, "sub")); err == nil || !strings.Contains(err.Error(), "blocker") {
		t.Errorf("exportMetadata into a folder under a file: %v", err)
	}
}

// exportConfigs writes each master's main settings by broker name and the
// cluster's size, namesrvSize counting the name servers of -n.
func TestExportConfigs(t *testing.T) {
	ns, _, _ := startTwoMasters(t)
	dir := t.TempDir()
	out, err := run(t, "exportConfigs", "-n", ns+";"+deadAddr(t), "-c", "DefaultCluster", "-f", dir)
	path := filepath.Join(dir, "configs.json")
	if err != nil || out != "export "+path+" success\n" {
		t.Fatalf("exportConfigs: %q %v", out, err)
	}
	var got struct {
		BrokerConfigs map[string]map[string]string `json:"brokerConfigs"`
		ClusterScale  map[string]int               `json:"clusterScale"`
	}
	readExport(t, path, &got)
	if len(got.BrokerConfigs) != 2 || got.ClusterScale["namesrvSize"] != 2 || got.ClusterScale["masterBrokerSize"] != 2 || got.ClusterScale["slaveBrokerSize"] != 0 {
		t.Fatalf("configs.json: %+v", got)
	}
	for _, name := range []string{"broker-a", "broker-b"} {
		c := got.BrokerConfigs[name]
		if c["brokerName"] != name || c["brokerClusterName"] != "DefaultCluster" || c["brokerId"] != "0" || c["brokerRole"] == "" || c["flushDiskType"] == "" {
			t.Errorf("settings of %s: %v", name, c)
		}
		for k := range c {
			if !strings.Contains(" "+strings.Join(exportedBrokerKeys, " ")+" ", " "+k+" ") {
				t.Errorf("settings of %s hold %s, which mqadmin does not export", name, k)
			}
		}
	}
	if _, err := run(t, "exportConfigs", "-n", ns, "-f", dir); err == nil || !strings.Contains(err.Error(), "clusterName") {
		t.Errorf("exportConfigs without -c: %v", err)
	}
	if _, err := run(t, "exportConfigs", "-n", ns, "-c", "NoSuchCluster", "-f", dir); err == nil || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Errorf("exportConfigs of an unknown cluster: %v", err)
	}
}

// exportMetrics writes, per broker group, what its master reports: the
// day's puts and user topic and group counts among them, the version and
// the languages of its consumers, and the cluster's totals.
func TestExportMetrics(t *testing.T) {
	ns, a, _ := startTwoMasters(t)
	ca := client(t, a)
	if _, err := run(t, "updateTopic", "-b", a, "-t", "TA", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "updateSubGroup", "-b", a, "-g", "GA"); err != nil {
		t.Fatal(err)
	}
	request(t, ca, remoting.HeartBeat, nil, []byte(`{"clientID":"10.0.0.1@1","producerDataSet":[],"consumerDataSet":[`+
		`{"groupName":"GA","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"TA","subString":"*","expressionType":"TAG"}]}]}`))
	dir := t.TempDir()
	out, err := run(t, "exportMetrics", "-n", ns, "-c", "DefaultCluster", "-f", dir)
	path := filepath.Join(dir, "metrics.json")
	if err != nil || out != "export "+path+" success\n" {
		t.Fatalf("exportMetrics: %q %v", out, err)
	}
	type report struct {
		RuntimeEnv   map[string]any `json:"runtimeEnv"`
		RuntimeQuota struct {
			DiskRatio          map[string]string  `json:"diskRatio"`
			TPS                map[string]float64 `json:"tps"`
			OneDayNum          map[string]int64   `json:"oneDayNum"`
			MessageAverageSize *string            `json:"messageAverageSize"`
			TopicSize          int                `json:"topicSize"`
			GroupSize          int                `json:"groupSize"`
		} `json:"runtimeQuota"`
		RuntimeVersion struct {
			RocketmqVersion string   `json:"rocketmqVersion"`
			ClientInfo      []string `json:"clientInfo"`
		} `json:"runtimeVersion"`
	}
	var got struct {
		EvaluateReport map[string]report `json:"evaluateReport"`
		TotalData      struct {
			TotalTps       map[string]float64 `json:"totalTps"`
			TotalOneDayNum map[string]int64   `json:"totalOneDayNum"`
		} `json:"totalData"`
	}
	readExport(t, path, &got)
	ra, rb := got.EvaluateReport["broker-a"], got.EvaluateReport["broker-b"]
	if len(got.EvaluateReport) != 2 || ra.RuntimeQuota.TopicSize != 1 || ra.RuntimeQuota.GroupSize != 1 || rb.RuntimeQuota.TopicSize != 0 ||
		ra.RuntimeVersion.RocketmqVersion != remoting.VersionName(int(remoting.CurrentVersion)) ||
		len(ra.RuntimeVersion.ClientInfo) != 1 || !strings.Contains(ra.RuntimeVersion.ClientInfo[0], "%V") || len(rb.RuntimeVersion.ClientInfo) != 0 {
		t.Fatalf("metrics.json: %+v", got)
	}
	for _, r := range []report{ra, rb} {
		for _, k := range []string{"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"} {
			if _, ok := r.RuntimeQuota.TPS[k]; !ok {
				t.Errorf("tps lacks %s: %v", k, r.RuntimeQuota.TPS)
			}
		}
		for _, k := range []string{"normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"} {
			if _, ok := r.RuntimeQuota.OneDayNum[k]; !ok {
				t.Errorf("oneDayNum lacks %s: %v", k, r.RuntimeQuota.OneDayNum)
			}
		}
		if r.RuntimeQuota.DiskRatio["commitLogDiskRatio"] == "" {
			t.Errorf("diskRatio: %v", r.RuntimeQuota.DiskRatio)
		}
	}
	if len(got.TotalData.TotalTps) != 4 || len(got.TotalData.TotalOneDayNum) != 4 {
		t.Fatalf("totalData: %+v", got.TotalData)
	}
	if _, err := run(t, "exportMetrics", "-n", ns, "-c", "NoSuchCluster", "-f", dir); err == nil || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Errorf("exportMetrics of an unknown cluster: %v", err)
	}
}

// A broker whose runtime info lacks a figure the report is computed from
// fails exportMetrics with an error naming the figure, as mqadmin fails.
func TestExportMetricsNeedsTheRuntimeFigures(t *testing.T) {
	addr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerRuntimeInfo:          withBody(`{"table":{"getTransferredTps":"1.0 1.0 1.0"}}`),
		remoting.GetBrokerConfig:               withBody("brokerName=broker-x\n"),
		remoting.GetAllSubscriptionGroupConfig: withBody(`{"subscriptionGroupTable":{}}`),
		remoting.GetAllTopicConfig:             withBody(`{"topicConfigTable":{}}`),
		remoting.GetSystemTopicListFromBroker:  withBody(`{"topicList":[]}`),
	})
	ns, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: withBody(`{"brokerAddrTable":{"broker-x":{"brokerAddrs":{"0":"` + addr + `"},"brokerName":"broker-x","cluster":"C"}},"clusterAddrTable":{"C":["broker-x"]}}`),
	})
	if _, err := run(t, "exportMetrics", "-n", ns, "-c", "C", "-f", t.TempDir()); err == nil || !strings.Contains(err.Error(), "putTps") || !strings.Contains(err.Error(), "broker-x") {
		t.Errorf("exportMetrics of a broker without putTps: %v", err)
	}
}

// exportMetadata -b -t keeps what mqadmin's getUserTopicConfig keeps of a
// broker's answer: a topic the broker lists as a system one, a %DLQ%
// topic and one whose perm is not a permission are left out; a topic's
// fields are written as the broker sent them, those rocketkv does not
// know too, and the wrapper's fields beyond topicConfigTable and
// dataVersion (a RocketMQ broker's static topic mappings) are dropped.
func TestExportMetadataFiltersAsMQAdmin(t *testing.T) {
	addr, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetAllTopicConfig: withBody(`{"topicConfigTable":{` +
			`"T1":{"topicName":"T1","perm":6,"readQueueNums":8,"writeQueueNums":8,"futureField":"kept"},` +
			`"BadPerm":{"topicName":"BadPerm","perm":14},` +
			`"MySys":{"topicName":"MySys","perm":6},` +
			`"%DLQ%G":{"topicName":"%DLQ%G","perm":6}},` +
			`"dataVersion":{"counter":7,"timestamp":1,"stateVersion":0},"mappingDataVersion":{"counter":1},"topicQueueMappingInfoMap":{}}`),
		remoting.GetSystemTopicListFromBroker: withBody(`{"topicList":["MySys"]}`),
	})
	dir := t.TempDir()
	if _, err := run(t, "exportMetadata", "-b", addr, "-t", "-f", dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "topic.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	table, _ := got["topicConfigTable"].(map[string]any)
	t1, _ := table["T1"].(map[string]any)
	if len(got) != 2 || got["dataVersion"] == nil || len(table) != 1 || t1["futureField"] != "kept" || t1["readQueueNums"] != float64(8) {
		t.Fatalf("topic.json:\n%s", data)
	}
	bad, _ := fakeBroker(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetAllTopicConfig: withBody(`{"topicConfigTable":{"T1":"not an object"}}`),
	})
	if _, err := run(t, "exportMetadata", "-b", bad, "-t", "-f", dir); err == nil || !strings.Contains(err.Error(), "T1") {
		t.Errorf("a topic table holding something else than configs: %v", err)
	}
}
