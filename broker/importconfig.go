package broker

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/dledger"
	"github.com/rocketkv/rocketkv/migrate/filecq"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/migrate/rocksdbcq"
)

// importRocketMQConfig copies the config files of an Apache RocketMQ store
// (<root>/config: topics, subscription groups, consumer offsets, delay
// offsets, POP request modes, the timer's progress) into the index the first time a broker opens the store, before
// its CommitLog is dispatched: the topics keep their queue counts and
// permissions, the groups their settings, every consumer its position,
// and the scheduler its progress per delay level, so nothing is consumed
// twice or skipped after the move. It fills only what the index lacks (an
// index that already has a topic, group or offset keeps its own) and then
// reports that it did (pending), so that the caller finishes the first
// open (takeOverRocketMQQueues) and then records it (MarkRocketMQConfigImported):
// it runs once; a crash before that record repeats it harmlessly. A store
// without config files is recorded the same way.
//
// With lmq (enableLmq) the consumer offsets are read as a RocketMQ broker
// with enableLmq reads them (rmqconfig.ReadOptions.LMQ).
//
// It also reads RocketMQ's KV POP records (kvStore/), which
// importRocketMQPop imports once the store is open, and hands them over
// in kvPop: a directory that cannot be read or a record that does not
// decode refuses the store here, before anything is imported.
func importRocketMQConfig(db *kvindex.DB, root string, lmq bool, log zerolog.Logger) (pending bool, kvPop kvPopState, err error) {
	if _, done, err := db.RocketMQConfigImported(); err != nil || done {
		return false, kvPopState{}, err
	}
	records, err := rmqconfig.ReadPopState(root)
	if err != nil {
		return false, kvPopState{}, fmt.Errorf("import the RocketMQ store %s: %w", root, err)
	}
	if len(records) > 0 {
		log.Info().Int("messages", len(records)).Str("dir", filepath.Join(root, rmqconfig.KVPopDir)).
			Msg("the RocketMQ store holds POP messages in flight in its KV POP RocksDB: they are imported once it is open")
	}
	kvPop = kvPopState{records: records, read: true}
	// A store of DLedger mode keeps its messages where the CommitLog
	// does not read: served as it is, its offsets would stand over none.
	if err := dledger.RefuseDLedgerStore(root); err != nil {
		return false, kvPopState{}, err
	}
	c, err := rmqconfig.ReadWith(root, rmqconfig.ReadOptions{LMQ: lmq})
	if err != nil {
		return false, kvPopState{}, fmt.Errorf("import the RocketMQ config of %s: %w", root, err)
	}
	if !c.Empty() {
		counts, err := importConfig(db, c, time.Now().UnixMilli())
		if err != nil {
			return false, kvPopState{}, fmt.Errorf("import the RocketMQ config of %s: %w", root, err)
		}
		log.Info().Strs("files", c.Files).Int("topics", counts[0]).Int("groups", counts[1]).Int("offsets", counts[2]).
			Int("delayOffsets", counts[3]).Int("requestModes", counts[4]).Int("orderlyBatches", counts[5]).Int("forbiddenGroups", counts[6]).Int("staticTopics", counts[7]).
			Int("popPositions", counts[8]).
			Msg("imported the config of the RocketMQ store")
	}
	for _, note := range c.NotCarried {
		log.Warn().Str("root", root).Msg("not carried over from the RocketMQ store: " + note)
	}
	return true, kvPop, nil
}

