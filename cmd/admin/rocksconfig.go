package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/atomicfile"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

// The config tables a RocketMQ broker with storeType=defaultRocksDB keeps
// as one RocksDB database each under <storePathRootDir>/config (config
// v1), named as mqadmin's -t names them, and the field of the JSON file
// each replaces.
var rocksConfigTables = []struct{ name, field string }{
	{"topics", "topicConfigTable"},
	{"subscriptionGroups", "subscriptionGroupTable"},
	{"consumerOffsets", "offsetTable"},
}

// rocksConfigTable returns the canonical name and JSON field of the
// config type t, matched without regard to case as mqadmin matches it.
func rocksConfigTable(t string, allowed int) (name, field string, err error) {
	var names []string
	for _, c := range rocksConfigTables[:allowed] {
		if strings.EqualFold(c.name, strings.TrimSpace(t)) {
			return c.name, c.field, nil
		}
		names = append(names, c.name)
	}
	return "", "", fmt.Errorf("unknown config type %q: want one of %s", t, strings.Join(names, ", "))
}

// readRocksConfig reads the config v1 database of table under the config
// directory dir, with an error that says what dir should be.
func readRocksConfig(dir, table string) (rmqconfig.RocksDBTable, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return rmqconfig.RocksDBTable{}, fmt.Errorf("RocksDB config path: %w", err)
	}
	if !fi.IsDir() {
		return rmqconfig.RocksDBTable{}, fmt.Errorf("RocksDB config path %s is not a directory (want a broker's <storePathRootDir>/config)", dir)
	}
	path := filepath.Join(dir, table)
	t, err := rmqconfig.ReadRocksDBTable(path)
	if err == nil {
		return t, nil
	}
	if _, serr := os.Stat(filepath.Join(dir, "rdb")); serr == nil {
		return t, fmt.Errorf("read RocketMQ's RocksDB config %s: %w (%s/rdb is config v2, configManagerVersion=v2, which this command does not read, as mqadmin's does not; kvdump rocksdb dumps it)", path, err, dir)
	}
	return t, fmt.Errorf("read RocketMQ's RocksDB config %s (want a broker's <storePathRootDir>/config holding %s/): %w", path, table, err)
}

// rocksConfigValue is the JSON value an entry of table is printed with:
// the stored config, or for consumer offsets the map of queue offsets
// (its integer keys quoted, for valid JSON).
func rocksConfigValue(table string, m adminbody.Member) (json.RawMessage, error) {
	v := m.Value
	if table == "consumerOffsets" {
		var err error
		if v, err = rmqconfig.RocksDBOffsetTable(v); err != nil {
			return nil, fmt.Errorf("%s %q: %w", table, m.Key, err)
		}
		v = adminbody.QuoteBareKeys(v)
	}
	if !json.Valid(v) {
		return nil, fmt.Errorf("%s %q: the value is not JSON: %.200q", table, m.Key, m.Value)
	}
	return json.RawMessage(v), nil
}

