package dledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/dledger/dledgertest"
)

// fixtureSegment is the CommitLog file size of the 4.9.8 fixture, which
// the DLedger stores made from it use for their data files, as a DLedger
// broker with that mappedFileSizeCommitLog would.
const fixtureSegment = 16384

// dledgerFixture makes a DLedger store of the 4.9.8 fixture's messages
// whose log starts at start, and returns its root and records.
func dledgerFixture(t *testing.T, start int64) (string, []dledgertest.Record) {
	t.Helper()
	src := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	root := filepath.Join(t.TempDir(), "dledger-store")
	recs := dledgertest.FromRocketMQ(t, src, root, "n0", dledgertest.NewLog(fixtureSegment, start, 0))
	if len(recs) < 20 {
		t.Fatalf("the fixture gave %d records", len(recs))
	}
	return root, recs
}

func importTo(t *testing.T, root string) (string, ImportResult, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rocketkv")
	res, err := Import(context.Background(), ImportOptions{Root: root, Out: out, Logger: zerolog.Nop()})
	return out, res, err
}

// readLog reads every record of a rocketkv store's CommitLog.
func readLog(t *testing.T, root string) (min int64, recs []commitlog.Entry) {
	t.Helper()
	l, err := commitlog.OpenReadOnly(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	it := l.NewIterator(l.MinOffset())
	for {
		e, err := it.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			return l.MinOffset(), recs
		}
		if err != nil {
			t.Fatal(err)
		}
		e.Data = bytes.Clone(e.Data)
		recs = append(recs, e)
	}
}

func TestImportKeepsEveryMessageAndItsQueueOffset(t *testing.T) {
	for _, start := range []int64{0, 2 * fixtureSegment} {
		t.Run("log from "+strconv.FormatInt(start, 10), func(t *testing.T) {
			root, want := dledgerFixture(t, start)
			out, res, err := importTo(t, root)
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != int64(len(want)) || res.Torn != nil || res.Uncommitted != 0 || res.UnresolvedCommits != 0 || len(res.Warnings) != 0 {
				t.Fatalf("result %+v, want %d messages and no warning", res, len(want))
			}
			if res.FileSize != fixtureSegment || res.MinOffset != start {
				t.Fatalf("file size %d, min offset %d; want %d, %d", res.FileSize, res.MinOffset, fixtureSegment, start)
			}
			min, got := readLog(t, out)
			if min != start || len(got) != len(want) {
				t.Fatalf("new log from %d with %d records, want from %d with %d", min, len(got), start, len(want))
			}
			newOf := map[int64]int64{} // DLedger offset -> new
			for i, e := range got {
				m, err := commitlog.DecodeWith(e.Data, commitlog.DecodeOptions{VerifyCRC: true})
				if err != nil {
					t.Fatal(err)
				}
				w := want[i]
				if m.Topic != w.Topic || m.QueueID != w.QueueID || m.QueueOffset != w.QueueOffset || !bytes.Equal(m.Body, w.Body) {
					t.Fatalf("record %d: %s/%d@%d %q, want %s/%d@%d %q", i, m.Topic, m.QueueID, m.QueueOffset, m.Body, w.Topic, w.QueueID, w.QueueOffset, w.Body)
				}
				if m.PhyOffset != e.Offset {
					t.Fatalf("record %d at %d says it is at %d", i, e.Offset, m.PhyOffset)
				}
				newOf[w.DLedger] = e.Offset
			}
			// The committed copy of tx-key-0 names its half at its new place.
			commits := 0
			for _, e := range got {
				m, _ := commitlog.Decode(e.Data)
				if commitlog.TransactionType(m.SysFlag) != commitlog.TransactionCommit || m.PreparedTransactionOffset == 0 {
					continue
				}
				commits++
				var half commitlog.Message
				for _, h := range got {
					if h.Offset == m.PreparedTransactionOffset {
						half, _ = commitlog.Decode(h.Data)
					}
				}
				if half.Topic != meta.TransHalfTopic || half.Properties == "" {
					t.Fatalf("committed record at %d names %d, no half there", e.Offset, m.PreparedTransactionOffset)
				}
				uniq, _ := commitlog.LookupProperty(m.Properties, "UNIQ_KEY")
				huniq, _ := commitlog.LookupProperty(half.Properties, "UNIQ_KEY")
				if uniq != huniq {
					t.Fatalf("committed %s names the half of %s", uniq, huniq)
				}
			}
			if commits == 0 {
				t.Fatal("the fixture's committed transaction record was not found")
			}
			checkConsumeQueue(t, root, out, newOf, got)
			for _, name := range []string{"topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json"} {
				a, _ := os.ReadFile(filepath.Join(root, "config", name))
				b, err := os.ReadFile(filepath.Join(out, "config", name))
				if err != nil || !bytes.Equal(a, b) {
					t.Fatalf("config/%s not copied as it is: %v", name, err)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "dledger-import-offsets.tmp")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the offset map is left behind: %v", err)
			}
			if err := RefuseDLedgerStore(out); err != nil {
				t.Fatalf("the output of a complete import is refused: %v", err)
			}
			if err := RefuseDLedgerStore(root); err == nil {
				t.Fatal("the DLedger store itself is not refused")
			}
		})
	}
}

