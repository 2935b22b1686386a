package rocksread

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DB is a RocksDB directory opened read-only. It never writes, locks or
// deletes anything in the directory. The WAL is replayed into memory at
// Open. A DB is not safe for concurrent use.
type DB struct {
	dir      string
	vs       *versionSet
	dec      decompressor
	mem      map[uint32][]entry     // unflushed WAL entries per column family, sorted
	memTombs map[uint32][]tombstone // unflushed range deletions per column family
	walFiles []string               // the WAL files replayed, oldest first
}

// ColumnFamily describes one column family of an open DB.
type ColumnFamily struct {
	// ID is the column family's id in the MANIFEST and the WAL.
	ID uint32
	// Name is the name RocksDB was given ("default", "offset", ...).
	Name string
	// Files lists its live SST files as "level:number.sst", by level.
	Files []string
	// WALEntries counts the unflushed writes replayed from the WAL.
	WALEntries int
}

// Open reads dir's CURRENT, MANIFEST and WAL files. It fails with an error
// wrapping ErrUnsupported when the database uses a feature the reader does
// not implement, and ErrCorrupt when the files contradict themselves.
func Open(dir string) (*DB, error) {
	vs, err := loadVersionSet(dir)
	if err != nil {
		return nil, fmt.Errorf("open RocksDB %s: %w", dir, err)
	}
	db := &DB{dir: dir, vs: vs, mem: map[uint32][]entry{}, memTombs: map[uint32][]tombstone{}}
	if err := db.replayWAL(); err != nil {
		return nil, fmt.Errorf("open RocksDB %s: %w", dir, err)
	}
	return db, nil
}

// Close releases the decoders. It does not touch the directory.
func (db *DB) Close() error {
	db.dec.close()
	return nil
}

