package dledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rocksdbcq"
)

// ImportOptions says what to import and where.
type ImportOptions struct {
	// Root is the RocketMQ store root (storePathRootDir) holding
	// dledger-<selfId>/, config/ and consumequeue/.
	Root string
	// DataDir is DLedger's data directory; empty: <Root>/dledger-*/data
	// when there is exactly one (storePathDLedgerCommitLog otherwise).
	DataDir string
	// Out is the new rocketkv store root; it must not exist or be empty.
	Out string
	// Logger receives progress and warnings.
	Logger zerolog.Logger
}

// ImportResult says what an import did.
type ImportResult struct {
	// DataDir is the DLedger data directory read.
	DataDir string `json:"dataDir"`
	// FileSize is the size of DLedger's data files, and so of the new
	// CommitLog's segments (mappedFileSizeCommitLog).
	FileSize int64 `json:"fileSize"`
	// Entries counts the DLedger entries read; Messages those that held a
	// message; Noops the empty ones (DLedger master's NOOP entries).
	Entries  int64 `json:"entries"`
	Messages int64 `json:"messages"`
	Noops    int64 `json:"noops"`
	// FirstIndex and LastIndex are the first and last entry index read
	// (-1 when none).
	FirstIndex int64 `json:"firstIndex"`
	LastIndex  int64 `json:"lastIndex"`
	// MinOffset and MaxOffset are the new CommitLog's bounds.
	MinOffset int64 `json:"minOffset"`
	MaxOffset int64 `json:"maxOffset"`
	// Torn is where the DLedger log ended in an unfinished entry.
	Torn *TornTail `json:"torn,omitempty"`
	// Uncommitted counts the entries imported past the committedIndex of
	// DLedger's checkpoint (-1: no checkpoint).
	Uncommitted int64 `json:"uncommitted"`
	// QueueFiles counts the consumequeue files written with the new
	// offsets; QueueUnitsCut the units dropped for naming records past
	// the imported end.
	QueueFiles    int   `json:"queueFiles"`
	QueueUnitsCut int64 `json:"queueUnitsCut"`
	// UnresolvedCommits counts committed transaction records whose half
	// message is not in the DLedger log (retention deleted it): their
	// PreparedTransactionOffset is set to 0.
	UnresolvedCommits int `json:"unresolvedCommits"`
	// ConfigFiles counts the files copied from config/.
	ConfigFiles int `json:"configFiles"`
	// Warnings are what the import could not carry over or found odd.
	Warnings []string `json:"warnings,omitempty"`
}

// FindDataDir returns the DLedger data directory of a RocketMQ store
// root: the data/ directory of its one dledger-* directory. ok is false
// when there is none.
func FindDataDir(root string) (dir string, ok bool, err error) {
	matches, err := filepath.Glob(filepath.Join(root, "dledger-*", "data"))
	if err != nil {
		return "", false, fmt.Errorf("look for dledger directories in %s: %w", root, err)
	}
	var dirs []string
	for _, m := range matches {
		if info, err := os.Stat(m); err == nil && info.IsDir() {
			dirs = append(dirs, m)
		}
	}
	switch len(dirs) {
	case 0:
		return "", false, nil
	case 1:
		return dirs[0], true, nil
	}
	return "", false, fmt.Errorf("%s holds several DLedger stores (%s): name the data directory of this broker's dLegerSelfId", root, strings.Join(dirs, ", "))
}

// HasData reports whether a DLedger data directory holds any data file.
func HasData(dataDir string) (bool, error) {
	ents, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dataDir, err)
	}
	for _, de := range ents {
		if _, ok := parseFileName(de.Name()); ok && !de.IsDir() {
			return true, nil
		}
	}
	return false, nil
}

// IncompleteMarker is the file an import keeps in its output until it is
// complete.
const IncompleteMarker = "dledger-import.incomplete"