// takeOverRocketMQQueues reads, on the first open of an Apache RocketMQ
// store, RocketMQ's file ConsumeQueue (<root>/consumequeue, read only,
// before a layout writes to it), or RocketMQ 5.3's RocksDB ConsumeQueue in
// the same directory (readRocksDBQueues; both when both are there), for what the CommitLog
// cannot tell:
//
//   - where each queue whose records retention had all deleted stands:
//     RocketMQ's ConsumeQueue still ends there, while the CommitLog holds
//     nothing to rebuild it from. cqs, the KV ConsumeQueue (nil when it is
//     not written), starts such queues there; without it such a queue
//     would number new messages from 0, below the consumer and delay
//     offsets carried over: consumers would skip the new messages and the
//     scheduler would never deliver them.
//   - where each queue's and each topic's records begin and which
//     topics it holds (db.RecordRocketMQConsumeQueue): a topic RocketMQ
//     deleted left its records in the CommitLog. Created again, its new
//     messages got the queue offsets from 0 again, as did a queue whose
//     files were lost once RocketMQ started without them: rebuilt from
//     the CommitLog, such a queue would hold the older messages at those
//     offsets and drop the ones RocketMQ serves as repeats. The decision
//     is the queue's: below its first entry, a record whose queue offset
//     is that entry's or above is of an earlier numbering and left out,
//     one below it continues the queue below its first files (lost, or
//     deleted by RocketMQ's cleanup) and is kept, though RocketMQ, which
//     never dispatches below its consumequeue's newest entry again, no
//     longer served it. A queue without files is judged by its topic's
//     first entry: below it, a record is left out (a queue of a topic
//     created again that got no message since, as likely as a queue
//     whose directory was lost); RocketMQ served neither. Not created
//     again, a deleted topic would come back with its deleted messages
//     (dropRocketMQDeletedTopics drops it).
//
// minPhy and endPhy are the CommitLog's minimum and end; unitsPerFile
// comes from cqUnitsPerFile. complete is where RocketMQ's ConsumeQueue
// may lack entries from: the end after a clean shutdown, the start of its
// recovery scan (which dispatches again) after a crash, which may have
// lost a queue's newest entries while another queue's reached the disk.
// A queue's records are left out only below it: RocketMQ's recovery
// dispatches every record from there on again.
//
// fileLayout names the setting that has the file layout written
// ("storeType=file", "rocksdbCQDoubleWriteEnable=true"), "" when it is
// not: it serves RocketMQ's files as they are, so with both ConsumeQueues
// a file one left behind below queue offsets the CommitLog no longer
// holds the records of is refused (checkFilesNotBehind). fileStarts are
// the queues whose records retention deleted, for the file layout's
// queues without files (seedFileStarts).
func takeOverRocketMQQueues(db *kvindex.DB, cqs *kvindex.CQ, root string, unitsPerFile int, minPhy, endPhy, complete int64, fileLayout string, log zerolog.Logger) (fileStarts []kvindex.QueueStart, err error) {
	dir := filepath.Join(root, "consumequeue")
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	rocks, files := rocksdbcq.Present(dir), filecq.HasQueueDirs(dir)
	switch {
	case rocks && !files:
		t, err := readRocksDBQueues(root, minPhy, endPhy, log)
		if err != nil {
			return nil, err
		}
		// The file layout, if written, starts without files here: it is
		// seeded with the same starts once open (seedFileStarts).
		return t.starts, t.record(db, cqs, minPhy, complete, log)
	case rocks:
		// Both, as RocketMQ's double write (CombineConsumeQueueStore)
		// keeps them, or a file ConsumeQueue left behind when the store
		// moved on to the RocksDB one: each may know records the other
		// does not (a RocksDB ConsumeQueue added to an old store starts at
		// each queue's offset then; a file one left behind stops there),
		// so whatever either keeps is kept (mergeQueueTakeovers).
		f, err := readFileQueues(root, unitsPerFile, minPhy, endPhy, cqs != nil, log)
		if err != nil {
			return nil, err
		}
		r, err := readRocksDBQueues(root, minPhy, endPhy, log)
		if err != nil {
			return nil, err
		}
		if fileLayout != "" {
			if err := checkFilesNotBehind(f, r, dir, fileLayout); err != nil {
				return nil, err
			}
		}
		log.Info().Str("dir", dir).Msg("RocketMQ's file and RocksDB ConsumeQueues are both here: the queues keep what either holds")
		// RocketMQ's files stay where they are: a file layout serves them,
		// and its queues without files start where the merge says.
		m := mergeQueueTakeovers(f, r)
		return m.starts, m.record(db, cqs, minPhy, complete, log)
	default:
		f, err := readFileQueues(root, unitsPerFile, minPhy, endPhy, cqs != nil, log)
		if err != nil {
			return nil, err
		}
		// RocketMQ's files stay where they are: a file layout needs no seeds.
		return nil, f.record(db, cqs, minPhy, complete, log)
	}
}

// queueTakeover is what a first open learns from a RocketMQ ConsumeQueue
// (takeOverRocketMQQueues): the queues whose records retention deleted
// (starts), each topic's first entry (firsts: its CommitLog offset) and
// each queue's (begins), the topics it held, the end of its newest entry
// (dispatched: RocketMQ dispatches again from there), and each queue's
// bounds over the CommitLog as RocketMQ's start would serve them
// (bounds; not merged).
type queueTakeover struct {
	starts     []kvindex.QueueStart
	firsts     map[string]int64
	begins     map[string]map[int32]kvindex.QueueBegin
	topics     []string
	dispatched int64
	bounds     map[string]map[int32]kvindex.QueueBounds
}

// setBounds records a queue's bounds.
func (t *queueTakeover) setBounds(topic string, qid int32, lo, hi int64) {
	if t.bounds == nil {
		t.bounds = map[string]map[int32]kvindex.QueueBounds{}
	}
	if t.bounds[topic] == nil {
		t.bounds[topic] = map[int32]kvindex.QueueBounds{}
	}
	t.bounds[topic][qid] = kvindex.QueueBounds{Min: lo, Max: hi}
}

// maxBehindNamed bounds the queues a refusal of checkFilesNotBehind names.
const maxBehindNamed = 10

// checkFilesNotBehind refuses, when the file layout is written (by the
// setting fileLayout) over both of RocketMQ's ConsumeQueues in dir, a file
// one (files) left behind by the RocksDB one (rocks) where the file
// layout cannot go on from it (kvindex.FileQueuesBehind): the file layout
// serves RocketMQ's files as they are. Where the records from the files'
// end on are all in the CommitLog, dispatch writes them at their
// offsets, and a queue without files starts at its first record or is
// seeded (seedFileStarts): neither is refused.
func checkFilesNotBehind(files, rocks queueTakeover, dir, fileLayout string) error {
	behind := kvindex.FileQueuesBehind(files.bounds, rocks.bounds)
	if len(behind) == 0 {
		return nil
	}
	var names []string
	for _, q := range behind[:min(len(behind), maxBehindNamed)] {
		names = append(names, q.String())
	}
	return fmt.Errorf("%s over %s: its file ConsumeQueue was left behind by the RocksDB one beside it in %d queues, %s: "+
		"the file layout serves the files as they are and would number those queues' new messages from the files' end, below the offsets RocketMQ gave and its consumers hold, "+
		"and the CommitLog no longer holds the records between; start with storeType=kv and rocksdbCQDoubleWriteEnable=false, "+
		"or move the file ConsumeQueue's topic directories out of %s (its RocksDB files stay) to have the file layout written from the CommitLog with the RocksDB one's offsets",
		fileLayout, dir, len(behind), strings.Join(names, ", "), dir)
}

