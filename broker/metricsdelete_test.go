package broker

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// seriesLines returns the lines of a scrape that are series (not
// comments) and contain every one of pairs.
func seriesLines(text string, pairs ...string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		all := true
		for _, p := range pairs {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// A topic deleted with DELETE_TOPIC_IN_BROKER takes its series with it,
// and a subscription group deleted with DELETE_SUBSCRIPTIONGROUP the
// series of its consumer_group: topics and groups that come and go leave
// no series behind. The others stay.
func TestMetricsSeriesGoWithDeletedTopicsAndGroups(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	c := b.client(nil)
	for _, topic := range []string{"DelT", "KeepT"} {
		mustSend(t, c, topic, 0, "m1", "")
		mustSend(t, c, topic, 0, "m2", "")
	}
	b.caughtUp()
	for _, group := range []string{"g-del", "g-keep"} {
		ensureGroup(t, c, group)
		for _, topic := range []string{"DelT", "KeepT"} {
			r := call(t, c, remoting.PullMessage, pullReq(group, topic, 0, 0, 0, 0, "*"), nil)
			if r.Code != remoting.Success {
				t.Fatalf("pull %s by %s: %d %s", topic, group, r.Code, r.Remark)
			}
			// Each group fails a message of each topic for good: a
			// dead-letter series of the group and topic.
			first := decodeRecords(t, r.Body)[0]
			if r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
				"offset": strconv.FormatInt(first.PhyOffset, 10), "group": group, "delayLevel": "-1",
				"originMsgId": commitlog.MessageID(first.StoreHost, first.PhyOffset), "originTopic": topic,
			}, nil); r.Code != remoting.Success {
				t.Fatalf("send back to the DLQ: %d %s", r.Code, r.Remark)
			}
		}
	}
	text := scrapeMetrics(t, b)
	for _, want := range [][]string{
		{"rocketmq_messages_in_total{", `topic="DelT"`},
		{"rocketmq_message_size_bucket{", `topic="DelT"`},
		{"rocketmq_messages_out_total{", `consumer_group="g-del"`, `topic="DelT"`},
		{"rocketmq_throughput_out_total{", `consumer_group="g-del"`, `topic="KeepT"`},
		{"rocketmq_send_to_dlq_messages_total{", `consumer_group="g-del"`, `topic="KeepT"`},
		{"rocketmq_send_to_dlq_messages_total{", `consumer_group="g-keep"`, `topic="DelT"`},
	} {
		if len(seriesLines(text, want...)) == 0 {
			t.Fatalf("no series %v before the deletions:\n%s", want, text)
		}
	}
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "DelT"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "g-del"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	text = scrapeMetrics(t, b)
	for _, gone := range []string{`topic="DelT"`, `consumer_group="g-del"`} {
		if lines := seriesLines(text, gone); len(lines) > 0 {
			t.Errorf("series of %s left after the deletions:\n%s", gone, strings.Join(lines, "\n"))
		}
	}
	for _, kept := range [][]string{
		{"rocketmq_messages_in_total{", `topic="KeepT"`},
		{"rocketmq_messages_out_total{", `consumer_group="g-keep"`, `topic="KeepT"`},
		{"rocketmq_send_to_dlq_messages_total{", `consumer_group="g-keep"`, `topic="KeepT"`},
	} {
		if len(seriesLines(text, kept...)) != 1 {
			t.Errorf("series %v not kept", kept)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// metricsOtelCardinalityLimit caps each metric: past the limit a new
// topic's sends are counted in the overflow series, whose labels all read
// otel_metric_overflow; deleting a topic frees room for a new one.
func TestMetricsOtelCardinalityLimitCapsSeries(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"metricsOtelCardinalityLimit": "4", // 3 topics and the overflow series
	})
	c := b.client(nil)
	for i := range 5 {
		mustSend(t, c, "CapT"+strconv.Itoa(i), 0, "m", "")
	}
	mustSend(t, c, "CapT0", 0, "again", "")
	const over = `topic="` + metrics.OverflowValue + `"`
	text := scrapeMetrics(t, b)
	if got := seriesLines(text, "rocketmq_messages_in_total{"); len(got) != 4 {
		t.Errorf("rocketmq_messages_in_total: %d series, want 3 and the overflow one:\n%s", len(got), strings.Join(got, "\n"))
	}
	if v := metricValue(t, text, "rocketmq_messages_in_total", `topic="CapT0"`); v != 2 {
		t.Errorf("CapT0's messages in %v, want 2", v)
	}
	if v := metricValue(t, text, "rocketmq_messages_in_total", over, `message_type="`+metrics.OverflowValue+`"`,
		`is_system="`+metrics.OverflowValue+`"`); v != 2 {
		t.Errorf("the overflow series counts %v messages in, want CapT3's and CapT4's", v)
	}
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "CapT1"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	mustSend(t, c, "CapT5", 0, "m", "")
	text = scrapeMetrics(t, b)
	if v := metricValue(t, text, "rocketmq_messages_in_total", `topic="CapT5"`); v != 1 {
		t.Errorf("CapT5's messages in %v, want 1 in a series of its own", v)
	}
	if v := metricValue(t, text, "rocketmq_messages_in_total", over); v != 2 {
		t.Errorf("the overflow series counts %v messages in, want still 2", v)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// A metricsOtelCardinalityLimit <= 0 stops the start of a broker with the
// exporter on, as OTel's refusal stops RocketMQ's; with the exporter off
// the key is not read, there as here.
func TestMetricsOtelCardinalityLimitMustBePositive(t *testing.T) {
	for _, limit := range []string{"0", "-1"} {
		err := startError(t, map[string]string{
			"storePathRootDir": t.TempDir(), "listenPort": "0", "brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": strconv.Itoa(4 << 20),
			"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
			"metricsOtelCardinalityLimit": limit,
		})
		if err == nil || !strings.Contains(err.Error(), "metricsOtelCardinalityLimit "+limit) {
			t.Errorf("start with metricsOtelCardinalityLimit=%s: %v", limit, err)
		}
	}
	b := startTestBroker(t, map[string]string{"metricsOtelCardinalityLimit": "0"})
	mustSend(t, b.client(nil), "NoExporterT", 0, "m", "")
}

// A slave that takes over its master's tables deletes the series of the
// topics and groups the master no longer has, as the master's deletions
// deleted its own.
func TestSlaveSyncDeletesTheSeriesOfRemovedTopicsAndGroups(t *testing.T) {
	master := startTestBroker(t, nil)
	slave := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	mc, sc := master.client(nil), slave.client(nil)
	createTopic(t, mc, "SyncKeptT", 1, 1)
	ensureGroup(t, mc, "g-synced")
	ensureGroup(t, sc, "g-slave-only")
	for _, topic := range []string{"SyncKeptT", "SlaveOnlyT"} {
		mustSend(t, sc, topic, 0, "m", "")
	}
	slave.caughtUp()
	for _, topic := range []string{"SyncKeptT", "SlaveOnlyT"} {
		for _, group := range []string{"g-synced", "g-slave-only"} {
			if r := call(t, sc, remoting.PullMessage, pullReq(group, topic, 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
				t.Fatalf("pull %s by %s: %d %s", topic, group, r.Code, r.Remark)
			}
		}
	}
	if text := scrapeMetrics(t, slave); len(seriesLines(text, `topic="SlaveOnlyT"`)) == 0 ||
		len(seriesLines(text, `consumer_group="g-slave-only"`)) == 0 {
		t.Fatalf("no series of SlaveOnlyT or g-slave-only before the sync:\n%s", text)
	}
	syncSlave(t, slave, master)
	text := scrapeMetrics(t, slave)
	for _, gone := range []string{`topic="SlaveOnlyT"`, `consumer_group="g-slave-only"`} {
		if lines := seriesLines(text, gone); len(lines) > 0 {
			t.Errorf("series of %s left after the sync:\n%s", gone, strings.Join(lines, "\n"))
		}
	}
	if len(seriesLines(text, "rocketmq_messages_out_total{", `consumer_group="g-synced"`, `topic="SyncKeptT"`)) != 1 {
		t.Errorf("the series of g-synced on SyncKeptT went too:\n%s", text)
	}
}
