package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// rocksDBConfigToJSONCmd is mqadmin rocksDBConfigToJson in its rpc mode:
// EXPORT_ROCKSDB_CONFIG_TO_JSON to the -b broker, or with -c to every
// master of the cluster, each of which writes the named config tables as
// RocketMQ's JSON files under its <storePathRootDir>/config.
func rocksDBConfigToJSONCmd(g *globals) *cobra.Command {
	var cluster, types string
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
stopped store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	cmd.Flags().StringVarP(&types, "configType", "t", "topics;subscriptionGroups;consumerOffsets", "the tables to write, separated by \";\"")
	return cmd
}
