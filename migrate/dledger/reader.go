package dledger

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/edsrzf/mmap-go"
)

// PosError locates a problem in a DLedger data file.
type PosError struct {
	// File is the data file's path.
	File string
	// At is the position in the file; Offset the same in the whole log.
	At     int64
	Offset int64
	Err    error
}

// Error names the file and the position.
func (e *PosError) Error() string {
	return fmt.Sprintf("dledger data file %s at byte %d (log offset %d): %v", e.File, e.At, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *PosError) Unwrap() error { return e.Err }

// TornTail describes where a log ends in an unfinished entry: the bytes a
// broker killed mid-write left, which DLedger's own recovery cuts off.
type TornTail struct {
	File   string
	At     int64
	Offset int64
	Reason string
}

// dataFile is one data file of the log.
type dataFile struct {
	path   string
	offset int64
	size   int64
}

// Reader reads a DLedger data directory's entries in log order. It maps
// one file at a time, read-only; entries' bodies alias the mapping and
// are valid until the next call of Next or Close.
type Reader struct {
	files    []dataFile
	fileSize int64
	cur      int
	m        mmap.MMap
	f        *os.File
	at       int64 // position in the current file
	last     struct {
		index, term int64
		end         int64 // position after the last entry returned
		ok          bool
	}
	torn *TornTail
	done bool
}

// OpenReader lists the data files of dir (DLedger's
// dledger-<selfId>/data). fileSize is the size of a data file
// (mappedFileSizeCommitLog of the broker); 0 takes the largest file's.
// The files must follow each other without a gap; only the last may be
// shorter than fileSize (its missing bytes read as a truncated tail).
func OpenReader(dir string, fileSize int64) (*Reader, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read dledger data directory: %w", err)
	}
	var files []dataFile
	for _, de := range ents {
		off, ok := parseFileName(de.Name())
		if !ok || de.IsDir() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("dledger data file %s: %w", de.Name(), err)
		}
		files = append(files, dataFile{path: filepath.Join(dir, de.Name()), offset: off, size: info.Size()})
	}
	slices.SortFunc(files, func(a, b dataFile) int { return int(min(max(a.offset-b.offset, -1), 1)) })
	if fileSize <= 0 {
		for _, f := range files {
			fileSize = max(fileSize, f.size)
		}
	}
	for i, f := range files {
		if fileSize <= 0 || f.offset%fileSize != 0 {
			return nil, fmt.Errorf("dledger data file %s: its offset %d is no multiple of the file size %d", f.path, f.offset, fileSize)
		}
		if f.size > fileSize || (f.size < fileSize && i < len(files)-1) {
			return nil, fmt.Errorf("dledger data file %s holds %d bytes, not the file size %d", f.path, f.size, fileSize)
		}
		if i > 0 && f.offset != files[i-1].offset+fileSize {
			return nil, fmt.Errorf("dledger data file %s does not follow %s: the files between are missing", f.path, files[i-1].path)
		}
	}
	return &Reader{files: files, fileSize: fileSize, cur: -1}, nil
}

// parseFileName reads a data file's name: its offset in 20 digits.
func parseFileName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil && v >= 0
}

// FileSize is the size of a data file.
func (r *Reader) FileSize() int64 { return r.fileSize }

// Files is the number of data files.
func (r *Reader) Files() int { return len(r.files) }

// StartOffset is the offset of the first data file (where the log's
// records begin; 0 when there is no file).
func (r *Reader) StartOffset() int64 {
	if len(r.files) == 0 {
		return 0
	}
	return r.files[0].offset
}

// Torn returns the torn tail Next stopped at, if it did.
func (r *Reader) Torn() (TornTail, bool) {
	if r.torn == nil {
		return TornTail{}, false
	}
	return *r.torn, true
}

// Close unmaps the current file.
func (r *Reader) Close() error {
	return r.unmap()
}

