package rmqconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/rocksread"
	"github.com/rocketkv/rocketkv/meta"
)

// Config v1 in RocksDB (storeType=defaultRocksDB; spec 6.2): one RocksDB
// database per table under <root>/config, each with the column families
// default (the table), kvDataVersion (its data version) and forbidden
// (groups only):
//
//	config/topics/              default: topic name       -> TopicConfig JSON
//	config/subscriptionGroups/  default: group name       -> SubscriptionGroupConfig JSON
//	                            forbidden: group name     -> {"<topic>":bits,...}
//	config/consumerOffsets/     default: "<topic>@<group>" -> {"offsetTable":{<qid>:<offset>,...}}
//	each                        kvDataVersion: "kvDataVersionKey" -> DataVersion JSON
//
// They are read with internal/rocksread (WAL included) and turned into the
// JSON file each replaces, so the JSON parsers apply unchanged. At load a
// RocketMQ broker merges a JSON file left from before the switch when its
// data version counter is above the database's: for topics and groups the
// JSON's entries are put over the database's, consumer offsets are
// replaced by the JSON's. ReadWith does the same.
const (
	v1Topics          = "topics"
	v1Groups          = "subscriptionGroups"
	v1Offsets         = "consumerOffsets"
	v2Dir             = "rdb"
	v1DataVersionCF   = "kvDataVersion"
	v1DataVersionKey  = "kvDataVersionKey"
	v1ForbiddenCF     = "forbidden"
	v1DefaultCF       = "default"
	v1MaxTableEntries = 50_000_000
)

