package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

func forbiddenCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "forbidden",
		Short: "What consumer groups are forbidden on topics (RocketMQ's forbiddenTable; JSON: one group per line)",
		Args:  cobra.NoArgs,
		RunE:  withStore(o, runForbidden),
	}
}

func runTopics(ctx context.Context, s *store, out *output) error {
	topics, err := s.db.Topics(1)
	if err != nil {
		return err
	}
	l := newListing(ctx, out, "TOPIC", "READ", "WRITE", "PERM", "ORDER", "FILTER", "SYSFLAG", "ATTRIBUTES")
	return l.finish(topics.Each(func(c meta.TopicConfig) bool {
		return l.emit(c, func() []string {
			return []string{cell(c.TopicName), strconv.Itoa(c.ReadQueueNums), strconv.Itoa(c.WriteQueueNums), strconv.Itoa(c.Perm),
				strconv.FormatBool(c.Order), cell(c.TopicFilterType), strconv.Itoa(c.TopicSysFlag), attributes(c.Attributes)}
		})
	}))
}

func runGroups(ctx context.Context, s *store, out *output) error {
	groups, err := s.db.Groups(1)
	if err != nil {
		return err
	}
	l := newListing(ctx, out, "GROUP", "CONSUME", "BROADCAST", "ORDERLY", "FROMMIN", "RETRYQUEUES", "RETRYMAX", "BROKERID", "SLOWBROKER", "ATTRIBUTES")
	return l.finish(groups.Each(func(c meta.SubscriptionGroupConfig) bool {
		return l.emit(c, func() []string {
			return []string{cell(c.GroupName), strconv.FormatBool(c.ConsumeEnable), strconv.FormatBool(c.ConsumeBroadcastEnable),
				strconv.FormatBool(c.ConsumeMessageOrderly), strconv.FormatBool(c.ConsumeFromMinEnable),
				strconv.Itoa(c.RetryQueueNums), strconv.Itoa(c.RetryMaxTimes), num(c.BrokerID), num(c.WhichBrokerWhenConsumeSlowly),
				attributes(c.Attributes)}
		})
	}))
}

func runForbidden(ctx context.Context, s *store, out *output) error {
	table, err := s.db.GroupForbiddens(1)
	if err != nil {
		return err
	}
	l := newListing(ctx, out, "GROUP", "TOPIC", "BITS", "READ")
	return l.finish(table.Each(func(f meta.GroupForbidden) bool {
		if l.t == nil {
			return l.emit(f, nil)
		}
		for _, topic := range slices.Sorted(maps.Keys(f.Topics)) {
			read := "allowed"
			if f.Forbidden(topic, meta.ForbidReadIndex) {
				read = "forbidden"
			}
			l.t.row(cell(f.Group), cell(topic), strconv.Itoa(f.Topics[topic]), read)
		}
		return l.ctx.Err() == nil
	}))
}

// listing writes the records of a scan, one JSON object per line or one
// table row each, and keeps the first error of a write or a decode for
// finish. Its methods return what the scan's callback returns: whether to
// go on.
type listing struct {
	ctx context.Context
	out *output
	t   *table // nil for JSON
	err error
}

// newListing starts a listing; headers name the table's columns.
func newListing(ctx context.Context, out *output, headers ...string) *listing {
	l := &listing{ctx: ctx, out: out}
	if !out.json {
		l.t = newTable(out.w, headers...)
	}
	return l
}

// emit writes obj as a JSON line, or the table row that row builds.
func (l *listing) emit(obj any, row func() []string) bool {
	if l.t == nil {
		l.err = l.out.object(obj)
	} else {
		l.t.row(row()...)
	}
	return l.err == nil && l.ctx.Err() == nil
}

// skip passes over a record the listing does not show.
func (l *listing) skip() bool { return l.ctx.Err() == nil }

// fail stops the scan with err.
func (l *listing) fail(err error) bool {
	l.err = err
	return false
}

// finish ends the listing: the scan's error, else the listing's own, else
// the context's; then the table's flush.
func (l *listing) finish(scanErr error) error {
	err := scanErr
	if err == nil {
		err = l.err
	}
	if err == nil {
		err = l.ctx.Err()
	}
	if err != nil {
		return err
	}
	if l.t != nil {
		return l.t.flush()
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
