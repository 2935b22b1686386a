package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// defaultExportPath is the folder mqadmin's export commands write to
// without -f.
const defaultExportPath = "/tmp/rocketmq/export"

// configTable is a broker's table of topic or subscription group configs
// by name, each config with the fields the broker sent (numbers kept as
// it wrote them), so that an export of a RocketMQ broker keeps the fields
// rocketkv does not know.
type configTable map[string]map[string]any

// decodeJSONKeepingNumbers reads a JSON body a broker sent (a Java one's
// bare integer keys too) into v, numbers as json.Number.
func decodeJSONKeepingNumbers(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(adminbody.QuoteBareKeys(body)))
	d.UseNumber()
	return d.Decode(v)
}

// configTableOf asks the broker at addr for a whole config table (code:
// GET_ALL_TOPIC_CONFIG or GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and returns
// the wrapper mqadmin reads from the answer, its fields wrapperFields
// (those the answer has; others, such as a RocketMQ broker's static topic
// mappings, are dropped as mqadmin's decoding drops them), and the table
// held in its field tableField.
func (g *globals) configTableOf(ctx context.Context, addr string, code int32, tableField string, wrapperFields ...string) (map[string]any, configTable, error) {
	resp, err := g.invoke(ctx, addr, code, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	var wrapper map[string]any
	if err := decodeJSONKeepingNumbers(resp.Body, &wrapper); err != nil {
		return nil, nil, fmt.Errorf("decode the %s of %s: %w", tableField, addr, err)
	}
	kept := map[string]any{}
	for _, f := range wrapperFields {
		if v, ok := wrapper[f]; ok {
			kept[f] = v
		}
	}
	raw, _ := wrapper[tableField].(map[string]any)
	table := make(configTable, len(raw))
	for name, v := range raw {
		c, ok := v.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("the %s of %s holds %s as %T, not an object", tableField, addr, name, v)
		}
		table[name] = c
	}
	return kept, table, nil
}

