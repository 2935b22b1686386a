package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// rocksDBConfigToJSONCmd is mqadmin rocksDBConfigToJson. In its rpc mode
// it sends EXPORT_ROCKSDB_CONFIG_TO_JSON to the -b broker, or with -c to
// every master of the cluster, each of which writes the named config
// tables as RocketMQ's JSON files under its <storePathRootDir>/config; in
// its local mode (-p without -b and -c) it reads a RocketMQ broker's
// RocksDB config files from the local disk.
func rocksDBConfigToJSONCmd(g *globals) *cobra.Command {
	var cluster, types, dir, exportFile, jsonEnable string
	cmd := &cobra.Command{
		Use:   "rocksDBConfigToJson",
		Short: "make brokers write their topics, groups and consumer offsets as RocketMQ's config JSON files (EXPORT_ROCKSDB_CONFIG_TO_JSON)",
		Long: `rocksDBConfigToJson makes the -b broker, or with -c every master broker of the
cluster, write the config tables named by -t (topics, subscriptionGroups,
consumerOffsets; separated by ";"; all three by default) as Apache RocketMQ's
files under its <storePathRootDir>/config: topics.json, subscriptionGroup.json
and consumerOffset.json, the previous content of each kept as <file>.bak. A
rocketkv broker never reads them back; they are for RocketMQ, or for reading.
Moving a store back to RocketMQ takes more: kvdump export-rocketmq, on the
stopped store.

With -p and without -b and -c (mqadmin's local mode), it reads the RocksDB
config database -t (one of topics, subscriptionGroups, consumerOffsets) of a
RocketMQ broker with storeType=defaultRocksDB (config v1) under -p, its
<storePathRootDir>/config, on the local disk (the files are only read; when
the broker runs, a compaction that deletes a file under the read fails it:
run it again), and prints it as indented JSON, {"dataVersion":...,
"topicConfigTable":{...}} ("subscriptionGroupTable", or "offsetTable" without
a data version), entries in key order; with -e it writes that JSON to the
file instead, keeping its previous content as <file>.bak; with -j false it
prints "type: <field>" lines each followed by numbered "N, Key: K, Value: V"
lines.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir != "" && cluster == "" && !cmd.Flags().Changed("broker") {
				if !cmd.Flags().Changed("configType") {
					return errors.New("-p (the local mode) needs -t: topics, subscriptionGroups or consumerOffsets")
				}
				return rocksDBConfigToJSONLocal(cmd.OutOrStdout(), dir, types, exportFile, jsonEnable)
			}
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			var failed []string
			for _, addr := range targets {
				resp, err := g.invoke(cmd.Context(), addr, remoting.ExportRocksDBConfigToJSON, map[string]string{"configType": types}, nil)
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s (%v)", addr, err))
					fmt.Fprintf(cmd.OutOrStdout(), "%s: export failed: %v\n", addr, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", addr, resp.Remark)
			}
			if len(failed) > 0 {
				return fmt.Errorf("export of the config to JSON failed on %s", strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cluster, "cluster", "c", "", "every master broker of this cluster (needs -n)")
	cmd.Flags().StringVarP(&dir, "configPath", "p", "", "local mode: read the RocksDB config under this directory, a RocketMQ broker's <storePathRootDir>/config (without -b and -c)")
	cmd.Flags().StringVarP(&exportFile, "exportFile", "e", "", "local mode: write the JSON to this file (its previous content kept as <file>.bak), not to stdout")
	cmd.Flags().StringVarP(&jsonEnable, "jsonEnable", "j", "true", "local mode: false prints numbered key and value lines, not JSON (ignored with -e)")
	cmd.Flags().StringVarP(&types, "configType", "t", "topics;subscriptionGroups;consumerOffsets", "the tables to write, separated by \";\"")
	return cmd
}
