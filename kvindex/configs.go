package kvindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/rocketkv/rocketkv/meta"
)

// ConfigTable is a durable table of named JSON configs (topic configs in
// keyspace 0x40, subscription group configs in 0x41) with a bounded cache
// in front and a DataVersion bumped on every change, persisted in the same
// synced batch. The cache remembers absent names too: requests name topics
// that do not exist on every call (a group's pop-retry topics, say), and
// each would otherwise cost a database read.
type ConfigTable[T any] struct {
	db     *DB
	prefix byte
	what   string
	verKey []byte
	nameOf func(T) string
	cache  *lru.Cache[string, cachedConfig[T]]
	// mu serialises writers so versions and values agree, and orders a
	// cache fill after a database read against writers, so a fill never
	// overwrites a newer value with the one it read.
	mu      sync.Mutex
	version *meta.VersionCounter
}

// cachedConfig is a cache entry: a config, or the knowledge that the name
// has none.
type cachedConfig[T any] struct {
	cfg     T
	present bool
}

// Topics is the table of topic configs.
type Topics = ConfigTable[meta.TopicConfig]

// Groups is the table of subscription group configs.
type Groups = ConfigTable[meta.SubscriptionGroupConfig]

// GroupForbiddens is the table of what groups may not do on topics.
type GroupForbiddens = ConfigTable[meta.GroupForbidden]

// Users is the table of ACL 2.0 users, by username.
type Users = ConfigTable[meta.UserInfo]

// ACLs is the table of ACL 2.0 access lists, by subject ("User:<name>").
type ACLs = ConfigTable[meta.AclInfo]

// TopicQueueMappings is the table of static topics' mappings, by topic.
type TopicQueueMappings = ConfigTable[meta.TopicQueueMappingDetail]

// DefaultConfigCache is the number of configs a table keeps in memory.
const DefaultConfigCache = 1 << 16

// Topics opens the topic config table, caching up to cacheSize configs
// (DefaultConfigCache when <= 0).
func (d *DB) Topics(cacheSize int) (*Topics, error) {
	return openConfigTable(d, prefixTopic, "topic", metaTopicsVer, cacheSize,
		func(t meta.TopicConfig) string { return t.TopicName })
}

// Groups opens the subscription group table.
func (d *DB) Groups(cacheSize int) (*Groups, error) {
	return openConfigTable(d, prefixGroup, "group", metaGroupsVer, cacheSize,
		func(g meta.SubscriptionGroupConfig) string { return g.GroupName })
}

// GroupForbiddens opens the table of what consumer groups are forbidden
// on topics (keyspace 0x44, RocketMQ's forbiddenTable), caching up to
// cacheSize entries, absent groups included: every pull without a posted
// subscription reads it.
func (d *DB) GroupForbiddens(cacheSize int) (*GroupForbiddens, error) {
	return openConfigTable(d, prefixForbidden, "group forbidden", metaForbidVer, cacheSize,
		func(f meta.GroupForbidden) string { return f.Group })
}

// Users opens the table of ACL 2.0 users (keyspace 0x42).
func (d *DB) Users(cacheSize int) (*Users, error) {
	return openConfigTable(d, prefixAuthUser, "user", metaUsersVer, cacheSize,
		func(u meta.UserInfo) string { return u.Username })
}

// ACLs opens the table of ACL 2.0 access lists (keyspace 0x43).
func (d *DB) ACLs(cacheSize int) (*ACLs, error) {
	return openConfigTable(d, prefixAuthACL, "acl", metaACLsVer, cacheSize,
		func(a meta.AclInfo) string { return a.Subject })
}

// TopicQueueMappings opens the table of static topics' queue mappings
// (keyspace 0x45, RocketMQ's topicQueueMapping.json), caching up to
// cacheSize entries, absent topics included: sends, pulls and offset
// requests of every topic look theirs up.
func (d *DB) TopicQueueMappings(cacheSize int) (*TopicQueueMappings, error) {
	return openConfigTable(d, prefixMapping, "topic queue mapping", metaMappingVer, cacheSize,
		func(m meta.TopicQueueMappingDetail) string { return m.Topic })
}

func openConfigTable[T any](d *DB, prefix byte, what, verName string, cacheSize int, nameOf func(T) string) (*ConfigTable[T], error) {
	if cacheSize <= 0 {
		cacheSize = DefaultConfigCache
	}
	cache, err := lru.New[string, cachedConfig[T]](cacheSize)
	if err != nil {
		return nil, fmt.Errorf("%s cache: %w", what, err)
	}
	t := &ConfigTable[T]{db: d, prefix: prefix, what: what, verKey: metaKey(verName), nameOf: nameOf, cache: cache}
	v, err := d.get(t.verKey)
	if err != nil {
		return nil, fmt.Errorf("read %s data version: %w", what, err)
	}
	var start meta.DataVersion
	if len(v) == 16 {
		start.Counter = int64(binary.BigEndian.Uint64(v))
		start.Timestamp = int64(binary.BigEndian.Uint64(v[8:]))
	} else if v != nil {
		return nil, fmt.Errorf("read %s data version %x: %w", what, v, ErrBadKey)
	}
	t.version = meta.NewVersionCounter(start)
	return t, nil
}