func (r *Reader) unmap() error {
	var err error
	if r.m != nil {
		err = r.m.Unmap()
		r.m = nil
	}
	if r.f != nil {
		err = errors.Join(err, r.f.Close())
		r.f = nil
	}
	return err
}

// open maps file i.
func (r *Reader) open(i int) error {
	if err := r.unmap(); err != nil {
		return fmt.Errorf("unmap %s: %w", r.files[r.cur].path, err)
	}
	r.cur, r.at = i, 0
	f := r.files[i]
	if f.size == 0 {
		return nil
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("open dledger data file: %w", err)
	}
	m, err := mmap.MapRegion(fh, int(f.size), mmap.RDONLY, 0, 0)
	if err != nil {
		_ = fh.Close()
		return fmt.Errorf("map dledger data file %s: %w", f.path, err)
	}
	r.f, r.m = fh, m
	return nil
}

// posErr wraps err with the current file and position at.
func (r *Reader) posErr(at int64, err error) error {
	f := r.files[r.cur]
	return &PosError{File: f.path, At: at, Offset: f.offset + at, Err: err}
}

// inLast reports whether the current file is the last one.
func (r *Reader) inLast() bool { return r.cur == len(r.files)-1 }

// zeroAt reports whether the 8 bytes at position at of the current file
// are zeros or lie past its end (what follows the log's last entry).
func (r *Reader) zeroAt(at int64) bool {
	for i := at; i < at+MinBlank; i++ {
		if i < int64(len(r.m)) && r.m[i] != 0 {
			return false
		}
	}
	return true
}

// AtEnd reports whether the entry Next returned last is the log's last:
// in the last file, followed by zeros or the file's end. An entry there
// whose body does not hold is a torn write, not damage.
func (r *Reader) AtEnd() bool {
	return r.last.ok && r.inLast() && r.zeroAt(r.last.end)
}

// Next returns the next entry, skipping blanks, or io.EOF after the last.
// At a torn tail (the last file ends in an unfinished entry) it returns
// io.EOF and Torn says where. Damage (a bad magic, an entry whose header
// contradicts itself or its place, an index or term out of order, a hole
// of zeros followed by more files) is an error naming the file and the
// position (*PosError).
func (r *Reader) Next() (Entry, error) {
	if r.done {
		return Entry{}, io.EOF
	}
	if r.cur < 0 {
		if len(r.files) == 0 {
			r.done = true
			return Entry{}, io.EOF
		}
		if err := r.open(0); err != nil {
			return Entry{}, err
		}
	}
	for {
		rest := r.fileSize - r.at
		if rest < MinBlank || r.at+MinBlank > int64(len(r.m)) {
			// No room for even a blank: a file ends here (a
			// shorter last file ends its log).
			if r.inLast() {
				return r.end(r.at, int64(len(r.m)) < r.fileSize && !r.zeroTail(r.at), "the file ends inside an entry header")
			}
			if err := r.open(r.cur + 1); err != nil {
				return Entry{}, err
			}
			continue
		}
		b := r.m[r.at:]
		magic := int32(binary.BigEndian.Uint32(b))
		size := int32(binary.BigEndian.Uint32(b[4:]))
		switch {
		case magic == 0 && size == 0:
			if !r.inLast() {
				return Entry{}, r.posErr(r.at, fmt.Errorf("%w: zeros where an entry or a blank belongs, before the data file that follows", ErrBadEntry))
			}
			return r.end(r.at, false, "")
		case magic == BlankMagic:
			if int64(size) < MinBlank || int64(size) > rest {
				return Entry{}, r.posErr(r.at, fmt.Errorf("%w: a blank of %d bytes where %d are left in the file", ErrBadEntry, size, rest))
			}
			r.at += int64(size)
			if r.at < r.fileSize {
				continue
			}
			if r.inLast() {
				return r.end(r.at, false, "")
			}
			if err := r.open(r.cur + 1); err != nil {
				return Entry{}, err
			}
			continue
		case !validMagic(magic):
			return Entry{}, r.posErr(r.at, fmt.Errorf("%w %d (%#08x)", ErrBadMagic, magic, uint32(magic)))
		}
		e, err := DecodeEntry(b, r.files[r.cur].offset+r.at)
		if err != nil {
			// In the last file, an entry cut short, or one whose
			// header is only partly there (a zero size) with zeros
			// after it, is a torn write.
			torn := errors.Is(err, ErrTruncated) || (size == 0 && r.zeroAt(r.at+MinBlank))
			if torn && r.inLast() {
				return r.end(r.at, true, err.Error())
			}
			return Entry{}, r.posErr(r.at, err)
		}
		if r.last.ok && e.Index != r.last.index+1 {
			return Entry{}, r.posErr(r.at, fmt.Errorf("%w: entry index %d after %d", ErrBadEntry, e.Index, r.last.index))
		}
		if r.last.ok && e.Term < r.last.term {
			return Entry{}, r.posErr(r.at, fmt.Errorf("%w: term %d after %d", ErrBadEntry, e.Term, r.last.term))
		}
		if int64(e.Size)+MinBlank > rest {
			// DLedger keeps room for a blank after every entry.
			return Entry{}, r.posErr(r.at, fmt.Errorf("%w: a %d-byte entry leaves %d bytes in the file, less than a blank", ErrBadEntry, e.Size, rest-int64(e.Size)))
		}
		r.last.index, r.last.term, r.last.ok = e.Index, e.Term, true
		r.last.end = r.at + int64(e.Size)
		r.at = r.last.end
		return e, nil
	}
}

