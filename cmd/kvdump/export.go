package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

// transCheckGroup is the consumer group under which RocketMQ's transaction
// checker keeps its progress in the half and op topics.
const transCheckGroup = "CID_RMQ_SYS_TRANS"

func exportCommand(o *globalOptions) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "export-rocketmq [--out DIR] [--force]",
		Short: "Write the store's topics, groups and offsets as Apache RocketMQ's config files: the way back to RocketMQ",
		Long: `Writes the topics, subscription groups, consumer offsets, delay-level
progress and POP request modes of a stopped store as the config files of
an Apache RocketMQ broker (topics.json, subscriptionGroup.json,
consumerOffset.json, delayOffset.json, messageRequestMode.json) into
--out, by default the store's own config/ directory, keeping what they
replace as .bak files. With RocketMQ's consumequeue/ files complete (the
broker ran with storeType=file or rocksdbCQDoubleWriteEnable=true), an
Apache RocketMQ broker with the same mappedFileSizeCommitLog can then
serve the store, consumers going on where they were.

State RocketMQ cannot take over stops the export unless --force is given:
POP messages in flight (RocketMQ would never revive them), timer messages
not yet due (RocketMQ would not deliver them) and open transactions
(RocketMQ would not check them; with --force the checker is pointed at the
first open one, and transactions ended after it may be checked again).
The message-key index is not exported: RocketMQ's query by key finds only
messages stored after the move.`,
		Args: cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, w *output) error {
			if s.broker != "" {
				return errors.New("export-rocketmq reads a stopped store (--store), not a running broker")
			}
			dir := out
			if dir == "" {
				dir = filepath.Join(s.root, "config")
			}
			return runExport(ctx, s, w, dir, force)
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for the config files (default: the store's config/)")
	cmd.Flags().BoolVar(&force, "force", false, "export although POP messages are in flight, timer messages wait or transactions are open")
	return cmd
}

// exportLine is the JSON report of an export.
type exportLine struct {
	Kind         string   `json:"kind"`
	Dir          string   `json:"dir"`
	Topics       int      `json:"topics"`
	Groups       int      `json:"groups"`
	Offsets      int      `json:"offsets"`
	DelayLevels  int      `json:"delayLevels"`
	RequestModes int      `json:"requestModes"`
	Warnings     []string `json:"warnings,omitempty"`
}

func runExport(ctx context.Context, s *store, w *output, dir string, force bool) error {
	fileDone, ok, err := s.db.LayoutProgress(kvindex.LayoutFile)
	if err != nil {
		return err
	}
	if !ok || fileDone < s.dispatched {
		return fmt.Errorf("RocketMQ's consumequeue/ files are not complete (written to %d of %d): run the broker once with rocksdbCQDoubleWriteEnable=true (or storeType=file) to build them, then export", max(fileDone, 0), s.dispatched)
	}
	problems, firstOpen, err := unportableState(s)
	if err != nil {
		return err
	}
	if len(problems) > 0 && !force {
		return fmt.Errorf("the store holds state Apache RocketMQ cannot take over: %s; drain it, or export with --force", strings.Join(problems, "; "))
	}
	var c rmqconfig.Config
	if c, err = collectConfig(ctx, s, firstOpen); err != nil {
		return err
	}
	if err := rmqconfig.Write(dir, c, meta.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1}); err != nil {
		return err
	}
	line := exportLine{Kind: "export", Dir: dir, Topics: len(c.Topics), Groups: len(c.Groups), Offsets: len(c.Offsets),
		DelayLevels: len(c.DelayOffsets), RequestModes: len(c.RequestModes), Warnings: problems}
	if w.json {
		return w.object(line)
	}
	for _, p := range problems {
		if err := w.line("warning: exported with --force although " + p); err != nil {
			return err
		}
	}
	return w.line(fmt.Sprintf("wrote %d topics, %d groups, %d consumer offsets, %d delay levels and %d request modes to %s",
		line.Topics, line.Groups, line.Offsets, line.DelayLevels, line.RequestModes, dir))
}

