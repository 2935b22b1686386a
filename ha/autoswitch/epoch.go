package autoswitch

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/atomicfile"
)

// EpochFileName is the epoch file's name in the store's root directory
// (RocketMQ's storePathEpochFile default: storePathRootDir/epochFileCheckpoint).
const EpochFileName = "epochFileCheckpoint"

// NoEnd is the end offset of the last epoch: it runs to the log's end
// (RocketMQ's Long.MAX_VALUE).
const NoEnd = math.MaxInt64

// ErrEpochFile is returned for an epoch file that does not parse: a count
// or checksum line that is not a number, an entry line that is not
// "epoch-startOffset", a count or checksum that does not match the
// entries, or epochs and start offsets that do not both grow.
var ErrEpochFile = errors.New("autoswitch: bad epoch file")

// ErrEpochOrder is returned by Append for an entry whose epoch or start
// offset is not above the last entry's (RocketMQ refuses it the same way).
var ErrEpochOrder = errors.New("autoswitch: epoch entry not after the last one")

// EpochEntry is one epoch of a broker group's CommitLog: the records from
// StartOffset up to EndOffset were written by the master elected in Epoch.
// EndOffset is never stored: it is the next entry's StartOffset, NoEnd for
// the last (or the log's end where a caller set it). The JSON names are
// RocketMQ's EpochEntry's (GET_BROKER_EPOCH_CACHE's EpochEntryCache body
// lists the entries, the last ending at Long.MAX_VALUE, NoEnd).
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
	EndOffset   int64 `json:"endOffset"`
}

// String formats the entry as the epoch file's line.
func (e EpochEntry) String() string {
	return fmt.Sprintf("%d-%d", e.Epoch, e.StartOffset)
}

// EpochEntryCache is RocketMQ's EpochEntryCache, the body of a broker's
// answer to GET_BROKER_EPOCH_CACHE: who the broker is, its epochs (each
// ending where the next starts, the last at NoEnd) and its CommitLog's
// end, which mqadmin getBrokerEpoch prints as the last epoch's end.
type EpochEntryCache struct {
	ClusterName string       `json:"clusterName"`
	BrokerName  string       `json:"brokerName"`
	BrokerID    int64        `json:"brokerId"`
	EpochList   []EpochEntry `json:"epochList"`
	MaxOffset   int64        `json:"maxOffset"`
}

// EpochCache is RocketMQ's EpochFileCache: a broker's epochs in epoch
// order, kept in the epoch file when it has a path. Safe for concurrent
// use.
type EpochCache struct {
	path string // "" for a cache in memory only

	mu      sync.Mutex
	entries []EpochEntry // ascending epochs and start offsets; the last ends at NoEnd unless set
}

// OpenEpochFile reads the epoch file at path as RocketMQ does: the file,
// or its backup path+".bak" when the file is missing, empty or does not
// parse. A missing file (and backup) is an empty cache. The cache writes
// every change back to path.
func OpenEpochFile(path string) (*EpochCache, error) {
	c := &EpochCache{path: path}
	entries, err := readEpochFile(path)
	if err != nil || len(entries) == 0 {
		bak, berr := readEpochFile(path + ".bak")
		switch {
		case berr == nil && (len(bak) > 0 || err != nil):
			entries, err = bak, nil
		case err == nil:
			// The file is missing or holds no entry, and so is the backup
			// or it is unreadable: an empty cache, as RocketMQ's.
		default:
			return nil, fmt.Errorf("read the epoch file %s: %w (and its backup: %v)", path, err, berr)
		}
	}
	c.entries = withEnds(entries)
	return c, nil
}

// NewEpochCache returns a cache in memory holding entries (in epoch order;
// their EndOffsets are derived, the last's being NoEnd).
func NewEpochCache(entries []EpochEntry) *EpochCache {
	return &EpochCache{entries: withEnds(slices.Clone(entries))}
}

// withEnds sets each entry's EndOffset to the next one's StartOffset, the
// last's to NoEnd.
func withEnds(entries []EpochEntry) []EpochEntry {
	for i := range entries {
		entries[i].EndOffset = NoEnd
		if i > 0 {
			entries[i-1].EndOffset = entries[i].StartOffset
		}
	}
	return entries
}

func readEpochFile(path string) ([]EpochEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	entries, err := ParseEpochFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}