// record writes t (recordRocketMQQueues).
func (t queueTakeover) record(db *kvindex.DB, cqs *kvindex.CQ, minPhy, complete int64, log zerolog.Logger) error {
	return recordRocketMQQueues(db, cqs, t.starts, t.firsts, t.begins, t.topics, t.dispatched, minPhy, complete, log)
}

// mergeQueueTakeovers keeps what either of a and b keeps: a queue begins
// at the earlier of its two beginnings, a topic's first entry is the
// earlier, the topics are both lists, a queue whose records retention
// deleted stands at the higher of its two offsets and is no such queue
// when either holds a record of it (its records number it), and the
// dispatch end is the later.
func mergeQueueTakeovers(a, b queueTakeover) queueTakeover {
	m := queueTakeover{firsts: map[string]int64{}, begins: map[string]map[int32]kvindex.QueueBegin{},
		topics: append(slices.Clone(a.topics), b.topics...), dispatched: max(a.dispatched, b.dispatched)}
	for _, t := range []queueTakeover{a, b} {
		kvindex.KeepEarlierBeginnings(m.firsts, m.begins, t.firsts, t.begins)
	}
	type queue struct {
		topic string
		qid   int32
	}
	starts := map[queue]int64{}
	for _, st := range append(slices.Clone(a.starts), b.starts...) {
		if _, held := m.begins[st.Topic][st.QueueID]; held {
			continue
		}
		q := queue{st.Topic, st.QueueID}
		starts[q] = max(starts[q], st.Offset)
	}
	for q, off := range starts {
		m.starts = append(m.starts, kvindex.QueueStart{Topic: q.topic, QueueID: q.qid, Offset: off})
	}
	slices.SortFunc(m.starts, func(x, y kvindex.QueueStart) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.QueueID, y.QueueID))
	})
	return m
}

// withoutCQ says, in the refusal of a consumequeue/ the first open cannot
// read, what a start without it loses: the offsets of queues retention
// emptied, and the list of topics RocketMQ deleted (warnUnroutedQueues).
const withoutCQ = "queues whose records retention deleted then restart at offset 0, and the records of topics RocketMQ had deleted come back " +
	"into unrouted queues, named in a warning, until mqadmin cleanUnusedTopic drops them"

// readFileQueues reads RocketMQ's file ConsumeQueue under root as
// RocketMQ's start would serve it over the CommitLog [minPhy, endPhy);
// withKV says whether the KV ConsumeQueue is written (for the warning of
// a gap).
func readFileQueues(root string, unitsPerFile int, minPhy, endPhy int64, withKV bool, log zerolog.Logger) (queueTakeover, error) {
	fail := func(err error) error {
		return fmt.Errorf("read the RocketMQ consumequeue of %s (move it aside to start without it: %s): %w", root, withoutCQ, err)
	}
	files, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: unitsPerFile, Logger: log})
	if err != nil {
		return queueTakeover{}, fail(err)
	}
	defer files.Close()
	// As RocketMQ's start: entries of records past the CommitLog's end
	// (written before a crash the CommitLog's tail did not survive) are
	// cut, then minima move past the records retention deleted.
	if err := files.Truncate(endPhy); err != nil {
		return queueTakeover{}, fail(err)
	}
	if err := files.CorrectMin(minPhy); err != nil {
		return queueTakeover{}, fail(err)
	}
	var starts []kvindex.QueueStart
	firsts := map[string]int64{} // topic -> CommitLog offset of its first entry
	begins := map[string]map[int32]kvindex.QueueBegin{}
	var topics []string
	var dispatched int64 // the end of the newest entry: RocketMQ dispatches again from it
	var bounds queueTakeover
	var qerr error
	err = files.Queues(func(topic string, qid int32) bool {
		if len(topics) == 0 || topics[len(topics)-1] != topic {
			topics = append(topics, topic)
		}
		lo, err := files.MinOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		hi, err := files.MaxOffset(topic, qid)
		if err != nil {
			qerr = err
			return false
		}
		if hi > 0 {
			es, err := files.Get(topic, qid, hi-1, 1)
			if err != nil {
				qerr = err
				return false
			}
			if len(es) == 1 {
				dispatched = max(dispatched, es[0].End())
			}
		}
		bounds.setBounds(topic, qid, lo, hi)
		if hi > 0 && lo >= hi {
			starts = append(starts, kvindex.QueueStart{Topic: topic, QueueID: qid, Offset: hi})
			return true
		}
		if lo >= hi {
			return true
		}
		es, err := files.Get(topic, qid, lo, 1)
		if err != nil {
			qerr = err
			return false
		}
		if len(es) == 1 {
			if at, ok := firsts[topic]; !ok || es[0].PhyOffset < at {
				firsts[topic] = es[0].PhyOffset
			}
			if begins[topic] == nil {
				begins[topic] = map[int32]kvindex.QueueBegin{}
			}
			begins[topic][qid] = kvindex.QueueBegin{Phy: es[0].PhyOffset, Offset: es[0].QueueOffset}
		}
		return true
	})
	if err = errors.Join(err, qerr); err != nil {
		return queueTakeover{}, fail(err)
	}
	for _, g := range files.Gaps() {
		// The missing entries' records may lie below the first entry
		// found: the older records are not left out from there.
		if at, ok := firsts[g.Topic]; ok && g.PhyFrom < at {
			firsts[g.Topic] = g.PhyFrom
		}
		if b, ok := begins[g.Topic][g.QueueID]; ok && g.PhyFrom < b.Phy {
			b.Phy = g.PhyFrom
			begins[g.Topic][g.QueueID] = b
		}
		warnConsumeQueueGap(log, g, minPhy, withKV)
	}
	return queueTakeover{starts: starts, firsts: firsts, begins: begins, topics: topics, dispatched: dispatched, bounds: bounds.bounds}, nil
}

