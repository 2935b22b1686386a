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
	// the spelling the file used (lower-cased when the file is YAML or
	// JSON), and the spellings in another case of a key that a properties
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
	var out Loaded
	out.Broker = DefaultBroker()
	var inerts []inertFound[Broker]
	if path != "" {
		unknown, in, err := brokerSchema.load(path, &out.Broker)
		if err != nil {
			return Loaded{}, err
		}
		out.UnknownKeys, inerts = unknown, in
	}
	_, inOverrides, err := brokerSchema.apply(&out.Broker, overrides)
	if err != nil {
		return Loaded{}, fmt.Errorf("override: %w", err)
	}
	out.InertKeys = report(append(inerts, inOverrides...), &out.Broker)
	return out, nil
}

// brokerSchema is the broker's key table with its lookups.
var brokerSchema = newSchema(brokerFields, func(b Broker) Broker {
	b.DeleteWhen = slices.Clone(b.DeleteWhen)
	return b
}).withInert(slices.Concat(brokerInert, brokerInertRocketMQ53, nettyServerInert[Broker]()))

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
