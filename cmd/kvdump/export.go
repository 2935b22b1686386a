package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

func exportCommand(o *globalOptions) *cobra.Command {
	var out string
	var force bool
	run := withStore(o, func(ctx context.Context, s *store, w *output) error {
		dir := out
		if dir == "" {
			dir = filepath.Join(s.root, "config")
		}
		return runExport(ctx, s, w, dir, force)
	})
	cmd := &cobra.Command{
		Use:   "export-rocketmq [--out DIR] [--force]",
		Short: "Write the store's topics, groups and offsets as Apache RocketMQ's config files: the way back to RocketMQ",
		Long: `Writes the topics, subscription groups, consumer offsets, delay-level
progress, POP request modes, orderly POP batches in flight and static
topics' queue mappings of a stopped store as the config files of an
Apache RocketMQ broker (topics.json, subscriptionGroup.json,
consumerOffset.json, delayOffset.json, messageRequestMode.json,
consumerOrderInfo.json, topicQueueMapping.json) into
--out, by default the store's own config/ directory, keeping what they
replace as .bak files. A slave's store is exported with the offsets and
orderly batches of its own pops over those it copied from its master,
as the slave serves them. With RocketMQ's consumequeue/ files complete (the
broker ran with storeType=file or rocksdbCQDoubleWriteEnable=true), an
Apache RocketMQ broker with the same mappedFileSizeCommitLog can then
serve the store, consumers going on where they were.

RocketMQ 5's timer checkpoint (config/timercheck) is written too, so that
its timer takes in rmq_sys_wheel_timer after what rocketkv delivered, and
RocketMQ's own timerlog/ and timerwheel from before the store came to
rocketkv are renamed *.before-rocketkv-export (left, with a warning, when
--out points elsewhere): from them RocketMQ would deliver old timer
messages again. So is its KV POP RocksDB (kvStore/), whose messages in
flight the first open took over: RocketMQ's KV POP would revive them
again.

State RocketMQ cannot take over stops the export unless --force is given:
the messages kept for compacted topics (RocketMQ serves those topics from
compaction logs it builds from new messages only), POP messages in flight that no POP_ROLLBACK handed to RocketMQ's revive
(stop the POP consumers and send it with mqadmin exportPopRecord; or let
the broker run until their invisible time has passed, and it revives them
into the retry topics), timer messages
not yet due (with --force RocketMQ's timer takes in the parked messages
from the first of them, and timer messages after it that rocketkv already
delivered are delivered again) and open transactions (with --force the
checker is pointed at the first open one and at the op messages stored
after it: RocketMQ asks the producers about the open ones, and knows the
ones rocketkv ended from the op messages rocketkv writes; a transaction
ended by a rocketkv older than those, after the first open one, is asked
about again, and a commit answered then is stored a second time). The message-key index is
not exported: RocketMQ's query by key finds only messages stored after the
move.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Refused before the store is opened: with --broker, opening it
			// would first have the running broker write a checkpoint of its
			// index, only for the export to refuse it.
			if o.broker != "" {
				return errors.New("export-rocketmq reads a stopped store (--store), not a running broker")
			}
			return run(cmd, args)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for the config files (default: the store's config/)")
	cmd.Flags().BoolVar(&force, "force", false, "export although POP messages are in flight, timer messages wait, compacted topics keep messages or transactions are open")
	return cmd
}

// exportLine is the JSON report of an export.
type exportLine struct {
	Kind string `json:"kind"`
	Dir  string `json:"dir"`
	configCounts
	Warnings []string `json:"warnings,omitempty"`
}

// configCounts counts the tables of RocketMQ's config files: what an
// export writes, or what a first open imports.
type configCounts struct {
	Topics       int `json:"topics"`
	Groups       int `json:"groups"`
	Offsets      int `json:"offsets"`
	DelayLevels  int `json:"delayLevels"`
	RequestModes int `json:"requestModes"`
	// OrderlyBatches counts the orderly POP batches in flight
	// (consumerOrderInfo.json).
	OrderlyBatches int `json:"orderlyBatches"`
	// StaticTopics counts the static topics' queue mappings
	// (topicQueueMapping.json), which a first open imports and an export
	// writes.
	StaticTopics int `json:"staticTopics,omitempty"`
	// PopPositions counts config v2's pull offsets of light message
	// queues, which a first open with enableLmq imports as the groups' pop
	// positions (an export writes none: RocketMQ keeps them only there).
	PopPositions int `json:"popPositions,omitempty"`
}

// countConfig counts the tables of c.
func countConfig(c rmqconfig.Config) configCounts {
	return configCounts{Topics: len(c.Topics), Groups: len(c.Groups), Offsets: len(c.Offsets), DelayLevels: len(c.DelayOffsets),
		RequestModes: len(c.RequestModes), OrderlyBatches: len(c.OrderInfos), StaticTopics: len(c.QueueMappings),
		PopPositions: len(c.PullOffsets)}
}

func runExport(ctx context.Context, s *store, w *output, dir string, force bool) error {
	fileDone, ok, err := s.db.LayoutProgress(kvindex.LayoutFile)
	if err != nil {
		return err
	}
	if !ok || fileDone < s.dispatched {
		return fmt.Errorf("RocketMQ's consumequeue/ files are not complete (written to %d of %d): run the broker once with rocksdbCQDoubleWriteEnable=true (or storeType=file) to build them, then export", max(fileDone, 0), s.dispatched)
	}
	u, err := unportableState(s)
	if err != nil {
		return err
	}
	problems := u.problems
	if len(problems) > 0 && !force {
		return fmt.Errorf("the store holds state Apache RocketMQ cannot take over: %s; drain it, or export with --force", strings.Join(problems, "; "))
	}
	for i, p := range problems {
		problems[i] = "exported with --force although " + p
	}
	var c rmqconfig.Config
	if c, err = rmqconfig.FromStore(ctx, s.db, s.db.ConsumeQueue(1), u.firstOpen); err != nil {
		return err
	}
	version := meta.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1}
	if err := rmqconfig.Write(dir, c, version); err != nil {
		return err
	}
	timerFrom, err := timerTakeInFrom(s, u.firstParked)
	if err != nil {
		return err
	}
	if err := rmqconfig.WriteTimerCheckpoint(dir, time.Now().UnixMilli(), timerFrom, version); err != nil {
		return err
	}
	moved, leftover, err := moveStaleFilesAside(s.root, dir == filepath.Join(s.root, "config"))
	if err != nil {
		return err
	}
	problems = append(problems, leftover...)
	line := exportLine{Kind: "export", Dir: dir, configCounts: countConfig(c), Warnings: problems}
	if w.json {
		return w.object(line)
	}
	for _, p := range problems {
		if err := w.line("warning: " + p); err != nil {
			return err
		}
	}
	for _, m := range moved {
		if err := w.line("moved RocketMQ's stale " + m); err != nil {
			return err
		}
	}
	return w.line(fmt.Sprintf("wrote %d topics, %d groups, %d consumer offsets, %d delay levels, %d request modes, %d orderly POP batches and %d static topic mappings to %s",
		line.Topics, line.Groups, line.Offsets, line.DelayLevels, line.RequestModes, line.OrderlyBatches, line.StaticTopics, dir))
}

// popNotRolledBack counts the POP messages in flight that the last
// POP_ROLLBACK did not write to the revive topic (all of them without
// one): those popped after it began, or in its first millisecond; and
// those whose revive has not finished (keyspaces 0x58 and 0x57). Staged
// checkpoints (popReviveStageAhead) are not counted, as POP_ROLLBACK
// writes none: their messages' copies already wait in the pop-retry
// topics, which RocketMQ serves (at once, not at their deadline).
func popNotRolledBack(db *kvindex.DB) (int, error) {
	r, ok, err := db.LastPopRollback()
	if err != nil {
		return 0, err
	}
	n := 0
	err = db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool {
		if !c.Staged && (!ok || c.PopTime >= r.At) {
			n += len(c.Offsets)
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("read the POP messages in flight: %w", err)
	}
	// Messages whose revive a crash cut short: no checkpoint holds them
	// any more, and only rocketkv's next start revives those not stored.
	reviving, err := db.Pop().CountReviveIntents()
	if err != nil {
		return 0, fmt.Errorf("read the POP messages being revived: %w", err)
	}
	return n + int(reviving), nil
}

// unportable is the state of a store Apache RocketMQ cannot take over.
type unportable struct {
	problems []string
	// firstOpen is the queue offset of the first open transaction, -1
	// without one.
	firstOpen int64
	// firstParked is the CommitLog offset of the first timer message still
	// parked, -1 without one.
	firstParked int64
}

// unportableState reads what of the store Apache RocketMQ cannot take
// over: POP messages in flight, timer messages not due (one pass over the
// timer keyspace), the messages kept for compacted topics and open
// transactions.
func unportableState(s *store) (unportable, error) {
	u := unportable{firstOpen: -1, firstParked: -1}
	inFlight, err := popNotRolledBack(s.db)
	if err != nil {
		return u, err
	}
	if inFlight > 0 {
		u.problems = append(u.problems, fmt.Sprintf("%d POP messages are in flight (stop the POP consumers, then send POP_ROLLBACK to the broker with mqadmin exportPopRecord -b <its address>: it hands them to RocketMQ's revive; or let the broker run until their invisible time has passed: it revives them into the retry topics, which RocketMQ serves)", inFlight))
	}
	// A key that does not decode fails the export: skipping it could hide
	// a parked message, and the timer checkpoint would then be set past it
	// (RocketMQ would never deliver it). decodeErr is kept apart from the
	// Scan's own result, which would otherwise overwrite it with nil.
	parked := 0
	var decodeErr error
	err = s.db.Scan([]byte{kvindex.PrefixTimer}, func(k, v []byte) bool {
		rec, derr := kvindex.DecodeKey(k, v)
		if derr != nil {
			decodeErr = derr
			return false
		}
		if e := rec.(kvindex.TimerRecord).TimerEntry; u.firstParked < 0 || e.PhyOffset < u.firstParked {
			u.firstParked = e.PhyOffset
		}
		parked++
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return u, fmt.Errorf("read the parked timer messages: %w", err)
	}
	if parked > 0 {
		u.problems = append(u.problems, fmt.Sprintf("%d timer messages are not due yet", parked))
	}
	compacted, err := s.db.CompactedTopics()
	if err != nil {
		return u, err
	}
	if len(compacted) > 0 {
		u.problems = append(u.problems, fmt.Sprintf("%d compacted topics (%s) keep their messages in rocketkv's index: RocketMQ serves a compacted topic from its compaction logs alone, which it builds from the messages stored after the move, so their consumers would read none of the kept ones",
			len(compacted), strings.Join(compacted, ", ")))
	}
	open, firstOpen, err := rmqconfig.OpenTransactions(s.db)
	if err != nil {
		return u, err
	}
	u.firstOpen = firstOpen
	if open > 0 {
		u.problems = append(u.problems, fmt.Sprintf("%d transactions are open", open))
	}
	return u, nil
}

// timerTakeInFrom is the rmq_sys_wheel_timer offset RocketMQ's timer is to
// take messages in from: the first message still parked (at CommitLog
// offset firstParked; rocketkv has not delivered it), else the queue's
// end, so that nothing rocketkv delivered is delivered again.
func timerTakeInFrom(s *store, firstParked int64) (int64, error) {
	end, err := s.db.ConsumeQueue(1).MaxOffset(meta.TimerTopic, 0)
	if err != nil || firstParked < 0 {
		return end, err
	}
	// Queue offsets of the timer topic grow with the CommitLog offsets.
	log, err := s.needLog()
	if err != nil {
		return 0, err
	}
	m, err := readRecord(log, firstParked)
	if err != nil {
		return 0, fmt.Errorf("the first parked timer message: %w", err)
	}
	return min(m.QueueOffset, end), nil
}

// staleFiles are the files of RocketMQ's own from before the store came
// to rocketkv that it would act on again after an export, with what it
// would do.
var staleFiles = []struct{ name, why string }{
	{"timerlog", "its timer would deliver old timer messages again"},
	{"timerwheel", "its timer would deliver old timer messages again"},
	// The KV POP records rocketkv imported at its first open (or none):
	// RocketMQ's KV POP revive would deliver those messages again.
	{rmqconfig.KVPopDir, "its KV POP would revive the messages in flight rocketkv took over at its first open again"},
}

// moveStaleFilesAside renames RocketMQ's timerlog/ and timerwheel (from
// before the store came to rocketkv) so that RocketMQ's timer starts from
// the exported checkpoint instead of revising it from them, and its KV
// POP RocksDB (kvStore/), whose records rocketkv imported, so that
// RocketMQ's KV POP starts empty. When the export went elsewhere than the
// store's config/, it leaves them and warns instead.
func moveStaleFilesAside(root string, inStore bool) (moved, warnings []string, err error) {
	for _, f := range staleFiles {
		path := filepath.Join(root, f.name)
		if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
			continue
		} else if serr != nil {
			return nil, nil, fmt.Errorf("look for RocketMQ's %s: %w", path, serr)
		}
		if !inStore {
			warnings = append(warnings, fmt.Sprintf("move %s aside before Apache RocketMQ starts on the store: %s", path, f.why))
			continue
		}
		aside := path + ".before-rocketkv-export"
		if err := os.Rename(path, aside); err != nil {
			return nil, nil, fmt.Errorf("move RocketMQ's %s aside: %w", path, err)
		}
		moved = append(moved, f.name+" to "+aside)
	}
	return moved, warnings, nil
}
