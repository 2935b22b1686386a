// Package rmqconfig reads the config files of an Apache RocketMQ store,
// as RocketMQ's ConfigManager subclasses write them under
// <storePathRootDir>/config:
//
//	topics.json             {"dataVersion":{...},"topicConfigTable":{"<topic>":{TopicConfig}}}
//	subscriptionGroup.json  {"dataVersion":{...},"subscriptionGroupTable":{"<group>":{SubscriptionGroupConfig}}}
//	consumerOffset.json     {"offsetTable":{"<topic>@<group>":{<queueId>:<offset>,...}}}
//	delayOffset.json        {"offsetTable":{<delayLevel>:<offset>,...}}
//	messageRequestMode.json {"messageRequestModeMap":{"<topic>":{"<group>":{SetMessageRequestModeRequestBody}}}}
//	consumerOrderInfo.json  {"table":{"<topic>@<group>":{<queueId>:{OrderInfo}}}} (see OrderInfo)
//	timercheck              4 KiB, big-endian: lastReadTimeMs int64 | lastTimerLogFlushPos int64 |
//	                        lastTimerQueueOffset int64 | ... (RocketMQ 5's timer checkpoint;
//	                        the first and the third are read)
//
// The files are fastjson output, not strict JSON: integer map keys are
// written unquoted ({0:5,1:6}). Like RocketMQ's ConfigManager.load, a file
// that is missing, empty or does not parse is replaced by its ".bak" copy,
// and a store without either starts empty; a file of whitespace alone
// loads nothing, or is replaced by its ".bak" for the consumer offsets
// (see blankContent).
package rmqconfig

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
)

// Offset is one committed consumer offset of consumerOffset.json.
type Offset struct {
	Group, Topic string
	QueueID      int32
	Offset       int64
}

// RequestMode is one SetMessageRequestModeRequestBody.
type RequestMode struct {
	Topic            string `json:"topic"`
	ConsumerGroup    string `json:"consumerGroup"`
	Mode             string `json:"mode"`
	PopShareQueueNum int    `json:"popShareQueueNum"`
}

// Config is what a store's config files hold. Topics and Groups are in
// name order, Offsets in group, topic, queue order.
type Config struct {
	Topics []meta.TopicConfig
	Groups []meta.SubscriptionGroupConfig
	// Forbidden is subscriptionGroup.json's forbiddenTable: what groups
	// may not do on topics, in group order.
	Forbidden []meta.GroupForbidden
	// QueueMappings are topicQueueMapping.json's static topic mappings,
	// in topic order.
	QueueMappings []meta.TopicQueueMappingDetail
	Offsets       []Offset
	// PullOffsets are config v2's pull offsets of light message queues
	// (read with ReadOptions.LMQ), in group, topic and queue order: where
	// RocketMQ resumes a group's non-orderly pops of such a queue after a
	// restart (PopConsumerService.getPopOffset reads the pull offset, and
	// ConsumerOffsetManagerV2 reads a light message queue's from the
	// database), past the messages its last pop read. The broker imports
	// them as pop positions.
	//
	// No other pull offset is carried over. RocketMQ's JSON and config v1
	// stores keep none on disk, and config v2's of an ordinary topic is
	// written but never read back: RocketMQ's own restart pops such a
	// queue from its committed offset, which KV POP leaves at the start of
	// the last pop read (so a batch acked before the restart is delivered
	// again). Taking the pull offset instead would not be safe either: it
	// is committed before the pop's records are written, and with
	// enablePopBufferMerge the records stay in memory (the committed
	// offset held at the first of them stands in for them after a crash
	// or a shutdown), so messages between the two offsets may be in flight
	// with no record left to revive them.
	PullOffsets []Offset
	// RequestModes are the groups switched to POP (or back to PULL) with
	// SET_MESSAGE_REQUEST_MODE, in topic and group order.
	RequestModes []RequestMode
	// OrderInfos are the batches orderly POP consumers had in flight, in
	// group, topic and queue order.
	OrderInfos []OrderInfo
	// DelayOffsets maps a delay level (1-based) to the next
	// SCHEDULE_TOPIC_XXXX offset of its queue (level-1) to deliver.
	DelayOffsets map[int]int64
	// TimerReadMs is RocketMQ 5's timer progress (timercheck's
	// lastReadTimeMs): every timer message due before it was delivered.
	// HasTimerCheck is false for a store without a timercheck.
	TimerReadMs   int64
	HasTimerCheck bool
	// TimerQueueOffset is how far RocketMQ's timer had taken in
	// rmq_sys_wheel_timer (timercheck's lastTimerQueueOffset): a parked
	// message at or past it was never taken in, and RocketMQ takes it in
	// (and delivers it if overdue) when it restarts. -1 when the
	// timercheck is too short to hold it.
	TimerQueueOffset int64
	// NotCarried says, one line per file, what the store holds that
	// rocketkv does not take over (features it does not have: LMQ
	// offsets without enableLmq; entries of negative queue ids; a file read from its
	// backup because it was unreadable); the broker logs each line when
	// it imports the store.
	NotCarried []string
	// Files are the files read (a ".bak" when the main file was unusable).
	Files []string
}