// zeroTail reports whether the current file's bytes from at on are zeros.
func (r *Reader) zeroTail(at int64) bool {
	for _, c := range r.m[min(at, int64(len(r.m))):] {
		if c != 0 {
			return false
		}
	}
	return true
}

// end ends the log at position at of the last file: cleanly, or at a torn
// entry for reason.
func (r *Reader) end(at int64, torn bool, reason string) (Entry, error) {
	r.done = true
	if torn {
		f := r.files[r.cur]
		r.torn = &TornTail{File: f.path, At: at, Offset: f.offset + at, Reason: reason}
	}
	return Entry{}, io.EOF
}

// MarkTorn records that the entry Next returned last is a torn write (its
// body does not hold and nothing follows it: AtEnd) and ends the log
// before it.
func (r *Reader) MarkTorn(e Entry, reason string) {
	f := r.files[r.cur]
	at := e.Pos - f.offset
	r.done = true
	r.torn = &TornTail{File: f.path, At: at, Offset: e.Pos, Reason: reason}
}

// PosErrorOf locates an error found in the body of the entry Next
// returned last.
func (r *Reader) PosErrorOf(e Entry, err error) error {
	f := r.files[r.cur]
	return &PosError{File: f.path, At: e.Pos - f.offset, Offset: e.Pos, Err: err}
}

// Checkpoint is DLedger's checkpoint file: how far the log was written and
// committed (replicated to a majority) when it was last saved.
type Checkpoint struct {
	EndIndex       int64
	CommittedIndex int64
}

// ReadCheckpoint reads dledger-<selfId>/checkpoint (Java properties with
// endIndex and committedIndex). ok is false when there is none.
func ReadCheckpoint(path string) (c Checkpoint, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read dledger checkpoint: %w", err)
	}
	defer f.Close()
	c = Checkpoint{EndIndex: -1, CommittedIndex: -1}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, found := strings.Cut(line, "=")
		if !found {
			continue
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if perr != nil {
			return Checkpoint{}, false, fmt.Errorf("dledger checkpoint %s: %s=%q is no number", path, strings.TrimSpace(k), v)
		}
		switch strings.TrimSpace(k) {
		case "endIndex":
			c.EndIndex = n
		case "committedIndex":
			c.CommittedIndex = n
		}
	}
	if err := sc.Err(); err != nil {
		return Checkpoint{}, false, fmt.Errorf("read dledger checkpoint %s: %w", path, err)
	}
	return c, true, nil
}
