// Package dledgertest writes DLedger stores for tests: the data files,
// index files and checkpoint an Apache RocketMQ broker in DLedger mode
// leaves, laid out from DLedger's source (see package dledger's doc), and
// such a store made from a RocketMQ store's own CommitLog records, so that
// the message bodies are RocketMQ's. No RocketMQ-written DLedger files
// exist among the fixtures; this encoder is checked against hand-written
// byte vectors in package dledger's tests. Tests only.
package dledgertest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
)

// DLedger's entry header size (BODY_OFFSET) and index unit.
const (
	headerSize    = 48
	indexUnitSize = 32
)

// EncodeEntry encodes one entry as DLedgerEntryCoder.encode does, with
// the size computed from the body.
func EncodeEntry(magic int32, index, term, pos int64, body []byte) []byte {
	be := binary.BigEndian
	b := make([]byte, 0, headerSize+len(body))
	b = be.AppendUint32(b, uint32(magic))
	b = be.AppendUint32(b, uint32(headerSize+len(body)))
	b = be.AppendUint64(b, uint64(index))
	b = be.AppendUint64(b, uint64(term))
	b = be.AppendUint64(b, uint64(pos))
	b = be.AppendUint32(b, 0) // channel
	b = be.AppendUint32(b, 0) // chain crc: DLedger never computes it
	b = be.AppendUint32(b, 0) // body crc: likewise
	b = be.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// Log is a DLedger log being written in memory: data files of FileSize
// bytes from Start on, entries numbered from the first index given.
type Log struct {
	FileSize int64
	// IndexFileSize is the size of an index file (DLedger's default is
	// 5 Mi entries; tests use less).
	IndexFileSize int64
	// Term is written into each entry appended.
	Term int64

	start     int64
	files     [][]byte
	pos       int64 // next entry's offset
	first     int64 // first entry index
	next      int64 // next entry index
	index     []byte
	committed int64
}

// NewLog starts a log whose first data file is at start (a multiple of
// fileSize) and whose first entry has index firstIndex.
func NewLog(fileSize, start, firstIndex int64) *Log {
	return &Log{FileSize: fileSize, IndexFileSize: indexUnitSize * 1024, Term: 1, start: start, pos: start,
		first: firstIndex, next: firstIndex, committed: -1}
}

// Pos is where the next entry goes (before a blank moves it on).
func (l *Log) Pos() int64 { return l.pos }

// NextIndex is the next entry's index.
func (l *Log) NextIndex() int64 { return l.next }

// file returns the data file holding offset, creating the files up to it.
func (l *Log) file(off int64) []byte {
	i := int((off - l.start) / l.FileSize)
	for len(l.files) <= i {
		l.files = append(l.files, make([]byte, l.FileSize))
	}
	return l.files[i]
}

// Place returns where an entry of n bytes goes, filling the rest of the
// current file with a blank first (MmapFileList.preAppend: an entry and 8
// bytes must fit).
func (l *Log) Place(n int) int64 {
	in := l.pos % l.FileSize
	f := l.file(l.pos)
	if int64(n)+8 > l.FileSize-in {
		binary.BigEndian.PutUint32(f[in:], 0xFFFFFFFF)
		binary.BigEndian.PutUint32(f[in+4:], uint32(l.FileSize-in))
		l.pos += l.FileSize - in
		l.file(l.pos)
	}
	return l.pos
}

// Append appends an entry with body (a message record, or nothing for a
// NOOP) and returns its offset. The body is copied; a record's
// PHYSICALOFFSET is not touched (see AppendRecord).
func (l *Log) Append(magic int32, body []byte) int64 {
	pos := l.Place(headerSize + len(body))
	e := EncodeEntry(magic, l.next, l.Term, pos, body)
	copy(l.file(pos)[pos%l.FileSize:], e)
	l.index = binary.BigEndian.AppendUint32(l.index, uint32(magic))
	l.index = binary.BigEndian.AppendUint64(l.index, uint64(pos))
	l.index = binary.BigEndian.AppendUint32(l.index, uint32(len(e)))
	l.index = binary.BigEndian.AppendUint64(l.index, uint64(l.next))
	l.index = binary.BigEndian.AppendUint64(l.index, uint64(l.Term))
	l.next++
	l.pos = pos + int64(len(e))
	return pos
}

// AppendRecord appends a RocketMQ record as RocketMQ's DLedgerCommitLog
// does: its PHYSICALOFFSET set to the entry's offset + 48 (the append
// hook), which it returns.
func (l *Log) AppendRecord(rec []byte) int64 {
	pos := l.Place(headerSize + len(rec))
	body := append([]byte(nil), rec...)
	commitlog.PatchPhyOffset(body, pos+headerSize)
	if got := l.Append(1, body); got != pos {
		panic("dledgertest: the entry moved")
	}
	return pos + headerSize
}

// SetCommitted sets the committedIndex the checkpoint says (default: the
// last entry's).
func (l *Log) SetCommitted(i int64) { l.committed = i }

// Files returns the data files by name.
func (l *Log) Files() map[string][]byte {
	out := map[string][]byte{}
	for i, f := range l.files {
		out[fmt.Sprintf("%020d", l.start+int64(i)*l.FileSize)] = f
	}
	return out
}

// Write writes the log as dledger-<selfId> under root: data/, index/ and
// checkpoint. It returns the data directory.
func (l *Log) Write(t testing.TB, root, selfID string) string {
	t.Helper()
	dir := filepath.Join(root, "dledger-"+selfID)
	data := filepath.Join(dir, "data")
	mkdir(t, data)
	for name, b := range l.Files() {
		writeFile(t, filepath.Join(data, name), b)
	}
	idx := filepath.Join(dir, "index")
	mkdir(t, idx)
	if len(l.index) > 0 {
		from := l.first * indexUnitSize
		fileStart := from - from%l.IndexFileSize
		buf := make([]byte, from-fileStart, from-fileStart+int64(len(l.index)))
		buf = append(buf, l.index...)
		for off := int64(0); off < int64(len(buf)); off += l.IndexFileSize {
			f := make([]byte, l.IndexFileSize)
			copy(f, buf[off:])
			writeFile(t, filepath.Join(idx, fmt.Sprintf("%020d", fileStart+off)), f)
		}
	}
	committed := l.committed
	if committed < 0 {
		committed = l.next - 1
	}
	writeFile(t, filepath.Join(dir, "checkpoint"), fmt.Appendf(nil, "#%s\nendIndex=%d\ncommittedIndex=%d\n", "written by dledgertest", l.next-1, committed))
	return data
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Record is one message of a store made by FromRocketMQ.
type Record struct {
	// RocketMQ is its offset in the plain store it came from; DLedger
	// its physical offset in the DLedger store (entry pos + 48).
	RocketMQ, DLedger int64
	Size              int32
	Topic             string
	QueueID           int32
	QueueOffset       int64
	SysFlag           int32
	Body              []byte
}

// FromRocketMQ makes dst a RocketMQ DLedger store holding the messages of
// the plain RocketMQ store src (its commitlog/, in order): dst gets
// dledger-<selfId>/ with each record wrapped in an entry of log (whose
// file size and start it takes), a copy of src's config/, and src's
// consumequeue/ with every unit's offset moved to the DLedger one, as a
// DLedger broker would have written them. Committed transaction records
// name their half by its DLedger offset, as they would there.
func FromRocketMQ(t testing.TB, src, dst, selfID string, log *Log) []Record {
	t.Helper()
	rl, err := commitlog.OpenReadOnly(src)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	moved := map[int64]int64{}
	var recs []Record
	it := rl.NewIterator(rl.MinOffset())
	for {
		e, err := it.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := append([]byte(nil), e.Data...)
		m, err := commitlog.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if to, ok := moved[m.PreparedTransactionOffset]; ok && m.PreparedTransactionOffset != 0 {
			if err := commitlog.PatchPreparedTransactionOffset(rec, to); err != nil {
				t.Fatal(err)
			}
		}
		off := log.AppendRecord(rec)
		moved[e.Offset] = off
		recs = append(recs, Record{RocketMQ: e.Offset, DLedger: off, Size: e.Size, Topic: m.Topic, QueueID: m.QueueID,
			QueueOffset: m.QueueOffset, SysFlag: m.SysFlag, Body: m.Body})
	}
	log.Write(t, dst, selfID)
	copyTree(t, filepath.Join(src, "config"), filepath.Join(dst, "config"), nil)
	copyTree(t, filepath.Join(src, "consumequeue"), filepath.Join(dst, "consumequeue"), func(b []byte) {
		for i := 0; i+20 <= len(b); i += 20 {
			phy := int64(binary.BigEndian.Uint64(b[i:]))
			size := int32(binary.BigEndian.Uint32(b[i+8:]))
			if to, ok := moved[phy]; ok && size > 0 && size != math.MaxInt32 { // not a blank unit
				binary.BigEndian.PutUint64(b[i:], uint64(to))
			}
		}
	})
	return recs
}

// copyTree copies src's files to dst, passing each one's bytes through
// edit when it is set.
func copyTree(t testing.TB, src, dst string, edit func([]byte)) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			edit(b)
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