// Empty reports whether no file was read.
func (c Config) Empty() bool { return len(c.Files) == 0 }

// ReadOptions are what ReadWith reads differently from Read.
type ReadOptions struct {
	// LMQ reads the consumer offsets as a RocketMQ broker with enableLmq
	// loads them: from lmqConsumerOffset.json when it exists (both its
	// tables: offsetTable as consumerOffset.json's, and lmqOffsetTable,
	// one offset per "<topic>@<group>" of a light message queue, queue
	// 0), in place of consumerOffset.json's. Without it that file is only
	// reported (NotCarried).
	LMQ bool
}

// Read reads the config files under root/config.
func Read(root string) (Config, error) { return ReadWith(root, ReadOptions{}) }

// ReadWith reads the config files under root/config with o.
func ReadWith(root string, o ReadOptions) (Config, error) {
	var c Config
	dir := filepath.Join(root, "config")
	// Config v2 keeps topics, groups and consumer offsets in one RocksDB
	// (config/rdb), and RocketMQ's v2 managers ignore the JSON files beside
	// it (stale, from before the switch).
	v2 := isDir(filepath.Join(dir, v2Dir))
	if v2 {
		if err := c.readRocksDBConfigV2(filepath.Join(dir, v2Dir), o.LMQ); err != nil {
			return Config{}, err
		}
	}
	steps := []struct {
		name  string
		parse func([]byte) error
		// notCarried files are only reported on (Config.NotCarried):
		// one that cannot be read is a note, not an error.
		notCarried bool
		// blank is what whitespace alone in the file means to RocketMQ
		// (see blankContent).
		blank blankContent
	}{
		{"topics.json", c.parseTopics, false, blankLoadsNothing},
		{"subscriptionGroup.json", c.parseGroups, false, blankLoadsNothing},
		{"consumerOffset.json", c.parseOffsets, false, blankIsInvalid},
		{"delayOffset.json", c.parseDelayOffsets, false, blankLoadsNothing},
		{"messageRequestMode.json", c.parseRequestModes, false, blankLoadsNothing},
		{"consumerOrderInfo.json", c.parseOrderInfos, false, blankLoadsNothing},
		{"topicQueueMapping.json", c.parseQueueMappings, true, blankLoadsNothing},
		{"lmqConsumerOffset.json", func(data []byte) error { return c.parseLmqOffsets(data, o.LMQ) }, !o.LMQ, blankIsInvalid},
	}
	for _, s := range steps {
		if v2 && v2Replaces[s.name] {
			continue
		}
		if sub, ok := rocksDBTables[s.name]; ok && isDir(filepath.Join(dir, sub)) {
			// storeType=defaultRocksDB: the table is in RocksDB (config v1).
			if err := c.readRocksDBTable(dir, s.name, s.parse, s.blank); err != nil {
				return Config{}, err
			}
			continue
		}
		file, passedOver, err := readWithBackup(filepath.Join(dir, s.name), s.parse, s.blank)
		if passedOver != nil {
			// The backup is the persist before the last: what changed
			// in between (offsets committed since, say) is older there.
			c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: unreadable, its backup %s (the copy before the last write) was read instead: %v",
				s.name, filepath.Base(file), passedOver))
		}
		if err != nil && s.notCarried {
			c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: unreadable, nothing of it is carried over: %v", s.name, err))
			continue
		}
		if err != nil {
			return Config{}, err
		}
		if file != "" {
			c.Files = append(c.Files, file)
		}
	}
	c.noteTopicsNotCarried()
	check := filepath.Join(dir, "timercheck")
	switch data, err := os.ReadFile(check); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Config{}, fmt.Errorf("read RocketMQ timer checkpoint %s: %w", check, err)
	case len(data) < 8:
		return Config{}, fmt.Errorf("RocketMQ timer checkpoint %s: %d bytes, too short for lastReadTimeMs", check, len(data))
	default:
		c.TimerReadMs, c.HasTimerCheck = int64(binary.BigEndian.Uint64(data)), true
		c.TimerQueueOffset = -1
		if len(data) >= 24 {
			c.TimerQueueOffset = int64(binary.BigEndian.Uint64(data[16:]))
		}
		c.Files = append(c.Files, check)
	}
	return c, nil
}

