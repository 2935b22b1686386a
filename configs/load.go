package configs

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Loaded is the outcome of reading a configuration.
type Loaded struct {
	// Broker is the resulting configuration: defaults, then the file, then
	// the overrides.
	Broker Broker
	// UnknownKeys lists keys of the file that rocketkv does not know, in
	// the spelling the file used (a YAML or JSON file's nested keys as a
	// dotted path), and the spellings in another case of a key that a properties
	// file also gives in RocketMQ's spelling, which win (RocketMQ ignores
	// the others). The caller logs them as warnings: RocketMQ broker.conf
	// files commonly carry keys for features rocketkv does not have.
	UnknownKeys []string
	// InertKeys lists the RocketMQ keys of the file that rocketkv accepts
	// without effect, with the reason (and a warning when the value asks
	// for something rocketkv does not do). The caller logs each once.
	InertKeys []InertKey
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
	return LoadBrokerFrom(path, nil, []Source{{Name: "override", Values: overrides}})
}

// Source is settings from one place other than the configuration file,
// named for the errors in them.
type Source struct {
	// Name says where Values came from, as an error starts: "flag -n",
	// "environment variable NAMESRV_ADDR".
	Name string
	// Values are settings under RocketMQ's keys (or their aliases).
	Values map[string]string
}

// LoadBrokerFrom is LoadBroker with each setting's origin named:
// defaults give way to the file and to overrides, which win over the
// file (RocketMQ's broker takes namesrvAddr from NAMESRV_ADDR unless its
// file or -n names one); a later source wins over an earlier one. A
// default that the file or an override sets is not read at all. An error
// in a source starts with its Name.
func LoadBrokerFrom(path string, defaults, overrides []Source) (Loaded, error) {
	var out Loaded
	out.Broker = DefaultBroker()
	inerts, err := loadLayers(brokerSchema, &out.Broker, path, defaults, overrides, &out.UnknownKeys)
	if err != nil {
		return Loaded{}, err
	}
	out.InertKeys = report(inerts, &out.Broker)
	return out, nil
}

// loadLayers sets c from the file at path (none when empty) and the
// overrides after it, then from the defaults' settings of the keys
// neither set (as though the defaults came first and gave way). It
// stores the file's unknown keys in unknown and returns the inert keys
// met.
func loadLayers[T any](s *schema[T], c *T, path string, defaults, overrides []Source, unknown *[]string) ([]inertFound[T], error) {
	var inerts []inertFound[T]
	taken := map[string]bool{}
	if path != "" {
		unk, in, set, err := s.load(path, c)
		if err != nil {
			return nil, err
		}
		*unknown, inerts = unk, in
		for _, k := range set {
			taken[k] = true
		}
	}
	in, err := applySources(s, c, overrides, taken)
	if err != nil {
		return nil, err
	}
	inerts = append(inerts, in...)
	var left []Source
	for _, src := range defaults {
		values := make(map[string]string, len(src.Values))
		for k, v := range src.Values {
			if key, ok := s.canonical(k); !ok || !taken[key] {
				values[k] = v
			}
		}
		left = append(left, Source{Name: src.Name, Values: values})
	}
	in, err = applySources(s, c, left, nil)
	if err != nil {
		return nil, err
	}
	return append(inerts, in...), nil
}

// applySources applies each source's settings to c in order, records the
// keys set in taken (when not nil), and returns the inert keys among
// them; an error names the source.
func applySources[T any](s *schema[T], c *T, sources []Source, taken map[string]bool) ([]inertFound[T], error) {
	var inerts []inertFound[T]
	for _, src := range sources {
		set, in, err := s.apply(c, src.Values)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
		if taken != nil {
			for _, k := range set {
				taken[k] = true
			}
		}
		inerts = append(inerts, in...)
	}
	return inerts, nil
}

// brokerSchema is the broker's key table with its lookups.
var brokerSchema = newSchema(brokerFields, func(b Broker) Broker {
	b.DeleteWhen = slices.Clone(b.DeleteWhen)
	return b
}).withInert(slices.Concat(brokerInert, brokerInertRocketMQ53, brokerInertDevelopStore, nettyServerInert[Broker]()))

// Apply sets the given keys (RocketMQ's names, their aliases, any case) on
// b as a configuration file would, in key order, and returns the canonical
// names of the keys it set. Inert keys (InertKeys) are checked and
// otherwise ignored. An unknown key or a value that does not parse
// is an error naming the key, and b is left unchanged.
func (b *Broker) Apply(props map[string]string) ([]string, error) {
	set, _, err := brokerSchema.apply(b, props)
	return set, err
}

// ApplyReporting is Apply that also returns the inert keys among props
// (marked Override), for the caller to log.
func (b *Broker) ApplyReporting(props map[string]string) ([]string, []InertKey, error) {
	return brokerSchema.applyReporting(b, props)
}

// formatOf picks the viper config type for a file name.
func formatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return "yaml"
	case ".json":
		return "json"
	default:
		return "properties"
	}
}

// Keys returns every key rocketkv understands, in table order, without
// aliases.
func Keys() []string { return brokerSchema.keys() }
