package broker

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// squeeze drops the whitespace of fastjson's pretty output (no name or
// value here holds any).
func squeeze(s string) string { return strings.Join(strings.Fields(s), "") }

// The answers to GET_ALL_CONSUMER_OFFSET and GET_ALL_DELAY_OFFSET have the
// shape of the files Apache RocketMQ 4.9.8 wrote for the same tables:
// each topic@group entry byte for byte (integer queue keys unquoted), the
// delay table likewise, plus the dataVersion a 5.3 slave assigns.
func TestOffsetAnswersHaveRocketMQsShape(t *testing.T) {
	dir := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean", "config")
	fixture := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("fixture: %v", err)
		}
		return string(data)
	}
	wantOffsets, wantDelay := fixture("consumerOffset.json"), fixture("delayOffset.json")

	master := startTestBroker(t, nil)
	c := master.client(nil)
	if r := call(t, c, remoting.GetAllDelayOffset, nil, nil); r.Code != remoting.Success ||
		!strings.HasPrefix(squeeze(string(r.Body)), `{"offsetTable":{},"dataVersion":{`) {
		t.Errorf("delay offsets of a fresh broker: %d %s", r.Code, r.Body)
	}

	offsets, err := rmqconfig.ParseOffsets([]byte(wantOffsets))
	if err != nil {
		t.Fatal(err)
	}
	var updates []kvindex.OffsetUpdate
	for _, o := range offsets {
		updates = append(updates, kvindex.OffsetUpdate{Group: o.Group, Topic: o.Topic, QueueID: o.QueueID, Offset: o.Offset})
	}
	levels, err := rmqconfig.ParseDelayOffsets([]byte(wantDelay))
	if err != nil {
		t.Fatal(err)
	}
	for level, off := range levels {
		updates = append(updates, kvindex.OffsetUpdate{Group: scheduleOffsetGroup, Topic: meta.ScheduleTopic, QueueID: int32(level - 1), Offset: off})
	}
	if err := master.offsets.SetMany(updates, true); err != nil {
		t.Fatal(err)
	}

	r := call(t, c, remoting.GetAllConsumerOffset, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_ALL_CONSUMER_OFFSET: %d %s", r.Code, r.Remark)
	}
	got := squeeze(string(r.Body))
	entries := regexp.MustCompile(`"[^"]+@[^"]+":\{[^}]*\}`).FindAllString(squeeze(wantOffsets), -1)
	if len(entries) != 3 {
		t.Fatalf("fixture entries %q", entries)
	}
	for _, e := range entries {
		if !strings.Contains(got, e) {
			t.Errorf("answer %s lacks RocketMQ's entry %s", got, e)
		}
	}
	if strings.Contains(got, scheduleOffsetGroup) {
		t.Errorf("the scheduler's progress is in the consumer offsets: %s", got)
	}
	if back, err := rmqconfig.ParseOffsets(r.Body); err != nil || !reflect.DeepEqual(back, offsets) {
		t.Errorf("answer parses to %+v (%v), want %+v", back, err, offsets)
	}
	wantVersion := regexp.MustCompile(`"dataVersion":\{"stateVersion":0,"timestamp":\d+,"counter":\d+\}\}$`)
	if !wantVersion.MatchString(got) {
		t.Errorf("answer %s lacks a dataVersion", got)
	}

	// Asked by a slave that holds the whole CommitLog (a slave naming
	// none is answered as far as the slaves on the HA port hold, and
	// none is connected here: nothing).
	if r := call(t, c, remoting.GetAllDelayOffset, nil, nil); r.Code != remoting.Success ||
		!strings.HasPrefix(squeeze(string(r.Body)), `{"offsetTable":{},"dataVersion":{`) {
		t.Errorf("delay offsets for a slave naming no CommitLog end, none connected: %d %s", r.Code, r.Body)
	}
	r = call(t, c, remoting.GetAllDelayOffset, map[string]string{syncFieldCommitLogEnd: strconv.FormatInt(master.clog.MaxOffset(), 10)}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_ALL_DELAY_OFFSET: %d %s", r.Code, r.Remark)
	}
	got = squeeze(string(r.Body))
	// {"offsetTable":{1:1}} as RocketMQ wrote it, then the dataVersion.
	if table := strings.TrimSuffix(squeeze(wantDelay), "}"); !strings.HasPrefix(got, table+",") || !wantVersion.MatchString(got) {
		t.Errorf("delay answer %s, want %s with a dataVersion", got, squeeze(wantDelay))
	}
}
