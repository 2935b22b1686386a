package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

type verifyOptions struct {
	logScan     bool
	delayLevels string
}

func verifyCommand(o *globalOptions) *cobra.Command {
	var vo verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [--log-scan] [--delay-levels LEVELS]",
		Short: "Check every ConsumeQueue entry against the CommitLog; exit status 1 when they differ",
		Long: `verify walks every queue's entries in order and checks that each points at a
record of that topic and queue with the entry's size, queue offset, tagsCode
and store time; that each queue's offsets are gapless; that no entry lies
past the CommitLog's end or the dispatched offset; and that the dispatched
offset is not past the CommitLog's end. Each difference is printed with its
topic, queue, queue offset and physical offset.

--log-scan also reads the CommitLog up to the dispatched offset and checks
that every record that belongs in a ConsumeQueue has its entry (records of
deleted topics are reported too).`,
		Args: cobra.NoArgs,
		RunE: withStore(o, func(ctx context.Context, s *store, out *output) error {
			return runVerify(ctx, s, out, vo)
		}),
	}
	cmd.Flags().BoolVar(&vo.logScan, "log-scan", false, "also check that every dispatched record has its ConsumeQueue entry")
	cmd.Flags().StringVar(&vo.delayLevels, "delay-levels", meta.DefaultMessageDelayLevel, "the broker's messageDelayLevel (tagsCode of SCHEDULE_TOPIC_XXXX entries)")
	return cmd
}

// differenceLine is one difference in JSON output; the location fields
// are absent for store-wide differences.
type differenceLine struct {
	Kind        string `json:"kind"` // "difference"
	Topic       string `json:"topic,omitempty"`
	QueueID     *int32 `json:"queueId,omitempty"`
	QueueOffset *int64 `json:"queueOffset,omitempty"`
	PhyOffset   *int64 `json:"phyOffset,omitempty"`
	Problem     string `json:"problem"`
}

// verifyLine is verify's result in JSON output.
type verifyLine struct {
	Kind         string `json:"kind"` // "result"
	Queues       int64  `json:"queues"`
	Entries      int64  `json:"entries"`
	Records      int64  `json:"records"`
	Differences  int64  `json:"differences"`
	Dispatched   int64  `json:"dispatched"`
	LogMinOffset int64  `json:"logMinOffset"`
	LogMaxOffset int64  `json:"logMaxOffset"`
}

// verifier accumulates and prints differences.
type verifier struct {
	s      *store
	out    *output
	log    *commitlog.ReadOnlyLog
	levels []time.Duration
	t      *table // created at the first difference
	res    verifyLine
}

func runVerify(ctx context.Context, s *store, out *output, vo verifyOptions) error {
	log, err := s.needLog()
	if err != nil {
		return err
	}
	levels, err := meta.ParseDelayLevels(vo.delayLevels)
	if err != nil {
		return fmt.Errorf("--delay-levels: %w", err)
	}
	v := &verifier{s: s, out: out, log: log, levels: levels,
		res: verifyLine{Kind: "result", Dispatched: s.dispatched, LogMinOffset: log.MinOffset(), LogMaxOffset: s.logEnd}}
	if s.dispatched > s.logEnd {
		if err := v.report(nil, fmt.Sprintf("dispatched offset %d is past the CommitLog end %d", s.dispatched, s.logEnd)); err != nil {
			return err
		}
	}
	if err := v.entries(ctx); err != nil {
		return err
	}
	if vo.logScan {
		if err := v.records(ctx); err != nil {
			return err
		}
	}
	if err := v.finish(); err != nil {
		return err
	}
	if v.res.Differences > 0 {
		return fmt.Errorf("%d differences: %w", v.res.Differences, errDifferences)
	}
	return nil
}

// where locates a difference in a queue.
type where struct {
	topic string
	qid   int32
	off   int64 // -1 when unknown
	phy   int64 // -1 when unknown
}

func at(topic string, qid int32, off, phy int64) *where {
	return &where{topic: topic, qid: qid, off: off, phy: phy}
}