// userTopics returns the broker's GET_ALL_TOPIC_CONFIG answer and its
// topics as mqadmin's getUserTopicConfig keeps them: without the system
// topics (the broker's list and RocketMQ's), without a perm that is not
// one, and with special only the %RETRY% and %DLQ% topics.
func (g *globals) userTopics(ctx context.Context, addr string, special bool) (map[string]any, configTable, error) {
	wrapper, table, err := g.configTableOf(ctx, addr, remoting.GetAllTopicConfig, "topicConfigTable", "dataVersion")
	if err != nil {
		return nil, nil, err
	}
	resp, err := g.invoke(ctx, addr, remoting.GetSystemTopicListFromBroker, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	var sys struct {
		TopicList []string `json:"topicList"`
	}
	if err := json.Unmarshal(resp.Body, &sys); err != nil {
		return nil, nil, fmt.Errorf("decode the system topics of %s: %w", addr, err)
	}
	brokerSys := make(map[string]bool, len(sys.TopicList))
	for _, t := range sys.TopicList {
		brokerSys[t] = true
	}
	for name, c := range table {
		perm, hasPerm := jsonInt(c["perm"])
		switch {
		case brokerSys[name] || meta.IsSystemTopic(name),
			!special && (meta.IsRetryTopic(name) || meta.IsDLQTopic(name)),
			hasPerm && (perm < 0 || perm >= meta.PermPriority):
			delete(table, name)
		}
	}
	return wrapper, table, nil
}

// userGroups returns the broker's GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer
// and its groups as mqadmin's getUserSubscriptionGroup keeps them: without
// the system (CID_RMQ_SYS_...) and predefined groups.
func (g *globals) userGroups(ctx context.Context, addr string) (map[string]any, configTable, error) {
	wrapper, table, err := g.configTableOf(ctx, addr, remoting.GetAllSubscriptionGroupConfig, "subscriptionGroupTable", "forbiddenTable", "dataVersion")
	if err != nil {
		return nil, nil, err
	}
	for name := range table {
		if meta.IsSystemGroup(name) || meta.IsPredefinedGroup(name) {
			delete(table, name)
		}
	}
	return wrapper, table, nil
}

// jsonInt reads a whole number decoded as json.Number; false when v is
// none.
func jsonInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// addCount adds the number field of from to that of to, as mqadmin's
// exportMetadata -c adds up a topic's queues (or a group's retry queues)
// over the masters.
func addCount(to, from map[string]any, field string) {
	a, _ := jsonInt(to[field])
	b, _ := jsonInt(from[field])
	to[field] = json.Number(strconv.FormatInt(a+b, 10))
}

// writeExport writes v as indented JSON to path, making its folders, as
// mqadmin's export commands write theirs (MixAll.string2FileNotSafe).
func writeExport(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("make the folder of %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil { // #nosec G306 -- an export for people and other tools to read
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// exportMetadataCmd is mqadmin exportMetadata: the user topics and
// subscription groups of a broker, or of every master of a cluster
// merged, written as JSON under -f.
func exportMetadataCmd(g *globals) *cobra.Command {
	var cluster, dir string
	var topicOnly, groupOnly, special bool
	cmd := &cobra.Command{
		Use:   "exportMetadata",
		Short: "write the user topics and subscription groups of a broker or a cluster as JSON (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG)",
		Long: `exportMetadata writes the topic and subscription group configs of the -b
broker, or of every master of the -c cluster, under the folder -f, as mqadmin
exportMetadata: system topics and groups left out, and the %RETRY% and %DLQ%
topics unless -s is given.

With -b and -t: topic.json, the broker's answer (topicConfigTable,
dataVersion); with -b and -g: subscriptionGroup.json (subscriptionGroupTable,
forbiddenTable, dataVersion). With -c, the masters' tables are merged, a
topic's read and write queues (a group's retry queues) added up over them:
topic.json with -t (topicConfigTable, exportTime), subscriptionGroup.json
with -g (subscriptionGroupTable, exportTime), else metadata.json with both.
-b wins over -c, as in mqadmin; -b without -t or -g, where mqadmin writes
nothing, writes the broker's metadata.json as -c would.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dir, cluster = strings.TrimSpace(dir), strings.TrimSpace(cluster)
			var path string
			var out any
			if cmd.Flags().Changed("broker") || cluster == "" {
				switch {
				case topicOnly:
					wrapper, table, err := g.userTopics(ctx, g.broker, special)
					if err != nil {
						return err
					}
					wrapper["topicConfigTable"] = table
					path, out = filepath.Join(dir, "topic.json"), wrapper
				case groupOnly:
					wrapper, table, err := g.userGroups(ctx, g.broker)
					if err != nil {
						return err
					}
					wrapper["subscriptionGroupTable"] = table
					path, out = filepath.Join(dir, "subscriptionGroup.json"), wrapper
				}
			}
			if out == nil {
				addrs := []string{g.broker}
				if !cmd.Flags().Changed("broker") && cluster != "" {
					var err error
					if addrs, err = g.clusterMasters(ctx, cluster); err != nil {
						return err
					}
				}
				topics, groups, err := g.mergedMetadata(ctx, addrs, special)
				if err != nil {
					return err
				}
				result := map[string]any{"exportTime": time.Now().UnixMilli()}
				switch {
				case topicOnly:
					result["topicConfigTable"] = topics
					path = filepath.Join(dir, "topic.json")
				case groupOnly:
					result["subscriptionGroupTable"] = groups
					path = filepath.Join(dir, "subscriptionGroup.json")
				default:
					result["topicConfigTable"], result["subscriptionGroupTable"] = topics, groups
					path = filepath.Join(dir, "metadata.json")
				}
				out = result
			}
			if err := writeExport(path, out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "export %s success\n", path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster (without -b)")
	f.StringVarP(&dir, "filePath", "f", defaultExportPath, "the folder to write to")
	f.BoolVarP(&topicOnly, "topic", "t", false, "only the topics (topic.json)")
	f.BoolVarP(&groupOnly, "subscriptionGroup", "g", false, "only the subscription groups (subscriptionGroup.json)")
	f.BoolVarP(&special, "specialTopic", "s", false, "the %RETRY% and %DLQ% topics too")
	return cmd
}

// mergedMetadata reads the user topics and groups of the brokers at addrs
// and merges them as mqadmin's exportMetadata -c: a name several brokers
// have gets the config of the last one asked, with the queue counts
// (readQueueNums, writeQueueNums; a group's retryQueueNums) of all added
// up.
func (g *globals) mergedMetadata(ctx context.Context, addrs []string, special bool) (topics, groups configTable, err error) {
	topics, groups = configTable{}, configTable{}
	for _, addr := range addrs {
		_, ts, err := g.userTopics(ctx, addr, special)
		if err != nil {
			return nil, nil, err
		}
		_, gs, err := g.userGroups(ctx, addr)
		if err != nil {
			return nil, nil, err
		}
		for name, c := range ts {
			if prev, ok := topics[name]; ok {
				addCount(c, prev, "writeQueueNums")
				addCount(c, prev, "readQueueNums")
			}
			topics[name] = c
		}
		for name, c := range gs {
			if prev, ok := groups[name]; ok {
				addCount(c, prev, "retryQueueNums")
			}
			groups[name] = c
		}
	}
	return topics, groups, nil
}

// brokerConfig asks the broker at addr for its settings
// (GET_BROKER_CONFIG, a properties text).
func (g *globals) brokerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := g.invoke(ctx, addr, remoting.GetBrokerConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	props, err := configs.ParseProperties(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decode the settings of %s: %w", addr, err)
	}
	return props, nil
}

// exportedBrokerKeys are the broker settings mqadmin's exportConfigs
// writes (those a broker has).
var exportedBrokerKeys = []string{"brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
	"filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
	"traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup"}

// clusterMasterGroups returns the broker groups of a cluster, failing on
// one without a master, which mqadmin's export commands cannot read
// either.
func (g *globals) clusterMasterGroups(ctx context.Context, cluster string) ([]brokerGroup, error) {
	groups, err := g.clusterGroups(ctx, cluster)
	if err != nil {
		return nil, err
	}
	for _, grp := range groups {
		if grp.master == "" {
			return nil, fmt.Errorf("broker group %s of cluster %s has no master the name server knows", grp.name, cluster)
		}
	}
	return groups, nil
}

// clusterExportCmd is an export command of mqadmin that reads every
// master of the -c cluster (exportConfigs, exportMetrics): build makes the
// content of the file <-f>/file from the cluster's broker groups.
func clusterExportCmd(g *globals, use, short, long, file string,
	build func(ctx context.Context, groups []brokerGroup) (any, error)) *cobra.Command {
	var cluster, dir string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			groups, err := g.clusterMasterGroups(cmd.Context(), strings.TrimSpace(cluster))
			if err != nil {
				return err
			}
			content, err := build(cmd.Context(), groups)
			if err != nil {
				return err
			}
			path := filepath.Join(strings.TrimSpace(dir), file)
			if err := writeExport(path, content); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "export %s success\n", path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "the cluster")
	cmd.Flags().StringVarP(&dir, "filePath", "f", defaultExportPath, "the folder to write "+file+" to")
	_ = cmd.MarkFlagRequired("clusterName")
	return cmd
}

// exportConfigsCmd is mqadmin exportConfigs: the main settings of every
// master of a cluster and the cluster's size, written to configs.json.
func exportConfigsCmd(g *globals) *cobra.Command {
	return clusterExportCmd(g, "exportConfigs",
		"write the main settings of a cluster's masters and its size as JSON (GET_BROKER_CONFIG)",
		`exportConfigs writes <-f>/configs.json, as mqadmin exportConfigs:
brokerConfigs, for each broker group of the -c cluster the settings of its
master among brokerClusterName, brokerId, brokerName, brokerRole,
fileReservedTime, filterServerNums, flushDiskType, maxMessageSize,
messageDelayLevel, msgTraceTopicName, slaveReadEnable, traceOn,
traceTopicEnable, useTLS, autoCreateTopicEnable and autoCreateSubscriptionGroup
(as text, those the broker has), keyed by its brokerName; and clusterScale:
namesrvSize (the name servers of -n), masterBrokerSize and slaveBrokerSize.`,
		"configs.json", func(ctx context.Context, groups []brokerGroup) (any, error) {
			brokerConfigs := map[string]map[string]string{}
			slaves := 0
			for _, grp := range groups {
				props, err := g.brokerConfig(ctx, grp.master)
				if err != nil {
					return nil, err
				}
				kept := map[string]string{}
				for _, k := range exportedBrokerKeys {
					if v, ok := props[k]; ok {
						kept[k] = v
					}
				}
				brokerConfigs[props["brokerName"]] = kept
				slaves += len(grp.slaves)
			}
			return map[string]any{
				"brokerConfigs": brokerConfigs,
				"clusterScale":  map[string]int{"namesrvSize": len(g.nameServers()), "masterBrokerSize": len(groups), "slaveBrokerSize": slaves},
			}, nil
		})
}