// checkConsumeQueue checks that every unit of the new store's
// consumequeue/ is its DLedger store's unit with the new offset, and
// names a record of its queue at its queue offset.
func checkConsumeQueue(t *testing.T, root, out string, newOf map[int64]int64, got []commitlog.Entry) {
	t.Helper()
	at := map[int64][]byte{}
	for _, e := range got {
		at[e.Offset] = e.Data
	}
	units := 0
	err := filepath.WalkDir(filepath.Join(root, "consumequeue"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root, "consumequeue"), p)
		parts := strings.Split(rel, string(filepath.Separator))
		qid, _ := strconv.Atoi(parts[1])
		base, _ := strconv.ParseInt(parts[2], 10, 64)
		old, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(out, "consumequeue", rel))
		if err != nil || len(b) != len(old) {
			t.Fatalf("consumequeue/%s: %d bytes, %v; want %d", rel, len(b), err, len(old))
		}
		for i := 0; i+20 <= len(b); i += 20 {
			ophy := int64(binary.BigEndian.Uint64(old[i:]))
			size := int32(binary.BigEndian.Uint32(old[i+8:]))
			if size <= 0 || size == math.MaxInt32 {
				if !bytes.Equal(b[i:i+20], old[i:i+20]) {
					t.Fatalf("consumequeue/%s unit %d: a blank or zero unit changed", rel, i/20)
				}
				continue
			}
			phy := int64(binary.BigEndian.Uint64(b[i:]))
			if phy != newOf[ophy] || !bytes.Equal(b[i+8:i+20], old[i+8:i+20]) {
				t.Fatalf("consumequeue/%s unit %d: offset %d, want %d (from %d)", rel, i/20, phy, newOf[ophy], ophy)
			}
			m, err := commitlog.Decode(at[phy])
			if err != nil || m.QueueID != int32(qid) || m.QueueOffset != base/20+int64(i/20) || m.Topic != parts[0] {
				t.Fatalf("consumequeue/%s unit %d names %s/%d@%d: %v", rel, i/20, m.Topic, m.QueueID, m.QueueOffset, err)
			}
			units++
		}
		return nil
	})
	if err != nil || units == 0 {
		t.Fatalf("consumequeue: %d units, %v", units, err)
	}
}

// entryAt returns the data file and position of the entry of the record
// at DLedger offset off.
func entryAt(root string, off int64) (string, int64) {
	pos := off - HeaderSize
	return filepath.Join(root, "dledger-n0", "data", fmt.Sprintf("%020d", pos-pos%fixtureSegment)), pos % fixtureSegment
}

func TestImportStopsAtATornTail(t *testing.T) {
	root, recs := dledgerFixture(t, 0)
	last := recs[len(recs)-1]
	path, at := entryAt(root, last.DLedger)
	// The broker died while the last entry's body was being written: its
	// header is there, the record's last bytes are zeros.
	patch(t, path, at+HeaderSize+int64(last.Size)-6, make([]byte, 6))
	out, res, err := importTo(t, root)
	if err != nil {
		t.Fatalf("a torn tail is no error: %v", err)
	}
	if res.Messages != int64(len(recs)-1) || res.Torn == nil || res.Torn.File != path || res.Torn.At != at {
		t.Fatalf("result %+v torn %+v, want %d messages and the tail torn at %s:%d", res, res.Torn, len(recs)-1, path, at)
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], path) || !strings.Contains(res.Warnings[0], "stopped at the last whole entry") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	if _, got := readLog(t, out); len(got) != len(recs)-1 {
		t.Fatalf("new log holds %d records, want %d", len(got), len(recs)-1)
	}
	// The unit of the torn record is cut from its queue.
	if res.QueueUnitsCut != 1 {
		t.Fatalf("%d consumequeue units cut, want the torn record's", res.QueueUnitsCut)
	}
}