// ParseEpochFile parses an epoch file (RocketMQ's CheckpointFile of
// EpochEntry):
//
//	<number of entries>\n
//	<checksum>\n
//	<epoch>-<startOffset>\n   one line per entry, ascending epochs
//
// The checksum is the CRC-32 (IEEE) of the entry lines, each with its
// "\n", with the top bit cleared; 0 means unchecked. Lines may end in
// "\r\n" (the checksum is then of the lines with "\n", as RocketMQ reads
// them); blank entry lines are skipped but checksummed. The entries'
// EndOffsets are derived.
func ParseEpochFile(b []byte) ([]EpochEntry, error) {
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the last line's end
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte("\r"))
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: %d lines, want the entry count and the checksum at least", ErrEpochFile, len(lines))
	}
	count, err := strconv.ParseInt(string(lines[0]), 10, 32)
	if err != nil || count < 0 {
		return nil, fmt.Errorf("%w: entry count %q", ErrEpochFile, lines[0])
	}
	sum, err := strconv.ParseInt(string(lines[1]), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: checksum %q", ErrEpochFile, lines[1])
	}
	crc := crc32.NewIEEE()
	var entries []EpochEntry
	for i, l := range lines[2:] {
		crc.Write(l)
		crc.Write([]byte("\n"))
		if len(l) == 0 {
			continue
		}
		e, err := parseEpochLine(l)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrEpochFile, i+3, err)
		}
		if n := len(entries); n > 0 && (e.Epoch <= entries[n-1].Epoch || e.StartOffset <= entries[n-1].StartOffset) {
			return nil, fmt.Errorf("%w: line %d: entry %s after %s: epochs and start offsets must grow", ErrEpochFile, i+3, e, entries[n-1])
		}
		entries = append(entries, e)
	}
	if int64(len(entries)) != count {
		return nil, fmt.Errorf("%w: %d entries, the count line says %d", ErrEpochFile, len(entries), count)
	}
	if got := int64(crc.Sum32() & 0x7fffffff); sum != 0 && got != sum {
		return nil, fmt.Errorf("%w: checksum %d, the entries' is %d", ErrEpochFile, sum, got)
	}
	return withEnds(entries), nil
}

// parseEpochLine parses "epoch-startOffset", both decimal, not negative.
func parseEpochLine(l []byte) (EpochEntry, error) {
	i := bytes.IndexByte(l, '-')
	if i < 0 {
		return EpochEntry{}, fmt.Errorf("%q is not epoch-startOffset", l)
	}
	epoch, err := strconv.ParseUint(string(l[:i]), 10, 31)
	if err != nil {
		return EpochEntry{}, fmt.Errorf("epoch in %q: %w", l, err)
	}
	start, err := strconv.ParseUint(string(l[i+1:]), 10, 63)
	if err != nil {
		return EpochEntry{}, fmt.Errorf("start offset in %q: %w", l, err)
	}
	return EpochEntry{Epoch: int32(epoch), StartOffset: int64(start)}, nil
}

// FormatEpochFile returns the epoch file holding entries, as RocketMQ
// writes it (ParseEpochFile describes the format). No entries give
// "0\n0\n".
func FormatEpochFile(entries []EpochEntry) []byte {
	var body []byte
	for _, e := range entries {
		body = strconv.AppendInt(body, int64(e.Epoch), 10)
		body = append(body, '-')
		body = strconv.AppendInt(body, e.StartOffset, 10)
		body = append(body, '\n')
	}
	out := strconv.AppendInt(nil, int64(len(entries)), 10)
	out = append(out, '\n')
	out = strconv.AppendInt(out, int64(crc32.ChecksumIEEE(body)&0x7fffffff), 10)
	out = append(out, '\n')
	return append(out, body...)
}

// flushLocked writes the entries to the file: first the file's previous
// content to path+".bak", then the new content to path, each replaced
// atomically (RocketMQ writes the same two files, in place). With no
// entries both get an empty list, so neither brings back entries a
// truncation removed (RocketMQ leaves the file as it was then, and reads
// the backup when the file holds no entry).
func (c *EpochCache) flushLocked() error {
	if c.path == "" {
		return nil
	}
	data := FormatEpochFile(c.entries)
	if len(c.entries) == 0 {
		if err := atomicfile.WriteFile(c.path+".bak", data, 0o644); err != nil {
			return fmt.Errorf("write the epoch file's backup: %w", err)
		}
		if err := atomicfile.WriteFile(c.path, data, 0o644); err != nil {
			return fmt.Errorf("write the epoch file: %w", err)
		}
		return nil
	}
	if err := atomicfile.ReplaceKeepingBackup(c.path, data, 0o644); err != nil {
		return fmt.Errorf("write the epoch file: %w", err)
	}
	return nil
}

// Entries returns a copy of the entries in epoch order.
func (c *EpochCache) Entries() []EpochEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.entries)
}