// rocksDBTables maps the JSON files config v1 replaces to their database.
var rocksDBTables = map[string]string{
	"topics.json":            v1Topics,
	"subscriptionGroup.json": v1Groups,
	"consumerOffset.json":    v1Offsets,
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// RocksDBTable is one config v1 database (config/topics,
// config/subscriptionGroups or config/consumerOffsets) as stored.
type RocksDBTable struct {
	// Entries is the default column family in key order: the name (or
	// "<topic>@<group>") and its JSON value, as stored.
	Entries []adminbody.Member
	// Forbidden is the forbidden column family (groups only), in key order.
	Forbidden []adminbody.Member
	// Version is the data version under kvDataVersionKey, zero without
	// one; RawVersion is its JSON as stored, nil without one.
	Version    meta.DataVersion
	RawVersion []byte
}

// ReadRocksDBTable reads the config v1 database dir, its WAL included.
func ReadRocksDBTable(dir string) (RocksDBTable, error) {
	var t RocksDBTable
	db, err := rocksread.Open(dir)
	if err != nil {
		return t, err
	}
	defer db.Close()
	collect := func(cf string, out *[]adminbody.Member) error {
		return db.Scan(cf, func(k, v []byte) error {
			if len(*out) >= v1MaxTableEntries {
				return fmt.Errorf("column family %s: more than %d entries", cf, v1MaxTableEntries)
			}
			*out = append(*out, adminbody.Member{Key: bytes.Clone(k), Value: bytes.Clone(v)})
			return nil
		})
	}
	if err := collect(v1DefaultCF, &t.Entries); err != nil {
		return t, err
	}
	for _, cf := range db.ColumnFamilies() {
		switch cf.Name {
		case v1ForbiddenCF:
			if err := collect(v1ForbiddenCF, &t.Forbidden); err != nil {
				return t, err
			}
		case v1DataVersionCF:
			err := db.Scan(v1DataVersionCF, func(k, v []byte) error {
				if string(k) != v1DataVersionKey {
					return nil
				}
				if err := json.Unmarshal(v, &t.Version); err != nil {
					return fmt.Errorf("%s: %w", v1DataVersionKey, err)
				}
				t.RawVersion = bytes.Clone(v)
				return nil
			})
			if err != nil {
				return t, err
			}
		}
	}
	return t, nil
}

// jsonObject writes {"<key>":<value>,...} with each key JSON-quoted and each
// value as value(m) returns it.
func jsonObject(b *bytes.Buffer, ms []adminbody.Member, value func(adminbody.Member) ([]byte, error)) error {
	b.WriteByte('{')
	for i, m := range ms {
		v, err := value(m)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(string(m.Key))
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return nil
}

func rawValue(m adminbody.Member) ([]byte, error) {
	if len(bytes.TrimSpace(m.Value)) == 0 {
		return nil, fmt.Errorf("%q: empty value", m.Key)
	}
	return m.Value, nil
}

// RocksDBOffsetTable takes the map out of a consumerOffsets value,
// {"offsetTable":{<queueId>:<offset>,...}}, as stored (fastjson's bare
// integer keys kept); {} when the field is missing.
func RocksDBOffsetTable(value []byte) ([]byte, error) {
	members, err := adminbody.Members(value)
	if err != nil {
		return nil, err
	}
	for _, f := range members {
		if unquote(f.Key) == "offsetTable" {
			return f.Value, nil
		}
	}
	return []byte("{}"), nil
}

// offsetTableValue is RocksDBOffsetTable of an entry's value.
func offsetTableValue(m adminbody.Member) ([]byte, error) {
	v, err := RocksDBOffsetTable(m.Value)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", m.Key, err)
	}
	return v, nil
}

// asJSONFile renders a config v1 table as the JSON file it replaces.
func (t RocksDBTable) asJSONFile(table string) ([]byte, error) {
	var b bytes.Buffer
	var err error
	switch table {
	case v1Topics:
		b.WriteString(`{"topicConfigTable":`)
		err = jsonObject(&b, t.Entries, rawValue)
	case v1Groups:
		b.WriteString(`{"subscriptionGroupTable":`)
		if err = jsonObject(&b, t.Entries, rawValue); err == nil {
			b.WriteString(`,"forbiddenTable":`)
			err = jsonObject(&b, t.Forbidden, rawValue)
		}
	case v1Offsets:
		b.WriteString(`{"offsetTable":`)
		err = jsonObject(&b, t.Entries, offsetTableValue)
	default:
		return nil, fmt.Errorf("unknown config table %q", table)
	}
	b.WriteByte('}')
	return b.Bytes(), err
}

// readRocksDBTable fills the table that name (topics.json,
// subscriptionGroup.json or consumerOffset.json) would from the config v1
// database that replaces it, merged with the JSON file as RocketMQ merges
// them at load; parse is the JSON file's parser.
func (c *Config) readRocksDBTable(dir, name string, parse func([]byte) error, blank blankContent) error {
	table := rocksDBTables[name]
	path := filepath.Join(dir, table)
	t, err := ReadRocksDBTable(path)
	if err != nil {
		return fmt.Errorf("read RocketMQ's RocksDB config %s (or export it with mqadmin rocksDBConfigToJson and move %s aside): %w", path, path, err)
	}
	data, err := t.asJSONFile(table)
	if err != nil {
		return fmt.Errorf("RocketMQ's RocksDB config %s: %w", path, err)
	}
	var jsonVersion meta.DataVersion
	file, _, err := readWithBackup(filepath.Join(dir, name), func(b []byte) error {
		v, err := fileDataVersion(b)
		jsonVersion = v
		return err
	}, blank)
	if err != nil {
		// RocketMQ's load fails on an unreadable JSON file beside the
		// database too.
		return err
	}
	newer := file != "" && jsonVersion.Counter > t.Version.Counter
	if newer && table == v1Offsets {
		// The JSON's table replaces the database's.
		c.Files = append(c.Files, file)
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read RocketMQ config %s: %w", file, err)
		}
		return parse(b)
	}
	if err := parse(data); err != nil {
		return fmt.Errorf("RocketMQ's RocksDB config %s: %w", path, err)
	}
	c.Files = append(c.Files, path)
	if !newer {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read RocketMQ config %s: %w", file, err)
	}
	var j Config
	switch table {
	case v1Topics:
		if err := j.parseTopics(b); err != nil {
			return fmt.Errorf("RocketMQ config %s: %w", file, err)
		}
		c.Topics = overlay(c.Topics, j.Topics, func(t meta.TopicConfig) string { return t.TopicName })
	case v1Groups:
		if err := j.parseGroups(b); err != nil {
			return fmt.Errorf("RocketMQ config %s: %w", file, err)
		}
		c.Groups = overlay(c.Groups, j.Groups, func(g meta.SubscriptionGroupConfig) string { return g.GroupName })
		c.Forbidden = overlay(c.Forbidden, j.Forbidden, func(f meta.GroupForbidden) string { return f.Group })
	}
	c.Files = append(c.Files, file)
	return nil
}

// overlay returns base with top's entries put over it by name, in name order.
func overlay[T any](base, top []T, name func(T) string) []T {
	at := map[string]int{}
	for i, e := range base {
		at[name(e)] = i
	}
	for _, e := range top {
		if i, ok := at[name(e)]; ok {
			base[i] = e
			continue
		}
		at[name(e)] = len(base)
		base = append(base, e)
	}
	sortByName(base, name)
	return base
}

// sortByName sorts s by name, stably.
func sortByName[T any](s []T, name func(T) string) {
	slices.SortStableFunc(s, func(a, b T) int { return strings.Compare(name(a), name(b)) })
}

// fileDataVersion reads the top-level dataVersion of a config file, which
// may hold fastjson's unquoted integer keys elsewhere.
func fileDataVersion(data []byte) (meta.DataVersion, error) {
	var v meta.DataVersion
	top, err := adminbody.Members(data)
	if err != nil {
		return v, err
	}
	for _, m := range top {
		if unquote(m.Key) == "dataVersion" && string(m.Value) != "null" {
			if err := json.Unmarshal(m.Value, &v); err != nil {
				return v, fmt.Errorf("dataVersion: %w", err)
			}
		}
	}
	return v, nil
}