// recordRocketMQQueues records what takeOverRocketMQQueues read from
// either ConsumeQueue: firsts (topic -> CommitLog offset of its first
// entry) and begins (each queue's first entry) are lowered to complete
// and dropped where no record lies below them, then written with topics
// and the dispatch end; starts seed the KV ConsumeQueue (cqs, nil when it
// is not written).
func recordRocketMQQueues(db *kvindex.DB, cqs *kvindex.CQ, starts []kvindex.QueueStart, firsts map[string]int64,
	begins map[string]map[int32]kvindex.QueueBegin, topics []string, dispatched, minPhy, complete int64, log zerolog.Logger) error {
	for topic, at := range firsts {
		// RocketMQ's recovery dispatches again from complete on: what it
		// would serve is kept.
		at = min(at, complete)
		top := at
		for qid, b := range begins[topic] {
			b.Phy = min(b.Phy, complete)
			begins[topic][qid] = b
			top = max(top, b.Phy)
		}
		if top <= minPhy {
			delete(firsts, topic) // no record lies below it
			delete(begins, topic)
			continue
		}
		firsts[topic] = at
	}
	topics = slices.Compact(slices.Sorted(slices.Values(topics)))
	if err := db.RecordRocketMQConsumeQueue(firsts, begins, topics, min(complete, max(dispatched, minPhy))); err != nil {
		return err
	}
	if len(starts) == 0 || cqs == nil {
		return nil
	}
	if err := cqs.SeedStarts(starts); err != nil {
		return err
	}
	log.Info().Int("queues", len(starts)).Msg("queues whose records retention had deleted keep their RocketMQ offsets")
	return nil
}

// readRocksDBQueues is readFileQueues for RocketMQ 5.3's
// RocksDB ConsumeQueue (storeType=defaultRocksDB), read with
// migrate/rocksdbcq: its offset column family names the queues RocketMQ
// held and where each ended, its units where each begins over the
// CommitLog [minPhy, endPhy). The units are read once, in order.
func readRocksDBQueues(root string, minPhy, endPhy int64, log zerolog.Logger) (queueTakeover, error) {
	dir := filepath.Join(root, "consumequeue")
	// One pass over every unit: minutes for a ConsumeQueue of many
	// millions of messages.
	log.Info().Str("dir", dir).Msg("reading RocketMQ's RocksDB ConsumeQueue for where its queues begin and end")
	v, err := rocksdbcq.Read(dir, minPhy, endPhy)
	if err != nil {
		return queueTakeover{}, fmt.Errorf("read the RocketMQ RocksDB consumequeue of %s (move it aside to start without it: %s): %w", root, withoutCQ, err)
	}
	if v.Foreign > 0 || v.Orphans > 0 {
		log.Warn().Str("dir", dir).Int("foreignRecords", v.Foreign).Int("unitsWithoutQueue", v.Orphans).
			Msg("the RocketMQ RocksDB ConsumeQueue holds records in neither of its layouts, or units of queues without a max record; they are left out")
	}
	var (
		starts     []kvindex.QueueStart
		firsts     = map[string]int64{}
		begins     = map[string]map[int32]kvindex.QueueBegin{}
		topics     []string
		dispatched int64
		bounds     queueTakeover
	)
	for _, q := range v.Queues {
		bounds.setBounds(q.Topic, q.QueueID, q.Min, q.Max)
		topics = append(topics, q.Topic)
		dispatched = max(dispatched, q.LastEnd)
		if q.Max > 0 && q.Min >= q.Max {
			starts = append(starts, kvindex.QueueStart{Topic: q.Topic, QueueID: q.QueueID, Offset: q.Max})
			continue
		}
		if q.Min >= q.Max {
			continue
		}
		if at, ok := firsts[q.Topic]; !ok || q.FirstPhy < at {
			firsts[q.Topic] = q.FirstPhy
		}
		if begins[q.Topic] == nil {
			begins[q.Topic] = map[int32]kvindex.QueueBegin{}
		}
		begins[q.Topic][q.QueueID] = kvindex.QueueBegin{Phy: q.FirstPhy, Offset: q.Min}
	}
	log.Info().Str("dir", dir).Int("queues", len(v.Queues)).Msg("read RocketMQ's RocksDB ConsumeQueue")
	return queueTakeover{starts: starts, firsts: firsts, begins: begins, topics: topics, dispatched: dispatched, bounds: bounds.bounds}, nil
}

