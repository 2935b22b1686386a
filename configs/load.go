package configs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/viper"
)

// Loaded is the outcome of reading a configuration.
type Loaded struct {
	// Broker is the resulting configuration: defaults, then the file, then
	// the overrides.
	Broker Broker
	// UnknownKeys lists keys of the file that rocketkv does not know, in
	// the spelling the file used (lower-cased when the file is YAML). The
	// caller logs them as warnings: RocketMQ broker.conf files commonly
	// carry keys for features rocketkv does not have.
	UnknownKeys []string
}

// LoadBroker reads a broker configuration. path may be empty (defaults
// only), a RocketMQ-style properties file (broker.conf, *.properties: one
// key=value per line) or a YAML file (*.yaml, *.yml); the format is chosen
// by extension, and anything that is not YAML is read as properties.
// overrides (for example from command-line flags) win over the file; their
// keys must be known.
//
// A value that does not parse is an error naming the key and the source.
func LoadBroker(path string, overrides map[string]string) (Loaded, error) {
	var out Loaded
	out.Broker = DefaultBroker()

	byKey := fieldIndex()

	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Loaded{}, fmt.Errorf("read config %s: %w", path, err)
		}
		reg := viper.NewCodecRegistry()
		if err := reg.RegisterCodec("properties", propertiesCodec{}); err != nil {
			return Loaded{}, fmt.Errorf("register properties codec: %w", err)
		}
		v := viper.NewWithOptions(viper.WithCodecRegistry(reg))
		v.SetConfigType(formatOf(path))
		if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
			return Loaded{}, fmt.Errorf("parse config %s: %w", path, err)
		}
		keys := v.AllKeys()
		sort.Strings(keys)
		for _, k := range keys {
			f, ok := byKey[k]
			if !ok {
				out.UnknownKeys = append(out.UnknownKeys, k)
				continue
			}
			val := strings.TrimSpace(fmt.Sprint(v.Get(k)))
			if err := f.set(&out.Broker, val); err != nil {
				return Loaded{}, fmt.Errorf("config %s: key %s: %w", path, f.key, err)
			}
		}
	}

	if _, err := out.Broker.Apply(overrides); err != nil {
		return Loaded{}, fmt.Errorf("override: %w", err)
	}
	return out, nil
}

// fieldIndex maps every key and alias, lower-cased, to its field. It is
// built once from brokerFields and only read.
var fieldIndex = sync.OnceValue(func() map[string]*field {
	byKey := make(map[string]*field, len(brokerFields)*2)
	for i := range brokerFields {
		f := &brokerFields[i]
		byKey[strings.ToLower(f.key)] = f
		for _, a := range f.aliases {
			byKey[strings.ToLower(a)] = f
		}
	}
	return byKey
})

// Apply sets the given keys (RocketMQ's names, their aliases, any case) on
// b as a configuration file would, in key order, and returns the canonical
// names of the keys it set. An unknown key or a value that does not parse
// is an error naming the key, and b is left unchanged.
func (b *Broker) Apply(props map[string]string) ([]string, error) {
	byKey := fieldIndex()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	next := *b
	next.DeleteWhen = slices.Clone(b.DeleteWhen)
	set := make([]string, 0, len(keys))
	for _, k := range keys {
		f, ok := byKey[strings.ToLower(strings.TrimSpace(k))]
		if !ok {
			return nil, fmt.Errorf("unknown key %s", k)
		}
		if err := f.set(&next, strings.TrimSpace(props[k])); err != nil {
			return nil, fmt.Errorf("key %s: %w", f.key, err)
		}
		set = append(set, f.key)
	}
	*b = next
	return set, nil
}

// formatOf picks the viper config type for a file name.
func formatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return "yaml"
	default:
		return "properties"
	}
}

// Keys returns every key rocketkv understands, in table order, without
// aliases.
func Keys() []string {
	out := make([]string, len(brokerFields))
	for i, f := range brokerFields {
		out[i] = f.key
	}
	return out
}
