package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// updateTopicList and updateSubGroupList are mqadmin's batch commands:
// a file holding a JSON array of TopicConfig (SubscriptionGroupConfig)
// objects, as RocketMQ's fastjson writes them, sent in one
// UPDATE_AND_CREATE_TOPIC_LIST (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST)
// request to the -b broker or to every master of the -c cluster.
//
// Each object is read over RocketMQ's defaults, as mqadmin's
// JSON.parseArray fills a new TopicConfig (SubscriptionGroupConfig): a
// field the file leaves out is the Java class's default (16 read and
// write queues, perm 6, SINGLE_TAG; consumeEnable true, retryMaxTimes 16,
// ...), and the whole config is sent.

// defaultListQueueNums is TopicConfig's default queue count
// (defaultReadQueueNums, defaultWriteQueueNums), which a topic of the
// file gets for the counts it leaves out.
const defaultListQueueNums = 16

// sendTopicList creates or updates topics on the broker at addr in one
// UPDATE_AND_CREATE_TOPIC_LIST request (CreateTopicListRequestBody).
func (g *globals) sendTopicList(ctx context.Context, addr string, topics []meta.TopicConfig) error {
	return g.invokeJSON(ctx, addr, remoting.UpdateAndCreateTopicList, nil, struct {
		TopicConfigList []meta.TopicConfig `json:"topicConfigList"`
	}{topics})
}

// readConfigList reads a file holding a JSON array of objects and decodes
// each over the value fresh returns; what names an entry in errors. An
// empty array gives no entry and no error, as mqadmin sends nothing then.
func readConfigList[T any](path, what string, fresh func() T) ([]T, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// mqadmin's words.
		return nil, fmt.Errorf("the file path %s does not exists", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read the %s list: %w", what, err)
	}
	var entries []json.RawMessage
	if err := adminbody.UnmarshalFastjson(data, &entries); err != nil {
		return nil, fmt.Errorf("%s is not a JSON array of %s: %w", path, what, err)
	}
	out := make([]T, 0, len(entries))
	for i, raw := range entries {
		v := fresh()
		if err := adminbody.UnmarshalFastjson(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %s %d of the list: %w", path, what, i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// configListCmd builds updateTopicList and updateSubGroupList: read the
// -f file's list of what, each entry over fresh's defaults, then send the
// list to each broker of -b or -c, printing mqadmin's line (byCluster
// when the brokers are a -c cluster's masters: mqadmin words it otherwise
// there).
func configListCmd[T any](g *globals, use, short, what string, fresh func() T,
	send func(ctx context.Context, addr string, list []T) error, line, byCluster string) *cobra.Command {
	var cluster, file string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster = strings.TrimSpace(cluster)
			if cluster != "" && cmd.Flags().Changed("broker") {
				return fmt.Errorf("give -b or -c, not both")
			}
			path := strings.TrimSpace(file)
			list, err := readConfigList(path, what, fresh)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s holds no %s: nothing sent\n", path, what)
				return nil
			}
			targets, err := g.groupTargets(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			format := line
			if cluster != "" {
				format = byCluster
			}
			for _, addr := range targets {
				if err := send(cmd.Context(), addr, list); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), format, addr)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster instead of -b")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "path to a file with a list of "+what+" in json format (a JSON array, as RocketMQ writes them)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func updateTopicListCmd(g *globals) *cobra.Command {
	line := "submit batch of topic config to %s success, please check the result later.\n"
	return configListCmd(g, "updateTopicList",
		"create or update topic in batch (UPDATE_AND_CREATE_TOPIC_LIST, to -b or every master of -c)",
		"TopicConfig", func() meta.TopicConfig { return meta.NewTopicConfig("", defaultListQueueNums) },
		g.sendTopicList, line, line)
}

func updateSubGroupListCmd(g *globals) *cobra.Command {
	return configListCmd(g, "updateSubGroupList",
		"Update or create subscription group in batch (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, to -b or every master of -c)",
		"SubscriptionGroupConfig", func() meta.SubscriptionGroupConfig { return meta.NewSubscriptionGroupConfig("") },
		g.sendGroupList,
		"submit batch of group config to %s success, please check the result later.\n",
		"submit batch of subscription group config to %s success, please check the result later.\n")
}

// sendGroupList creates or updates subscription groups on the broker at
// addr in one UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST request
// (SubscriptionGroupList).
func (g *globals) sendGroupList(ctx context.Context, addr string, groups []meta.SubscriptionGroupConfig) error {
	return g.invokeJSON(ctx, addr, remoting.UpdateAndCreateSubscriptionGroupList, nil, struct {
		GroupConfigList []meta.SubscriptionGroupConfig `json:"groupConfigList"`
	}{groups})
}
