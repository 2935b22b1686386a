package broker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// exportConfig sends EXPORT_ROCKSDB_CONFIG_TO_JSON with configType.
func exportConfig(t *testing.T, c *remoting.Client, configType string) *remoting.Command {
	t.Helper()
	return call(t, c, remoting.ExportRocksDBConfigToJSON, map[string]string{"configType": configType}, nil)
}

// mqadmin rocksDBConfigToJson -b writes the tables it names as RocketMQ's
// config files, which RocketMQ's reader (rmqconfig.Read, checked against
// files RocketMQ wrote) takes back: topics, groups with what they are
// forbidden, consumer offsets.
func TestExportConfigToJSON(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	createTopic(t, c, "ExT", 2, 3)
	for range 3 {
		mustSend(t, c, "ExT", 1, "m", "")
	}
	b.caughtUp()
	ensureGroup(t, c, "exg")
	commit(t, c, "exg", "ExT", 1, 2)
	forbid(t, c, "exg", "Other", "false")
	dir := filepath.Join(b.cfg.StorePathRootDir, "config")

	if r := exportConfig(t, c, "topics"); r.Code != remoting.Success || r.Remark != "export done." {
		t.Fatalf("export of the topics: %d %q", r.Code, r.Remark)
	}
	if _, err := os.Stat(filepath.Join(dir, rmqconfig.TopicsFile)); err != nil {
		t.Fatalf("topics not written: %v", err)
	}
	for _, f := range []string{rmqconfig.GroupsFile, rmqconfig.OffsetsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s written although only the topics were asked for", f)
		}
	}
	before, err := os.ReadFile(filepath.Join(dir, rmqconfig.TopicsFile))
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, c, "ExT2", 1, 1)

	// All three, named as RocketMQ reads them: any case, blanks, empty names.
	if r := exportConfig(t, c, " TOPICS;subscriptionGroups;; consumeroffsets;"); r.Code != remoting.Success {
		t.Fatalf("export of all three: %d %q", r.Code, r.Remark)
	}
	if bak, err := os.ReadFile(filepath.Join(dir, rmqconfig.TopicsFile+".bak")); err != nil || string(bak) != string(before) {
		t.Errorf("topics.json.bak does not keep the previous export: %v", err)
	}
	got, err := rmqconfig.Read(b.cfg.StorePathRootDir)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(got.Topics, func(tc meta.TopicConfig) bool { return tc.TopicName == "ExT" })
	if i < 0 || got.Topics[i].ReadQueueNums != 2 || got.Topics[i].WriteQueueNums != 3 {
		t.Errorf("topic ExT not exported as it is: %+v", got.Topics)
	}
	if !slices.ContainsFunc(got.Topics, func(tc meta.TopicConfig) bool { return tc.TopicName == "ExT2" }) {
		t.Error("topic created after the first export missing from the second")
	}
	if !slices.ContainsFunc(got.Groups, func(g meta.SubscriptionGroupConfig) bool { return g.GroupName == "exg" }) {
		t.Errorf("group exg not exported: %+v", got.Groups)
	}
	if len(got.Forbidden) != 1 || got.Forbidden[0].Group != "exg" || !got.Forbidden[0].Forbidden("Other", meta.ForbidReadIndex) {
		t.Errorf("forbidden table exported as %+v, want exg forbidden to read Other", got.Forbidden)
	}
	if !slices.Contains(got.Offsets, rmqconfig.Offset{Group: "exg", Topic: "ExT", QueueID: 1, Offset: 2}) {
		t.Errorf("offset of exg on ExT/1 not exported: %+v", got.Offsets)
	}
}

func TestExportConfigToJSONRefusals(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for name, ext := range map[string]map[string]string{
		"no configType": nil,
		"unknown type":  {"configType": "topics;queues"},
		"empty type":    {"configType": ""},
	} {
		r := call(t, c, remoting.ExportRocksDBConfigToJSON, ext, nil)
		if r.Code != remoting.SystemError || r.Remark == "" {
			t.Errorf("%s: %d %q", name, r.Code, r.Remark)
		}
		if name == "unknown type" && !strings.Contains(r.Remark, "Unknown config type: queues") {
			t.Errorf("unknown type: remark %q does not name it", r.Remark)
		}
	}
	dir := filepath.Join(b.cfg.StorePathRootDir, "config")
	if _, err := os.Stat(filepath.Join(dir, rmqconfig.TopicsFile)); err == nil {
		t.Error("a refused request wrote topics.json")
	}
	// A config directory that cannot be written: the caller is told.
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := exportConfig(t, c, "subscriptionGroups"); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "config") {
		t.Errorf("export into a file: %d %q, want SYSTEM_ERROR naming the directory", r.Code, r.Remark)
	}
}