// ColumnFamilies lists the live column families, by id.
func (db *DB) ColumnFamilies() []ColumnFamily {
	out := make([]ColumnFamily, 0, len(db.vs.cfs))
	for _, cf := range db.vs.cfs {
		c := ColumnFamily{ID: cf.id, Name: cf.name, WALEntries: len(db.mem[cf.id])}
		for _, f := range cf.sortedFiles() {
			c.Files = append(c.Files, fmt.Sprintf("%d:%06d.sst", f.level, f.number))
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WALFiles names the WAL files Open replayed, oldest first.
func (db *DB) WALFiles() []string { return append([]string(nil), db.walFiles...) }

func (db *DB) columnFamily(name string) (*columnFamily, error) {
	for _, cf := range db.vs.cfs {
		if cf.name == name {
			return cf, nil
		}
	}
	return nil, fmt.Errorf("%w: %q in %s", ErrNoColumnFamily, name, db.dir)
}

// replayWAL reads every WAL file at or above the smallest column family
// log number. A batch counts for a column family only when its file is at
// or above that family's own log number: older files were flushed into
// its SSTs. A log cut inside its last record ends there, as a RocksDB
// recovery would; a corrupt record elsewhere fails Open.
func (db *DB) replayWAL() error {
	if len(db.vs.cfs) == 0 {
		return nil
	}
	minLog := ^uint64(0)
	for _, cf := range db.vs.cfs {
		minLog = min(minLog, cf.logNumber)
	}
	ents, err := os.ReadDir(db.dir)
	if err != nil {
		return fmt.Errorf("list directory: %w", err)
	}
	type walFile struct {
		name string
		num  uint64
	}
	var wals []walFile
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		num, err := strconv.ParseUint(stem, 10, 64)
		if err != nil || num < minLog {
			continue
		}
		wals = append(wals, walFile{e.Name(), num})
	}
	sort.Slice(wals, func(i, j int) bool { return wals[i].num < wals[j].num })
	for _, w := range wals {
		if err := db.replayLog(w.name, w.num); err != nil {
			return err
		}
		db.walFiles = append(db.walFiles, w.name)
	}
	for id := range db.mem {
		m := db.mem[id]
		sort.SliceStable(m, func(i, j int) bool { return entryLess(&m[i], &m[j]) })
	}
	return nil
}

func (db *DB) replayLog(name string, num uint64) error {
	f, err := os.Open(filepath.Join(db.dir, name))
	if err != nil {
		return fmt.Errorf("open WAL: %w", err)
	}
	defer f.Close()
	lr := newLogReader(f, name, num)
	for i := 0; ; i++ {
		rec, err := lr.next()
		if errors.Is(err, io.EOF) || errors.Is(err, errTornTail) {
			return nil
		}
		if err != nil {
			return err
		}
		ops, err := decodeWriteBatch(rec)
		if err != nil {
			return fmt.Errorf("%s record %d: %w", name, i, err)
		}
		for _, op := range ops {
			cf, ok := db.vs.cfs[op.cf]
			if !ok {
				// Written for a column family dropped since.
				continue
			}
			if num < cf.logNumber {
				continue
			}
			switch op.kind {
			case kindRangeDeletion:
				db.memTombs[op.cf] = append(db.memTombs[op.cf], tombstone{
					start: bytes.Clone(op.key), end: bytes.Clone(op.value), seq: op.seq,
				})
			default:
				db.mem[op.cf] = append(db.mem[op.cf], entry{
					key: bytes.Clone(op.key), seq: op.seq, kind: op.kind, value: bytes.Clone(op.value),
				})
			}
		}
	}
}

// entryLess is RocksDB's internal key order: user key ascending, then
// newest (highest sequence) first.
func entryLess(a, b *entry) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.seq > b.seq
}

// Scan calls fn for every live key of the named column family, in key
// order, with the value the newest write left: a key whose newest version
// is a deletion, or that a newer range deletion covers, is left out. A
// merge operand as the newest version fails the scan (ErrUnsupported).
// fn's slices are valid only during the call. An error from fn stops the
// scan and is returned.
func (db *DB) Scan(cfName string, fn func(key, value []byte) error) error {
	cf, err := db.columnFamily(cfName)
	if err != nil {
		return err
	}
	// First pass: every table's range deletions (a tombstone may hide
	// keys of any older table) and its column family. Tables are then
	// opened again one at a time as the merge reaches them: one per
	// level-0 file and one per deeper level at a time, whose files do not
	// overlap, so a large database does not hold every file open.
	tombs := append([]tombstone(nil), db.memTombs[cf.id]...)
	levels := map[int][]fileMeta{}
	for _, f := range cf.sortedFiles() {
		t, err := db.openTable(f)
		if err != nil {
			return fmt.Errorf("column family %q: %w", cfName, err)
		}
		id, ok := t.columnFamilyID()
		tombs = append(tombs, t.tombs...)
		_ = t.close()
		if ok && id != cf.id {
			return corruptf("%06d.sst belongs to column family %d, the MANIFEST lists it under %d (%q)", f.number, id, cf.id, cfName)
		}
		levels[f.level] = append(levels[f.level], f)
	}
	var srcs mergeHeap
	for level, files := range levels {
		if level == 0 {
			for _, f := range files {
				srcs = append(srcs, &source{db: db, files: []fileMeta{f}})
			}
			continue
		}
		if err := sortBySmallest(files); err != nil {
			return fmt.Errorf("column family %q level %d: %w", cfName, level, err)
		}
		srcs = append(srcs, &source{db: db, files: files})
	}
	if m := db.mem[cf.id]; len(m) > 0 {
		srcs = append(srcs, &source{mem: m, memPos: -1})
	}
	all := append([]*source(nil), srcs...) // srcs shrinks as sources end
	defer func() {
		for _, s := range all {
			s.close()
		}
	}()
	live := srcs[:0]
	for _, s := range srcs {
		ok, err := s.next()
		if err != nil {
			return fmt.Errorf("column family %q: %w", cfName, err)
		}
		if ok {
			live = append(live, s)
		}
	}
	srcs = live
	heap.Init(&srcs)
	cover := newTombstoneCover(tombs)
	var cur []byte
	first := true
	for srcs.Len() > 0 {
		s := srcs[0]
		e := s.cur()
		if first || !bytes.Equal(e.key, cur) {
			first = false
			cur = append(cur[:0], e.key...)
			if err := visit(e, cover, fn); err != nil {
				return err
			}
		}
		ok, err := s.next()
		if err != nil {
			return fmt.Errorf("column family %q: %w", cfName, err)
		}
		if ok {
			heap.Fix(&srcs, 0)
		} else {
			heap.Pop(&srcs)
		}
	}
	return nil
}

// visit handles the newest version of a user key.
func visit(e *entry, cover *tombstoneCover, fn func(key, value []byte) error) error {
	if cover.covers(e.key, e.seq) {
		return nil
	}
	switch e.kind {
	case kindValue:
		return fn(e.key, e.value)
	case kindDeletion, kindSingleDeletion:
		return nil
	case kindMerge:
		return unsupportedf("key %x: merge operand (the reader has no merge operator)", e.key)
	case kindBlobIndex:
		return unsupportedf("key %x: value in a blob file", e.key)
	case kindWideColumnEntity:
		return unsupportedf("key %x: wide-column entity", e.key)
	case kindDeletionWithTimestamp:
		return unsupportedf("key %x: user-defined timestamp", e.key)
	}
	return corruptf("key %x: value type %#x in a table", e.key, e.kind)
}

// source is one ordered stream of entries: the WAL's memtable, or tables
// read one after another (a level-0 file alone, or a deeper level's files
// in key order).
type source struct {
	mem    []entry
	memPos int

	db    *DB
	files []fileMeta
	tab   *table
	it    *tableIter
}

func (s *source) next() (bool, error) {
	if s.db == nil {
		s.memPos++
		return s.memPos < len(s.mem), nil
	}
	for {
		if s.it != nil {
			if s.it.next() {
				return true, nil
			}
			if s.it.err != nil {
				return false, s.it.err
			}
		}
		s.close()
		if len(s.files) == 0 {
			return false, nil
		}
		t, err := s.db.openTable(s.files[0])
		if err != nil {
			return false, err
		}
		s.files = s.files[1:]
		it, err := t.iter()
		if err != nil {
			_ = t.close()
			return false, err
		}
		s.tab, s.it = t, it
	}
}

func (s *source) cur() *entry {
	if s.db == nil {
		return &s.mem[s.memPos]
	}
	return &s.it.ent
}

// close releases the open table, if any.
func (s *source) close() {
	if s.tab != nil {
		_ = s.tab.close()
		s.tab, s.it = nil, nil
	}
}

// openTable opens the SST file f.
func (db *DB) openTable(f fileMeta) (*table, error) {
	name := fmt.Sprintf("%06d.sst", f.number)
	return openTable(filepath.Join(db.dir, name), name, &db.dec)
}

// sortBySmallest orders a level's files by their smallest user key.
func sortBySmallest(files []fileMeta) error {
	for _, f := range files {
		if _, err := parseInternalKey(f.smallest); err != nil {
			return fmt.Errorf("file %d smallest key: %w", f.number, err)
		}
	}
	sort.Slice(files, func(i, j int) bool {
		a, _ := parseInternalKey(files[i].smallest)
		b, _ := parseInternalKey(files[j].smallest)
		return bytes.Compare(a.userKey, b.userKey) < 0
	})
	return nil
}

type mergeHeap []*source

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return entryLess(h[i].cur(), h[j].cur()) }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*source)) }
func (h *mergeHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// tombstoneCover answers "does a range deletion newer than seq cover key"
// for keys asked in ascending order: tombstones enter an active list when
// the scan reaches their start and leave it once it passes their end.
type tombstoneCover struct {
	pending []tombstone // by start, not yet reached
	active  []tombstone
}

func newTombstoneCover(ts []tombstone) *tombstoneCover {
	sort.Slice(ts, func(i, j int) bool { return bytes.Compare(ts[i].start, ts[j].start) < 0 })
	return &tombstoneCover{pending: ts}
}

func (c *tombstoneCover) covers(key []byte, seq uint64) bool {
	for len(c.pending) > 0 && bytes.Compare(c.pending[0].start, key) <= 0 {
		c.active = append(c.active, c.pending[0])
		c.pending = c.pending[1:]
	}
	kept := c.active[:0]
	hit := false
	for _, t := range c.active {
		if bytes.Compare(key, t.end) >= 0 {
			continue
		}
		kept = append(kept, t)
		if t.seq > seq {
			hit = true
		}
	}
	c.active = kept
	return hit
}
