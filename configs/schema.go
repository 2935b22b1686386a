package configs

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/viper"
)

// schema is the key table of one configuration struct T (Broker, Namesrv)
// and what is built on it: defaults, loading a file, applying updates,
// reporting the settings in force. The table is fixed at package
// initialisation and only read afterwards.
type schema[T any] struct {
	fields []field[T]
	// clone copies a configuration deeply enough that setting fields on
	// the copy leaves the original alone (slices); nil for a plain copy.
	clone func(T) T
	index func() map[string]*field[T]
	// inert lists the keys accepted without effect (inert.go), looked up
	// in inertIndex (lower-cased).
	inert      []inert[T]
	inertIndex map[string]*inert[T]
}

// inertKeys returns the keys accepted without effect, in table order.
func (s *schema[T]) inertKeys() []string {
	out := make([]string, len(s.inert))
	for i, k := range s.inert {
		out[i] = k.key
	}
	return out
}

// withInert adds keys accepted without effect to the schema. Call it once,
// when the schema is built.
func (s *schema[T]) withInert(keys []inert[T]) *schema[T] {
	s.inert = keys
	s.inertIndex = make(map[string]*inert[T], len(keys))
	for i := range keys {
		s.inertIndex[strings.ToLower(keys[i].key)] = &keys[i]
	}
	return s
}

// lookupInert finds an inert key in any case.
func (s *schema[T]) lookupInert(key string) (*inert[T], bool) {
	k, ok := s.inertIndex[strings.ToLower(strings.TrimSpace(key))]
	return k, ok
}

// applyReporting is apply with the inert keys met reported as InertKeys
// (judged against c as applied).
func (s *schema[T]) applyReporting(c *T, props map[string]string) ([]string, []InertKey, error) {
	set, inerts, err := s.apply(c, props)
	if err != nil {
		return nil, nil, err
	}
	return set, report(inerts, c), nil
}

// inertFound is an inert key met while loading, with its value and
// whether it came from an override rather than the file.
type inertFound[T any] struct {
	k        *inert[T]
	raw      string
	override bool
}

// report turns the inert keys met into InertKeys, their warnings judged
// against the configuration c as finally loaded.
func report[T any](found []inertFound[T], c *T) []InertKey {
	var out []InertKey
	for _, f := range found {
		ik := InertKey{Key: f.k.key, Value: f.raw, Reason: f.k.reason, Override: f.override}
		if f.k.warn != nil {
			ik.Warning = f.k.warn(c, f.raw)
		}
		out = append(out, ik)
	}
	return out
}

// newSchema builds the schema of a field table. Its lookup index (every
// key and alias, lower-cased) is built on first use.
func newSchema[T any](fields []field[T], clone func(T) T) *schema[T] {
	s := &schema[T]{fields: fields, clone: clone}
	s.index = sync.OnceValue(func() map[string]*field[T] {
		byKey := make(map[string]*field[T], len(fields)*2)
		for i := range fields {
			f := &fields[i]
			byKey[strings.ToLower(f.key)] = f
			for _, a := range f.aliases {
				byKey[strings.ToLower(a)] = f
			}
		}
		return byKey
	})
	return s
}

// lookup finds the field of a key or alias in any case.
func (s *schema[T]) lookup(key string) (*field[T], bool) {
	f, ok := s.index()[strings.ToLower(strings.TrimSpace(key))]
	return f, ok
}

// canonical is the canonical name of a key or alias, or false for a key
// the schema does not know.
func (s *schema[T]) canonical(key string) (string, bool) {
	f, ok := s.lookup(key)
	if !ok {
		return "", false
	}
	return f.key, true
}

// defaults is the configuration with every key at its default.
func (s *schema[T]) defaults() T {
	var c T
	for _, f := range s.fields {
		if err := f.set(&c, f.def); err != nil {
			// The defaults are constants checked by the tests; a failure
			// here is a programming error in the field table.
			panic("configs: default of " + f.key + ": " + err.Error())
		}
	}
	return c
}

// settings is every key's current value as text under its canonical name.
func (s *schema[T]) settings(c *T) map[string]string {
	out := make(map[string]string, len(s.fields))
	for _, f := range s.fields {
		out[f.key] = f.get(c)
	}
	return out
}

// keys lists the canonical keys in table order.
func (s *schema[T]) keys() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.key
	}
	return out
}

// apply sets props on c in key order and returns the canonical names of
// the keys it set and the inert keys among props (checked, marked as
// overrides, not set). An unknown key or a value that does not parse is
// an error naming the key, and c is left unchanged.
func (s *schema[T]) apply(c *T, props map[string]string) ([]string, []inertFound[T], error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	next := *c
	if s.clone != nil {
		next = s.clone(*c)
	}
	set := make([]string, 0, len(keys))
	var inerts []inertFound[T]
	for _, k := range keys {
		f, ok := s.lookup(k)
		if !ok {
			if ik, ok := s.lookupInert(k); ok {
				// Accepted, checked, and nothing changes.
				raw := strings.TrimSpace(props[k])
				if err := ik.parse(raw); err != nil {
					return nil, nil, fmt.Errorf("key %s: %w", ik.key, err)
				}
				inerts = append(inerts, inertFound[T]{k: ik, raw: raw, override: true})
				continue
			}
			return nil, nil, fmt.Errorf("unknown key %s", k)
		}
		if err := f.set(&next, strings.TrimSpace(props[k])); err != nil {
			return nil, nil, fmt.Errorf("key %s: %w", f.key, err)
		}
		set = append(set, f.key)
	}
	*c = next
	return set, inerts, nil
}

// load reads the file at path (properties or YAML, by extension) into c
// and returns the keys of the file the schema does not know, in the
// spelling the file used (lower-cased by viper), and the inert keys it
// holds. A value that does not parse, an inert key's included, is an
// error naming the key and the file.
func (s *schema[T]) load(path string, c *T) (unknown []string, inerts []inertFound[T], err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	reg := viper.NewCodecRegistry()
	if err := reg.RegisterCodec("properties", propertiesCodec{}); err != nil {
		return nil, nil, fmt.Errorf("register properties codec: %w", err)
	}
	v := viper.NewWithOptions(viper.WithCodecRegistry(reg))
	v.SetConfigType(formatOf(path))
	if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
		return nil, nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	keys := v.AllKeys()
	sort.Strings(keys)
	for _, k := range keys {
		val := valueText(v.Get(k))
		f, ok := s.lookup(k)
		if !ok {
			if ik, ok := s.lookupInert(k); ok {
				if err := ik.parse(val); err != nil {
					return nil, nil, fmt.Errorf("config %s: key %s: %w", path, ik.key, err)
				}
				inerts = append(inerts, inertFound[T]{k: ik, raw: val})
				continue
			}
			unknown = append(unknown, k)
			continue
		}
		if err := f.set(c, val); err != nil {
			return nil, nil, fmt.Errorf("config %s: key %s: %w", path, f.key, err)
		}
	}
	return unknown, inerts, nil
}

// valueText is a value read by viper as the text a key's parser takes.
// JSON numbers arrive as float64, whose default text for a million or
// more is an exponent (4194304 prints as 4.194304e+06): whole numbers are
// written as integers.
func valueText(v any) string {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