func TestImportRefusesADamagedRecord(t *testing.T) {
	root, recs := dledgerFixture(t, 0)
	r := recs[len(recs)/2]
	path, at := entryAt(root, r.DLedger)
	// One bit of a message body in the middle of the log flips: the
	// record's body CRC no longer holds.
	b, _ := os.ReadFile(path)
	bodyAt := at + HeaderSize + int64(bytes.Index(b[at+HeaderSize:at+HeaderSize+int64(r.Size)], r.Body))
	patch(t, path, bodyAt, []byte{b[bodyAt] ^ 1})
	out, _, err := importTo(t, root)
	var pe *PosError
	if !errors.Is(err, commitlog.ErrCRC) || !errors.As(err, &pe) || pe.File != path || pe.At != at {
		t.Fatalf("err %v, want a CRC error naming %s at %d", err, path, at)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "at byte "+strconv.FormatInt(at, 10)) {
		t.Fatalf("err %q does not name the file and the byte", err)
	}
	// What the import left is refused by a broker.
	if err := RefuseDLedgerStore(out); err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("the output of a failed import: %v, want it refused", err)
	}
}

func TestImportRefusesABadMagic(t *testing.T) {
	root, recs := dledgerFixture(t, 0)
	path, at := entryAt(root, recs[5].DLedger)
	patch(t, path, at, []byte{0, 0, 0, 9})
	_, _, err := importTo(t, root)
	var pe *PosError
	if !errors.Is(err, ErrBadMagic) || !errors.As(err, &pe) || pe.File != path || pe.At != at {
		t.Fatalf("err %v, want a bad magic at %s:%d", err, path, at)
	}
}

func TestImportRefusals(t *testing.T) {
	root, _ := dledgerFixture(t, 0)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(context.Background(), ImportOptions{Root: root, Out: out}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("import into a non-empty directory: %v", err)
	}
	// A store that ran without DLedger first keeps those messages in
	// commitlog/: the import does not mix them in.
	if err := os.MkdirAll(filepath.Join(root, "commitlog"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "commitlog", "00000000000000000000"), make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := importTo(t, root); err == nil || !strings.Contains(err.Error(), "before the switch to DLedger") {
		t.Fatalf("import of a mixed store: %v", err)
	}
	if _, _, err := importTo(t, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no dledger-<selfId>/data") {
		t.Fatalf("import of a store without DLedger: %v", err)
	}
}

func TestImportReportsEntriesPastTheCommittedIndex(t *testing.T) {
	src := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	root := filepath.Join(t.TempDir(), "dledger-store")
	l := dledgertest.NewLog(fixtureSegment, 0, 0)
	recs := dledgertest.FromRocketMQ(t, src, root, "n0", l)
	l.SetCommitted(int64(len(recs)) - 4)
	l.Write(t, root, "n1") // the same log with the checkpoint lagging
	res, err := Import(context.Background(), ImportOptions{Root: root, DataDir: filepath.Join(root, "dledger-n1", "data"),
		Out: filepath.Join(t.TempDir(), "out"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Uncommitted != 3 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "committedIndex") {
		t.Fatalf("uncommitted %d, warnings %q", res.Uncommitted, res.Warnings)
	}
	if _, _, err := importTo(t, root); err == nil || !strings.Contains(err.Error(), "several DLedger stores") {
		t.Fatalf("two dledger directories: %v", err)
	}
}

// A consumequeue unit naming an offset inside the log where no message
// begins is an error naming the file, with the way out.
func TestImportRefusesAConsumeQueueUnitOffTheMessages(t *testing.T) {
	root, recs := dledgerFixture(t, 0)
	cq := filepath.Join(root, "consumequeue", recs[0].Topic, strconv.Itoa(int(recs[0].QueueID)))
	ents, err := os.ReadDir(cq)
	if err != nil || len(ents) == 0 {
		t.Fatalf("queue dir of the first record: %v", err)
	}
	path := filepath.Join(cq, ents[0].Name())
	b, _ := os.ReadFile(path)
	at := -1
	for i := 0; i+20 <= len(b); i += 20 {
		if int64(binary.BigEndian.Uint64(b[i:])) == recs[0].DLedger && binary.BigEndian.Uint32(b[i+8:]) > 0 {
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("no unit of the first record in %s", path)
	}
	patch(t, path, int64(at), binary.BigEndian.AppendUint64(nil, uint64(recs[0].DLedger+1)))
	_, _, err = importTo(t, root)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move the store's consumequeue/ aside") {
		t.Fatalf("err %v, want one naming %s", err, path)
	}
}
