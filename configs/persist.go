package configs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rocketkv/rocketkv/internal/atomicfile"
)

// PersistSettings writes settings (canonical key -> value text) into the
// configuration file at path, so that a change made while the broker runs
// (UPDATE_BROKER_CONFIG) survives a restart, as RocketMQ writes such a
// change back to the file given with -c. A key already present keeps its
// line (or YAML node) and spelling with the new value, other keys and
// comments stay, and keys not present yet are added at the end. A
// properties file keeps every other line byte for byte; a YAML file is
// re-encoded, which keeps comments and key order but not blank lines or
// the original quoting. The file is replaced atomically (a temporary file
// beside it, synced, then renamed); a symbolic link is followed, so the
// file it names is replaced and the link stays.
//
// A key of settings is a canonical key or a key rocketkv accepts without
// effect (InertKey.Key): RocketMQ writes every key an update set, those
// of its mechanisms rocketkv does not have included, so a restart keeps
// what the operator set either way.
func PersistSettings(path string, settings map[string]string) error {
	return persistSettings(path, settings, brokerSchema.persistedName)
}

// persistSettings is PersistSettings for any schema: canonical names the
// key a line or YAML node sets, or reports a key of no interest.
func persistSettings(path string, settings map[string]string, canonical func(string) (string, bool)) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("persist settings: read %s: %w", path, err)
	}
	var out []byte
	switch formatOf(path) {
	case "yaml":
		out, err = setYAMLKeys(raw, settings, canonical)
	case "json":
		out, err = setJSONKeys(raw, settings, canonical)
	default:
		out, err = setPropertiesKeys(raw, settings, canonical), nil
	}
	if err != nil {
		return fmt.Errorf("persist settings into %s: %w", path, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("persist settings: %w", err)
	}
	if err := atomicfile.WriteFile(path, out, info.Mode().Perm()); err != nil {
		return fmt.Errorf("persist settings: %w", err)
	}
	return nil
}

// setPropertiesKeys rewrites the entries of a properties file that set
// one of the keys (matched by canonical name or alias, any case, escapes
// resolved) and appends the keys it did not find, so that the file then
// reads, by the rules of Properties.load, with those keys at their new
// values and every other entry as it was.
//
// The file is read with the reader that loads it (lineReader), which
// tells the bytes each entry is read from: a replaced entry's natural
// lines, its continuation lines included, become one line "key=value"
// with the key as the file spells it (escapes kept) and the line break
// that ended the entry. Every other byte, comments and blank lines
// included, is kept. Keys added end with the file's first line break
// ("\n" when it has none).
func setPropertiesKeys(raw []byte, settings map[string]string, canonical func(string) (string, bool)) []byte {
	eol := firstLineBreak(raw)
	done := make(map[string]bool, len(settings))
	var out bytes.Buffer
	copied := 0 // raw[:copied] is in out, rewritten or not
	// The last entry, kept as it is, ends the text inside a continuation
	// (appending would extend it), and its logical line is empty.
	unterminated, lastEmpty := false, false
	r := newLineReader(raw)
	for {
		logical, _, ok := r.next()
		if !ok {
			break
		}
		unterminated, lastEmpty = r.unterminated, len(logical) == 0
		rawKey, _ := splitEntry(logical)
		key, err := unescapeProperty(rawKey)
		if err != nil {
			continue // a malformed \u: the file does not load; left as it is
		}
		name, known := canonical(key)
		v, set := settings[name]
		if key == "" || !known || !set {
			continue
		}
		start, end := r.span()
		out.Write(raw[copied:start])
		out.WriteString(string(rawKey))
		out.WriteByte('=')
		out.WriteString(escapeProperty(v))
		out.WriteString(lineBreakAtEnd(raw[start:end], eol))
		copied = end
		done[name] = true
		unterminated = false
	}
	out.Write(raw[copied:])

	var added bytes.Buffer
	for _, k := range sortedSettingKeys(settings) {
		if !done[k] {
			fmt.Fprintf(&added, "%s=%s%s", k, escapeProperty(settings[k]), eol)
		}
	}
	if added.Len() == 0 {
		return out.Bytes()
	}
	if b := out.Bytes(); len(b) > 0 && lineBreakAtEnd(b, "") == "" {
		out.WriteString(eol) // the last line had no line break
	}
	if unterminated {
		if lastEmpty {
			// The text ends in a line of a backslash alone, which Java
			// reads as an entry of empty key and value only because the
			// text ends there: "=" spells the entry out, so that it stays
			// with lines after it.
			out.WriteByte('=')
		}
		// An empty line ends the continued entry, or it would take in
		// the first key added.
		out.WriteString(eol)
	}
	out.Write(added.Bytes())
	return out.Bytes()
}