// blankContent is what a config file holding only whitespace (and at
// least one byte of it) means to RocketMQ's ConfigManager.load. An empty
// file (0 bytes) is read as a missing one: the ".bak" is read instead.
// Content of whitespace alone reaches the JSON decoder, fastjson 1.2.83,
// whose answer depends on the class decoded: for a class it generates a
// deserializer for, it is null, and the manager's decode loads nothing
// without reading the ".bak"; for one it does not (ConsumerOffsetManager
// and LmqConsumerOffsetManager, whose getGroupTopicMap is a getter
// without a setter) it is a syntax error, and load reads the ".bak".
type blankContent int

const (
	// blankLoadsNothing: the file loads nothing and the ".bak" is not
	// read (topics, groups, delay offsets, request modes, orderly POP
	// batches, static topic mappings).
	blankLoadsNothing blankContent = iota
	// blankIsInvalid: the file is unparsable and the ".bak" is read
	// (consumer offsets).
	blankIsInvalid
)

// isBlank reports whether data is whitespace alone as fastjson's lexer
// skips it (space, \n, \r, \t, \f, \b; not Unicode spaces).
func isBlank(data []byte) bool {
	for _, b := range data {
		switch b {
		case ' ', '\n', '\r', '\t', '\f', '\b':
		default:
			return false
		}
	}
	return true
}

// readWithBackup parses path, or path.bak when path is missing, empty
// (0 bytes), unparsable, or blank (whitespace alone) where blank says so,
// and returns the file it used ("" when neither exists) and, when it
// used path.bak, why path was passed over (nil when it was missing or
// empty). A blank file that loads nothing is returned as used, with
// nothing parsed.
func readWithBackup(path string, parse func([]byte) error, blank blankContent) (used string, passedOver, err error) {
	var errs []error
	for _, p := range []string{path, path + ".bak"} {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("read RocketMQ config %s: %w", p, err)
		}
		if len(data) == 0 {
			continue // RocketMQ treats an empty file as absent
		}
		if isBlank(data) {
			if blank == blankLoadsNothing {
				return p, errors.Join(errs...), nil
			}
			errs = append(errs, fmt.Errorf("RocketMQ config %s: whitespace alone, which RocketMQ cannot parse for this file", p))
			continue
		}
		if err := parse(data); err != nil {
			errs = append(errs, fmt.Errorf("RocketMQ config %s: %w", p, err))
			continue
		}
		return p, errors.Join(errs...), nil
	}
	return "", nil, errors.Join(errs...)
}

func (c *Config) parseTopics(data []byte) (err error) {
	c.Topics, err = parseTable(data, "topicConfigTable", "topic",
		func(name string) meta.TopicConfig { return meta.NewTopicConfig(name, 0) },
		func(tc *meta.TopicConfig, name string) (string, *map[string]string) {
			if tc.TopicName == "" {
				tc.TopicName = name
			}
			return tc.TopicName, &tc.Attributes
		})
	return err
}

func (c *Config) parseGroups(data []byte) (err error) {
	c.Groups, err = parseTable(data, "subscriptionGroupTable", "group",
		// Defaults for the fields older versions did not write.
		meta.NewSubscriptionGroupConfig,
		func(gc *meta.SubscriptionGroupConfig, name string) (string, *map[string]string) {
			if gc.GroupName == "" {
				gc.GroupName = name
			}
			return gc.GroupName, &gc.Attributes
		})
	if err != nil {
		return err
	}
	c.Forbidden, err = parseForbidden(data)
	return err
}

