package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/dledger"
	"github.com/rocketkv/rocketkv/migrate/filecq"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/migrate/rocksdbcq"
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
  progress, POP request modes, orderly POP batches, the timer's progress,
  and with --enable-lmq config v2's pull offsets of light message queues,
  which become pop positions),
  the POP messages in flight in RocketMQ 5's KV POP RocksDB (kvStore/),
  which it imports,
  what refuses the store (an unreadable RocksDB config, a KV POP RocksDB
  that cannot be read or holds a record that does not decode, segments
  of different sizes), with the way out,
  what it warns about and does not carry over (static topics, LMQ offsets,
  BatchCQ and compacted topics),
  what it leaves out or cuts, with counts: the records of topics RocketMQ
  deleted, the consumequeue entries past the CommitLog's end, and the runs
  of consumequeue files missing in the middle of a queue; queue by queue,
  the records below a queue's first consumequeue entry: of an earlier
  numbering of the queue (left out), continuing it below its first files
  (served again with storeType=kv), and the records of queues without
  consumequeue files (left out below their topic's first entry).

It reads every record of the CommitLog to count the deleted topics'.
A consumequeue/ that is RocketMQ 5.3's RocksDB ConsumeQueue is read as the
first open reads it (its offset column family, then its units once).

POP messages in flight in the revive topic are taken over at the first
open but not counted here (that needs the whole CommitLog read).

With --enable-lmq the consumer offsets are read as a broker configured
with enableLmq=true reads them (from lmqConsumerOffset.json, light message
queues' offsets included; with config v2, the light message queues'
consumer and pull offsets in config/rdb), for a store whose RocketMQ
broker ran with it.

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
	cmd.Flags().BoolVar(&lmq, "enable-lmq", false, "read the consumer (and config v2's pull) offsets as a broker with enableLmq=true does")
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
	FileConsumeQueue bool `json:"fileConsumeQueue"`
	// RocksDBConsumeQueue is set when consumequeue/ is RocketMQ 5.3's
	// RocksDB ConsumeQueue (storeType=defaultRocksDB), read the same way.
	RocksDBConsumeQueue bool     `json:"rocksDBConsumeQueue,omitempty"`
	ConfigFiles         []string `json:"configFiles"`
	configCounts
	TimerProgress bool `json:"timerProgress"`
	// KVPopMessages counts the POP messages in flight in RocketMQ 5's KV
	// POP RocksDB (kvStore/), which the first open imports.
	KVPopMessages int `json:"kvPopMessages,omitempty"`
	// Refusals stop the first open; Warnings name what does not move.
	Refusals []string `json:"refusals,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Unrouted names the queues of consumequeue/ no topic config routes
	// (rmqconfig.UnroutedQueues); without consumequeue/ the broker's first
	// open logs them once it has indexed the CommitLog.
	Unrouted []string `json:"unrouted,omitempty"`
	// ConsumeQueueGaps counts the runs of files missing in the middle of
	// a queue of consumequeue/ (filecq.Gap), EntriesPastLogEnd the
	// entries of records past the CommitLog's end the first open cuts,
	// DroppedTopics and DroppedRecords the topics RocketMQ deleted (in
	// the CommitLog, not in consumequeue/ nor topics.json) whose records
	// the first open leaves out, and OlderRecords the records of topics in
	// consumequeue/ it leaves out too: Renumbered, those below their
	// queue's first entry there with a queue offset it numbers again (an
	// earlier numbering of the queue: the topic deleted and created
	// again, or the queue's files lost and RocketMQ numbering it from 0
	// again), and those of queues without files there below their topic's
	// first entry. BelowFirstFiles counts the records below a queue's
	// first entry that continue its numbering (its first files removed),
	// which storeType=kv serves again; QueuesWithoutFiles the queues of
	// such topics that have records and no files, WithoutFilesKept their
	// records from the topic's first entry on, which the first open
	// serves. StoreWarnings says what they are.
	// FilesBehind counts the queues of a file ConsumeQueue left behind by
	// the RocksDB one beside it that the file layout cannot go on from
	// (kvindex.FileQueuesBehind): the first open refuses storeType=file
	// and the double write over such a store.
	FilesBehind int `json:"filesBehind,omitempty"`
	// EmptyTopicRecords counts the CommitLog records with an empty topic,
	// which every layout leaves out of the ConsumeQueue and the key index
	// (no client can read such a topic), not counted as a deleted topic's.
	EmptyTopicRecords  int      `json:"emptyTopicRecords,omitempty"`
	ConsumeQueueGaps   int      `json:"consumeQueueGaps"`
	EntriesPastLogEnd  int      `json:"entriesPastLogEnd"`
	DroppedTopics      int      `json:"droppedTopics"`
	DroppedRecords     int      `json:"droppedRecords"`
	OlderRecords       int      `json:"olderRecords"`
	Renumbered         int      `json:"renumberedRecords"`
	BelowFirstFiles    int      `json:"belowFirstFilesRecords"`
	QueuesWithoutFiles int      `json:"queuesWithoutFiles"`
	WithoutFilesKept   int      `json:"withoutFilesKeptRecords"`
	StoreWarnings      []string `json:"storeWarnings,omitempty"`
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
	if err := dledger.RefuseDLedgerStore(root); err != nil {
		r.Refusals = append(r.Refusals, err.Error())
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
	var view cqView
	if fi, err := os.Stat(filepath.Join(root, "consumequeue")); err == nil && fi.IsDir() {
		r.FileConsumeQueue = true
		r.RocksDBConsumeQueue = rocksdbcq.Present(filepath.Join(root, "consumequeue"))
		if view, err = readConsumeQueue(root, r.CommitLog.MinOffset, r.CommitLog.MaxOffset, r.logRead); err != nil {
			r.Refusals = append(r.Refusals, err.Error())
		} else {
			queues = view.queues
			r.reportConsumeQueue(view)
		}
	}
	if n, err := rmqconfig.CheckPopState(root); err != nil {
		r.Refusals = append(r.Refusals, err.Error())
	} else {
		r.KVPopMessages = n
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
	configured := make(map[string]int, len(c.Topics))
	for _, t := range c.Topics {
		configured[t.TopicName] = int(t.ReadQueueNums)
	}
	if queues != nil {
		r.Unrouted = rmqconfig.UnroutedQueues(queues, func(topic string) (int, bool) {
			n, ok := configured[topic]
			return n, ok
		})
		if r.logRead {
			if err := r.countDeletedTopics(segDir, root, view, configured); err != nil {
				r.StoreWarnings = append(r.StoreWarnings, "the CommitLog could not be read through, so the records of deleted topics are not counted: "+err.Error())
			}
		}
	}
	return r, nil
}

// cqView is what readConsumeQueue found in consumequeue/.
type cqView struct {
	queues map[string]int32 // topic -> highest queue id
	// firsts is where each topic's records begin as a broker's first
	// open records it (takeOverRocketMQQueues): records of the topic
	// below are left out.
	firsts map[string]int64
	// begins is where each queue with entries begins (its first entry,
	// or a run of missing files before it), as the first open records
	// it: below it, a record with the entry's queue offset or above is
	// left out, one below it is kept.
	begins map[string]map[int32]kvindex.QueueBegin
	gaps   []filecq.Gap
	// cut counts the entries past the CommitLog's end per queue.
	cut map[string]int64
	// bounds are each queue's bounds in the ConsumeQueue read (the file
	// one's with both), filesBehind the queues a file ConsumeQueue left
	// behind by the RocksDB one beside it cannot go on from
	// (kvindex.FileQueuesBehind).
	bounds      map[string]map[int32]kvindex.QueueBounds
	filesBehind []kvindex.FileQueueBehind
}

// setBounds records a queue's bounds.
func (v *cqView) setBounds(topic string, qid int32, lo, hi int64) {
	if v.bounds == nil {
		v.bounds = map[string]map[int32]kvindex.QueueBounds{}
	}
	if v.bounds[topic] == nil {
		v.bounds[topic] = map[int32]kvindex.QueueBounds{}
	}
	v.bounds[topic][qid] = kvindex.QueueBounds{Min: lo, Max: hi}
}

// reportConsumeQueue adds what readConsumeQueue found that the first open
// warns about or changes.
func (r *rocketmqCheck) reportConsumeQueue(v cqView) {
	if len(v.filesBehind) > 0 {
		r.FilesBehind = len(v.filesBehind)
		var qs []string
		for _, q := range v.filesBehind {
			qs = append(qs, q.String())
		}
		r.StoreWarnings = append(r.StoreWarnings, fmt.Sprintf("the file ConsumeQueue was left behind by the RocksDB one beside it in %d queues whose records between retention deleted: "+
			"the first open refuses storeType=file and rocksdbCQDoubleWriteEnable=true (the files would number new messages below the offsets RocketMQ gave); "+
			"open it with storeType=kv, or move the file ConsumeQueue's topic directories out of consumequeue/ first: %s", r.FilesBehind, firstNames(qs)))
	}
	if len(v.gaps) > 0 {
		var runs []string
		for _, g := range v.gaps {
			runs = append(runs, fmt.Sprintf("%s/%d offsets %d to %d", g.Topic, g.QueueID, g.From, g.To-1))
		}
		r.ConsumeQueueGaps = len(v.gaps)
		r.StoreWarnings = append(r.StoreWarnings, fmt.Sprintf("%d runs of consumequeue files are missing in the middle of a queue: %s; "+
			"the first open builds their entries again from the CommitLog (those of records retention deleted are gone), "+
			"and with storeType=file writes the files again from it when it can (a run followed by a file holding entries or none yet, not by a queue's first file of blank units, whose records the CommitLog holds, "+
			"of at most %d entries; otherwise the broker refuses the queue)", len(v.gaps), firstNames(runs), filecq.DefaultMaxRefillEntries))
	}
	if len(v.cut) > 0 {
		var qs []string
		for _, q := range slices.Sorted(maps.Keys(v.cut)) {
			r.EntriesPastLogEnd += int(v.cut[q])
			qs = append(qs, fmt.Sprintf("%s (%d)", q, v.cut[q]))
		}
		r.StoreWarnings = append(r.StoreWarnings, fmt.Sprintf("%d consumequeue entries point past the CommitLog's end %d (RocketMQ's ConsumeQueue reached the disk, the CommitLog's tail did not): "+
			"the first open cuts them, as RocketMQ's start does: %s", r.EntriesPastLogEnd, r.CommitLog.MaxOffset, firstNames(qs)))
	}
}

// countDeletedTopics reads every record of the CommitLog in segDir and
// counts what a broker's first open leaves out as records of deleted
// topics: topics consumequeue/ does not hold that have no config and are
// not system topics (RocketMQ deleted them: dropRocketMQDeletedTopics),
// and records of a topic below where its entries in consumequeue/ begin
// (view.firsts). A store RocketMQ did not shut down cleanly (its abort
// file) counts up to that many: the first open keeps the topics whose
// records lie past where RocketMQ's recovery starts.
func (r *rocketmqCheck) countDeletedTopics(segDir, root string, view cqView, configured map[string]int) error {
	log, err := commitlog.OpenReadOnlyDir(segDir)
	if err != nil {
		return err
	}
	defer log.Close()
	dropped := map[string]int{}
	// Per queue ("topic/queueId"): records of an earlier numbering,
	// records below the first files, records of a queue without files
	// left out and kept.
	renumbered, belowFiles, noFilesOut, noFilesKept := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	intern := map[string]string{}
	opts := commitlog.DecodeOptions{Topics: func(b []byte) string {
		if s, ok := intern[string(b)]; ok {
			return s
		}
		s := string(b)
		intern[s] = s
		return s
	}}
	it := log.NewIterator(log.MinOffset())
	for {
		e, err := it.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			break
		}
		if err != nil {
			return err
		}
		m, err := commitlog.DecodeWith(e.Data, opts)
		if err != nil {
			return fmt.Errorf("record at %d: %w", e.Offset, err)
		}
		if m.Topic == "" {
			r.EmptyTopicRecords++
			continue
		}
		_, known := view.queues[m.Topic]
		_, hasConfig := configured[m.Topic]
		switch {
		case !known && !hasConfig && !meta.IsSystemTopic(m.Topic):
			dropped[m.Topic]++
		case known:
			if tx := commitlog.TransactionType(m.SysFlag); tx != commitlog.TransactionNotType && tx != commitlog.TransactionCommit {
				continue // no entry of its own
			}
			q := fmt.Sprintf("%s/%d", m.Topic, m.QueueID)
			at, recorded := view.firsts[m.Topic]
			if b, ok := view.begins[m.Topic][m.QueueID]; ok {
				switch {
				case !recorded || e.Offset >= b.Phy:
				case m.QueueOffset >= b.Offset:
					renumbered[q]++
				default:
					belowFiles[q]++
				}
				continue
			}
			if recorded && e.Offset < at {
				noFilesOut[q]++
			} else {
				noFilesKept[q]++
			}
		}
	}
	if r.EmptyTopicRecords > 0 {
		r.StoreWarnings = append(r.StoreWarnings, fmt.Sprintf("%d CommitLog records have an empty topic (a foreign writer's or damage; no client can read such a topic): "+
			"the first open leaves them out of the ConsumeQueue and the key index", r.EmptyTopicRecords))
	}
	upTo := ""
	if _, err := os.Stat(filepath.Join(root, "abort")); err == nil {
		upTo = "up to "
	}
	if len(dropped) > 0 {
		var ts []string
		for _, t := range slices.Sorted(maps.Keys(dropped)) {
			r.DroppedRecords += dropped[t]
			ts = append(ts, fmt.Sprintf("%s (%d)", t, dropped[t]))
		}
		r.DroppedTopics = len(dropped)
		r.StoreWarnings = append(r.StoreWarnings, fmt.Sprintf("%s%d topics RocketMQ deleted (records in the CommitLog, no consumequeue directory, no topic config) are dropped by the first open, %d records: %s",
			upTo, len(dropped), r.DroppedRecords, firstNames(ts)))
	}
	queues := map[string]bool{}
	for q := range noFilesOut {
		queues[q] = true
	}
	for q := range noFilesKept {
		queues[q] = true
	}
	r.QueuesWithoutFiles = len(queues)
	report := func(counts map[string]int, total *int, format string) {
		if len(counts) == 0 {
			return
		}
		var qs []string
		n := 0
		for _, q := range slices.Sorted(maps.Keys(counts)) {
			n += counts[q]
			qs = append(qs, fmt.Sprintf("%s (%d)", q, counts[q]))
		}
		*total += n
		r.StoreWarnings = append(r.StoreWarnings, fmt.Sprintf(format, upTo, n, len(counts), firstNames(qs)))
	}
	report(renumbered, &r.Renumbered, "%s%d records of %d queues lie below the queue's first consumequeue entry with queue offsets the consumequeue numbers again "+
		"(an earlier numbering of the queue: its topic deleted and created again, or its files lost and RocketMQ numbering it from 0 again); "+
		"RocketMQ no longer serves them and the first open leaves them out: %s")
	report(belowFiles, &r.BelowFirstFiles, "%s%d records of %d queues lie below the queue's first consumequeue file and continue its numbering "+
		"(files removed by other means than RocketMQ's cleanup, which removes only files whose records retention deleted); "+
		"RocketMQ no longer serves them: with storeType=kv the first open serves them again, storeType=file (RocketMQ's files) serves the queue from its first file: %s")
	report(noFilesOut, &r.OlderRecords, "%s%d records of %d queues without consumequeue files lie below their topic's first consumequeue entry and are left out by the first open, "+
		"as RocketMQ no longer serves them (a queue of a topic deleted and created again that got no message since cannot be told from one whose directory was lost): %s")
	report(noFilesKept, &r.WithoutFilesKept, "%s%d records of %d queues without consumequeue files lie at or past their topic's first consumequeue entry (or their topic has none); "+
		"the first open serves them at their queue offsets, RocketMQ served only those its recovery dispatched again: %s")
	r.OlderRecords += r.Renumbered
	return nil
}

// readConsumeQueue reads the bounds of every queue of the file
// ConsumeQueue under root, with the units per file its files hold, as a
// broker's first open reads them (takeOverRocketMQQueues): entries past
// the CommitLog's end logEnd are cut when logRead, and minima move past
// logMin (0 when the CommitLog could not be read). It returns each
// topic's highest queue id, where each topic's records begin, the runs
// of missing files and the entries cut. Files it cannot read, torn ones
// for example, refuse the store.
func readConsumeQueue(root string, logMin, logEnd int64, logRead bool) (cqView, error) {
	fail := func(err error) error {
		return fmt.Errorf("the consumequeue cannot be read (move it aside: queues whose records retention deleted then restart at offset 0, and the records of topics RocketMQ had deleted come back into unrouted queues until mqadmin cleanUnusedTopic drops them): %w", err)
	}
	// RocketMQ's RocksDB ConsumeQueue, alone or beside the file one (its
	// double write, or a file one left behind): as the first open, with
	// both the queues keep what either keeps.
	var rocks *cqView
	if dir := filepath.Join(root, "consumequeue"); rocksdbcq.Present(dir) {
		end := logEnd
		if !logRead {
			end = math.MaxInt64
		}
		rv, err := readRocksDBConsumeQueue(dir, logMin, end)
		if err != nil {
			return cqView{}, fail(err)
		}
		if !filecq.HasQueueDirs(dir) {
			return rv, nil
		}
		rocks = &rv
	}
	units, ok := filecq.DetectUnitsPerFile(nil, root)
	if !ok {
		units = filecq.DefaultUnitsPerFile
	}
	files, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: units, Logger: zerolog.Nop()})
	if err != nil {
		return cqView{}, fail(err)
	}
	defer files.Close()
	v := cqView{queues: map[string]int32{}, firsts: map[string]int64{}, begins: map[string]map[int32]kvindex.QueueBegin{}, cut: map[string]int64{}}
	type qk struct {
		topic string
		qid   int32
	}
	before := map[qk]int64{}
	var qerr error
	if logRead {
		err = files.Queues(func(topic string, qid int32) bool {
			before[qk{topic, qid}], qerr = files.MaxOffset(topic, qid)
			return qerr == nil
		})
		if err = errors.Join(err, qerr); err != nil {
			return cqView{}, fail(err)
		}
		if err := files.Truncate(logEnd); err != nil {
			return cqView{}, fail(err)
		}
	}
	if err := files.CorrectMin(logMin); err != nil {
		return cqView{}, fail(err)
	}
	err = files.Queues(func(topic string, qid int32) bool {
		if top, ok := v.queues[topic]; !ok || qid > top {
			v.queues[topic] = qid
		}
		var lo, hi int64
		if lo, qerr = files.MinOffset(topic, qid); qerr == nil {
			hi, qerr = files.MaxOffset(topic, qid)
		}
		v.setBounds(topic, qid, lo, hi)
		if qerr == nil && lo < hi {
			var es []cq.Entry
			if es, qerr = files.Get(topic, qid, lo, 1); qerr == nil && len(es) == 1 {
				if at, ok := v.firsts[topic]; !ok || es[0].PhyOffset < at {
					v.firsts[topic] = es[0].PhyOffset
				}
				if v.begins[topic] == nil {
					v.begins[topic] = map[int32]kvindex.QueueBegin{}
				}
				v.begins[topic][qid] = kvindex.QueueBegin{Phy: es[0].PhyOffset, Offset: es[0].QueueOffset}
			}
		}
		if n := before[qk{topic, qid}] - hi; logRead && n > 0 {
			v.cut[fmt.Sprintf("%s/%d", topic, qid)] = n
		}
		if qerr != nil {
			qerr = fmt.Errorf("queue %s/%d: %w", topic, qid, qerr)
		}
		return qerr == nil
	})
	if err = errors.Join(err, qerr); err != nil {
		return cqView{}, fail(err)
	}
	v.gaps = files.Gaps()
	for _, g := range v.gaps {
		if at, ok := v.firsts[g.Topic]; ok && g.PhyFrom < at {
			v.firsts[g.Topic] = g.PhyFrom
		}
		if b, ok := v.begins[g.Topic][g.QueueID]; ok && g.PhyFrom < b.Phy {
			b.Phy = g.PhyFrom
			v.begins[g.Topic][g.QueueID] = b
		}
	}
	v.forgetFirstsAtOrBelow(logMin)
	if rocks != nil {
		v.filesBehind = kvindex.FileQueuesBehind(v.bounds, rocks.bounds)
		v.keepWhatEitherKeeps(*rocks)
	}
	return v, nil
}

// keepWhatEitherKeeps adds to v what o, the view of the other
// ConsumeQueue of the store, keeps, as the first open merges them: the
// higher queue ids, the earlier first records and queue beginnings, the
// larger count of entries cut.
func (v cqView) keepWhatEitherKeeps(o cqView) {
	for topic, qid := range o.queues {
		if top, ok := v.queues[topic]; !ok || qid > top {
			v.queues[topic] = qid
		}
	}
	kvindex.KeepEarlierBeginnings(v.firsts, v.begins, o.firsts, o.begins)
	for q, n := range o.cut {
		v.cut[q] = max(v.cut[q], n)
	}
}

// readRocksDBConsumeQueue is readConsumeQueue for RocketMQ 5.3's RocksDB
// ConsumeQueue in dir, as a broker's first open reads it
// (takeOverRocksDBQueues): each queue's bounds over the CommitLog
// [logMin, logEnd), the units past logEnd counted as cut.
func readRocksDBConsumeQueue(dir string, logMin, logEnd int64) (cqView, error) {
	rv, err := rocksdbcq.Read(dir, logMin, logEnd)
	if err != nil {
		return cqView{}, err
	}
	v := cqView{queues: map[string]int32{}, firsts: map[string]int64{}, begins: map[string]map[int32]kvindex.QueueBegin{}, cut: map[string]int64{}}
	for _, q := range rv.Queues {
		v.setBounds(q.Topic, q.QueueID, q.Min, q.Max)
		if top, ok := v.queues[q.Topic]; !ok || q.QueueID > top {
			v.queues[q.Topic] = q.QueueID
		}
		if n := q.Written - q.Max; n > 0 {
			v.cut[fmt.Sprintf("%s/%d", q.Topic, q.QueueID)] = n
		}
		if q.Min >= q.Max {
			continue
		}
		if at, ok := v.firsts[q.Topic]; !ok || q.FirstPhy < at {
			v.firsts[q.Topic] = q.FirstPhy
		}
		if v.begins[q.Topic] == nil {
			v.begins[q.Topic] = map[int32]kvindex.QueueBegin{}
		}
		v.begins[q.Topic][q.QueueID] = kvindex.QueueBegin{Phy: q.FirstPhy, Offset: q.Min}
	}
	v.forgetFirstsAtOrBelow(logMin)
	return v, nil
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
	if r.RocksDBConsumeQueue {
		add("consumequeue/: present, RocketMQ's RocksDB ConsumeQueue (queues whose records retention deleted keep their offsets from its max records)")
	} else if r.FileConsumeQueue {
		add("consumequeue/: present (queues whose records retention deleted keep their offsets from it)")
	} else if r.CommitLog.Segments > 0 {
		add("consumequeue/: absent (the first open indexes every record of the CommitLog, and logs the topics whose messages no topic config routes)")
	}
	add("config files: %s", orNone(r.ConfigFiles))
	add("imported at the first open: %d topics, %d groups, %d consumer offsets, %d delay levels, %d request modes, %d orderly POP batches (before the import skips the stale ones), %d static topics' queue mappings, timer progress %v",
		r.Topics, r.Groups, r.Offsets, r.DelayLevels, r.RequestModes, r.OrderlyBatches, r.StaticTopics, r.TimerProgress)
	if r.PopPositions > 0 {
		add("imported at the first open: %d pull offsets of light message queues (config v2) as their groups' pop positions, where RocketMQ's next pops would read", r.PopPositions)
	}
	if r.KVPopMessages > 0 {
		add("imported once the store is open: %d POP messages in flight in RocketMQ's KV POP RocksDB (%s/), revived into their groups' pop-retry topics after their invisible time", r.KVPopMessages, rmqconfig.KVPopDir)
	}
	for _, w := range r.Warnings {
		add("warning: not carried over: %s", w)
	}
	for _, w := range r.Unrouted {
		add("warning: %s", w)
	}
	for _, w := range r.StoreWarnings {
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

// firstNames joins the first few of all, and says how many more there
// are.
func firstNames(all []string) string {
	const shown = 5
	if len(all) <= shown {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:shown], ", "), len(all)-shown)
}

// forgetFirstsAtOrBelow drops the first record of every topic none of
// whose queues begins above logMin: no record of it lies below the
// CommitLog's minimum.
func (v cqView) forgetFirstsAtOrBelow(logMin int64) {
	for topic, at := range v.firsts {
		top := at
		for _, b := range v.begins[topic] {
			top = max(top, b.Phy)
		}
		if top <= logMin {
			delete(v.firsts, topic)
		}
	}
}