// firstLineBreak is the first line break of a properties text ("\n",
// "\r\n" or a lone "\r"), or "\n" when it has none.
func firstLineBreak(raw []byte) string {
	i := bytes.IndexAny(raw, "\r\n")
	if i < 0 {
		return "\n"
	}
	if raw[i] == '\r' && i+1 < len(raw) && raw[i+1] == '\n' {
		return "\r\n"
	}
	return string(raw[i : i+1])
}

// lineBreakAtEnd is the line break that ends b, or otherwise (the last
// line of a file without a final line break).
func lineBreakAtEnd(b []byte, otherwise string) string {
	switch {
	case bytes.HasSuffix(b, []byte("\r\n")):
		return "\r\n"
	case bytes.HasSuffix(b, []byte("\n")):
		return "\n"
	case bytes.HasSuffix(b, []byte("\r")):
		return "\r"
	}
	return otherwise
}

// escapeProperty writes a value so that a properties reader gives it back:
// backslashes and line breaks escaped, a leading blank kept.
func escapeProperty(v string) string {
	var b strings.Builder
	for i, r := range v {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		case ' ':
			if i == 0 {
				b.WriteString(`\ `)
			} else {
				b.WriteRune(r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// yamlScalar is a value node that reads back as the same text: plain for
// a decimal integer without leading zeros or a boolean, double-quoted for
// anything else (a YAML reader would take "04" for octal, "~" for null).
func yamlScalar(v string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: v}
	if !plainYAML(v) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

func plainYAML(v string) bool {
	if v == "true" || v == "false" || v == "0" {
		return true
	}
	if v == "" || v[0] < '1' || v[0] > '9' || len(v) > 18 {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// setYAMLKeys sets the keys in the top-level mapping of a YAML document,
// keeping comments and the order of the other keys.
func setYAMLKeys(raw []byte, settings map[string]string, canonical func(string) (string, bool)) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	if doc.Kind == 0 { // an empty file
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the document is not a mapping of keys")
	}
	m := doc.Content[0]
	done := make(map[string]bool, len(settings))
	for i := 0; i+1 < len(m.Content); i += 2 {
		name, known := canonical(m.Content[i].Value)
		if !known {
			continue
		}
		if v, ok := settings[name]; ok {
			val := m.Content[i+1]
			n := yamlScalar(v)
			n.LineComment, n.HeadComment, n.FootComment = val.LineComment, val.HeadComment, val.FootComment
			*val = *n
			done[name] = true
		}
	}
	for _, k := range sortedSettingKeys(settings) {
		if !done[k] {
			m.Content = append(m.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: k}, yamlScalar(settings[k]))
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return out.Bytes(), nil
}

// setJSONKeys sets the keys in the top-level object of a JSON document,
// keeping the order of the other keys (the file is written indented). A
// value replacing a number or a boolean stays one when it reads as one;
// every other value, and every key added, is a string.
func setJSONKeys(raw []byte, settings map[string]string, canonical func(string) (string, bool)) ([]byte, error) {
	type member struct {
		key   string
		value json.RawMessage
	}
	var members []member
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, fmt.Errorf("parse json: the document is not an object of keys")
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("parse json: %w", err)
			}
			key, _ := tok.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("parse json: value of %q: %w", key, err)
			}
			members = append(members, member{key, v})
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("parse json: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("parse json: more than one value in the document")
		}
	}
	encode := func(old json.RawMessage, v string) json.RawMessage {
		if len(old) > 0 && (old[0] == '-' || old[0] >= '0' && old[0] <= '9') && json.Valid([]byte(v)) {
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				return json.RawMessage(v)
			}
		}
		if (string(old) == "true" || string(old) == "false") && (v == "true" || v == "false") {
			return json.RawMessage(v)
		}
		out, _ := json.Marshal(v)
		return out
	}
	done := make(map[string]bool, len(settings))
	for i, m := range members {
		name, known := canonical(m.key)
		if !known {
			continue
		}
		if v, ok := settings[name]; ok {
			members[i].value = encode(m.value, v)
			done[name] = true
		}
	}
	for _, k := range sortedSettingKeys(settings) {
		if !done[k] {
			members = append(members, member{k, encode(nil, settings[k])})
		}
	}
	var compact bytes.Buffer
	compact.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			compact.WriteByte(',')
		}
		key, _ := json.Marshal(m.key)
		compact.Write(key)
		compact.WriteByte(':')
		compact.Write(m.value)
	}
	compact.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func sortedSettingKeys(settings map[string]string) []string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PropertiesText writes settings as "key=value" lines sorted by key, values
// escaped so that a properties reader gives them back: the body of
// GET_BROKER_CONFIG and GET_NAMESRV_CONFIG.
func PropertiesText(settings map[string]string) []byte {
	var b bytes.Buffer
	for _, k := range sortedSettingKeys(settings) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(escapeProperty(settings[k]))
		b.WriteByte('\n')
	}
	return b.Bytes()
}