// unportableState describes what of the store Apache RocketMQ cannot take
// over, and returns the queue offset of the first open transaction (-1
// without one).
func unportableState(s *store) ([]string, int64, error) {
	var problems []string
	_, inFlight, err := s.db.Pop().CountInFlight()
	if err != nil {
		return nil, 0, err
	}
	if inFlight > 0 {
		problems = append(problems, fmt.Sprintf("%d POP messages are in flight", inFlight))
	}
	stats, err := s.db.KeyspaceStats()
	if err != nil {
		return nil, 0, err
	}
	for _, st := range stats {
		if st.Prefix == kvindex.PrefixTimer && st.Keys > 0 {
			problems = append(problems, fmt.Sprintf("%d timer messages are not due yet", st.Keys))
		}
	}
	firstOpen, open := int64(-1), 0
	if err := s.db.Transactions().OpenHalves(func(h kvindex.TxnHalf) bool {
		if firstOpen < 0 || h.QueueOffset < firstOpen {
			firstOpen = h.QueueOffset
		}
		open++
		return true
	}); err != nil {
		return nil, 0, err
	}
	if open > 0 {
		problems = append(problems, fmt.Sprintf("%d transactions are open", open))
	}
	return problems, firstOpen, nil
}

// collectConfig reads the store's config as RocketMQ's files hold it. The
// scheduler's progress becomes delayOffset.json; the transaction checker's
// progress is set past every ended transaction (at firstOpen when one is
// open).
func collectConfig(ctx context.Context, s *store, firstOpen int64) (rmqconfig.Config, error) {
	var c rmqconfig.Config
	topics, err := s.db.Topics(1)
	if err != nil {
		return c, err
	}
	if err := topics.Each(func(tc meta.TopicConfig) bool {
		c.Topics = append(c.Topics, tc)
		return ctx.Err() == nil
	}); err != nil {
		return c, err
	}
	groups, err := s.db.Groups(1)
	if err != nil {
		return c, err
	}
	if err := groups.Each(func(gc meta.SubscriptionGroupConfig) bool {
		c.Groups = append(c.Groups, gc)
		return ctx.Err() == nil
	}); err != nil {
		return c, err
	}
	c.DelayOffsets = map[int]int64{}
	if err := s.db.ConsumerOffsets().Each("", func(u kvindex.OffsetUpdate) bool {
		switch u.Group {
		case meta.ScheduleOffsetGroup:
			c.DelayOffsets[int(u.QueueID)+1] = u.Offset
		case transCheckGroup: // set below
		default:
			c.Offsets = append(c.Offsets, rmqconfig.Offset{Group: u.Group, Topic: u.Topic, QueueID: u.QueueID, Offset: u.Offset})
		}
		return ctx.Err() == nil
	}); err != nil {
		return c, err
	}
	cq := s.db.ConsumeQueue(1)
	for _, topic := range []string{meta.TransHalfTopic, meta.TransOpHalfTopic} {
		end, err := cq.MaxOffset(topic, 0)
		if err != nil {
			return c, err
		}
		if topic == meta.TransHalfTopic && firstOpen >= 0 {
			end = firstOpen
		}
		if end > 0 {
			c.Offsets = append(c.Offsets, rmqconfig.Offset{Group: transCheckGroup, Topic: topic, Offset: end})
		}
	}
	if err := s.db.Pop().EachRequestMode(func(m kvindex.RequestMode) bool {
		var rm rmqconfig.RequestMode
		if json.Unmarshal(m.JSON, &rm) == nil {
			rm.Topic, rm.ConsumerGroup = m.Topic, m.Group
			c.RequestModes = append(c.RequestModes, rm)
		}
		return ctx.Err() == nil
	}); err != nil {
		return c, err
	}
	return c, ctx.Err()
}