// seedFileStarts makes the file layout's queues in starts (queues whose
// records retention deleted, from RocketMQ's RocksDB ConsumeQueue) stand
// where RocketMQ's did, and flushes that, before anything is dispatched.
func seedFileStarts(fs *filecq.Store, starts []kvindex.QueueStart, log zerolog.Logger) error {
	if len(starts) == 0 {
		return nil
	}
	for _, st := range starts {
		if err := fs.SeedStart(st.Topic, st.QueueID, st.Offset); err != nil {
			return fmt.Errorf("seed %s/%d of the file consumequeue at %d: %w", st.Topic, st.QueueID, st.Offset, err)
		}
	}
	if err := fs.Flush(); err != nil {
		return fmt.Errorf("flush the seeded file consumequeue: %w", err)
	}
	log.Info().Int("queues", len(starts)).Msg("file ConsumeQueue: queues whose records retention had deleted keep their RocketMQ offsets")
	return nil
}

// warnConsumeQueueGap logs a run of files missing in the middle of a
// queue of RocketMQ's consumequeue/ (filecq.Gap), and what becomes of
// its entries: kv (the Pebble ConsumeQueue is written) builds them again
// from the CommitLog records the first open dispatches (every one from
// the CommitLog's minimum minPhy on), the file layout's Open writes the
// files again from them (refillConsumeQueueGap); records retention
// deleted are gone with or without the files.
func warnConsumeQueueGap(log zerolog.Logger, g filecq.Gap, minPhy int64, kv bool) {
	ev := log.Warn().Str("queue", fmt.Sprintf("%s/%d", g.Topic, g.QueueID)).Int64("fromOffset", g.From).Int64("toOffset", g.To).
		Int64("fromPhy", g.PhyFrom).Int64("toPhy", g.PhyTo)
	switch {
	case g.PhyTo >= 0 && g.PhyTo <= minPhy:
		ev.Msg("the RocketMQ consumequeue lacks the files of these queue offsets in the middle of the queue; their records are gone from the CommitLog already (retention), so no message is lost with them")
	case kv:
		ev.Int64("logMin", minPhy).Msg("the RocketMQ consumequeue lacks the files of these queue offsets in the middle of the queue; " +
			"their entries are built again from the CommitLog into the Pebble ConsumeQueue (all of them unless retention deleted the records below logMin)")
	default:
		ev.Msg("the RocketMQ consumequeue lacks the files of these queue offsets in the middle of the queue; " +
			"the file ConsumeQueue writes them again from the CommitLog when it opens (storeType=file)")
	}
}

// refillConsumeQueueGap reads from the CommitLog the entries of a run of
// files missing in the middle of a queue of the file ConsumeQueue
// (filecq.Options.RefillGap): the records of the queue (a light message
// queue's: those naming it, queueOffsetIn) whose queue offsets fall in
// the run, between the entries around it (from the entry before it to
// the CommitLog's end when the file after it holds none yet). Records
// that retention deleted are gone; any other the run lacks is an error.
func refillConsumeQueueGap(clog *commitlog.Log, g filecq.Gap, levels []time.Duration) ([]cq.Entry, error) {
	minPhy := clog.MinOffset()
	from := max(g.PhyFrom, minPhy)
	r := clog.NewReader(from)
	defer r.Close()
	var out []cq.Entry
	for {
		e, err := r.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the CommitLog from %d: %w", from, err)
		}
		if g.PhyTo >= 0 && e.Offset >= g.PhyTo {
			break
		}
		m, err := commitlog.Decode(e.Data)
		if err != nil {
			return nil, fmt.Errorf("read the CommitLog record at %d: %w", e.Offset, err)
		}
		tx := commitlog.TransactionType(m.SysFlag)
		off, ok := queueOffsetIn(&m, g.Topic, g.QueueID)
		if !ok || off < g.From || off >= g.To || (tx != commitlog.TransactionNotType && tx != commitlog.TransactionCommit) {
			continue
		}
		out = append(out, cq.Entry{QueueOffset: off, PhyOffset: e.Offset, Size: e.Size, TagsCode: kvindex.TagsCodeOf(&m, levels)})
		if off == g.To-1 {
			break // the run's last: no need to read on (to the log's end when PhyTo is -1)
		}
	}
	if g.PhyFrom >= minPhy && (len(out) == 0 || out[0].QueueOffset != g.From) {
		return nil, fmt.Errorf("the CommitLog from %d to %d holds %d entries of queue offsets %d to %d of %s/%d, whose records it should all hold",
			from, g.PhyTo, len(out), g.From, g.To-1, g.Topic, g.QueueID)
	}
	return out, nil
}