// Len returns the number of entries.
func (c *EpochCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// LastEntry returns the entry of the highest epoch; ok is false when the
// cache is empty.
func (c *EpochCache) LastEntry() (e EpochEntry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// FirstEntry returns the entry of the lowest epoch; ok is false when the
// cache is empty.
func (c *EpochCache) FirstEntry() (e EpochEntry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[0], true
}

// LastEpoch returns the highest epoch, -1 when the cache is empty.
func (c *EpochCache) LastEpoch() int32 {
	if e, ok := c.LastEntry(); ok {
		return e.Epoch
	}
	return -1
}

// Entry returns the entry of epoch.
func (c *EpochCache) Entry(epoch int32) (e EpochEntry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.findLocked(epoch)
	if !ok {
		return EpochEntry{}, false
	}
	return c.entries[i], true
}

func (c *EpochCache) findLocked(epoch int32) (int, bool) {
	return slices.BinarySearchFunc(c.entries, epoch, func(e EpochEntry, t int32) int {
		switch {
		case e.Epoch < t:
			return -1
		case e.Epoch > t:
			return 1
		}
		return 0
	})
}

// EntryByOffset returns the entry whose range [StartOffset, EndOffset)
// holds offset.
func (c *EpochCache) EntryByOffset(offset int64) (e EpochEntry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.StartOffset <= offset && offset < e.EndOffset {
			return e, true
		}
	}
	return EpochEntry{}, false
}

// NextEntry returns the entry of the lowest epoch above epoch.
func (c *EpochCache) NextEntry(epoch int32) (e EpochEntry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, found := c.findLocked(epoch)
	if found {
		i++
	}
	if i >= len(c.entries) {
		return EpochEntry{}, false
	}
	return c.entries[i], true
}

// Append adds e as the last entry and writes the file. Its epoch and
// start offset must both be above the last entry's (ErrEpochOrder, the
// cache unchanged); the last entry then ends at e's start.
func (c *EpochCache) Append(e EpochEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch >= e.Epoch || last.StartOffset >= e.StartOffset {
			return fmt.Errorf("%w: %s after %s", ErrEpochOrder, e, last)
		}
		c.entries[n-1].EndOffset = e.StartOffset
	}
	e.EndOffset = NoEnd
	c.entries = append(c.entries, e)
	return c.flushLocked()
}

// SetLastEndOffset sets the last entry's EndOffset (in memory: ends are
// not stored) when it is not below its start: a cache of a log that ends
// there, for ConsistentPoint.
func (c *EpochCache) SetLastEndOffset(end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && c.entries[n-1].StartOffset <= end {
		c.entries[n-1].EndOffset = end
	}
}

// TruncateSuffixByOffset removes the entries starting at or after offset
// and writes the file; the last entry left then ends at NoEnd. (RocketMQ
// means to do the same, but its reset changes a copy of the entry, so its
// last entry keeps the removed next one's start as its end until the next
// append or restart; rocketkv does what its comment says.)
func (c *EpochCache) TruncateSuffixByOffset(offset int64) error {
	return c.truncate(func(e EpochEntry) bool { return e.StartOffset >= offset })
}

// TruncateSuffixByEpoch removes the entries of epoch and above and writes
// the file.
func (c *EpochCache) TruncateSuffixByEpoch(epoch int32) error {
	return c.truncate(func(e EpochEntry) bool { return e.Epoch >= epoch })
}

// TruncatePrefixByOffset removes the entries ending at or before offset
// (retention deleted their records) and writes the file.
func (c *EpochCache) TruncatePrefixByOffset(offset int64) error {
	return c.truncate(func(e EpochEntry) bool { return e.EndOffset <= offset })
}

func (c *EpochCache) truncate(drop func(EpochEntry) bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	c.entries = slices.DeleteFunc(c.entries, drop)
	if len(c.entries) == n {
		return nil
	}
	if k := len(c.entries); k > 0 {
		c.entries[k-1].EndOffset = NoEnd
	}
	return c.flushLocked()
}

// ConsistentPoint returns the end of what c's log and other's share
// (RocketMQ's findConsistentPoint): for the highest epoch of c that other
// holds with the same start offset, the lower of the two entries'
// EndOffsets; -1 when they share no epoch start. Set each cache's last
// EndOffset to its log's end first (SetLastEndOffset).
func (c *EpochCache) ConsistentPoint(other *EpochCache) int64 {
	mine := c.Entries()
	for i := len(mine) - 1; i >= 0; i-- {
		o, ok := other.Entry(mine[i].Epoch)
		if ok && o.StartOffset == mine[i].StartOffset {
			return min(mine[i].EndOffset, o.EndOffset)
		}
	}
	return -1
}

// FollowRetention returns the callback to register with the CommitLog's
// OnMinOffsetChange: when retention deleted segments, the entries ending
// at or before the new first offset minus one go (RocketMQ's store calls
// truncateEpochFilePrefix(minPhyOffset - 1) after a deletion in
// controller mode). Errors are logged.
func (c *EpochCache) FollowRetention(log zerolog.Logger) func(newMin int64) {
	return func(newMin int64) {
		if err := c.TruncatePrefixByOffset(newMin - 1); err != nil {
			log.Error().Err(err).Int64("minOffset", newMin).Msg("the epoch file keeps the entries of deleted segments")
		}
	}
}
