package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// sent is one message a scenario appended.
type sent struct {
	topic            string
	qid              int32
	qoff             int64
	keys, tags, uniq string
	body             string
	res              commitlog.AppendResult
}

// scenario is a store built through the real append, dispatch, offset and
// config code, and what was written to it.
type scenario struct {
	root   string
	msgs   []sent
	end    int64
	topics []meta.TopicConfig
	groups []meta.SubscriptionGroupConfig
	// forbidden is G2's entry of the forbidden table.
	forbidden meta.GroupForbidden
	offsets   []kvindex.OffsetUpdate
}

func (sc *scenario) queue(topic string, qid int32) []sent {
	var out []sent
	for _, m := range sc.msgs {
		if m.topic == topic && m.qid == qid {
			out = append(out, m)
		}
	}
	return out
}

// buildScenario writes the scenario store and leaves it open (the caller
// closes it) or closed.
func buildScenario(t *testing.T, keepOpen bool) (*scenario, *testStore) {
	t.Helper()
	sc := &scenario{root: filepath.Join(t.TempDir(), "store")}
	s := openTestStore(t, sc.root, 64<<10)
	for _, m := range []sent{
		{topic: "TopicA", qid: 0, keys: "order-1", tags: "TagA", uniq: "U0", body: "alpha"},
		{topic: "TopicA", qid: 0, keys: "order-2 cust-9", tags: "TagB", uniq: "U1", body: "bravo!"},
		{topic: "TopicA", qid: 1, keys: "order-1", tags: "TagA", uniq: "U2", body: "charlie"},
		{topic: "TopicA", qid: 0, uniq: "U3", body: "delta"},
		{topic: "TopicB", qid: 0, keys: "b-1", tags: "TagC", uniq: "U4", body: "echo"},
		{topic: "TopicB", qid: 0, keys: "b-2", tags: "TagC", uniq: "U5", body: "foxtrot"},
		{topic: "TopicB", qid: 0, keys: "b-3", tags: "TagC", uniq: "U6", body: "golf"},
	} {
		m.qoff = int64(len(sc.queue(m.topic, m.qid)))
		m.res = s.send(t, m.topic, m.qid, map[string]string{"KEYS": m.keys, "TAGS": m.tags, "UNIQ_KEY": m.uniq}, m.body)
		if m.res.QueueOffset != m.qoff {
			t.Fatalf("message %v got queue offset %d", m, m.res.QueueOffset)
		}
		sc.msgs = append(sc.msgs, m)
	}
	sc.end = s.log.MaxOffset()
	sc.offsets = []kvindex.OffsetUpdate{{Group: "G1", Topic: "TopicA", QueueID: 0, Offset: 1}, {Group: "G1", Topic: "TopicA", QueueID: 1, Offset: 1}, {Group: "G2", Topic: "TopicB", QueueID: 0, Offset: 0}}
	for _, u := range sc.offsets {
		if err := s.db.ConsumerOffsets().Set(u.Group, u.Topic, u.QueueID, u.Offset); err != nil {
			t.Fatal(err)
		}
	}
	tb := meta.NewTopicConfig("TopicB", 1)
	tb.Order = true
	tb.Attributes = map[string]string{"+message.type": "FIFO"}
	sc.topics = []meta.TopicConfig{meta.NewTopicConfig("TopicA", 2), tb}
	topics, err := s.db.Topics(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(sc.topics...); err != nil {
		t.Fatal(err)
	}
	g2 := meta.NewSubscriptionGroupConfig("G2")
	g2.ConsumeBroadcastEnable = false
	g2.RetryMaxTimes = 3
	sc.groups = []meta.SubscriptionGroupConfig{meta.NewSubscriptionGroupConfig("G1"), g2}
	groups, err := s.db.Groups(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := groups.Put(sc.groups...); err != nil {
		t.Fatal(err)
	}
	sc.forbidden = meta.GroupForbidden{Group: "G2", Topics: map[string]int{"TopicB": meta.PermRead, "TopicA": meta.PermWrite}}
	forbidden, err := s.db.GroupForbiddens(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := forbidden.Put(sc.forbidden); err != nil {
		t.Fatal(err)
	}
	if !keepOpen {
		s.close(t)
		return sc, nil
	}
	return sc, s
}

func ts() string { return kvindex.FormatMillis(testClock.UnixMilli()) }

var diskUsageLine = regexp.MustCompile(`(?m)^index disk usage( +)[0-9]+ bytes$`)

func TestSummary(t *testing.T) {
	sc, _ := buildScenario(t, false)
	// Sizes of every key written, from the layouts of kvindex/doc.go.
	type sizes struct{ keys, kb, vb int64 }
	ks := map[string]*sizes{}
	for _, k := range kvindex.Keyspaces() {
		ks[k.Name] = &sizes{}
	}
	add := func(name string, kb, vb int) {
		s := ks[name]
		s.keys++
		s.kb += int64(kb)
		s.vb += int64(vb)
	}
	add("meta", 1+len("schema"), 4)
	add("meta", 1+len("dispatched"), 8)
	add("meta", 1+len("cqWritten.kv"), 8) // the KV ConsumeQueue's progress, in every dispatch batch
	add("meta", 1+len("topicsVer"), 16)
	add("meta", 1+len("groupsVer"), 16)
	add("meta", 1+len("groupForbiddenVer"), 16)
	fb, _ := json.Marshal(sc.forbidden)
	add("group-forbidden", 1+len(sc.forbidden.Group), len(fb))
	for _, m := range sc.msgs {
		add("cq", 1+2+len(m.topic)+4+8, 28)
		add("cq-journal", 1+8, 8+2+len(m.topic)+4+8) // one dispatch batch per message
		for _, k := range append(strings.Fields(m.keys), m.uniq) {
			add("key-index", 1+8+2+len(m.topic)+1+2+len(k)+8, 0) // no value: the store time is in the record
		}
	}
	add("key-bucket", 1+8, 16)
	for _, u := range sc.offsets {
		add("consumer-offset", 1+2+len(u.Group)+2+len(u.Topic)+4, 8)
	}
	for _, c := range sc.topics {
		b, _ := json.Marshal(c)
		add("topic-config", 1+len(c.TopicName), len(b))
	}
	for _, c := range sc.groups {
		b, _ := json.Marshal(c)
		add("group-config", 1+len(c.GroupName), len(b))
	}

	rows := [][]string{{"KEYSPACE", "PREFIX", "KEYS", "KEY BYTES", "VALUE BYTES"}}
	var wantJSON []map[string]any
	for _, k := range kvindex.Keyspaces() {
		s := ks[k.Name]
		rows = append(rows, []string{k.Name, fmt.Sprintf("0x%02x", k.Prefix), num(s.keys), num(s.kb), num(s.vb)})
		wantJSON = append(wantJSON, asJSON(t, map[string]any{"kind": "keyspace", "name": k.Name, "prefix": fmt.Sprintf("0x%02x", k.Prefix),
			"known": true, "derivable": k.Derivable, "keys": s.keys, "keyBytes": s.kb, "valueBytes": s.vb}))
	}
	index := filepath.Join(sc.root, "kvindex")
	want := alignRows(rows...) + "\n" + alignRows(
		[]string{"store", sc.root},
		[]string{"index", index},
		[]string{"dispatched offset", num(sc.end)},
		[]string{"commitlog", fmt.Sprintf("[0, %d)", sc.end)},
		[]string{"lag (bytes)", "0"},
		[]string{"topics", "2"},
		[]string{"queues", "3"},
		[]string{"pop in flight", "0 messages in 0 checkpoints"},
		[]string{"transactions", "0 half messages open, 0 ended, 0 op messages"},
		[]string{"timer messages", "0 waiting"},
		[]string{"access control (ACL 2.0)", "0 users, 0 access lists"},
		[]string{"consumequeue written", fmt.Sprintf("kv to %d", sc.end)},
		[]string{"index disk usage", "N bytes"},
	)
	got := mustKvdump(t, "--store", sc.root, "summary")
	if !diskUsageLine.MatchString(got) {
		t.Fatalf("no disk usage line in:\n%s", got)
	}
	got = diskUsageLine.ReplaceAllString(got, "index disk usage${1}N bytes")
	if got != want {
		t.Errorf("summary table:\n%s\nwant:\n%s", got, want)
	}

	lines := jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "summary"))
	if len(lines) != len(wantJSON)+1 {
		t.Fatalf("%d JSON lines", len(lines))
	}
	checkJSON(t, "summary keyspaces", lines[:len(wantJSON)], wantJSON...)
	last := lines[len(lines)-1]
	if disk, err := strconv.ParseInt(string(last["indexDiskBytes"].(json.Number)), 10, 64); err != nil || disk <= 0 {
		t.Errorf("index disk bytes %v", last["indexDiskBytes"])
	}
	delete(last, "indexDiskBytes")
	checkJSON(t, "summary", lines[len(wantJSON):], asJSON(t, map[string]any{"kind": "summary", "store": sc.root, "index": index,
		"dispatched": sc.end, "logMinOffset": 0, "logMaxOffset": sc.end, "lag": 0, "topics": 2, "queues": 3,
		"popCheckpoints": 0, "popInFlight": 0, "popStaged": 0, "popStagedMessages": 0, "popReviving": 0, "txnOpenHalves": 0, "txnEnded": 0, "txnOpMessages": 0, "timerMessages": 0, "users": 0, "acls": 0,
		"cqWritten": map[string]any{"kv": sc.end}}))
}

func TestCQ(t *testing.T) {
	sc, _ := buildScenario(t, false)
	entryRow := func(m sent) []string {
		return []string{m.topic, num(m.qid), num(m.qoff), num(m.res.PhyOffset), num(m.res.WroteBytes), num(commitlog.TagsCode(m.tags)), ts()}
	}
	messageRow := func(m sent) []string {
		keys := m.keys
		if keys == "" {
			keys = "-"
		}
		tags := m.tags
		if tags == "" {
			tags = "-"
		}
		return []string{m.uniq, commitlog.MessageID(testStoreHost, m.res.PhyOffset), keys, tags, testBornHost.String(), num(len(m.body))}
	}
	entryHeader := []string{"TOPIC", "QUEUE", "OFFSET", "PHY", "SIZE", "TAGSCODE", "STORETIME"}

	// Every queue of the topic, ranges then entries.
	rows := [][]string{entryHeader}
	for _, m := range append(sc.queue("TopicA", 0), sc.queue("TopicA", 1)...) {
		rows = append(rows, entryRow(m))
	}
	want := alignRows([]string{"TOPIC", "QUEUE", "MIN", "MAX"}, []string{"TopicA", "0", "0", "3"}, []string{"TopicA", "1", "0", "1"}) +
		"\n" + alignRows(rows...)
	if got := mustKvdump(t, "--store", sc.root, "cq", "--topic", "TopicA"); got != want {
		t.Errorf("cq TopicA:\n%s\nwant:\n%s", got, want)
	}

	// One queue, from an offset, limited, joined with the records.
	q := sc.queue("TopicA", 0)
	rows = [][]string{append(append([]string{}, entryHeader...), "MSGID", "OFFSETMSGID", "KEYS", "TAGS", "BORNHOST", "BODYSIZE")}
	for _, m := range q[1:3] {
		rows = append(rows, append(entryRow(m), messageRow(m)...))
	}
	want = alignRows([]string{"TOPIC", "QUEUE", "MIN", "MAX"}, []string{"TopicA", "0", "0", "3"}) + "\n" + alignRows(rows...)
	if got := mustKvdump(t, "--store", sc.root, "cq", "--topic", "TopicA", "--queue", "0", "--from", "1", "--limit", "2", "--with-message"); got != want {
		t.Errorf("cq TopicA/0 from 1:\n%s\nwant:\n%s", got, want)
	}
	rows = [][]string{entryHeader, entryRow(q[0])}
	want = alignRows([]string{"TOPIC", "QUEUE", "MIN", "MAX"}, []string{"TopicA", "0", "0", "3"}) + "\n" + alignRows(rows...)
	if got := mustKvdump(t, "--store", sc.root, "cq", "--topic", "TopicA", "--queue", "0", "--limit", "1"); got != want {
		t.Errorf("cq TopicA/0 limit 1:\n%s\nwant:\n%s", got, want)
	}

	// JSON: one object per line, queues then entries.
	var wantJSON []map[string]any
	wantJSON = append(wantJSON, asJSON(t, map[string]any{"kind": "queue", "topic": "TopicB", "queueId": 0, "minOffset": 0, "maxOffset": 3}))
	for _, m := range sc.queue("TopicB", 0) {
		wantJSON = append(wantJSON, asJSON(t, map[string]any{"kind": "entry", "topic": m.topic, "queueId": m.qid, "queueOffset": m.qoff,
			"phyOffset": m.res.PhyOffset, "size": m.res.WroteBytes, "tagsCode": commitlog.TagsCode(m.tags), "storeTimestamp": testClock.UnixMilli(),
			"message": map[string]any{"msgId": m.uniq, "offsetMsgId": commitlog.MessageID(testStoreHost, m.res.PhyOffset), "topic": m.topic,
				"queueId": m.qid, "queueOffset": m.qoff, "keys": m.keys, "tags": m.tags, "bornHost": testBornHost.String(), "bodySize": len(m.body)}}))
	}
	checkJSON(t, "cq TopicB --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "cq", "--topic", "TopicB", "--with-message")), wantJSON...)

	// A topic the index does not have: empty tables, no error.
	want = alignRows([]string{"TOPIC", "QUEUE", "MIN", "MAX"}) + "\n" + alignRows(entryHeader)
	if got := mustKvdump(t, "--store", sc.root, "cq", "--topic", "Nope"); got != want {
		t.Errorf("cq of an absent topic:\n%s", got)
	}
	if _, _, err := runKvdump(t, "--store", sc.root, "cq"); err == nil || exitStatus(err) != exitError {
		t.Errorf("cq without --topic: %v", err)
	}
}

func TestOffsetsTopicsGroups(t *testing.T) {
	sc, _ := buildScenario(t, false)
	maxOf := func(topic string, qid int32) int64 { return int64(len(sc.queue(topic, qid))) }
	rows := [][]string{{"GROUP", "TOPIC", "QUEUE", "OFFSET", "MIN", "MAX", "LAG"}}
	var wantJSON []map[string]any
	for _, u := range sc.offsets {
		mx := maxOf(u.Topic, u.QueueID)
		rows = append(rows, []string{u.Group, u.Topic, num(u.QueueID), num(u.Offset), "0", num(mx), num(mx - u.Offset)})
		wantJSON = append(wantJSON, asJSON(t, map[string]any{"group": u.Group, "topic": u.Topic, "queueId": u.QueueID, "offset": u.Offset,
			"minOffset": 0, "maxOffset": mx, "lag": mx - u.Offset}))
	}
	if got, want := mustKvdump(t, "--store", sc.root, "offsets"), alignRows(rows...); got != want {
		t.Errorf("offsets:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "offsets --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "offsets", "--json")), wantJSON...)
	checkJSON(t, "offsets --group G1 --topic TopicA", jsonLines(t, mustKvdump(t, "--store", sc.root, "offsets", "--json", "--group", "G1", "--topic", "TopicA")), wantJSON[:2]...)
	checkJSON(t, "offsets --topic TopicB", jsonLines(t, mustKvdump(t, "--store", sc.root, "offsets", "--json", "--topic", "TopicB")), wantJSON[2])
	if got, want := mustKvdump(t, "--store", sc.root, "offsets", "--group", "G3"), alignRows(rows[0]); got != want {
		t.Errorf("offsets of an unknown group:\n%s", got)
	}

	rows = [][]string{{"TOPIC", "READ", "WRITE", "PERM", "ORDER", "FILTER", "SYSFLAG", "ATTRIBUTES"},
		{"TopicA", "2", "2", "6", "false", "SINGLE_TAG", "0", "-"},
		{"TopicB", "1", "1", "6", "true", "SINGLE_TAG", "0", "+message.type=FIFO"}}
	if got, want := mustKvdump(t, "--store", sc.root, "topics"), alignRows(rows...); got != want {
		t.Errorf("topics:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "topics --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "topics")), asJSON(t, sc.topics[0]), asJSON(t, sc.topics[1]))

	rows = [][]string{{"GROUP", "CONSUME", "BROADCAST", "ORDERLY", "FROMMIN", "RETRYQUEUES", "RETRYMAX", "BROKERID", "SLOWBROKER", "ATTRIBUTES"},
		{"G1", "true", "true", "false", "true", "1", "16", "0", "1", "-"},
		{"G2", "true", "false", "false", "true", "1", "3", "0", "1", "-"}}
	if got, want := mustKvdump(t, "--store", sc.root, "groups"), alignRows(rows...); got != want {
		t.Errorf("groups:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "groups --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "groups")), asJSON(t, sc.groups[0]), asJSON(t, sc.groups[1]))

	rows = [][]string{{"GROUP", "TOPIC", "BITS", "READ"}, {"G2", "TopicA", "2", "allowed"}, {"G2", "TopicB", "4", "forbidden"}}
	if got, want := mustKvdump(t, "--store", sc.root, "forbidden"), alignRows(rows...); got != want {
		t.Errorf("forbidden:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "forbidden --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "forbidden")), asJSON(t, sc.forbidden))
}

