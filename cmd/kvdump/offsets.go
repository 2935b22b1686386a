package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
)

func offsetsCommand(o *globalOptions) *cobra.Command {
	var group, topic string
	cmd := &cobra.Command{
		Use:   "offsets [--group G] [--topic T]",
		Short: "Committed consumer offsets with their lag against the queues' max offsets",
		Args:  cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			return runOffsets(ctx, s, out, group, topic)
		}),
	}
	cmd.Flags().StringVar(&group, "group", "", "only this consumer group")
	cmd.Flags().StringVar(&topic, "topic", "", "only this topic")
	return cmd
}

// offsetLine is one committed offset in JSON output.
type offsetLine struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	Offset    int64  `json:"offset"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	// Lag is how many messages the group has not consumed: max - offset
	// (RocketMQ's diff), never negative.
	Lag int64 `json:"lag"`
}

func runOffsets(ctx context.Context, s *store, out *output, group, topic string) error {
	c := s.db.ConsumeQueue(0)
	var t *table
	if !out.json {
		t = newTable(out.w, "GROUP", "TOPIC", "QUEUE", "OFFSET", "MIN", "MAX", "LAG")
	}
	var werr error
	err := s.db.ConsumerOffsets().Each(group, func(u kvindex.OffsetUpdate) bool {
		if topic != "" && u.Topic != topic {
			return ctx.Err() == nil
		}
		l := offsetLine{Group: u.Group, Topic: u.Topic, QueueID: u.QueueID, Offset: u.Offset}
		if l.MinOffset, werr = c.MinOffset(u.Topic, u.QueueID); werr != nil {
			return false
		}
		if l.MaxOffset, werr = c.MaxOffset(u.Topic, u.QueueID); werr != nil {
			return false
		}
		l.Lag = max(0, l.MaxOffset-l.Offset)
		if out.json {
			werr = out.object(l)
		} else {
			t.row(cell(l.Group), cell(l.Topic), num(l.QueueID), num(l.Offset), num(l.MinOffset), num(l.MaxOffset), num(l.Lag))
		}
		return werr == nil && ctx.Err() == nil
	})
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