// Get returns the config of name; ok is false when there is none.
func (t *ConfigTable[T]) Get(name string) (cfg T, ok bool, err error) {
	if c, hit := t.cache.Get(name); hit {
		return c.cfg, c.present, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, hit := t.cache.Get(name); hit {
		return c.cfg, c.present, nil
	}
	v, err := t.db.get(nameKey(t.prefix, name))
	if err != nil {
		return cfg, false, fmt.Errorf("read %s %s: %w", t.what, name, err)
	}
	if v == nil {
		t.cache.Add(name, cachedConfig[T]{})
		return cfg, false, nil
	}
	if err := json.Unmarshal(v, &cfg); err != nil {
		return cfg, false, fmt.Errorf("decode %s %s: %w", t.what, name, err)
	}
	t.cache.Add(name, cachedConfig[T]{cfg: cfg, present: true})
	return cfg, true, nil
}

// GetMany returns the stored configs among names; a name without one is
// not in the map. It reads the names in key order through one iterator:
// for a bulk request of many names, most of them new, each is a step
// from the one before rather than a point read that probes the bloom
// filter of every table overlapping it. It neither reads nor fills the
// cache, which thousands of absent names would empty of the configs in
// use.
func (t *ConfigTable[T]) GetMany(names []string) (map[string]T, error) {
	out := make(map[string]T)
	if len(names) == 0 {
		return out, nil
	}
	sorted := slices.Sorted(slices.Values(names))
	sorted = slices.Compact(sorted)
	lower := nameKey(t.prefix, sorted[0])
	upper := append(nameKey(t.prefix, sorted[len(sorted)-1]), 0)
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("read %d %s configs: %w", len(names), t.what, err)
	}
	var k []byte
	for _, name := range sorted {
		k = append(append(k[:0], t.prefix), name...)
		if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
			continue
		}
		v, err := it.ValueAndErr()
		var cfg T
		if err == nil {
			err = json.Unmarshal(v, &cfg)
		}
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("decode %s %s: %w", t.what, name, err)
		}
		out[name] = cfg
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read %d %s configs: %w", len(names), t.what, err)
	}
	return out, nil
}

// Put stores configs (created or replaced) in one synced batch and bumps
// the data version once.
func (t *ConfigTable[T]) Put(cfgs ...T) error {
	if len(cfgs) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.db.pdb.NewBatch()
	defer b.Close()
	for _, c := range cfgs {
		name := t.nameOf(c)
		if name == "" {
			return fmt.Errorf("put %s: empty name", t.what)
		}
		raw, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", t.what, name, err)
		}
		if err := b.Set(nameKey(t.prefix, name), raw, nil); err != nil {
			return fmt.Errorf("put %s %s: %w", t.what, name, err)
		}
	}
	if err := t.commitWithVersion(b); err != nil {
		return fmt.Errorf("put %d %s configs: %w", len(cfgs), t.what, err)
	}
	for _, c := range cfgs {
		t.cache.Add(t.nameOf(c), cachedConfig[T]{cfg: c, present: true})
	}
	return nil
}

// Delete removes the configs of names (absent ones are ignored).
func (t *ConfigTable[T]) Delete(names ...string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.db.pdb.NewBatch()
	defer b.Close()
	for _, n := range names {
		if err := b.Delete(nameKey(t.prefix, n), nil); err != nil {
			return fmt.Errorf("delete %s %s: %w", t.what, n, err)
		}
	}
	if err := t.commitWithVersion(b); err != nil {
		return fmt.Errorf("delete %s configs: %w", t.what, err)
	}
	for _, n := range names {
		t.cache.Add(n, cachedConfig[T]{})
	}
	return nil
}

// ReplaceAlso is a write Replace commits in its batch.
type ReplaceAlso func(b *pebble.Batch) error

// RecordSlaveTopicsAt is SetSlaveTopicsAt as a write of Replace's batch:
// a slave's take of its master's topic table and the record of how far
// it covers the log cannot part in a crash.
func RecordSlaveTopicsAt(off int64) ReplaceAlso {
	return func(b *pebble.Batch) error {
		return b.Set(metaKey(metaSlaveTopicsAt), putInt64(off), nil)
	}
}