// queueOffsetIn returns the offset of the record m in the queue
// topic/queueID: its own queue's, or that of a light message queue its
// INNER_MULTI_DISPATCH names (queue 0, at the offset
// INNER_MULTI_QUEUE_OFFSET gives), as the dispatcher puts it there.
func queueOffsetIn(m *commitlog.Message, topic string, queueID int32) (int64, bool) {
	if m.Topic == topic && m.QueueID == queueID {
		return m.QueueOffset, true
	}
	if queueID != 0 || !meta.ValidLMQ(topic) || !meta.TopicAllowsLMQ(m.Topic) {
		return 0, false
	}
	for name, off := range commitlog.MultiDispatched(m.Properties) {
		if name == topic && off >= 0 {
			return off, true
		}
	}
	return 0, false
}

// dropRocketMQDeletedTopics drops, once dispatch has indexed the
// CommitLog of an Apache RocketMQ store first opened, the queues of the
// topics RocketMQ had deleted and not created again: a topic dispatch
// indexed that RocketMQ's consumequeue/ did not hold (db.RocketMQTopics),
// whose every entry lies where that consumequeue/ was complete, and that
// has no config (RocketMQ's DeleteTopic removes it) and is not a system
// topic. RocketMQ never dispatches such records again; indexed, a topic
// created again under the name would serve the deleted messages. The
// record of the topics goes once they are dropped: a start after a crash
// before drops them then.
func (b *Broker) dropRocketMQDeletedTopics() error {
	complete, known, ok, err := b.db.RocketMQTopics()
	if err != nil || !ok {
		return err
	}
	newest := map[string]int64{} // topic -> end of its newest entry in either layout
	var qerr error
	for _, s := range []cq.Store{b.cqs, b.cqMirror} {
		if s == nil {
			continue
		}
		err := s.Queues(func(topic string, qid int32) bool {
			if known[topic] || meta.IsSystemTopic(topic) {
				return true
			}
			end := newest[topic]
			hi, err := s.MaxOffset(topic, qid)
			if err == nil && hi > 0 {
				var es []cq.Entry
				if es, err = s.Get(topic, qid, hi-1, 1); err == nil && len(es) == 1 {
					end = max(end, es[0].End())
				}
			}
			if err != nil {
				qerr = err
				return false
			}
			newest[topic] = end
			return true
		})
		if err = errors.Join(err, qerr); err != nil {
			return fmt.Errorf("find the topics the RocketMQ store had deleted: %w", err)
		}
	}
	var dropped []string
	for _, topic := range slices.Sorted(maps.Keys(newest)) {
		if newest[topic] > complete {
			continue // appended where RocketMQ's ConsumeQueue may lack its entries
		}
		if _, ok, err := b.topicConfig(topic); err != nil {
			return err
		} else if ok {
			continue
		}
		if err := b.dropTopicQueues(topic); err != nil {
			return err
		}
		dropped = append(dropped, topic)
	}
	if len(dropped) > 0 {
		b.log.Info().Strs("topics", dropped).Msg("dropped the queues of topics the RocketMQ store had deleted: their records are left in its CommitLog")
	}
	return b.db.EndRocketMQTopics()
}

// importConfig writes what db lacks of c and returns how many topics,
// groups, consumer offsets, delay offsets, request modes, orderly POP
// batches, groups' forbidden entries, static topics and pop positions it
// wrote; now (ms) ages the batches.
//
// A pop position comes from each of c.PullOffsets (config v2's pull
// offsets of light message queues): where RocketMQ would start the
// group's next non-orderly pop of the queue, past what its last pop read,
// acked or not (the messages in flight are imported with
// importRocketMQPop). A pop here starts at the later of the position and
// the committed offset, as RocketMQ's, so a batch popped and acked before
// the move is not delivered again. Nothing else has a pull offset on disk
// (RocketMQ's JSON and config v1 stores keep none, and config v2 never
// reads an ordinary topic's back): those queues' pops start from the
// committed offsets, as RocketMQ's own do after a restart.
func importConfig(db *kvindex.DB, c rmqconfig.Config, now int64) (counts [9]int, err error) {
	topics, err := db.Topics(len(c.Topics) + 1)
	if err != nil {
		return counts, err
	}
	if counts[0], err = putAbsent(c.Topics, topics.Get, topics.Put, func(t meta.TopicConfig) string { return t.TopicName }); err != nil {
		return counts, err
	}
	groups, err := db.Groups(len(c.Groups) + 1)
	if err != nil {
		return counts, err
	}
	if counts[1], err = putAbsent(c.Groups, groups.Get, groups.Put, func(g meta.SubscriptionGroupConfig) string { return g.GroupName }); err != nil {
		return counts, err
	}
	forbidden, err := db.GroupForbiddens(len(c.Forbidden) + 1)
	if err != nil {
		return counts, err
	}
	if counts[6], err = putAbsent(c.Forbidden, forbidden.Get, forbidden.Put, func(f meta.GroupForbidden) string { return f.Group }); err != nil {
		return counts, err
	}
	mappings, err := db.TopicQueueMappings(len(c.QueueMappings) + 1)
	if err != nil {
		return counts, err
	}
	if counts[7], err = putAbsent(c.QueueMappings, mappings.Get, mappings.Put, func(d meta.TopicQueueMappingDetail) string { return d.Topic }); err != nil {
		return counts, err
	}
	offsets := db.ConsumerOffsets()
	var updates []kvindex.OffsetUpdate
	add := func(u kvindex.OffsetUpdate) error {
		if _, ok, err := offsets.Get(u.Group, u.Topic, u.QueueID); err != nil || ok {
			return err
		}
		updates = append(updates, u)
		return nil
	}
	for _, o := range c.Offsets {
		if err := add(kvindex.OffsetUpdate{Group: o.Group, Topic: o.Topic, QueueID: o.QueueID, Offset: o.Offset}); err != nil {
			return counts, err
		}
	}
	delays := 0
	for level, off := range c.DelayOffsets {
		before := len(updates)
		if err := add(kvindex.OffsetUpdate{Group: scheduleOffsetGroup, Topic: meta.ScheduleTopic, QueueID: int32(level - 1), Offset: off}); err != nil {
			return counts, err
		}
		delays += len(updates) - before
	}
	if err := offsets.SetMany(updates, true); err != nil {
		return counts, err
	}
	if counts[8], err = importPopPositions(db, c.PullOffsets); err != nil {
		return counts, err
	}
	modes, err := importRequestModes(db, c.RequestModes)
	if err != nil {
		return counts, err
	}
	if counts[5], err = importOrderInfos(db, topics, groups, c.OrderInfos, now); err != nil {
		return counts, err
	}
	if c.HasTimerCheck {
		if _, ok, err := db.RocketMQTimerProgress(); err != nil {
			return counts, err
		} else if !ok {
			if c.TimerQueueOffset >= 0 {
				if err := db.SetRocketMQTimerQueueOffset(c.TimerQueueOffset); err != nil {
					return counts, err
				}
			}
			// The progress last: its presence says the import is done.
			if err := db.SetRocketMQTimerProgress(c.TimerReadMs); err != nil {
				return counts, err
			}
		}
	}
	counts[2], counts[3], counts[4] = len(updates)-delays, delays, modes
	return counts, nil
}