func TestKeys(t *testing.T) {
	sc, _ := buildScenario(t, false)
	m0, m2 := sc.msgs[0], sc.msgs[2] // both carry order-1 in TopicA
	keyRow := func(m sent, kind, key string) []string {
		return []string{m.topic, kind, key, num(m.res.PhyOffset), ts()}
	}
	want := alignRows([]string{"TOPIC", "KIND", "KEY", "PHY", "STORETIME"}, keyRow(m2, "key", "order-1"), keyRow(m0, "key", "order-1"))
	if got := mustKvdump(t, "--store", sc.root, "keys", "--topic", "TopicA", "--key", "order-1"); got != want {
		t.Errorf("keys order-1:\n%s\nwant:\n%s", got, want)
	}
	want = alignRows([]string{"TOPIC", "KIND", "KEY", "PHY", "STORETIME"}, keyRow(m2, "key", "order-1"))
	if got := mustKvdump(t, "--store", sc.root, "keys", "--topic", "TopicA", "--key", "order-1", "--limit", "1"); got != want {
		t.Errorf("keys order-1 limit 1:\n%s\nwant:\n%s", got, want)
	}
	// A key of another topic is not found; a unique key is, with --kind uniq.
	if got := mustKvdump(t, "--store", sc.root, "keys", "--topic", "TopicB", "--key", "order-1"); got != alignRows([]string{"TOPIC", "KIND", "KEY", "PHY", "STORETIME"}) {
		t.Errorf("keys of another topic:\n%s", got)
	}
	m1 := sc.msgs[1]
	want = alignRows(
		[]string{"TOPIC", "KIND", "KEY", "PHY", "STORETIME", "QUEUE", "QUEUEOFFSET", "MSGID", "OFFSETMSGID", "KEYS", "TAGS", "BORNHOST", "BODYSIZE"},
		append(keyRow(m1, "uniq", "U1"), "0", "1", "U1", commitlog.MessageID(testStoreHost, m1.res.PhyOffset), "order-2 cust-9", "TagB", testBornHost.String(), "6"))
	if got := mustKvdump(t, "--store", sc.root, "keys", "--topic", "TopicA", "--key", "U1", "--kind", "uniq", "--with-message"); got != want {
		t.Errorf("keys U1:\n%s\nwant:\n%s", got, want)
	}
	if got := mustKvdump(t, "--store", sc.root, "keys", "--topic", "TopicA", "--key", "U1", "--kind", "key"); got != alignRows([]string{"TOPIC", "KIND", "KEY", "PHY", "STORETIME"}) {
		t.Errorf("a unique key looked up as a KEYS word:\n%s", got)
	}
	checkJSON(t, "keys --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "keys", "--topic", "TopicA", "--key", "cust-9")),
		asJSON(t, map[string]any{"topic": "TopicA", "keyKind": "key", "key": "cust-9", "phyOffset": m1.res.PhyOffset, "storeTimestamp": testClock.UnixMilli()}))
	if _, _, err := runKvdump(t, "--store", sc.root, "keys", "--topic", "TopicA", "--key", "x", "--kind", "bogus"); err == nil {
		t.Error("--kind bogus accepted")
	}
}