// rocksConfigJSON renders entries as {"<field>":{"<key>":<value>,...}}
// (after "dataVersion" when version is not nil), indented with tabs.
func rocksConfigJSON(table, field string, version []byte, entries []adminbody.Member) ([]byte, error) {
	values := make(map[string]json.RawMessage, len(entries))
	for _, m := range entries {
		v, err := rocksConfigValue(table, m)
		if err != nil {
			return nil, err
		}
		values[string(m.Key)] = v
	}
	// encoding/json writes map keys sorted by their bytes: RocksDB's order.
	doc := []struct {
		name  string
		value any
	}{{"dataVersion", json.RawMessage(version)}, {field, values}}
	if version == nil {
		doc = doc[1:]
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, d := range doc {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(d.name)
		v, err := json.Marshal(d.value)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", table, d.name, err)
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "\t"); err != nil {
		return nil, fmt.Errorf("%s: %w", table, err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeFileKeepingBak writes data to path, making its folders, after
// copying the file's previous content to <path>.bak, as mqadmin's
// MixAll.string2File does.
func writeFileKeepingBak(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("make the folder of %s: %w", path, err)
	}
	prev, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := atomicfile.WriteFile(path+".bak", prev, 0o644); err != nil {
			return fmt.Errorf("keep the previous %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read the previous %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// rocksDBConfigToJSONLocal is rocksDBConfigToJson's local mode: the config
// type table of the config v1 RocksDB under dir, written to exportFile as
// JSON, or printed as JSON, or with jsonEnable "false" (any case) as
// numbered "Key: , Value: " lines under a "type: " line per table.
func rocksDBConfigToJSONLocal(w io.Writer, dir, configType, exportFile, jsonEnable string) error {
	var types []string
	for _, t := range strings.Split(configType, ";") {
		if strings.TrimSpace(t) != "" {
			types = append(types, t)
		}
	}
	if len(types) != 1 {
		return fmt.Errorf("-p reads one config type (-t topics, subscriptionGroups or consumerOffsets), not %q", configType)
	}
	table, field, err := rocksConfigTable(types[0], len(rocksConfigTables))
	if err != nil {
		return err
	}
	t, err := readRocksConfig(strings.TrimSpace(dir), table)
	if err != nil {
		return err
	}
	version := t.RawVersion
	if table == "consumerOffsets" {
		version = nil // mqadmin does not print the offsets' data version
	}
	if exportFile = strings.TrimSpace(exportFile); exportFile != "" || !strings.EqualFold(strings.TrimSpace(jsonEnable), "false") {
		data, err := rocksConfigJSON(table, field, version, t.Entries)
		if err != nil {
			return err
		}
		if exportFile != "" {
			return writeFileKeepingBak(exportFile, bytes.TrimSuffix(data, []byte("\n")))
		}
		_, err = w.Write(data)
		return err
	}
	n := 0
	line := func(k string, v []byte) {
		n++
		fmt.Fprintf(w, "%d, Key: %s, Value: %s\n", n, k, v)
	}
	if version != nil {
		members, err := adminbody.Members(version)
		if err != nil {
			return fmt.Errorf("%s dataVersion: %w", table, err)
		}
		fmt.Fprintln(w, "type: dataVersion")
		for _, m := range members {
			line(unquoteKey(m.Key), m.Value)
		}
	}
	fmt.Fprintf(w, "type: %s\n", field)
	for _, m := range t.Entries {
		v, err := rocksConfigValue(table, m)
		if err != nil {
			return err
		}
		if table == "consumerOffsets" {
			// mqadmin prints the offsets as a Java map: {0=15, 1=7}.
			members, err := adminbody.Members(v)
			if err != nil {
				return fmt.Errorf("%s %q: %w", table, m.Key, err)
			}
			parts := make([]string, len(members))
			for i, q := range members {
				parts[i] = unquoteKey(q.Key) + "=" + string(q.Value)
			}
			line(string(m.Key), []byte("{"+strings.Join(parts, ", ")+"}"))
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return fmt.Errorf("%s %q: %w", table, m.Key, err)
		}
		line(string(m.Key), c.Bytes())
	}
	return nil
}

// unquoteKey returns a JSON object key as text.
func unquoteKey(k []byte) string {
	var s string
	if json.Unmarshal(k, &s) == nil {
		return s
	}
	return string(k)
}

// exportMetadataInRocksDBCmd is mqadmin exportMetadataInRocksDB: the
// topics or subscription groups of a RocketMQ broker's config v1 RocksDB,
// read from the local disk.
func exportMetadataInRocksDBCmd() *cobra.Command {
	var dir, configType, jsonEnable string
	cmd := &cobra.Command{
		Use:   "exportMetadataInRocksDB",
		Short: "print the topics or subscription groups of a RocketMQ broker's RocksDB config on the local disk (mqadmin recommends rocksDBConfigToJson -p)",
		Long: `exportMetadataInRocksDB reads the RocksDB config database -t (topics or
subscriptionGroups) under -p, a RocketMQ broker's <storePathRootDir>/config
with storeType=defaultRocksDB (config v1; the files are only read; when the
broker runs, a compaction that deletes a file under the read fails it: run it
again), and prints each entry in key order as "N, Key: K, Value: V",
the value as stored, or with -j true {"topicConfigTable":{...}} or
{"subscriptionGroupTable":{...}} as indented JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			table, field, err := rocksConfigTable(configType, 2)
			if err != nil {
				return err
			}
			t, err := readRocksConfig(strings.TrimSpace(dir), table)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if strings.EqualFold(strings.TrimSpace(jsonEnable), "true") {
				data, err := rocksConfigJSON(table, field, nil, t.Entries)
				if err != nil {
					return err
				}
				_, err = w.Write(data)
				return err
			}
			for i, m := range t.Entries {
				fmt.Fprintf(w, "%d, Key: %s, Value: %s\n", i+1, m.Key, m.Value)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&dir, "path", "p", "", "the broker's config directory, <storePathRootDir>/config")
	cmd.Flags().StringVarP(&configType, "configType", "t", "", "topics or subscriptionGroups")
	cmd.Flags().StringVarP(&jsonEnable, "jsonEnable", "j", "false", "true: print the table as JSON")
	_ = cmd.MarkFlagRequired("path")
	_ = cmd.MarkFlagRequired("configType")
	return cmd
}
