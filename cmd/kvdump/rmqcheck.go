package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/filecq"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

func rocketmqCheckCommand(o *globalOptions) *cobra.Command {
	var lmq bool
	cmd := &cobra.Command{
		Use:   "check-rocketmq",
		Short: "Before a broker first opens an Apache RocketMQ store: what it will take over, what stops it, what stays behind; exit status 1 when it would refuse the store",
		Long: `check-rocketmq reads an Apache RocketMQ store (--store, its
storePathRootDir; --commitlog for another storePathCommitLog) and reports
what a rocketkv broker's first open of it would do, without opening it:

  the CommitLog it serves as it is (segments, their size, its offsets),
  the config it imports (topics, groups, consumer offsets, delay-level
  progress, POP request modes, orderly POP batches, the timer's progress),
  what refuses the store (config kept in RocksDB, POP state in RocketMQ's
  KV POP RocksDB, segments of different sizes), with the way out,
  what it warns about and does not carry over (static topics, LMQ offsets,
  BatchCQ and compacted topics).

POP messages in flight in the revive topic are taken over at the first
open but not counted here (that needs the whole CommitLog read).

With --enable-lmq the consumer offsets are read as a broker configured
with enableLmq=true reads them (from lmqConsumerOffset.json, light message
queues' offsets included), for a store whose RocketMQ broker ran with it.

It changes nothing. Exit status 1 when the first open would be refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.broker != "" {
				return errors.New("check-rocketmq reads a RocketMQ store (--store), not a running broker")
			}
			r, err := checkRocketMQ(o.store, o.commitLog, lmq)
			if err != nil {
				return err
			}
			if err := printRocketMQCheck(newOutput(cmd.OutOrStdout(), o.json), r); err != nil {
				return err
			}
			if len(r.Refusals) > 0 {
				return storeRefused{len(r.Refusals)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&lmq, "enable-lmq", false, "read the consumer offsets as a broker with enableLmq=true does")
	return cmd
}

// storeRefused is check-rocketmq's result when a broker would refuse the
// store (exit status 1).
type storeRefused struct{ n int }

func (e storeRefused) Error() string {
	return fmt.Sprintf("a broker would refuse this store (%d reasons above)", e.n)
}

// Is makes the refusal exit with status 1, as differences do.
func (e storeRefused) Is(target error) bool { return target == errDifferences }

// rocketmqCheck is what check-rocketmq found.
type rocketmqCheck struct {
	Kind  string `json:"kind"`
	Store string `json:"store"`
	// Opened is set when the store has a rocketkv index already: once
	// its first open finished, nothing is imported again.
	Opened bool `json:"opened"`
	// CommitLog describes the segment directory.
	CommitLog struct {
		Dir          string  `json:"dir"`
		Segments     int     `json:"segments"`
		SegmentSizes []int64 `json:"segmentSizes"`
		MinOffset    int64   `json:"minOffset"`
		MaxOffset    int64   `json:"maxOffset"`
	} `json:"commitLog"`
	// logRead is set when the CommitLog directory could be read.
	logRead bool
	// FileConsumeQueue is set when consumequeue/ exists: the queues whose
	// records retention deleted keep their offsets from it.
	FileConsumeQueue bool     `json:"fileConsumeQueue"`
	ConfigFiles      []string `json:"configFiles"`
	configCounts
	TimerProgress bool `json:"timerProgress"`
	// Refusals stop the first open; Warnings name what does not move.
	Refusals []string `json:"refusals,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Unrouted names the queues of consumequeue/ no topic config routes
	// (rmqconfig.UnroutedQueues); without consumequeue/ the broker's first
	// open logs them once it has indexed the CommitLog.
	Unrouted []string `json:"unrouted,omitempty"`
}

// checkRocketMQ inspects the store at root (segDir: its CommitLog
// directory when not root/commitlog) as a broker with enableLmq set to lmq
// would import it. An error is a store it could not read at all; what
// would refuse it is in Refusals.
func checkRocketMQ(root, segDir string, lmq bool) (rocketmqCheck, error) {
	r := rocketmqCheck{Kind: "check-rocketmq", Store: root}
	if _, err := os.Stat(root); err != nil {
		return r, fmt.Errorf("check the RocketMQ store %s: %w", root, err)
	}
	if fi, err := os.Stat(filepath.Join(root, kvindex.DirName)); err == nil && fi.IsDir() {
		r.Opened = true
	}
	if segDir == "" {
		segDir = commitlog.SegmentDirOf(root)
	}
	r.CommitLog.Dir = segDir
	switch log, err := commitlog.OpenReadOnlyDir(segDir); {
	case errors.Is(err, fs.ErrNotExist):
		r.Refusals = append(r.Refusals, fmt.Sprintf("no CommitLog directory %s (set storePathCommitLog, or --commitlog here)", segDir))
	case err != nil:
		r.Refusals = append(r.Refusals, "the CommitLog cannot be read: "+err.Error())
	default:
		r.logRead = true
		sizes := log.SegmentSizes()
		r.CommitLog.Segments, r.CommitLog.MinOffset, r.CommitLog.MaxOffset = len(sizes), log.MinOffset(), log.MaxOffset()
		r.CommitLog.SegmentSizes = slices.Compact(slices.Sorted(slices.Values(sizes)))
		// The broker takes the size from the files and accepts another
		// size only for a last file of zeros (a preallocation a crash
		// interrupted), which it removes.
		if len(sizes) > 1 && slices.ContainsFunc(sizes[:len(sizes)-1], func(s int64) bool { return s != sizes[0] }) {
			r.Refusals = append(r.Refusals, fmt.Sprintf("CommitLog segments of different sizes %v: a store's segments all have mappedFileSizeCommitLog bytes", r.CommitLog.SegmentSizes))
		}
		if err := log.Close(); err != nil {
			return r, err
		}
	}
	var queues map[string]int32
	if fi, err := os.Stat(filepath.Join(root, "consumequeue")); err == nil && fi.IsDir() {
		r.FileConsumeQueue = true
		if queues, err = readConsumeQueue(root, r.CommitLog.MinOffset); err != nil {
			r.Refusals = append(r.Refusals, err.Error())
		}
	}
	if err := rmqconfig.CheckPopState(root); err != nil {
		r.Refusals = append(r.Refusals, err.Error())
	}
	c, err := rmqconfig.ReadWith(root, rmqconfig.ReadOptions{LMQ: lmq})
	if err != nil {
		r.Refusals = append(r.Refusals, err.Error())
		return r, nil
	}
	r.ConfigFiles = c.Files
	r.configCounts = countConfig(c)
	r.TimerProgress = c.HasTimerCheck
	r.Warnings = c.NotCarried
	if queues != nil {
		configured := make(map[string]int, len(c.Topics))
		for _, t := range c.Topics {
			configured[t.TopicName] = int(t.ReadQueueNums)
		}
		r.Unrouted = rmqconfig.UnroutedQueues(queues, func(topic string) (int, bool) {
			n, ok := configured[topic]
			return n, ok
		})
	}
	return r, nil
}

// readConsumeQueue reads the bounds of every queue of the file
// ConsumeQueue under root, with the units per file its files hold, as a
// broker's first open reads them (the queues whose records retention
// deleted start past them), and returns each topic's highest queue id;
// logMin is the CommitLog's minimum (0 when it could not be read). Files
// it cannot read, torn ones for example, refuse the store.
func readConsumeQueue(root string, logMin int64) (map[string]int32, error) {
	fail := func(err error) error {
		return fmt.Errorf("the consumequeue cannot be read (move it aside: queues whose records retention deleted then restart at offset 0): %w", err)
	}
	units, ok := filecq.DetectUnitsPerFile(nil, root)
	if !ok {
		units = filecq.DefaultUnitsPerFile
	}
	files, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: units, Logger: zerolog.Nop()})
	if err != nil {
		return nil, fail(err)
	}
	defer files.Close()
	if err := files.CorrectMin(logMin); err != nil {
		return nil, fail(err)
	}
	queues := make(map[string]int32)
	var qerr error
	err = files.Queues(func(topic string, qid int32) bool {
		if top, ok := queues[topic]; !ok || qid > top {
			queues[topic] = qid
		}
		if _, qerr = files.MinOffset(topic, qid); qerr == nil {
			_, qerr = files.MaxOffset(topic, qid)
		}
		if qerr != nil {
			qerr = fmt.Errorf("queue %s/%d: %w", topic, qid, qerr)
		}
		return qerr == nil
	})
	if err = errors.Join(err, qerr); err != nil {
		return nil, fail(err)
	}
	return queues, nil
}

