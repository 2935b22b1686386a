package broker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The epoch file of a controller-mode broker is RocketMQ's EpochFileCache
// (a CheckpointFile of EpochEntry lines, storePathEpochFile):
//
//	<number of entries>\n
//	<crc>\n
//	<epoch>-<startOffset>\n   one line per entry, epochs increasing
//
// crc is CRC-32 (IEEE) of the entry lines, newlines included, masked to 31
// bits (RocketMQ's UtilAll.crc32); 0 means unchecked. An entry's end is the
// next entry's start (the last one's, the CommitLog's end). A broker
// appends an entry when it becomes master of a new epoch: the epoch and
// the CommitLog end it starts writing at. Writes copy the previous
// content to <file>.bak, and a read falls back to it, as RocketMQ's.

// epochEntry is one line of the epoch file.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochFile is the epoch file, read at open and rewritten at each append.
// Its methods are safe for concurrent use.
type epochFile struct {
	path    string
	mu      sync.Mutex
	entries []epochEntry
}

// openEpochFile reads the epoch file at path (none: no entries), falling
// back to path.bak when the file does not check out.
func openEpochFile(path string) (*epochFile, error) {
	entries, err := readEpochFile(path)
	if err != nil {
		bak, bakErr := readEpochFile(path + ".bak")
		if bakErr != nil {
			return nil, fmt.Errorf("epoch file %s: %w (its backup: %v)", path, err, bakErr)
		}
		entries = bak
	}
	return &epochFile{path: path, entries: entries}, nil
}

// readEpochFile reads and checks one epoch file.
func readEpochFile(path string) ([]epochEntry, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseEpochFile(raw)
}

// parseEpochFile reads an epoch file's content.
func parseEpochFile(raw []byte) ([]epochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var head []string
	for len(head) < 2 && sc.Scan() {
		head = append(head, strings.TrimSpace(sc.Text()))
	}
	if len(head) < 2 {
		return nil, errors.New("no entry count and checksum lines")
	}
	n, err := strconv.Atoi(head[0])
	if err != nil {
		return nil, fmt.Errorf("entry count %q: %w", head[0], err)
	}
	want, err := strconv.ParseInt(head[1], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("checksum %q: %w", head[1], err)
	}
	var body bytes.Buffer
	var out []epochEntry
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		body.WriteString(line)
		body.WriteByte('\n')
		epoch, start, ok := strings.Cut(line, "-")
		if !ok {
			continue // RocketMQ skips a line it cannot read, then counts
		}
		e, err1 := strconv.ParseInt(epoch, 10, 32)
		s, err2 := strconv.ParseInt(start, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("entry %q: not epoch-startOffset", line)
		}
		out = append(out, epochEntry{Epoch: int32(e), StartOffset: s})
	}
	if len(out) != n {
		return nil, fmt.Errorf("%d entries, the file says %d", len(out), n)
	}
	if want != 0 && int64(epochCRC(body.Bytes())) != want {
		return nil, fmt.Errorf("checksum %d, the entries' is %d", want, epochCRC(body.Bytes()))
	}
	return out, nil
}

// epochCRC is RocketMQ's UtilAll.crc32: CRC-32 masked to 31 bits.
func epochCRC(b []byte) int32 { return int32(crc32.ChecksumIEEE(b) & 0x7FFFFFFF) }

// formatEpochFile is the file's content for entries.
func formatEpochFile(entries []epochEntry) []byte {
	var body bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&body, "%d-%d\n", e.Epoch, e.StartOffset)
	}
	return fmt.Appendf(nil, "%d\n%d\n%s", len(entries), epochCRC(body.Bytes()), body.Bytes())
}

// Entries returns a copy of the entries.
func (f *epochFile) Entries() []epochEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]epochEntry(nil), f.entries...)
}

// LastEpoch is the last entry's epoch, -1 with none (RocketMQ's
// lastEpoch).
func (f *epochFile) LastEpoch() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		return -1
	}
	return f.entries[len(f.entries)-1].Epoch
}

// Append adds an entry and rewrites the file. As RocketMQ's appendEntry it
// refuses an entry whose epoch or start offset is not above the last
// one's; an entry of the last epoch is a no-op (a restart of the same
// master). An entry starting where the last one does replaces it: the
// last epoch wrote nothing.
func (f *epochFile) Append(e epochEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := f.entries
	if n := len(entries); n > 0 {
		last := entries[n-1]
		switch {
		case last.Epoch == e.Epoch:
			return nil
		case last.Epoch > e.Epoch:
			return fmt.Errorf("epoch %d is below the epoch file's last, %d", e.Epoch, last.Epoch)
		case last.StartOffset > e.StartOffset:
			return fmt.Errorf("epoch %d starts at %d, below the last epoch's start %d", e.Epoch, e.StartOffset, last.StartOffset)
		case last.StartOffset == e.StartOffset:
			entries = entries[:n-1]
		}
	}
	entries = append(append([]epochEntry(nil), entries...), e)
	if err := writeWithBackup(f.path, formatEpochFile(entries)); err != nil {
		return fmt.Errorf("write epoch file %s: %w", f.path, err)
	}
	f.entries = entries
	return nil
}
