package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
)

func popCommand(o *globalOptions) *cobra.Command {
	var group, topic, dueBefore string
	var orderly, reviving bool
	cmd := &cobra.Command{
		Use:   "pop [--group G] [--topic T] [--due-before TIME] [--orderly | --reviving]",
		Short: "POP in-flight messages in deadline order (checkpoints, keyspaces 0x55/0x56), orderly batches (0x53) or messages being revived (0x58, 0x57)",
		Long: `pop lists the messages popped and not yet acknowledged, earliest visibility
deadline first: the messages revive re-delivers once their deadline passes.
Each row is one message of a checkpoint (one pop of one queue); CK OFFSET and
POP TIME name its checkpoint. STAGED marks (JSON: "staged": true) a message of
a staged checkpoint (popReviveStageAhead): a staged revive already copied it
to the pop-retry topic, and pops hand the copy out from VISIBLE AT on (at most
50 ms later: the copies of a staging round wait for its last deadline) unless
the message is acknowledged or given a new invisible time first. A store of
schema version 2 not yet opened by a broker of this version keeps its records
in the old keyspaces 0x50/0x51, which "kvdump raw --prefix 50" decodes but this
listing does not show.
--due-before takes RFC 3339 (2026-05-06T07:08:09Z) or milliseconds since the
epoch; it keeps staged messages by their VISIBLE AT too. --topic matches the
topic a message was read from or, for pop-retry topics, the topic they retry.
--orderly lists the orderly pop batches instead.
--reviving lists the messages being revived instead: those whose checkpoint a
revive replaced by a revive batch (0x58; 0x57 intents of an earlier version)
and whose put to the retry topic or DLQ has not returned, or was cut short by
a crash; at its start the broker revives again those the CommitLog does not
hold.`,
		Args: cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			before, err := dueBound(dueBefore)
			if err != nil {
				return err
			}
			if orderly && reviving {
				return fmt.Errorf("--orderly and --reviving list different things; give one")
			}
			if orderly {
				return runPopOrder(ctx, s, out, group, topic)
			}
			if reviving {
				return runPopReviving(ctx, s, out, group, topic)
			}
			return runPop(ctx, s, out, group, topic, before)
		}),
	}
	cmd.Flags().StringVar(&group, "group", "", "only this consumer group")
	cmd.Flags().StringVar(&topic, "topic", "", "only this topic (and its pop-retry topics)")
	cmd.Flags().StringVar(&dueBefore, "due-before", "", "only records visible again at or before this time")
	cmd.Flags().BoolVar(&orderly, "orderly", false, "list orderly pop batches instead of in-flight messages")
	cmd.Flags().BoolVar(&reviving, "reviving", false, "list the messages being revived (whose revive a crash may have cut short) instead of in-flight messages")
	return cmd
}

// parseTime reads RFC 3339 or milliseconds since the epoch.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("--due-before %q: neither RFC 3339 nor milliseconds since the epoch", s)
	}
	return t.UnixMilli(), nil
}

// dueBound is the bound a --due-before flag sets: the time it names, or
// no bound when it is empty.
func dueBound(flag string) (int64, error) {
	if flag == "" {
		return math.MaxInt64, nil
	}
	return parseTime(flag)
}

// topicMatches reports whether a record's topic is topic or one of its
// pop-retry topics for group.
func topicMatches(recTopic, group, topic string) bool {
	return topic == "" || recTopic == topic ||
		recTopic == pop.RetryTopicV1(topic, group) || recTopic == pop.RetryTopicV2(topic, group)
}

// inFlightOf is the in-flight view of one offset of a checkpoint.
func inFlightOf(c *kvindex.Checkpoint, off int64) kvindex.InFlight {
	return kvindex.InFlight{Group: c.Group, Topic: c.Topic, QueueID: c.QueueID, QueueOffset: off, VisibleAt: c.VisibleAt,
		PopTime: c.PopTime, InvisibleTime: c.InvisibleTime, CKOffset: c.CKOffset, RetryFlag: c.RetryFlag, Attempts: c.Attempts, Staged: c.Staged}
}

func runPop(ctx context.Context, s *store, out *output, group, topic string, before int64) error {
	l := newListing(ctx, out, "VISIBLE AT", "GROUP", "TOPIC", "QUEUE", "OFFSET", "POP TIME", "INVISIBLE MS", "CK OFFSET", "RETRY", "ATTEMPTS", "STAGED")
	row := func(r kvindex.InFlight) bool {
		return l.emit(r, func() []string {
			mark := "-"
			if r.Staged {
				mark = "staged"
			}
			return []string{formatTime(r.VisibleAt), cell(r.Group), cell(r.Topic), num(r.QueueID), num(r.QueueOffset),
				formatTime(r.PopTime), num(r.InvisibleTime), num(r.CKOffset), num(int32(r.RetryFlag)), num(r.Attempts), mark}
		})
	}
	err := s.db.Pop().Due(before, 0, func(r kvindex.InFlight) bool {
		if (group != "" && r.Group != group) || !topicMatches(r.Topic, r.Group, topic) {
			return l.skip()
		}
		return row(r)
	})
	if err := l.finish(err); err != nil {
		return fmt.Errorf("list in-flight messages: %w", err)
	}
	return nil
}

func runPopReviving(ctx context.Context, s *store, out *output, group, topic string) error {
	l := newListing(ctx, out, "GROUP", "TOPIC", "QUEUE", "OFFSET", "POP TIME", "INVISIBLE MS", "CK OFFSET", "RETRY", "ATTEMPTS")
	err := s.db.Pop().ReviveIntents(func(r kvindex.ReviveIntent) bool {
		if (group != "" && r.Group != group) || !topicMatches(r.Topic, r.Group, topic) {
			return l.skip()
		}
		return l.emit(r, func() []string {
			return []string{cell(r.Group), cell(r.Topic), num(r.QueueID), num(r.QueueOffset), formatTime(r.PopTime),
				num(r.InvisibleTime), num(r.CKOffset), num(int32(r.RetryFlag)), num(r.Attempts)}
		})
	})
	if err := l.finish(err); err != nil {
		return fmt.Errorf("list the messages being revived: %w", err)
	}
	return nil
}

func runPopOrder(ctx context.Context, s *store, out *output, group, topic string) error {
	l := newListing(ctx, out, "GROUP", "TOPIC", "QUEUE", "POP TIME", "INVISIBLE MS", "ATTEMPT", "MESSAGES (offset/consumed, * acked)")
	err := s.db.Scan([]byte{kvindex.PrefixPopOrder}, func(k, v []byte) bool {
		rec, err := kvindex.DecodeKey(k, v)
		if err != nil {
			return l.fail(err)
		}
		o := rec.(kvindex.PopOrderRecord)
		if (group != "" && o.Group != group) || !topicMatches(o.Topic, o.Group, topic) {
			return l.skip()
		}
		return l.emit(o.OrderState, func() []string {
			var b strings.Builder
			for i, m := range o.Messages {
				if i > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%d/%d", m.QueueOffset, m.Consumed)
				if o.Acked&(1<<i) != 0 {
					b.WriteByte('*')
				}
			}
			return []string{cell(o.Group), cell(o.Topic), num(o.QueueID), formatTime(o.PopTime), num(o.InvisibleTime), cell(o.AttemptID), b.String()}
		})
	})
	if err := l.finish(err); err != nil {
		return fmt.Errorf("list orderly batches: %w", err)
	}
	return nil
}
