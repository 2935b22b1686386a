package rocksread

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// VersionEdit tags (RocksDB db/version_edit.h).
const (
	tagComparator        = 1
	tagLogNumber         = 2
	tagNextFileNumber    = 3
	tagLastSequence      = 4
	tagCompactCursor     = 5
	tagDeletedFile       = 6
	tagNewFile           = 7
	tagPrevLogNumber     = 9
	tagMinLogNumberToKp  = 10
	tagNewFile2          = 100
	tagNewFile3          = 102
	tagNewFile4          = 103
	tagColumnFamily      = 200
	tagColumnFamilyAdd   = 201
	tagColumnFamilyDrop  = 202
	tagMaxColumnFamily   = 203
	tagInAtomicGroup     = 300
	tagBlobFileAddition  = 400
	tagBlobFileGarbage   = 401
	tagSafeIgnoreMask    = 1 << 13
	customTerminate      = 1
	customPathID         = 65
	customNonSafeIgnore  = 1 << 6
	bytewiseComparator   = "leveldb.BytewiseComparator"
	defaultColumnFamily  = "default"
	maxLevels            = 64
	maxColumnFamilyCount = 1 << 20
)

// fileMeta is one live SST file of a column family.
type fileMeta struct {
	level    int
	number   uint64
	size     uint64
	smallest []byte // internal keys
	largest  []byte
}

type deletedFile struct {
	level  int
	number uint64
}

// versionEdit is one decoded MANIFEST record.
type versionEdit struct {
	comparator    string
	hasComparator bool
	logNumber     uint64
	hasLogNumber  bool
	lastSequence  uint64
	cfID          uint32
	cfAdd         string
	isCFAdd       bool
	isCFDrop      bool
	inAtomicGroup bool
	atomicLeft    uint32
	deleted       []deletedFile
	added         []fileMeta
}

// decodeVersionEdit decodes one MANIFEST record. Tags RocksDB marks as
// safe to ignore are skipped; blob files and SSTs in other db_paths are
// refused.
func decodeVersionEdit(b []byte) (versionEdit, error) {
	var e versionEdit
	r := byteReader{b: b}
	for !r.empty() {
		tag := r.uvarint32()
		if !r.ok() {
			return e, corruptf("version edit: bad tag")
		}
		switch tag {
		case tagComparator:
			e.comparator, e.hasComparator = string(r.lenPrefixed()), true
		case tagLogNumber:
			e.logNumber, e.hasLogNumber = r.uvarint64(), true
		case tagNextFileNumber, tagPrevLogNumber, tagMinLogNumberToKp:
			r.uvarint64()
		case tagLastSequence:
			e.lastSequence = r.uvarint64()
		case tagCompactCursor:
			r.uvarint32()
			r.lenPrefixed()
		case tagDeletedFile:
			level := r.uvarint32()
			num := r.uvarint64()
			if level >= maxLevels {
				return e, corruptf("version edit: deleted file %d at level %d", num, level)
			}
			e.deleted = append(e.deleted, deletedFile{level: int(level), number: num})
		case tagNewFile, tagNewFile2, tagNewFile3, tagNewFile4:
			f, err := decodeNewFile(&r, tag)
			if err != nil {
				return e, err
			}
			e.added = append(e.added, f)
		case tagColumnFamily:
			e.cfID = r.uvarint32()
		case tagColumnFamilyAdd:
			e.cfAdd, e.isCFAdd = string(r.lenPrefixed()), true
		case tagColumnFamilyDrop:
			e.isCFDrop = true
		case tagMaxColumnFamily:
			r.uvarint32()
		case tagInAtomicGroup:
			e.inAtomicGroup, e.atomicLeft = true, r.uvarint32()
		case tagBlobFileAddition, tagBlobFileGarbage:
			return e, unsupportedf("version edit: blob files (enable_blob_files)")
		default:
			if tag&tagSafeIgnoreMask == 0 {
				return e, corruptf("version edit: unknown tag %d", tag)
			}
			r.lenPrefixed()
		}
		if !r.ok() {
			return e, corruptf("version edit: field of tag %d runs past the record", tag)
		}
	}
	return e, nil
}

func decodeNewFile(r *byteReader, tag uint32) (fileMeta, error) {
	var f fileMeta
	level := r.uvarint32()
	f.number = r.uvarint64()
	if tag == tagNewFile3 {
		if path := r.uvarint32(); path != 0 {
			return f, unsupportedf("version edit: file %d in db_paths[%d]", f.number, path)
		}
	}
	f.size = r.uvarint64()
	f.smallest = bytes.Clone(r.lenPrefixed())
	f.largest = bytes.Clone(r.lenPrefixed())
	if tag != tagNewFile {
		r.uvarint64() // smallest seqno
		r.uvarint64() // largest seqno
	}
	if tag == tagNewFile4 {
		for {
			ct := r.uvarint32()
			if !r.ok() || ct == customTerminate {
				break
			}
			field := r.lenPrefixed()
			switch {
			case ct == customPathID:
				if len(field) != 1 || field[0] != 0 {
					return f, unsupportedf("version edit: file %d outside the first db_path", f.number)
				}
			case ct&customNonSafeIgnore != 0:
				return f, unsupportedf("version edit: file %d has custom field %d RocksDB forbids ignoring", f.number, ct)
			}
		}
	}
	if !r.ok() {
		return f, corruptf("version edit: new-file entry runs past the record")
	}
	if level >= maxLevels {
		return f, corruptf("version edit: file %d at level %d", f.number, level)
	}
	f.level = int(level)
	return f, nil
}