func TestRaw(t *testing.T) {
	sc, _ := buildScenario(t, false)
	// A key of a keyspace doc.go does not define (a later version's), and
	// a malformed consumer offset.
	editIndex(t, sc.root, func(db *pebble.DB) {
		if err := db.Set([]byte{0xF0, 0xAB}, []byte{1, 2, 3}, nil); err != nil {
			t.Fatal(err)
		}
		bad := keyString16(keyString16([]byte{0x30}, "G9"), "T")
		bad = append(bad, 0, 0, 0, 0)
		if err := db.Set(bad, []byte{7}, nil); err != nil {
			t.Fatal(err)
		}
	})
	offKey := func(u kvindex.OffsetUpdate) []byte {
		b := keyString16(keyString16([]byte{0x30}, u.Group), u.Topic)
		return append(b, byte(u.QueueID>>24), byte(u.QueueID>>16), byte(u.QueueID>>8), byte(u.QueueID))
	}
	rows := [][]string{{"KEYSPACE", "KEY", "VALUE", "DECODED"}}
	for _, u := range sc.offsets {
		rows = append(rows, []string{"consumer-offset", fmt.Sprintf("%x", offKey(u)), fmt.Sprintf("%016x", u.Offset),
			fmt.Sprintf("group=%q topic=%q queue=%d offset=%d", u.Group, u.Topic, u.QueueID, u.Offset)})
	}
	badKey := fmt.Sprintf("%x", append(keyString16(keyString16([]byte{0x30}, "G9"), "T"), 0, 0, 0, 0))
	badLine := regexp.MustCompile(`(?m)^consumer-offset +` + badKey + ` +07 +malformed: consumer-offset key ` + badKey + ` \(value 1 bytes\): kvindex: malformed key or value$`)
	if got := mustKvdump(t, "--store", sc.root, "raw", "--prefix", "30"); !badLine.MatchString(got) {
		t.Errorf("malformed offset not shown as such:\n%s", got)
	}
	// Without the malformed key (which sorts after G1, G2), the table is
	// exactly the offsets written.
	good := mustKvdump(t, "--store", sc.root, "raw", "--prefix", "30", "--limit", "3")
	if want := alignRows(rows...); good != want {
		t.Errorf("raw 30:\n%s\nwant:\n%s", good, want)
	}

	want := alignRows([]string{"KEYSPACE", "KEY", "VALUE", "DECODED"}, []string{"unknown-f0", "f0ab", "010203", "-"})
	if got := mustKvdump(t, "--store", sc.root, "raw", "--prefix", "0xf0"); got != want {
		t.Errorf("raw f0:\n%s\nwant:\n%s", got, want)
	}
	b, _ := json.Marshal(sc.topics[1])
	checkJSON(t, "raw topic config --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "raw", "--prefix", fmt.Sprintf("%x", append([]byte{0x40}, "TopicB"...)))),
		asJSON(t, map[string]any{"keyspace": "topic-config", "key": fmt.Sprintf("%x", append([]byte{0x40}, "TopicB"...)), "value": fmt.Sprintf("%x", b),
			"record": map[string]any{"name": "TopicB", "config": sc.topics[1]}}))
	all := jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "raw", "--limit", "0"))
	if len(all) < 40 || all[0]["keyspace"] != "meta" || all[len(all)-1]["keyspace"] != "unknown-f0" {
		t.Errorf("raw of the whole store: %d lines, first %v, last %v", len(all), all[0], all[len(all)-1])
	}
	if _, _, err := runKvdump(t, "--store", sc.root, "raw", "--prefix", "zz"); err == nil {
		t.Error("non-hex prefix accepted")
	}
}

// summary says how far a slave's topic table covers its log, and says
// nothing of it for a store that never served as a slave.
func TestSummarySlaveTopics(t *testing.T) {
	sc, s := buildScenario(t, true)
	s.close(t)
	if strings.Contains(mustKvdump(t, "--store", sc.root, "summary"), "slave's topics") {
		t.Fatal("summary names a slave's topic table on a store that never served as a slave")
	}
	s = openTestStore(t, sc.root, 64<<10)
	if err := s.db.SetSlaveTopicsAt(sc.end); err != nil {
		t.Fatal(err)
	}
	s.close(t)
	lines := jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "summary"))
	if got := lines[len(lines)-1]["slaveTopicsAt"]; fmt.Sprint(got) != fmt.Sprint(sc.end) {
		t.Errorf("slaveTopicsAt %v, want %d", got, sc.end)
	}
	if out := mustKvdump(t, "--store", sc.root, "summary"); !strings.Contains(out, fmt.Sprintf("copied from its master for the records below %d", sc.end)) {
		t.Errorf("summary does not say how far the slave's topics go:\n%s", out)
	}
}
