package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/meta"
)

func topicsCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "topics",
		Short: "Topic configs (JSON: RocketMQ's TopicConfig, one per line)",
		Args:  cobra.NoArgs,
		RunE:  withStore(o, runTopics),
	}
}

func groupsCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "groups",
		Short: "Subscription group configs (JSON: RocketMQ's SubscriptionGroupConfig, one per line)",
		Args:  cobra.NoArgs,
		RunE:  withStore(o, runGroups),
	}
}

func runTopics(ctx context.Context, s *store, out *output) error {
	topics, err := s.db.Topics(1)
	if err != nil {
		return err
	}
	var t *table
	if !out.json {
		t = newTable(out.w, "TOPIC", "READ", "WRITE", "PERM", "ORDER", "FILTER", "SYSFLAG", "ATTRIBUTES")
	}
	var werr error
	err = topics.Each(func(c meta.TopicConfig) bool {
		if out.json {
			werr = out.object(c)
		} else {
			t.row(cell(c.TopicName), strconv.Itoa(c.ReadQueueNums), strconv.Itoa(c.WriteQueueNums), strconv.Itoa(c.Perm),
				strconv.FormatBool(c.Order), cell(c.TopicFilterType), strconv.Itoa(c.TopicSysFlag), attributes(c.Attributes))
		}
		return werr == nil && ctx.Err() == nil
	})
	return finishListing(ctx, t, err, werr)
}

func runGroups(ctx context.Context, s *store, out *output) error {
	groups, err := s.db.Groups(1)
	if err != nil {
		return err
	}
	var t *table
	if !out.json {
		t = newTable(out.w, "GROUP", "CONSUME", "BROADCAST", "ORDERLY", "FROMMIN", "RETRYQUEUES", "RETRYMAX", "BROKERID", "SLOWBROKER", "ATTRIBUTES")
	}
	var werr error
	err = groups.Each(func(c meta.SubscriptionGroupConfig) bool {
		if out.json {
			werr = out.object(c)
		} else {
			t.row(cell(c.GroupName), strconv.FormatBool(c.ConsumeEnable), strconv.FormatBool(c.ConsumeBroadcastEnable),
				strconv.FormatBool(c.ConsumeMessageOrderly), strconv.FormatBool(c.ConsumeFromMinEnable),
				strconv.Itoa(c.RetryQueueNums), strconv.Itoa(c.RetryMaxTimes), num(c.BrokerID), num(c.WhichBrokerWhenConsumeSlowly),
				attributes(c.Attributes))
		}
		return werr == nil && ctx.Err() == nil
	})
	return finishListing(ctx, t, err, werr)
}

// finishListing ends a listing: the scan's error, else the writer's, else
// the context's; then the table's flush.
func finishListing(ctx context.Context, t *table, err, werr error) error {
	if err == nil {
		err = werr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

// attributes formats a config's attributes as sorted key=value pairs.
func attributes(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%s", k, v))
	}
	sort.Strings(parts)
	return cell(strings.Join(parts, ","))
}