// report prints one difference.
func (v *verifier) report(w *where, problem string) error {
	v.res.Differences++
	l := differenceLine{Kind: "difference", Problem: problem}
	cells := []string{"-", "-", "-", "-", cell(problem)}
	if w != nil {
		l.Topic, l.QueueID = w.topic, &w.qid
		cells[0], cells[1] = cell(w.topic), num(w.qid)
		if w.off >= 0 {
			l.QueueOffset = &w.off
			cells[2] = num(w.off)
		}
		if w.phy >= 0 {
			l.PhyOffset = &w.phy
			cells[3] = num(w.phy)
		}
	}
	if v.out.json {
		return v.out.object(l)
	}
	if v.t == nil {
		v.t = newTable(v.out.w, "TOPIC", "QUEUE", "OFFSET", "PHY", "PROBLEM")
	}
	v.t.row(cells...)
	return nil
}

func (v *verifier) finish() error {
	if v.out.json {
		return v.out.object(v.res)
	}
	if v.t != nil {
		if err := v.t.flush(); err != nil {
			return err
		}
		if err := v.out.line(""); err != nil {
			return err
		}
	}
	r := v.res
	scanned := ""
	if r.Records > 0 {
		scanned = fmt.Sprintf(" (and %d CommitLog records)", r.Records)
	}
	return v.out.line("verified %d entries in %d queues%s against the CommitLog [%d, %d), dispatched %d: %d differences",
		r.Entries, r.Queues, scanned, r.LogMinOffset, r.LogMaxOffset, r.Dispatched, r.Differences)
}