// importPopPositions writes, synced, the pop positions of pulls the
// index lacks (see importConfig) and returns how many.
func importPopPositions(db *kvindex.DB, pulls []rmqconfig.Offset) (int, error) {
	if len(pulls) == 0 {
		return 0, nil
	}
	pops := db.Pop()
	batch := pops.NewBatch()
	defer batch.Close()
	n := 0
	for _, p := range pulls {
		if _, ok, err := pops.Position(p.Group, p.Topic, p.QueueID); err != nil || ok {
			if err != nil {
				return 0, err
			}
			continue
		}
		if err := batch.SetPosition(p.Group, p.Topic, p.QueueID, p.Offset); err != nil {
			return 0, fmt.Errorf("import the pull offset of %s on %s/%d: %w", p.Group, p.Topic, p.QueueID, err)
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, batch.Commit(true)
}

// importRequestModes writes the request modes the index lacks and
// returns how many.
func importRequestModes(db *kvindex.DB, modes []rmqconfig.RequestMode) (int, error) {
	if len(modes) == 0 {
		return 0, nil
	}
	have := map[[2]string]bool{}
	if err := db.Pop().EachRequestMode(func(m kvindex.RequestMode) bool {
		have[[2]string{m.Topic, m.Group}] = true
		return true
	}); err != nil {
		return 0, err
	}
	n := 0
	for _, m := range modes {
		// Retry topics always pull, as SET_MESSAGE_REQUEST_MODE refuses
		// them.
		if have[[2]string{m.Topic, m.ConsumerGroup}] || meta.IsRetryTopic(m.Topic) {
			continue
		}
		body := requestModeBody{Topic: m.Topic, ConsumerGroup: m.ConsumerGroup, Mode: m.Mode, PopShareQueueNum: m.PopShareQueueNum}
		if err := setRequestMode(db, body); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// orderInfoIdle is how long RocketMQ keeps the orderly batch of a queue
// its group stopped consuming (ConsumerOrderInfoManager's clean span).
const orderInfoIdle = 24 * time.Hour

// importOrderInfos writes the orderly POP batches of consumerOrderInfo.json
// that the index lacks and returns how many. A batch still in flight
// keeps its queue locked for the group after the move, its messages are
// acknowledged with the receipt handles RocketMQ gave (same popTime), and
// their consumption counts carry on; without it a moved broker would hand
// the batch's messages to a second consumer at once and restart their
// counts, those RocketMQ kept for offsets the batch no longer holds
// included (rmqconfig.OrderInfo.Carried). Batches RocketMQ's next persist
// would drop are skipped, as are
// those with nothing left to lock: topic or group gone, queue past the
// topic's read queues, idle for 24 h, or every message acknowledged.
func importOrderInfos(db *kvindex.DB, topics *kvindex.Topics, groups *kvindex.Groups, infos []rmqconfig.OrderInfo, now int64) (int, error) {
	if len(infos) == 0 {
		return 0, nil
	}
	store := db.Pop()
	b := store.NewBatch()
	defer b.Close()
	n := 0
	for _, info := range infos {
		tc, ok, err := topics.Get(info.Topic)
		if err != nil {
			return 0, err
		}
		if !ok || info.QueueID >= int32(tc.ReadQueueNums) {
			continue
		}
		if _, ok, err := groups.Get(info.Group); err != nil || !ok {
			if err != nil {
				return 0, err
			}
			continue
		}
		// One bit per message of the batch (at most 64: for 64 the shift
		// gives 0 and the subtraction all ones).
		all := uint64(1)<<len(info.Offsets) - 1
		if len(info.Offsets) == 0 || info.Acked&all == all || now-info.LastConsume > orderInfoIdle.Milliseconds() {
			continue
		}
		if _, ok, err := store.Order(info.Group, info.Topic, info.QueueID); err != nil || ok {
			if err != nil {
				return 0, err
			}
			continue
		}
		st := kvindex.OrderState{Group: info.Group, Topic: info.Topic, QueueID: info.QueueID, PopTime: info.PopTime,
			InvisibleTime: info.InvisibleTime, Acked: info.Acked & all, AttemptID: info.AttemptID}
		for _, off := range info.Offsets {
			st.Messages = append(st.Messages, kvindex.OrderMessage{QueueOffset: off, Consumed: info.Consumed[off], NextVisibleAt: info.NextVisible[off]})
		}
		// Counts RocketMQ kept for offsets outside the batch (a pop
		// repeating the attemptId keeps them): a retry of the attempt
		// delivering them again finds them.
		st.Carried = info.Carried()
		if err := b.SetOrder(&st); err != nil {
			return 0, fmt.Errorf("orderly batch of %s on %s/%d: %w", info.Group, info.Topic, info.QueueID, err)
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, b.Commit(true)
}

// putAbsent writes the configs whose names get does not find and returns
// how many.
func putAbsent[T any](cfgs []T, get func(string) (T, bool, error), put func(...T) error, name func(T) string) (int, error) {
	var out []T
	for _, c := range cfgs {
		_, ok, err := get(name(c))
		if err != nil {
			return 0, err
		}
		if !ok {
			out = append(out, c)
		}
	}
	return len(out), put(out...)
}

// cqUnitsPerFile is the units per file of the file ConsumeQueue under
// root: what its files hold when it has any (RocketMQ's store may have
// been written with another mappedFileSizeConsumeQueue than this
// broker's configuration says, and the files cannot be read otherwise),
// else the configured size.
func cqUnitsPerFile(root string, configured int, log zerolog.Logger) int {
	units, ok := filecq.DetectUnitsPerFile(nil, root)
	if !ok || units == configured {
		return configured
	}
	log.Warn().Int("configured", configured).Int("files", units).
		Msg("the consumequeue files hold another number of units than mappedFileSizeConsumeQueue says; reading them as they are")
	return units
}

// warnUnroutedQueues logs, once the first open of an Apache RocketMQ
// store has indexed its CommitLog and the start has created its own
// topics, the queues that hold messages no topic config routes (rmqconfig.UnroutedQueues): a store whose topics.json was
// lost, or is older than its CommitLog. Their messages stay in the store;
// clients reach them once an operator creates or widens the topic.
func (b *Broker) warnUnroutedQueues() error {
	queues := make(map[string]int32)
	if err := b.cqs.Queues(func(topic string, qid int32) bool {
		if top, ok := queues[topic]; !ok || qid > top {
			queues[topic] = qid
		}
		return true
	}); err != nil {
		return fmt.Errorf("list the queues of the imported store: %w", err)
	}
	var lookupErr error
	noConfig := 0
	lines := rmqconfig.UnroutedQueues(queues, func(topic string) (int, bool) {
		tc, ok, err := b.topics.get(topic)
		if err != nil {
			lookupErr = err
		}
		if !ok {
			noConfig++
		}
		return tc.ReadQueueNums, ok
	})
	if lookupErr != nil {
		return fmt.Errorf("look up the topics of the imported store: %w", lookupErr)
	}
	log := b.component("import")
	for _, line := range lines {
		log.Warn().Str("root", b.cfg.StorePathRootDir).Msg("in the RocketMQ store: " + line)
	}
	if noConfig > 0 && b.importedWithoutCQ {
		log.Warn().Str("root", b.cfg.StorePathRootDir).Msg(withoutCQDeletedTopics)
	}
	return nil
}

// withoutCQDeletedTopics is the warning of a first open without
// consumequeue/ that found topics without a config. With consumequeue/ the
// first open tells the topics RocketMQ deleted (no queues there) and
// drops their queues (dropRocketMQDeletedTopics); without it a topic
// without a config may be one RocketMQ deleted or one whose config
// topics.json lost, and its queues are kept: dropped, the messages of the
// second would be lost for good. RocketMQ itself keeps them in a file
// ConsumeQueue rebuilt from the CommitLog; its RocksDB ConsumeQueue drops
// them within the hour (cleanRocksDBDirtyCQIntervalMin), as
// cleanUnusedTopic does here.
const withoutCQDeletedTopics = "in the RocketMQ store: its first open found no consumequeue/ (moved aside), which tells the topics RocketMQ had deleted: " +
	"a topic named above as having no topic config may be one, its deleted messages rebuilt from the CommitLog into its queues; " +
	"it stays unrouted, and a topic created under its name would serve them; drop such queues with mqadmin cleanUnusedTopic " +
	"(every topic without a config; RocketMQ's RocksDB ConsumeQueue drops them itself within the hour) or create the topics whose config was lost"
