package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/migrate/cqcompare"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

type compareCQOptions struct {
	topic string
	from  int64
}

func compareCQCommand(o *globalOptions) *cobra.Command {
	var co compareCQOptions
	run := withStore(o, func(ctx context.Context, s *store, out *output) error {
		return runCompareCQ(ctx, s, out, co)
	})
	cmd := &cobra.Command{
		Use:   "compare-cq [--topic T] [--from MS]",
		Short: "Compare the Pebble ConsumeQueue with the file one (consumequeue/) of a stopped store; exit status 1 when they differ",
		Long: `compare-cq compares the two ConsumeQueue layouts a broker writes under
rocksdbCQDoubleWriteEnable=true: Pebble's (kv) and RocketMQ's files in
consumequeue/ (file). It is the check behind bin/admin
checkRocksdbCqWriteProgress, for a stopped store, before restarting it with
the other storeType: queue by queue, each queue's presence, its min and
max offsets, and every entry both layouts hold (queue offset, CommitLog
offset, size, tagsCode) from --from on. The first differing entry of a
queue is reported and the rest of that queue skipped.

The file layout is read as the broker reads it when it starts: with the
units per file its files have, entries past the CommitLog's end left out
and queue minima moved past records retention deleted. A store that was
not shut down cleanly may lack file entries its next start writes again.

It needs the stopped store itself (not --broker): compare a running
broker's layouts with bin/admin checkRocksdbCqWriteProgress.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.broker != "" {
				return errors.New("compare-cq reads a stopped store (--store); for a running broker use bin/admin checkRocksdbCqWriteProgress")
			}
			if co.from < 0 {
				return fmt.Errorf("--from %d: want ms since the epoch, or 0 for every entry", co.from)
			}
			return run(cmd, args)
		},
	}
	cmd.Flags().StringVar(&co.topic, "topic", "", "compare this topic only (default: every topic of either layout)")
	cmd.Flags().Int64Var(&co.from, "from", 0, "ms since the epoch: entries stored before are not compared (0: every entry)")
	return cmd
}

// compareCQLine is compare-cq's result in JSON output.
type compareCQLine struct {
	Kind                  string `json:"kind"` // "result"
	OK                    bool   `json:"ok"`
	Topics                int    `json:"topics"`
	Queues                int    `json:"queues"`
	Entries               int64  `json:"entries"`
	Differences           int64  `json:"differences"`
	QueuesWithDifferences int    `json:"queuesWithDifferences"`
}

// layoutsDiffer is compare-cq's error when the layouts differ; it maps to
// exit status 1 as verify's differences do.
type layoutsDiffer struct{ n int64 }

func (e layoutsDiffer) Error() string {
	return fmt.Sprintf("%d differences: the kv and file ConsumeQueues differ", e.n)
}

func (e layoutsDiffer) Is(target error) bool { return target == errDifferences }

func runCompareCQ(ctx context.Context, s *store, out *output, co compareCQOptions) error {
	log, err := s.needLog()
	if err != nil {
		return err
	}
	file, err := openFileCQ(s, log)
	if err != nil {
		return err
	}
	defer file.Close()
	r, err := cqcompare.Compare(ctx, s.db.ConsumeQueue(0), file, [2]string{"kv", "file"},
		cqcompare.Options{Topic: co.topic, FromTime: co.from})
	if err != nil {
		return err
	}
	if err := printCompareCQ(out, r); err != nil {
		return err
	}
	if !r.OK() {
		return layoutsDiffer{r.DifferenceCount}
	}
	return nil
}

// openFileCQ opens the store's file ConsumeQueue read-only and brings its
// bounds where the broker's start would: cut at the CommitLog's end, minima
// past the CommitLog's minimum (a read-only store only moves the bounds it
// reports).
func openFileCQ(s *store, log *commitlog.ReadOnlyLog) (*filecq.Store, error) {
	dir := filepath.Join(s.root, "consumequeue")
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no file ConsumeQueue in %s: the broker never wrote one; nothing to compare", s.root)
	}
	if err != nil {
		return nil, fmt.Errorf("file ConsumeQueue %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("file ConsumeQueue %s: not a directory", dir)
	}
	units, ok := filecq.DetectUnitsPerFile(nil, s.root)
	if !ok {
		units = filecq.DefaultUnitsPerFile
	}
	file, err := filecq.OpenReadOnly(filecq.Options{
		Dir:          s.root,
		UnitsPerFile: units,
		StoreTime:    storeTimeFrom(log),
		Logger:       zerolog.New(s.stderr).Level(zerolog.WarnLevel),
	})
	if err != nil {
		return nil, err
	}
	err = file.Truncate(s.logEnd)
	if err == nil {
		err = file.CorrectMin(log.MinOffset())
	}
	if err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("file ConsumeQueue: %w", err)
	}
	return file, nil
}

// storeTimeFrom reads a record's store timestamp from the CommitLog: the
// file layout keeps none.
func storeTimeFrom(log *commitlog.ReadOnlyLog) func(phy int64, size int32) (int64, error) {
	return func(phy int64, size int32) (int64, error) {
		rec, err := log.ReadRecord(phy)
		if err != nil {
			return 0, err
		}
		if rec.Size != size {
			return 0, fmt.Errorf("the record at %d has %d bytes, the entry says %d", phy, rec.Size, size)
		}
		m, err := commitlog.Decode(rec.Data)
		if err != nil {
			return 0, fmt.Errorf("record at %d: %w", phy, err)
		}
		return m.StoreTimestamp, nil
	}
}

// printCompareCQ prints the report: its summary as text, or one JSON line
// per difference it kept and a result line.
func printCompareCQ(out *output, r cqcompare.Report) error {
	if !out.json {
		return out.line("%s", r.String())
	}
	for _, d := range r.Differences {
		l := differenceLine{Kind: "difference", Topic: d.Topic, QueueID: &d.QueueID, Problem: d.Problem}
		if d.QueueOffset >= 0 {
			l.QueueOffset = &d.QueueOffset
		}
		if err := out.object(l); err != nil {
			return err
		}
	}
	return out.object(compareCQLine{Kind: "result", OK: r.OK(), Topics: r.Topics, Queues: r.Queues, Entries: r.Entries,
		Differences: r.DifferenceCount, QueuesWithDifferences: r.QueuesWithDifferences})
}
