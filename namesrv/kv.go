package namesrv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/rocketkv/rocketkv/internal/atomicfile"
)

// OrderTopicConfigNamespace is the KV namespace of per-topic order
// configuration ("brokerName:queueNum;..."), which routes carry as
// orderTopicConf when order messages are enabled and which REGISTER_BROKER
// returns to brokers.
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// KVStore holds the name server's namespaced key/value configuration
// (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE). With a path it is
// loaded at start and rewritten after each change in Java's kvConfig.json
// format: {"configTable":{"<namespace>":{"<key>":"<value>"}}}.
type KVStore struct {
	path string

	mu    sync.RWMutex // guards table and the file
	table map[string]map[string]string
}

// kvFile is the persisted form.
type kvFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// OpenKVStore returns a store persisted at path, loading what is there; an
// empty path keeps the store in memory only. A missing file is an empty
// store, and so is an empty one: RocketMQ's name server rewrites
// kvConfig.json in place (truncate, then write), so one that stopped in
// between leaves it empty, and RocketMQ starts from such a file with no
// KV configuration.
func OpenKVStore(path string) (*KVStore, error) {
	s := &KVStore{path: path, table: make(map[string]map[string]string)}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read kv config %s: %w", path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return s, nil
	}
	var f kvFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse kv config %s: %w", path, err)
	}
	for ns, kv := range f.ConfigTable {
		if kv == nil {
			kv = make(map[string]string)
		}
		s.table[ns] = kv
	}
	return s, nil
}

// Put sets key in namespace.
func (s *KVStore) Put(namespace, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := s.table[namespace]
	created := kv == nil
	if created {
		kv = make(map[string]string)
		s.table[namespace] = kv
	}
	prev, had := kv[key]
	kv[key] = value
	if err := s.persistLocked(); err != nil {
		// The caller hears the put failed: nobody may read it either.
		switch {
		case had:
			kv[key] = prev
		case created:
			delete(s.table, namespace)
		default:
			delete(kv, key)
		}
		return err
	}
	return nil
}

// Get returns the value of key in namespace.
func (s *KVStore) Get(namespace, key string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.table[namespace][key]
	return v, ok
}

// Delete removes key from namespace; the namespace stays, possibly empty,
// as in Java.
func (s *KVStore) Delete(namespace, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := s.table[namespace]
	prev, ok := kv[key]
	if !ok {
		return nil
	}
	delete(kv, key)
	if err := s.persistLocked(); err != nil {
		kv[key] = prev // the caller hears the delete failed
		return err
	}
	return nil
}

// List returns a copy of namespace's table, or false when the namespace
// was never written.
func (s *KVStore) List(namespace string) (map[string]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	kv, ok := s.table[namespace]
	return maps.Clone(kv), ok
}

// persistLocked rewrites the file: a temporary file, fsynced, renamed over
// the old one, so a crash leaves the old or the new content.
func (s *KVStore) persistLocked() error {
	if s.path == "" {
		return nil
	}
	data, err := json.Marshal(kvFile{ConfigTable: s.table})
	if err != nil {
		return fmt.Errorf("encode kv config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("write kv config %s: %w", s.path, err)
	}
	if err := atomicfile.WriteFile(s.path, data, 0o644); err != nil {
		return fmt.Errorf("write kv config: %w", err)
	}
	return nil
}
