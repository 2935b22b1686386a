package meta

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseDelayLevels(t *testing.T) {
	lv, err := ParseDelayLevels(DefaultMessageDelayLevel)
	if err != nil {
		t.Fatal(err)
	}
	if len(lv) != 18 || lv[0] != time.Second || lv[2] != 10*time.Second || lv[4] != time.Minute || lv[17] != 2*time.Hour {
		t.Fatalf("levels %v", lv)
	}
	if d, _ := ParseDelayLevels("1d 30s"); d[0] != 24*time.Hour || d[1] != 30*time.Second {
		t.Fatalf("day unit: %v", d)
	}
	for _, bad := range []string{"", "5", "5x", "-1s", "s"} {
		if _, err := ParseDelayLevels(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if DelayMillis(lv, 3) != 10000 || DelayMillis(lv, 99) != 7200000 || DelayMillis(lv, 0) != 1000 {
		t.Fatal("DelayMillis: RocketMQ clamps high levels to the last and treats unknown ones as 1 s")
	}
}

// Configs marshal with RocketMQ's JSON names, so clients and tools read
// them.
func TestConfigJSONNames(t *testing.T) {
	raw, err := json.Marshal(NewTopicConfig("T", 4))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{}}`
	if string(raw) != want {
		t.Fatalf("topic config JSON\n%s\nwant\n%s", raw, want)
	}
	var g SubscriptionGroupConfig
	if err := json.Unmarshal([]byte(`{"groupName":"G","retryMaxTimes":3,"consumeEnable":true,"groupRetryPolicy":{"type":"EXPONENTIAL"}}`), &g); err != nil {
		t.Fatal(err)
	}
	if g.GroupName != "G" || g.RetryMaxTimes != 3 || g.GroupRetryPolicy.Type != "EXPONENTIAL" {
		t.Fatalf("group %+v", g)
	}
	if !Readable(6) || !Writable(6) || Inheritable(6) || !Inheritable(7) || Writable(4) {
		t.Fatal("permission bits")
	}
	if RetryTopic("g") != "%RETRY%g" || !IsRetryTopic("%RETRY%g") || DLQTopic("g") != "%DLQ%g" || !IsDLQTopic("%DLQ%g") {
		t.Fatal("system topic names")
	}
	v := NewVersionCounter(DataVersion{Counter: 41, Timestamp: 5})
	if v.Current().Counter != 41 || v.Bump().Counter != 42 || v.Current().Counter != 42 {
		t.Fatal("version counter")
	}
}

// IsSystemTopic holds TopicValidator's set (RocketMQ 5.3) and prefix;
// the check is case-sensitive there too.
func TestIsSystemTopic(t *testing.T) {
	for topic, want := range map[string]bool{
		"TBW102": true, "SCHEDULE_TOPIC_XXXX": true, "BenchmarkTest": true, "RMQ_SYS_TRANS_HALF_TOPIC": true,
		"RMQ_SYS_TRACE_TOPIC": true, "RMQ_SYS_TRANS_OP_HALF_TOPIC": true, "TRANS_CHECK_MAX_TIME_TOPIC": true,
		"SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true, "CHECKPOINT_TOPIC": true,
		"rmq_sys_wheel_timer": true, "rmq_sys_anything": true,
		"checkpoint_topic": false, "RMQ_SYS_anything": false, "%RETRY%g": false, "TopicA": false,
	} {
		if got := IsSystemTopic(topic); got != want {
			t.Errorf("IsSystemTopic(%q) = %v, want %v", topic, got, want)
		}
	}
}

// IsPredefinedGroup holds MixAll's PREDEFINE_GROUP_SET (RocketMQ 5.3),
// exact names only.
func TestIsPredefinedGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"DEFAULT_CONSUMER": true, "DEFAULT_PRODUCER": true, "TOOLS_CONSUMER": true, "SCHEDULE_CONSUMER": true,
		"FILTERSRV_CONSUMER": true, "__MONITOR_CONSUMER": true, "CLIENT_INNER_PRODUCER": true, "SELF_TEST_P_GROUP": true,
		"SELF_TEST_C_GROUP": true, "CID_ONS-HTTP-PROXY": true, "CID_ONSAPI_PERMISSION": true, "CID_ONSAPI_OWNER": true,
		"CID_ONSAPI_PULL": true, "CID_RMQ_SYS_TRANS": true,
		"CID_RMQ_SYS_OTHER": false, "tools_consumer": false, "GroupA": false, "": false,
	} {
		if got := IsPredefinedGroup(group); got != want {
			t.Errorf("IsPredefinedGroup(%q) = %v, want %v", group, got, want)
		}
	}
}

// RetryTopicGroup reads the group as RocketMQ's KeyBuilder.parseGroup:
// the part before the '+' when a split on '+' gives exactly two parts
// (Java's split drops trailing empty parts), otherwise everything after
// the prefix.
func TestRetryTopicGroup(t *testing.T) {
	for _, c := range []struct{ topic, group string }{
		{"%RETRY%g", "g"},
		{"%RETRY%g+T", "g"},
		{"%RETRY%g+", "g+"}, // one part once the empty one is dropped
		{"%RETRY%g+++", "g+++"},
		{"%RETRY%g++T", "g++T"}, // three parts
		{"%RETRY%g+a+b", "g+a+b"},
		{"%RETRY%g_T", "g_T"},
		{"%RETRY%+T", ""},
		{"%RETRY%", ""},
	} {
		if got := RetryTopicGroup(c.topic); got != c.group {
			t.Errorf("RetryTopicGroup(%q) = %q, want %q", c.topic, got, c.group)
		}
	}
}