// columnFamily is a column family as the MANIFEST leaves it.
type columnFamily struct {
	id         uint32
	name       string
	comparator string
	logNumber  uint64 // WAL files below this number hold nothing unflushed for it
	files      map[uint64]fileMeta
}

// versionSet is the state a MANIFEST replays to.
type versionSet struct {
	manifest     string
	cfs          map[uint32]*columnFamily
	lastSequence uint64
}

// readCurrent returns the MANIFEST file name CURRENT points to.
func readCurrent(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "CURRENT"))
	if err != nil {
		return "", fmt.Errorf("read CURRENT (is %s a RocksDB directory?): %w", dir, err)
	}
	name, ok := strings.CutSuffix(string(b), "\n")
	if !ok || !strings.HasPrefix(name, "MANIFEST-") || strings.ContainsAny(name, "/\\\n") {
		return "", corruptf("CURRENT holds %q, not a MANIFEST name", truncateForError(b))
	}
	return name, nil
}

func truncateForError(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// loadVersionSet replays the MANIFEST CURRENT names.
func loadVersionSet(dir string) (*versionSet, error) {
	name, err := readCurrent(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer f.Close()
	num, _ := strconv.ParseUint(strings.TrimPrefix(name, "MANIFEST-"), 10, 64)
	vs := &versionSet{manifest: name, cfs: map[uint32]*columnFamily{
		0: {id: 0, name: defaultColumnFamily, comparator: bytewiseComparator, files: map[uint64]fileMeta{}},
	}}
	lr := newLogReader(f, name, num)
	var group []versionEdit
	for i := 0; ; i++ {
		rec, err := lr.next()
		if errors.Is(err, io.EOF) || errors.Is(err, errTornTail) {
			// An unfinished atomic group at the end was never committed.
			break
		}
		if err != nil {
			return nil, err
		}
		e, err := decodeVersionEdit(rec)
		if err != nil {
			return nil, fmt.Errorf("%s record %d: %w", name, i, err)
		}
		if e.inAtomicGroup {
			group = append(group, e)
			if e.atomicLeft > 0 {
				continue
			}
			for _, g := range group {
				if err := vs.apply(g); err != nil {
					return nil, fmt.Errorf("%s record %d: %w", name, i, err)
				}
			}
			group = group[:0]
			continue
		}
		if len(group) > 0 {
			return nil, corruptf("%s record %d: atomic group of %d edits cut short", name, i, len(group))
		}
		if err := vs.apply(e); err != nil {
			return nil, fmt.Errorf("%s record %d: %w", name, i, err)
		}
	}
	for _, cf := range vs.cfs {
		if cf.comparator != bytewiseComparator {
			return nil, unsupportedf("column family %q uses comparator %q", cf.name, cf.comparator)
		}
	}
	return vs, nil
}

func (vs *versionSet) apply(e versionEdit) error {
	if e.lastSequence > vs.lastSequence {
		vs.lastSequence = e.lastSequence
	}
	switch {
	case e.isCFAdd:
		if _, dup := vs.cfs[e.cfID]; dup {
			return corruptf("column family %d added twice", e.cfID)
		}
		if len(vs.cfs) >= maxColumnFamilyCount {
			return corruptf("more than %d column families", maxColumnFamilyCount)
		}
		cf := &columnFamily{id: e.cfID, name: e.cfAdd, comparator: bytewiseComparator, files: map[uint64]fileMeta{}}
		if e.hasComparator {
			cf.comparator = e.comparator
		}
		vs.cfs[e.cfID] = cf
		return nil
	case e.isCFDrop:
		if _, ok := vs.cfs[e.cfID]; !ok {
			return corruptf("drop of unknown column family %d", e.cfID)
		}
		delete(vs.cfs, e.cfID)
		return nil
	}
	cf, ok := vs.cfs[e.cfID]
	if !ok {
		return corruptf("edit for unknown column family %d", e.cfID)
	}
	if e.hasComparator {
		cf.comparator = e.comparator
	}
	for _, d := range e.deleted {
		delete(cf.files, d.number)
	}
	for _, f := range e.added {
		cf.files[f.number] = f
	}
	if e.hasLogNumber {
		cf.logNumber = e.logNumber
	}
	return nil
}

// sortedFiles returns a column family's files, by level then number.
func (cf *columnFamily) sortedFiles() []fileMeta {
	out := make([]fileMeta, 0, len(cf.files))
	for _, f := range cf.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].level != out[j].level {
			return out[i].level < out[j].level
		}
		return out[i].number < out[j].number
	})
	return out
}