// parseForbidden reads the forbiddenTable of subscriptionGroup.json
// ({"<group>":{"<topic>":bits}}, RocketMQ 4.9.4 and later) in group
// order. Bits of zero or below mean none (RocketMQ's reading): such
// topics, and groups left with none, are dropped.
func parseForbidden(data []byte) ([]meta.GroupForbidden, error) {
	var f struct {
		Table map[string]map[string]int `json:"forbiddenTable"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("forbiddenTable: %w", err)
	}
	var out []meta.GroupForbidden
	for _, group := range slices.Sorted(maps.Keys(f.Table)) {
		topics := map[string]int{}
		for topic, bits := range f.Table[group] {
			if bits > 0 {
				topics[topic] = bits
			}
		}
		if len(topics) > 0 {
			out = append(out, meta.GroupForbidden{Group: group, Topics: topics})
		}
	}
	return out, nil
}

// parseTable reads the config table named field of a ConfigManager file
// ({"<field>":{"<name>":{config},...}}): each config starts from
// fresh(name), is filled from its JSON, then named (its name field set
// when the JSON left it empty; it returns the name and the attributes,
// which it makes non-nil). The configs are returned in name order.
func parseTable[T any](data []byte, field, what string, fresh func(string) T,
	named func(*T, string) (string, *map[string]string)) ([]T, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	var table map[string]json.RawMessage
	if raw, ok := f[field]; ok {
		if err := json.Unmarshal(raw, &table); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}
	out := make([]T, 0, len(table))
	names := make([]string, 0, len(table))
	for name, raw := range table {
		cfg := fresh(name)
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, name, err)
		}
		n, attrs := named(&cfg, name)
		if *attrs == nil {
			*attrs = map[string]string{}
		}
		out = append(out, cfg)
		names = append(names, n)
	}
	sort.Sort(byName[T]{out, names})
	return out, nil
}

// byName sorts configs by their names.
type byName[T any] struct {
	cfgs  []T
	names []string
}

func (b byName[T]) Len() int           { return len(b.cfgs) }
func (b byName[T]) Less(i, j int) bool { return b.names[i] < b.names[j] }
func (b byName[T]) Swap(i, j int) {
	b.cfgs[i], b.cfgs[j] = b.cfgs[j], b.cfgs[i]
	b.names[i], b.names[j] = b.names[j], b.names[i]
}

// tableMembers returns the members of the object a config file holds
// under field (RocketMQ's ConfigManager tables: {"<field>":{...}}); none
// when it is absent or null.
func tableMembers(data []byte, field string) ([]adminbody.Member, error) {
	top, err := adminbody.Members(data)
	if err != nil {
		return nil, err
	}
	for _, m := range top {
		if unquote(m.Key) != field || string(m.Value) == "null" {
			continue
		}
		members, err := adminbody.Members(m.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return members, nil
	}
	return nil, nil
}

func (c *Config) parseOffsets(data []byte) error {
	var (
		err     error
		skipped []string
	)
	c.Offsets, skipped, err = readOffsetTable(c.Offsets[:0], data)
	sortOffsets(c.Offsets)
	if err == nil {
		c.noteNegativeQueues("consumerOffset.json", skipped)
	}
	return err
}

// noteNegativeQueues notes, for the broker's log, the entries of a file
// keyed by a negative queue id, which were skipped.
func (c *Config) noteNegativeQueues(file string, skipped []string) {
	if len(skipped) > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: %d entries of negative queue ids (no queue has one; a client committed them unchecked) are not carried over: %s",
			file, len(skipped), strings.Join(skipped, ", ")))
	}
}

// readOffsetTable appends to out the offsets of a ConsumerOffsetManager
// file's offsetTable ({"offsetTable":{"T@G":{0:v,...}}}), in file order,
// up to the first one that is not a number. Offsets of negative queue ids
// are skipped and listed in skipped.
func readOffsetTable(out []Offset, data []byte) (_ []Offset, skipped []string, err error) {
	skipped, err = eachQueueValue(data, "offsetTable", "offsets", func(topic, group string, qid int32, value []byte) error {
		off, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			return fmt.Errorf("offset %s: %w", value, err)
		}
		out = append(out, Offset{Group: group, Topic: topic, QueueID: qid, Offset: off})
		return nil
	})
	return out, skipped, err
}

// sortOffsets puts offsets in group, topic, queue order.
func sortOffsets(offsets []Offset) {
	sortByQueue(offsets, func(o *Offset) (string, string, int32) { return o.Group, o.Topic, o.QueueID })
}

// eachQueueValue walks the table named field of a config file, keyed by
// "<topic>@<group>" and then by queue id ({"<field>":{"T@G":{0:v,...}}}),
// calling fn with each value that is not null. what names the table's
// content in errors. Entries of a negative queue id are skipped and
// listed in skipped ("T@G queue -1"): RocketMQ does not check the queue
// id a client commits an offset for, and loads such a file.
func eachQueueValue(data []byte, field, what string, fn func(topic, group string, qid int32, value []byte) error) (skipped []string, err error) {
	table, err := tableMembers(data, field)
	if err != nil {
		return nil, err
	}
	for _, g := range table {
		var key string
		if err := json.Unmarshal(g.Key, &key); err != nil {
			return skipped, fmt.Errorf("%s key %s: %w", what, g.Key, err)
		}
		topic, group, ok := cutLast(key, "@")
		if !ok || topic == "" || group == "" {
			return skipped, fmt.Errorf("%s key %q is not <topic>@<group>", what, key)
		}
		if string(g.Value) == "null" {
			continue
		}
		queues, err := adminbody.Members(g.Value)
		if err != nil {
			return skipped, fmt.Errorf("%s of %s: %w", what, key, err)
		}
		for _, q := range queues {
			qid, err := strconv.ParseInt(unquote(q.Key), 10, 32)
			if err != nil {
				return skipped, fmt.Errorf("%s of %s: queue %s: not a queue id", what, key, q.Key)
			}
			if qid < 0 {
				skipped = append(skipped, fmt.Sprintf("%s queue %d", key, qid))
				continue
			}
			if string(q.Value) == "null" {
				continue
			}
			if err := fn(topic, group, int32(qid), q.Value); err != nil {
				return skipped, fmt.Errorf("%s of %s: queue %d: %w", what, key, qid, err)
			}
		}
	}
	return skipped, nil
}

// sortByQueue orders s by group, topic and queue id, as key gives them.
func sortByQueue[T any](s []T, key func(*T) (group, topic string, qid int32)) {
	sort.Slice(s, func(i, j int) bool {
		ag, at, aq := key(&s[i])
		bg, bt, bq := key(&s[j])
		if ag != bg {
			return ag < bg
		}
		if at != bt {
			return at < bt
		}
		return aq < bq
	})
}

func (c *Config) parseDelayOffsets(data []byte) error {
	table, err := tableMembers(data, "offsetTable")
	if err != nil {
		return err
	}
	c.DelayOffsets = make(map[int]int64, len(table))
	for _, m := range table {
		level, err := strconv.Atoi(unquote(m.Key))
		if err != nil || level < 1 {
			return fmt.Errorf("delay level %s: not a level", m.Key)
		}
		off, err := strconv.ParseInt(string(m.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("delay level %d: offset %s: %w", level, m.Value, err)
		}
		c.DelayOffsets[level] = off
	}
	return nil
}

func (c *Config) parseRequestModes(data []byte) error {
	var f struct {
		Map map[string]map[string]RequestMode `json:"messageRequestModeMap"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	c.RequestModes = c.RequestModes[:0]
	for topic, groups := range f.Map {
		for group, m := range groups {
			if m.Topic == "" {
				m.Topic = topic
			}
			if m.ConsumerGroup == "" {
				m.ConsumerGroup = group
			}
			c.RequestModes = append(c.RequestModes, m)
		}
	}
	sort.Slice(c.RequestModes, func(i, j int) bool {
		a, b := c.RequestModes[i], c.RequestModes[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.ConsumerGroup < b.ConsumerGroup
	})
	return nil
}

// cutLast splits s around the last sep. RocketMQ joins topic and group
// with "@", which neither name may contain.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// unquote returns a key without the quotes fastjson puts around string
// keys (integer keys come bare).
func unquote(k []byte) string {
	s := string(k)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
