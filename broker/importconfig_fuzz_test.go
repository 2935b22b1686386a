package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

// importFuzzFiles are the config files of a RocketMQ store that
// FuzzImportConfig writes, in the order of its inputs.
var importFuzzFiles = []string{"topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json",
	"messageRequestMode.json", "consumerOrderInfo.json", "timercheck"}

// FuzzImportConfig reads arbitrary config files of a RocketMQ store, as
// the first open of one does (rmqconfig.Read), and imports what reads
// into a fresh index (importConfig): no panic; an import that succeeds
// leaves every key decodable (kvdump reads the store), every topic,
// group and consumer offset it read there, and a second import finds
// nothing lacking, so no name is written under a key it does not read
// back from. A nil input is a missing file.
func FuzzImportConfig(f *testing.F) {
	ms := time.Now().UnixMilli() - 1000
	f.Add([]byte(`{"topicConfigTable":{"OrdC":{"topicName":"OrdC","readQueueNums":2,"writeQueueNums":2,"perm":6,"order":true}},"dataVersion":{"counter":3,"timestamp":1}}`),
		[]byte(`{"subscriptionGroupTable":{"cg-c":{"groupName":"cg-c","consumeEnable":true,"retryMaxTimes":16}},"forbiddenTable":{"cg-c":{"OrdC":4}}}`),
		[]byte(`{"offsetTable":{"OrdC@cg-c":{0:5,1:6}}}`),
		[]byte(`{"offsetTable":{1:1,18:4}}`),
		[]byte(`{"messageRequestModeMap":{"OrdC":{"cg-c":{"topic":"OrdC","consumerGroup":"cg-c","mode":"POP","popShareQueueNum":1}}}}`),
		[]byte(`{"table":{"OrdC@cg-c":{0:{"a":"att","cm":0,"i":60000,"l":`+strconv.FormatInt(ms, 10)+`,"o":[5,1],"oc":{5:2,6:1},"popTime":`+strconv.FormatInt(ms, 10)+`}}}}`),
		[]byte{0, 0, 1, 0x8c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7})
	f.Add([]byte(`{"topicConfigTable":{"a@b":{"topicName":"a@b"},"%RETRY%g":{"topicName":"%RETRY%g","readQueueNums":1}}}`),
		[]byte(`{"subscriptionGroupTable":{"":{"groupName":""},"g@h":{"groupName":"g@h"}}}`),
		[]byte(`{"offsetTable":{"a@b@g@h":{0:1,-1:2,2147483647:9223372036854775807}}}`),
		[]byte(`{"offsetTable":{1:5,99:2}}`),
		[]byte(`{"messageRequestModeMap":{"%RETRY%g":{"g":{"mode":"POP"}},"a@b":{"":{"mode":"PULL"}}}}`),
		[]byte(nil), []byte{1, 2, 3})
	fixture := filepath.Join("..", "..", "shared", "fixtures", "rocketmq-store-4.9.8", "clean", "config")
	var seeds [7][]byte
	for i, name := range importFuzzFiles[:4] {
		b, err := os.ReadFile(filepath.Join(fixture, name))
		if err != nil {
			f.Logf("fuzzing without the fixture's %s as a seed: %v", name, err)
			break
		}
		seeds[i] = b
		if i == 3 {
			f.Add(seeds[0], seeds[1], seeds[2], seeds[3], []byte(nil), []byte(nil), []byte(nil))
		}
	}
	f.Fuzz(func(t *testing.T, topics, groups, offsets, delays, modes, orders, timercheck []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "config")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, data := range [][]byte{topics, groups, offsets, delays, modes, orders, timercheck} {
			if data == nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, importFuzzFiles[i]), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c, err := rmqconfig.Read(root)
		if err != nil {
			return
		}
		db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(root, "kvindex"), Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		now := time.Now().UnixMilli()
		if _, err := importConfig(db, c, now); err != nil {
			return // refused with a reason (an orderly batch no RocketMQ writes, say)
		}
		err = db.Scan(nil, func(k, v []byte) bool {
			if _, err := kvindex.DecodeKey(k, v); err != nil && !errors.Is(err, kvindex.ErrUnknownKeyspace) {
				t.Fatalf("key %x (value %x) written by the import does not decode: %v", k, v, err)
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		tt, err := db.Topics(len(c.Topics) + 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range c.Topics {
			if _, ok, err := tt.Get(tc.TopicName); err != nil || !ok {
				t.Fatalf("topic %q imported, read back %v %v", tc.TopicName, ok, err)
			}
		}
		gt, err := db.Groups(len(c.Groups) + 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range c.Groups {
			if _, ok, err := gt.Get(g.GroupName); err != nil || !ok {
				t.Fatalf("group %q imported, read back %v %v", g.GroupName, ok, err)
			}
		}
		for _, o := range c.Offsets {
			if _, ok, err := db.ConsumerOffsets().Get(o.Group, o.Topic, o.QueueID); err != nil || !ok {
				t.Fatalf("offset of %q on %s/%d imported, read back %v %v", o.Group, o.Topic, o.QueueID, ok, err)
			}
		}
		again, err := importConfig(db, c, now)
		if err != nil || again != [9]int{} {
			t.Fatalf("a second import of the same files wrote %v (%v): the first left keys it does not read back", again, err)
		}
	})
}