// entries walks every queue's entries in order and checks each against
// its record.
func (v *verifier) entries(ctx context.Context) error {
	var werr error
	err := v.s.db.QueueRanges("", func(r kvindex.QueueRange) bool {
		v.res.Queues++
		werr = v.queue(ctx, r)
		return werr == nil && ctx.Err() == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

func (v *verifier) queue(ctx context.Context, r kvindex.QueueRange) error {
	if r.MinKey >= 0 && r.MinKey < r.MinOffset && r.MinOffset < r.MaxOffset {
		if err := v.report(at(r.Topic, r.QueueID, r.MinKey, -1), fmt.Sprintf("gap: offsets [%d, %d) missing (the queue's min key is %d, its first entry %d)",
			r.MinKey, r.MinOffset, r.MinKey, r.MinOffset)); err != nil {
			return err
		}
	}
	expect := r.MinOffset
	var werr error
	err := v.s.db.ScanQueue(r.Topic, r.QueueID, r.MinOffset, func(e kvindex.CQEntryRecord, derr error) bool {
		v.res.Entries++
		switch {
		case derr != nil:
			werr = v.report(at(r.Topic, r.QueueID, e.QueueOffset, -1), "malformed entry: "+derr.Error())
		case e.QueueOffset > expect:
			werr = v.report(at(r.Topic, r.QueueID, expect, -1), fmt.Sprintf("gap: offsets [%d, %d) missing", expect, e.QueueOffset))
		}
		if werr == nil && derr == nil {
			if problems := v.checkEntry(e); len(problems) > 0 {
				werr = v.report(at(r.Topic, r.QueueID, e.QueueOffset, e.PhyOffset), strings.Join(problems, "; "))
			}
		}
		if e.QueueOffset >= 0 {
			expect = e.QueueOffset + 1
		}
		return werr == nil && ctx.Err() == nil
	})
	if err == nil {
		err = werr
	}
	return err
}

// checkEntry compares one entry with the record it points at.
func (v *verifier) checkEntry(e kvindex.CQEntryRecord) []string {
	end := e.PhyOffset + int64(e.Size)
	switch {
	case e.Size <= 0:
		return []string{fmt.Sprintf("size %d", e.Size)}
	case e.PhyOffset < v.log.MinOffset():
		return []string{fmt.Sprintf("record below the CommitLog minimum %d (deleted by retention; the queue minimum was not corrected)", v.log.MinOffset())}
	case end > v.s.logEnd:
		return []string{fmt.Sprintf("entry ends at %d, past the CommitLog end %d", end, v.s.logEnd)}
	case end > v.s.dispatched:
		return []string{fmt.Sprintf("entry ends at %d, past the dispatched offset %d", end, v.s.dispatched)}
	}
	rec, err := v.log.ReadRecord(e.PhyOffset)
	if err != nil {
		return []string{fmt.Sprintf("no record at %d: %v", e.PhyOffset, err)}
	}
	m, err := commitlog.Decode(rec.Data)
	if err != nil {
		return []string{fmt.Sprintf("record at %d does not decode: %v", e.PhyOffset, err)}
	}
	var p []string
	if m.Topic != e.Topic || m.QueueID != e.QueueID {
		p = append(p, fmt.Sprintf("record is of %s/%d", m.Topic, m.QueueID))
	}
	if rec.Size != e.Size {
		p = append(p, fmt.Sprintf("size %d, the record has %d bytes", e.Size, rec.Size))
	}
	if m.QueueOffset != e.QueueOffset {
		p = append(p, fmt.Sprintf("the record's queue offset is %d", m.QueueOffset))
	}
	if m.PhyOffset != e.PhyOffset {
		p = append(p, fmt.Sprintf("the record's physical offset field is %d", m.PhyOffset))
	}
	switch commitlog.TransactionType(m.SysFlag) {
	case commitlog.TransactionPrepared, commitlog.TransactionRollback:
		p = append(p, "the record is a prepared or rolled-back transaction message, which is never dispatched")
	}
	if tc := kvindex.TagsCodeOf(&m, v.levels); tc != e.TagsCode {
		p = append(p, fmt.Sprintf("tagsCode %d, the record's is %d", e.TagsCode, tc))
	}
	if m.StoreTimestamp != e.StoreTimestamp {
		p = append(p, fmt.Sprintf("store time %s, the record's is %s", formatTime(e.StoreTimestamp), formatTime(m.StoreTimestamp)))
	}
	return p
}

// records reads the CommitLog up to the dispatched offset and checks that
// every record that belongs in a ConsumeQueue has its entry.
func (v *verifier) records(ctx context.Context) error {
	c := v.s.db.ConsumeQueue(0)
	it := v.log.NewIterator(v.log.MinOffset())
	for it.Offset() < v.s.dispatched {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := it.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			return nil
		}
		if err != nil {
			return v.report(nil, fmt.Sprintf("CommitLog unreadable at %d, scan stopped: %v", it.Offset(), err))
		}
		v.res.Records++
		m, err := commitlog.Decode(e.Data)
		if err != nil {
			if err := v.report(nil, fmt.Sprintf("record at %d does not decode: %v", e.Offset, err)); err != nil {
				return err
			}
			continue
		}
		switch commitlog.TransactionType(m.SysFlag) {
		case commitlog.TransactionPrepared, commitlog.TransactionRollback:
			continue
		}
		lo, err := c.MinOffset(m.Topic, m.QueueID)
		if err != nil {
			return err
		}
		hi, err := c.MaxOffset(m.Topic, m.QueueID)
		if err != nil {
			return err
		}
		w := at(m.Topic, m.QueueID, m.QueueOffset, e.Offset)
		switch {
		case m.QueueOffset < lo:
			continue // below the queue's minimum: removed on purpose
		case m.QueueOffset >= hi:
			err = v.report(w, fmt.Sprintf("record not in the ConsumeQueue (the queue ends at %d)", hi))
		default:
			got, gerr := c.Get(m.Topic, m.QueueID, m.QueueOffset, 1)
			switch {
			case gerr != nil:
				return gerr
			case len(got) == 0:
				err = v.report(w, "record not in the ConsumeQueue (no entry at its queue offset)")
			case got[0].PhyOffset != e.Offset:
				err = v.report(w, fmt.Sprintf("the entry at its queue offset points at %d, not at this record", got[0].PhyOffset))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