// RefuseDLedgerStore returns an error, naming the import, when the
// RocketMQ store at root ran in DLedger mode (its dledger-*/data holds
// files): its messages are not in commitlog/, so a broker opening it as
// it is would serve its config and queue offsets over none of them. It
// refuses too the output of an import that did not finish.
func RefuseDLedgerStore(root string) error {
	if _, err := os.Stat(filepath.Join(root, IncompleteMarker)); err == nil {
		return fmt.Errorf("%s is the output of a kvdump import-dledger that did not finish (%s): delete it and import again", root, IncompleteMarker)
	}
	dir, ok, err := FindDataDir(root)
	if err != nil {
		return fmt.Errorf("the RocketMQ store %s: %w", root, err)
	}
	if !ok {
		return nil
	}
	has, err := HasData(dir)
	if err != nil || !has {
		return err
	}
	return fmt.Errorf("the RocketMQ store %s ran in DLedger mode (enableDLegerCommitLog): its messages are in %s, which rocketkv's CommitLog does not read; "+
		"write them into a new store with `bin/kvdump --store %s import-dledger --out NEWDIR` and start the broker on NEWDIR", root, dir, root)
}

// Import copies the messages of a RocketMQ DLedger CommitLog into a new
// rocketkv store at o.Out: each message's RocketMQ record as it was
// stored (topic, queue id, queue offset, store time, properties), laid out
// in the plain CommitLog format with segments of DLedger's file size and
// a new physical offset, the first segment starting where DLedger's first
// file did. The store's consumequeue/ files are written to the new store
// with the new offsets, and config/ is copied as it is, for the broker's
// first open to import. The source is not changed.
//
// The import stops at a torn tail (the last entry unfinished, as a killed
// broker leaves it) and reports it; damage anywhere else (a bad magic, a
// header out of place, a record whose body CRC does not hold) is an error
// naming the file and the position, and the output is left for the
// caller to delete.
func Import(ctx context.Context, o ImportOptions) (ImportResult, error) {
	res := ImportResult{FirstIndex: -1, LastIndex: -1, Uncommitted: -1}
	log := o.Logger
	if o.Out == "" {
		return res, errors.New("import dledger: no output directory")
	}
	dataDir := o.DataDir
	if dataDir == "" {
		d, ok, err := FindDataDir(o.Root)
		if err != nil {
			return res, err
		}
		if !ok {
			return res, fmt.Errorf("import dledger: %s has no dledger-<selfId>/data directory (name it when storePathDLedgerCommitLog moved it)", o.Root)
		}
		dataDir = d
	}
	res.DataDir = dataDir
	if err := checkSource(o.Root); err != nil {
		return res, err
	}
	if err := checkOut(o.Out); err != nil {
		return res, err
	}
	r, err := OpenReader(dataDir, 0)
	if err != nil {
		return res, fmt.Errorf("import dledger: %w", err)
	}
	defer r.Close()
	if r.Files() == 0 {
		return res, fmt.Errorf("import dledger: %s holds no data file", dataDir)
	}
	res.FileSize = r.FileSize()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return res, fmt.Errorf("import dledger: %w", err)
	}
	// Until the import is complete, a broker refuses the output
	// (RefuseDLedgerStore): a store cut short would open without some of
	// its messages, queues or config.
	marker := filepath.Join(o.Out, IncompleteMarker)
	if err := os.WriteFile(marker, []byte("bin/kvdump import-dledger from "+dataDir+" has not finished\n"), 0o644); err != nil {
		return res, fmt.Errorf("import dledger: %w", err)
	}
	offsets, err := newOffsetMap(filepath.Join(o.Out, "dledger-import-offsets.tmp"))
	if err != nil {
		return res, err
	}
	defer offsets.close()

	w, err := newLogWriter(o.Out, r.FileSize(), r.StartOffset(), log)
	if err != nil {
		return res, err
	}
	res.MinOffset = r.StartOffset()
	if err := copyEntries(ctx, r, w, offsets, &res); err != nil {
		_ = w.close()
		return res, err
	}
	if err := w.close(); err != nil {
		return res, err
	}
	res.MaxOffset = w.pos
	if t, ok := r.Torn(); ok {
		res.Torn = &t
		res.Warnings = append(res.Warnings, fmt.Sprintf("the DLedger log ends in an unfinished entry at byte %d of %s (log offset %d: %s); the import stopped at the last whole entry, index %d, as DLedger's own recovery would",
			t.At, t.File, t.Offset, t.Reason, res.LastIndex))
	}
	if cp, ok, err := ReadCheckpoint(filepath.Join(filepath.Dir(dataDir), "checkpoint")); err != nil {
		res.Warnings = append(res.Warnings, err.Error())
	} else if ok && res.LastIndex >= 0 {
		res.Uncommitted = max(0, res.LastIndex-max(cp.CommittedIndex, res.FirstIndex-1))
		if res.Uncommitted > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%d entries after DLedger's committedIndex %d (its checkpoint) were imported: a majority may not have them; import the store of the group's leader, stopped after its followers caught up",
				res.Uncommitted, cp.CommittedIndex))
		}
	}
	if err := offsets.seal(); err != nil {
		return res, err
	}
	var firstOld int64 = -1
	if offsets.n > 0 {
		firstOld, _ = offsets.at(0)
	}
	oldEnd := r.StartOffset() // units naming records from here on are cut
	if offsets.n > 0 {
		oldEnd = offsets.lastOldEnd
	}
	files, cut, err := translateConsumeQueue(filepath.Join(o.Root, "consumequeue"), filepath.Join(o.Out, "consumequeue"), offsets, firstOld, oldEnd)
	if err != nil {
		return res, err
	}
	res.QueueFiles, res.QueueUnitsCut = files, cut
	if cut > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d consumequeue units named records past the imported end and were dropped", cut))
	}
	n, err := copyTree(filepath.Join(o.Root, "config"), filepath.Join(o.Out, "config"))
	if err != nil {
		return res, err
	}
	res.ConfigFiles = n
	if n == 0 {
		res.Warnings = append(res.Warnings, "the store has no config/ files: topics, groups and consumer offsets are not carried over")
	}
	if _, err := os.Stat(filepath.Join(o.Root, "abort")); err == nil {
		res.Warnings = append(res.Warnings, "the RocketMQ broker did not stop cleanly (abort file): its consumequeue/ may lack the newest entries, which the first open rebuilds from the CommitLog")
	}
	if res.UnresolvedCommits > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d committed transaction records name a half message that is no longer in the DLedger log: their prepared offset is set to 0", res.UnresolvedCommits))
	}
	if err := offsets.remove(); err != nil {
		return res, err
	}
	if err := syncDir(o.Out); err != nil {
		return res, err
	}
	if err := os.Remove(marker); err != nil {
		return res, fmt.Errorf("import dledger: %w", err)
	}
	for _, wmsg := range res.Warnings {
		log.Warn().Msg(wmsg)
	}
	log.Info().Int64("messages", res.Messages).Int64("minOffset", res.MinOffset).Int64("maxOffset", res.MaxOffset).
		Int("queueFiles", res.QueueFiles).Str("out", o.Out).Msg("dledger store imported")
	return res, nil
}