func printRocketMQCheck(out *output, r rocketmqCheck) error {
	if out.json {
		return out.object(r)
	}
	var err error
	add := func(format string, args ...any) {
		if err == nil {
			err = out.line(format, args...)
		}
	}
	add("store %s", r.Store)
	if r.Opened {
		add("a rocketkv index is present (%s/): once a broker's first open of the store finished, nothing is imported again", kvindex.DirName)
	}
	if r.CommitLog.Segments > 0 {
		add("CommitLog %s: %d segments of %v bytes, offsets %d to %d", r.CommitLog.Dir, r.CommitLog.Segments,
			r.CommitLog.SegmentSizes, r.CommitLog.MinOffset, r.CommitLog.MaxOffset)
	} else if r.logRead {
		add("CommitLog %s: empty", r.CommitLog.Dir)
	}
	if sizes := r.CommitLog.SegmentSizes; len(sizes) == 1 && sizes[0] != commitlog.DefaultSegmentSize {
		add("set mappedFileSizeCommitLog=%d in the broker's config (the default is %d), as RocketMQ needs it to serve these segments again; rocketkv gives new segments the size of these whatever it says", sizes[0], int64(commitlog.DefaultSegmentSize))
	}
	if r.FileConsumeQueue {
		add("consumequeue/: present (queues whose records retention deleted keep their offsets from it)")
	} else if r.CommitLog.Segments > 0 {
		add("consumequeue/: absent (the first open indexes every record of the CommitLog, and logs the topics whose messages no topic config routes)")
	}
	add("config files: %s", orNone(r.ConfigFiles))
	add("imported at the first open: %d topics, %d groups, %d consumer offsets, %d delay levels, %d request modes, %d orderly POP batches (before the import skips the stale ones), timer progress %v",
		r.Topics, r.Groups, r.Offsets, r.DelayLevels, r.RequestModes, r.OrderlyBatches, r.TimerProgress)
	for _, w := range r.Warnings {
		add("warning: not carried over: %s", w)
	}
	for _, w := range r.Unrouted {
		add("warning: %s", w)
	}
	for _, why := range r.Refusals {
		add("refused: %s", why)
	}
	if len(r.Refusals) == 0 {
		add("a broker can open this store")
	}
	return err
}

// orNone joins names, or says none.
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
