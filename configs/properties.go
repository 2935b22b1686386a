package configs

import (
	"fmt"

	"github.com/magiconair/properties"
)

// propertiesCodec lets viper read Java properties files such as RocketMQ's
// broker.conf (key=value lines, '#' and '!' comments, backslash
// continuations). Keys keep their spelling; viper lower-cases them itself.
// Value expansion (${...}) is off: RocketMQ does not expand values either.
type propertiesCodec struct{}

// Decode fills v with one entry per property.
func (propertiesCodec) Decode(b []byte, v map[string]any) error {
	loader := properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	p, err := loader.LoadBytes(b)
	if err != nil {
		return fmt.Errorf("parse properties: %w", err)
	}
	for _, k := range p.Keys() {
		val, _ := p.Get(k)
		v[k] = val
	}
	return nil
}

// Encode writes v as key=value lines. Nested maps are not representable in
// a properties file and are rejected.
func (propertiesCodec) Encode(v map[string]any) ([]byte, error) {
	p := properties.NewProperties()
	p.DisableExpansion = true
	for k, val := range v {
		if _, nested := val.(map[string]any); nested {
			return nil, fmt.Errorf("encode properties: key %q holds a nested map", k)
		}
		if _, _, err := p.Set(k, fmt.Sprint(val)); err != nil {
			return nil, fmt.Errorf("encode properties: key %q: %w", k, err)
		}
	}
	p.Sort()
	return []byte(p.String()), nil
}