// checkSource refuses what the import cannot carry: a CommitLog of
// RocketMQ's own format beside DLedger's (a store that switched to
// DLedger keeps its older messages there) and a RocksDB ConsumeQueue.
func checkSource(root string) error {
	seg := commitlog.SegmentDirOf(root)
	ents, err := os.ReadDir(seg)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("import dledger: %w", err)
	}
	for _, de := range ents {
		if _, ok := parseFileName(de.Name()); ok {
			return fmt.Errorf("import dledger: %s holds CommitLog files of RocketMQ's own format from before the switch to DLedger; the import reads DLedger's files only: let retention delete them (or move them aside when their messages are consumed) and import again", seg)
		}
	}
	if rocksdbcq.Present(filepath.Join(root, "consumequeue")) {
		return fmt.Errorf("import dledger: %s is a RocksDB ConsumeQueue (storeType=defaultRocksDB), whose offsets the import cannot rewrite; move it aside (the queues are rebuilt from the messages; queues whose messages retention deleted restart at 0) and import again", filepath.Join(root, "consumequeue"))
	}
	return nil
}

// checkOut refuses an output directory that holds anything.
func checkOut(out string) error {
	ents, err := os.ReadDir(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("import dledger: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("import dledger: the output directory %s is not empty", out)
	}
	return nil
}

// copyEntries copies every message of r into w, recording each one's old
// and new offset.
func copyEntries(ctx context.Context, r *Reader, w *logWriter, offsets *offsetMap, res *ImportResult) error {
	halves := map[int64]int64{} // old offset -> new, of RMQ_SYS_TRANS_HALF_TOPIC records
	var rec []byte
	for {
		if res.Entries%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("import dledger: %w", err)
		}
		if len(e.Body) == 0 || e.Magic != MagicNormal {
			// DLedger master's NOOP and config entries hold no message.
			res.Entries++
			res.Noops++
			res.noteIndex(e.Index)
			continue
		}
		n, err := commitlog.Check(e.Body, true)
		if err == nil && int(n) != len(e.Body) {
			err = fmt.Errorf("%w: the entry body holds %d bytes, its record %d", commitlog.ErrCorrupt, len(e.Body), n)
		}
		if err == nil && r.AtEnd() && e.Body[len(e.Body)-1] == 0 {
			// The log's last record ends in zeros: its properties (or
			// topic), which never end in a zero byte, were not all
			// written when the broker died. Its lengths and body CRC
			// cannot tell.
			err = fmt.Errorf("%w: the record's last bytes are zeros", commitlog.ErrTruncated)
		}
		if err != nil {
			if r.AtEnd() {
				r.MarkTorn(e, "its message record does not hold: "+err.Error())
				return nil
			}
			return fmt.Errorf("import dledger: %w", r.PosErrorOf(e, fmt.Errorf("the RocketMQ message record in entry %d: %w", e.Index, err)))
		}
		res.Entries++
		res.noteIndex(e.Index)
		oldOff := e.Pos + HeaderSize
		rec = append(rec[:0], e.Body...)
		newOff, err := w.place(len(rec))
		if err != nil {
			return err
		}
		commitlog.PatchPhyOffset(rec, newOff)
		m, err := commitlog.Decode(rec)
		if err != nil {
			return fmt.Errorf("import dledger: %w", r.PosErrorOf(e, err))
		}
		if m.Topic == meta.TransHalfTopic {
			halves[oldOff] = newOff
		}
		if commitlog.TransactionType(m.SysFlag) == commitlog.TransactionCommit || commitlog.TransactionType(m.SysFlag) == commitlog.TransactionRollback {
			if m.PreparedTransactionOffset != 0 {
				to, ok := halves[m.PreparedTransactionOffset]
				if !ok {
					res.UnresolvedCommits++
				}
				if err := commitlog.PatchPreparedTransactionOffset(rec, to); err != nil {
					return fmt.Errorf("import dledger: %w", r.PosErrorOf(e, err))
				}
			}
		}
		if err := w.write(newOff, rec); err != nil {
			return err
		}
		if err := offsets.add(oldOff, newOff, oldOff+int64(len(rec))); err != nil {
			return err
		}
		res.Messages++
	}
}

// noteIndex records an entry index read.
func (res *ImportResult) noteIndex(i int64) {
	if res.FirstIndex < 0 {
		res.FirstIndex = i
	}
	res.LastIndex = i
}