// Replace makes the table hold exactly cfgs and sets its data version to
// version, in one synced batch with the writes of also: a slave taking
// over its master's table (RocketMQ's SlaveSynchronize). Configs not in
// cfgs are deleted and their names returned in name order.
// version.StateVersion is not kept.
func (t *ConfigTable[T]) Replace(cfgs []T, version meta.DataVersion, also ...ReplaceAlso) (removed []string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := make(map[string]bool, len(cfgs))
	b := t.db.pdb.NewBatch()
	defer b.Close()
	for _, c := range cfgs {
		name := t.nameOf(c)
		if name == "" {
			return nil, fmt.Errorf("replace the %s table: empty name", t.what)
		}
		keep[name] = true
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", t.what, name, err)
		}
		if err := b.Set(nameKey(t.prefix, name), raw, nil); err != nil {
			return nil, fmt.Errorf("put %s %s: %w", t.what, name, err)
		}
	}
	if err := t.db.Scan([]byte{t.prefix}, func(k, _ []byte) bool {
		if name := string(k[1:]); !keep[name] {
			removed = append(removed, name)
		}
		return true
	}); err != nil {
		return nil, fmt.Errorf("list the %s table: %w", t.what, err)
	}
	for _, name := range removed {
		if err := b.Delete(nameKey(t.prefix, name), nil); err != nil {
			return nil, fmt.Errorf("delete %s %s: %w", t.what, name, err)
		}
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(version.Counter))
	v = binary.BigEndian.AppendUint64(v, uint64(version.Timestamp))
	if err := b.Set(t.verKey, v, nil); err != nil {
		return nil, fmt.Errorf("replace the %s table: %w", t.what, err)
	}
	for _, w := range also {
		if err := w(b); err != nil {
			return nil, fmt.Errorf("replace the %s table: %w", t.what, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("replace the %s table with %d configs: %w", t.what, len(cfgs), err)
	}
	t.version.Set(version)
	for _, c := range cfgs {
		t.cache.Add(t.nameOf(c), cachedConfig[T]{cfg: c, present: true})
	}
	for _, name := range removed {
		t.cache.Add(name, cachedConfig[T]{})
	}
	return removed, nil
}

// Touch records a change that lives outside the table (the broker's
// permission masks every topic's) by moving the data version on, synced:
// name servers re-read a broker's topics only when its version changes.
func (t *ConfigTable[T]) Touch() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.db.pdb.NewBatch()
	defer b.Close()
	if err := t.commitWithVersion(b); err != nil {
		return fmt.Errorf("move the %s data version on: %w", t.what, err)
	}
	return nil
}

func (t *ConfigTable[T]) commitWithVersion(b *pebble.Batch) error {
	next := t.version.Current()
	next.Counter++
	v := binary.BigEndian.AppendUint64(nil, uint64(next.Counter))
	v = binary.BigEndian.AppendUint64(v, uint64(nowMillis()))
	if err := b.Set(t.verKey, v, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	t.version.Bump()
	return nil
}

// Each calls fn for every config in name order until fn returns false. It
// reads the database, not the cache, and does not fill the cache.
func (t *ConfigTable[T]) Each(fn func(T) bool) error {
	return t.EachExcept(nil, fn)
}

// EachExcept is Each for the configs whose names keep does not hold:
// only those are decoded, so a look for the few configs a table holds
// that another does not costs a scan of the keys.
func (t *ConfigTable[T]) EachExcept(keep map[string]bool, fn func(T) bool) error {
	var derr error
	err := t.db.Scan([]byte{t.prefix}, func(k, v []byte) bool {
		if keep[string(k[1:])] {
			return true
		}
		var c T
		if err := json.Unmarshal(v, &c); err != nil {
			derr = fmt.Errorf("decode %s %q: %w", t.what, k[1:], err)
			return false
		}
		return fn(c)
	})
	if err != nil {
		return err
	}
	return derr
}

// All returns every config in name order (Each collecting them), or ctx's
// error when it ends first.
func (t *ConfigTable[T]) All(ctx context.Context) ([]T, error) {
	var out []T
	if err := t.Each(func(cfg T) bool {
		out = append(out, cfg)
		return ctx.Err() == nil
	}); err != nil {
		return nil, fmt.Errorf("read the %s configs: %w", t.what, err)
	}
	return out, ctx.Err()
}

// Page calls fn for the configs at positions [from, from+n) of the table
// in name order (none when n <= 0 or from is past the end) and returns
// how many configs the table holds. The page and the total come from one
// scan, so they agree however the table changes meanwhile; only the
// page's configs are decoded.
func (t *ConfigTable[T]) Page(from, n int, fn func(T)) (total int, err error) {
	var derr error
	err = t.db.Scan([]byte{t.prefix}, func(k, v []byte) bool {
		i := total
		total++
		if i < from || i-from >= n || derr != nil {
			return true
		}
		var c T
		if err := json.Unmarshal(v, &c); err != nil {
			derr = fmt.Errorf("decode %s %q: %w", t.what, k[1:], err)
			return true
		}
		fn(c)
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("page through the %s configs: %w", t.what, err)
	}
	return total, derr
}

// Count returns the number of configs (a scan of the keyspace).
func (t *ConfigTable[T]) Count() (int, error) {
	n := 0
	err := t.db.Scan([]byte{t.prefix}, func(_, _ []byte) bool { n++; return true })
	return n, err
}

// Version returns the table's data version.
func (t *ConfigTable[T]) Version() meta.DataVersion { return t.version.Current() }
