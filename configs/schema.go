package configs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
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

// persistedName is canonical for a key of the table, and otherwise the
// name of an inert key as RocketMQ spells it, or false for a key the
// schema does not know: the keys a configuration update writes back.
func (s *schema[T]) persistedName(key string) (string, bool) {
	if name, ok := s.canonical(key); ok {
		return name, true
	}
	if ik, ok := s.lookupInert(key); ok {
		return ik.key, true
	}
	return "", false
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

// values is the current value of each of keys (canonical names) as text,
// a secret's unmasked: what a configuration update writes back. A key
// the table does not know is left out.
func (s *schema[T]) values(c *T, keys []string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		f, ok := s.lookup(k)
		if !ok {
			continue
		}
		get := f.get
		if f.value != nil {
			get = f.value
		}
		out[f.key] = get(c)
	}
	return out
}

// changed lists, in table order, the canonical keys whose values differ
// between a and b (a secret's by its value, not its masked report).
func (s *schema[T]) changed(a, b *T) []string {
	var out []string
	for _, f := range s.fields {
		get := f.get
		if f.value != nil {
			get = f.value
		}
		if get(a) != get(b) {
			out = append(out, f.key)
		}
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
// spelling the file used (for YAML and JSON, whose keys viper reads in
// any case and reports lower-cased, the file's spellings of the key as a
// dotted path, see writtenKeys), the
// inert keys it holds, and the canonical names of the keys it set. A
// value that does not parse, an inert key's included, is an error naming
// the key and the file.
func (s *schema[T]) load(path string, c *T) (unknown []string, inerts []inertFound[T], set []string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if formatOf(path) == "properties" {
		return s.loadProperties(path, raw, c)
	}
	v := viper.New()
	v.SetConfigType(formatOf(path))
	if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
		return nil, nil, nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	keys := v.AllKeys()
	sort.Strings(keys)
	written := writtenKeys(formatOf(path), raw) // viper's key -> the file's spellings
	for _, k := range keys {
		val := valueText(v.Get(k))
		f, ok := s.lookup(k)
		if !ok {
			if ik, ok := s.lookupInert(k); ok {
				if err := ik.parse(val); err != nil {
					return nil, nil, nil, fmt.Errorf("config %s: key %s: %w", path, ik.key, err)
				}
				inerts = append(inerts, inertFound[T]{k: ik, raw: val})
				continue
			}
			if w := written[k]; len(w) > 0 {
				unknown = append(unknown, w...)
			} else {
				unknown = append(unknown, k)
			}
			continue
		}
		if w := written[k]; len(w) > 1 {
			// viper keeps one of them, which one depending on the order
			// it walks a map in.
			return nil, nil, nil, fmt.Errorf("config %s: key %s is given %d times, spelled %s: which one would be read is not defined; keep one",
				path, f.key, len(w), strings.Join(w, ", "))
		}
		if err := f.set(c, val); err != nil {
			return nil, nil, nil, fmt.Errorf("config %s: key %s: %w", path, f.key, err)
		}
		set = append(set, f.key)
	}
	return unknown, inerts, set, nil
}

// loadProperties sets c from the properties text raw of the file at path
// (parseProperties reads it as java.util.Properties.load does) and
// returns the keys the schema does not know, in the file's spelling and
// order, the inert keys met, and the canonical names of the keys set.
//
// RocketMQ sets its configuration from the entries with
// MixAll.properties2Object: for each setter it looks up the key of exactly
// the setter's name, trims the value only for a String setter, and parses
// int and long with Integer.parseInt and Long.parseLong, boolean with
// Boolean.parseBoolean ("true" in any case, anything else false); a value
// that does not parse is skipped in silence, and so is a key with no
// setter. rocketkv differs where RocketMQ would not do what the file says:
// a value that does not parse is an error naming the key; every value is
// trimmed, so "listenPort=10911 " is 10911 where RocketMQ keeps its
// default; and a key is matched in any case. When a file sets a key both
// in RocketMQ's spelling (the canonical name or an alias) and in another
// case, the spelling RocketMQ reads wins wherever it stands, and the other
// is reported unknown, as RocketMQ ignores it; otherwise the key's last
// entry wins, as in Java.
func (s *schema[T]) loadProperties(path string, raw []byte, c *T) (unknown []string, inerts []inertFound[T], set []string, err error) {
	entries, err := parseProperties(raw)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	// The entry that sets each key (known or inert, by its canonical
	// name), and whether it is spelled as RocketMQ spells the key.
	type choice struct {
		entry int
		exact bool
	}
	chosen := make(map[string]choice)
	target := make([]string, len(entries)) // "" for a key nobody knows
	exact := make([]bool, len(entries))
	for i, e := range entries {
		if f, ok := s.lookup(e.key); ok {
			target[i], exact[i] = "field "+f.key, e.key == f.key || slices.Contains(f.aliases, e.key)
		} else if ik, ok := s.lookupInert(e.key); ok {
			target[i], exact[i] = "inert "+ik.key, e.key == ik.key
		} else {
			continue
		}
		if prev, ok := chosen[target[i]]; !ok || exact[i] || !prev.exact {
			chosen[target[i]] = choice{entry: i, exact: exact[i]}
		}
	}
	reported := make(map[string]bool)
	for i, e := range entries {
		ch, known := chosen[target[i]]
		if !known || ch.entry != i {
			// Not set from this entry. Reported: a key nobody knows, and
			// a spelling in another case of a key the file also spells as
			// RocketMQ does (RocketMQ ignores both). Not reported: an
			// entry that a later one of the key overrides, as in Java.
			if (!known || ch.exact && !exact[i]) && !reported[e.key] {
				reported[e.key] = true
				unknown = append(unknown, e.key)
			}
			continue
		}
		val := strings.TrimSpace(e.value)
		if f, ok := s.lookup(e.key); ok {
			if err := f.set(c, val); err != nil {
				return nil, nil, nil, fmt.Errorf("config %s line %d: key %s: %w", path, e.line, f.key, err)
			}
			set = append(set, f.key)
			continue
		}
		ik, _ := s.lookupInert(e.key)
		if err := ik.parse(val); err != nil {
			return nil, nil, nil, fmt.Errorf("config %s line %d: key %s: %w", path, e.line, ik.key, err)
		}
		inerts = append(inerts, inertFound[T]{k: ik, raw: val})
	}
	return unknown, inerts, set, nil
}

// writtenKeys maps the keys viper reads from a YAML or JSON file (a
// nested key as a dotted path, lower-cased) to the spellings the file
// uses for them, sorted (two when the file spells one key in two
// cases), so that a warning names a key as the operator wrote it and a
// key given in two cases is found. It is
// nil for a file it cannot read, whose keys are then reported as viper
// gives them; viper already read the same file, so that does not
// happen in practice.
func writtenKeys(format string, raw []byte) map[string][]string {
	var doc any
	var err error
	if format == "json" {
		err = json.Unmarshal(raw, &doc)
	} else {
		err = yaml.Unmarshal(raw, &doc)
	}
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	var walk func(prefix string, v any)
	add := func(prefix string, k any, v any) {
		path := fmt.Sprint(k)
		if prefix != "" {
			path = prefix + "." + path
		}
		if !isMap(v) {
			lk := strings.ToLower(path)
			if !slices.Contains(out[lk], path) {
				out[lk] = append(out[lk], path)
				slices.Sort(out[lk])
			}
			return
		}
		walk(path, v)
	}
	walk = func(prefix string, v any) {
		switch m := v.(type) {
		case map[string]any:
			for k, e := range m {
				add(prefix, k, e)
			}
		case map[any]any:
			for k, e := range m {
				add(prefix, k, e)
			}
		}
	}
	walk("", doc)
	return out
}

// isMap reports whether a decoded YAML or JSON value is a mapping, which
// viper reads as nested keys rather than as a value.
func isMap(v any) bool {
	switch v.(type) {
	case map[string]any, map[any]any:
		return true
	}
	return false
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
