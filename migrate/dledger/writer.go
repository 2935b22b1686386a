package dledger

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/edsrzf/mmap-go"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// writeChunk is how many record bytes the writer gathers before handing
// them to the log.
const writeChunk = 4 << 20

// logWriter lays records out in a new rocketkv CommitLog as RocketMQ's
// CommitLog does: packed, a segment's end filled with a blank when the
// next record and 8 bytes do not fit. It writes through the log's replica
// path (commitlog.Log.AppendReplica), which keeps every byte of a record
// and checks that its PHYSICALOFFSET field is its place.
type logWriter struct {
	l        *commitlog.Log
	seg      int64
	pos      int64 // where the next record goes
	bufStart int64 // where buf goes
	buf      []byte
}

// newLogWriter opens a new log at out whose first segment starts at start.
func newLogWriter(out string, seg, start int64, log zerolog.Logger) (*logWriter, error) {
	cfg := commitlog.DefaultConfig(out)
	cfg.SegmentSize = seg
	cfg.Replica = true
	// Nothing the import writes may go to retention, however full the
	// disk: appends fail instead.
	cfg.KeepUnexpiredWhenFull = true
	cfg.Logger = log
	l, err := commitlog.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("import dledger: open the new commitlog: %w", err)
	}
	return &logWriter{l: l, seg: seg, pos: start, bufStart: start}, nil
}

// place returns where a record of n bytes goes, filling the rest of the
// segment with a blank first when it does not fit with 8 bytes to spare.
func (w *logWriter) place(n int) (int64, error) {
	if int64(n)+8 > w.seg {
		return 0, fmt.Errorf("import dledger: a %d-byte record does not fit in a %d-byte segment", n, w.seg)
	}
	in := w.pos % w.seg
	if in+int64(n)+8 <= w.seg {
		return w.pos, nil
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	fill := make([]byte, w.seg-in)
	binary.BigEndian.PutUint32(fill, uint32(len(fill)))
	binary.BigEndian.PutUint32(fill[4:], commitlog.BlankMagic)
	if err := w.l.AppendReplica(w.pos, fill); err != nil {
		return 0, fmt.Errorf("import dledger: write the blank at %d: %w", w.pos, err)
	}
	w.pos += int64(len(fill))
	w.bufStart = w.pos
	return w.pos, nil
}

// write appends rec, which place put at off.
func (w *logWriter) write(off int64, rec []byte) error {
	if off != w.pos {
		return fmt.Errorf("import dledger: a record for %d written at %d", off, w.pos)
	}
	w.buf = append(w.buf, rec...)
	w.pos += int64(len(rec))
	if len(w.buf) >= writeChunk {
		return w.flush()
	}
	return nil
}

// flush hands the gathered records to the log.
func (w *logWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.l.AppendReplica(w.bufStart, w.buf); err != nil {
		return fmt.Errorf("import dledger: write records at %d: %w", w.bufStart, err)
	}
	w.bufStart = w.pos
	w.buf = w.buf[:0]
	return nil
}

// close writes what is gathered and closes the log (flushed to disk).
func (w *logWriter) close() error {
	return errors.Join(w.flush(), w.l.Close())
}

// offsetMap records each imported record's old (DLedger) and new offset,
// in a file of 16-byte pairs (the map of a large store does not fit in
// memory), ascending in both; once sealed it is mapped and searched.
type offsetMap struct {
	path       string
	f          *os.File
	w          *bufio.Writer
	m          mmap.MMap
	n          int
	lastOldEnd int64
}

func newOffsetMap(path string) (*offsetMap, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("import dledger: %w", err)
	}
	return &offsetMap{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// add records a record at old that went to new and ended at oldEnd.
func (o *offsetMap) add(old, new, oldEnd int64) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], uint64(old))
	binary.BigEndian.PutUint64(b[8:], uint64(new))
	if _, err := o.w.Write(b[:]); err != nil {
		return fmt.Errorf("import dledger: write %s: %w", o.path, err)
	}
	o.n++
	o.lastOldEnd = oldEnd
	return nil
}

// seal ends the writing and maps the file for finds.
func (o *offsetMap) seal() error {
	if err := o.w.Flush(); err != nil {
		return fmt.Errorf("import dledger: write %s: %w", o.path, err)
	}
	if o.n == 0 {
		return nil
	}
	m, err := mmap.MapRegion(o.f, o.n*16, mmap.RDONLY, 0, 0)
	if err != nil {
		return fmt.Errorf("import dledger: map %s: %w", o.path, err)
	}
	o.m = m
	return nil
}

// at returns the i-th pair (sealed).
func (o *offsetMap) at(i int) (old, new int64) {
	b := o.m[i*16:]
	return int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))
}

// find returns the new offset of the record that was at old (sealed).
func (o *offsetMap) find(old int64) (int64, bool) {
	i := sort.Search(o.n, func(i int) bool { v, _ := o.at(i); return v >= old })
	if i == o.n {
		return 0, false
	}
	v, n := o.at(i)
	return n, v == old
}

func (o *offsetMap) close() {
	if o.m != nil {
		_ = o.m.Unmap()
		o.m = nil
	}
	if o.f != nil {
		_ = o.f.Close()
		o.f = nil
	}
}

// remove closes and deletes the file.
func (o *offsetMap) remove() error {
	o.close()
	if err := os.Remove(o.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("import dledger: %w", err)
	}
	return nil
}

// copyTree copies the regular files under src to dst, keeping the tree;
// a missing src copies nothing.
func copyTree(src, dst string) (int, error) {
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		n++
		return copyFile(p, to)
	})
	if err != nil {
		return n, fmt.Errorf("import dledger: copy %s: %w", src, err)
	}
	return n, nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err = io.Copy(out, in); err != nil {
		return err
	}
	return out.Sync()
}

// writeFileSync writes a new file and syncs it.
func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("import dledger: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("import dledger: write %s: %w", path, err)
	}
	return nil
}

// syncDir syncs the directories of the tree at root, so that the files
// the import created are there after a crash.
func syncDir(root string) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		return errors.Join(err, f.Close())
	})
	if err != nil {
		return fmt.Errorf("import dledger: sync %s: %w", root, err)
	}
	return nil
}
