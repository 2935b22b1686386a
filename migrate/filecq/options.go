package filecq

import (
	"errors"
	"fmt"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rs/zerolog"
)

// DefaultMaxOpenQueues is the default bound on queues holding open files.
const DefaultMaxOpenQueues = 1024

// maxUnitsPerFile keeps a file below 2 GiB (RocketMQ's files are far
// smaller; 300,000 units is the default).
const maxUnitsPerFile = (1<<31 - 1) / UnitSize

// segmentsPerQueue is the number of files a queue keeps open at once: the
// one being written and one being read, usually.
const segmentsPerQueue = 2

// Options configures a Store.
type Options struct {
	// Dir is the store root (RocketMQ's storePathRootDir). Queues live in
	// Dir/consumequeue/<topic>/<queueId>/. Dir must exist.
	Dir string

	// UnitsPerFile is the number of 20-byte units per file
	// (mappedFileSizeConsumeQueue / 20). 0 means DefaultUnitsPerFile. It
	// must match the store's existing files.
	UnitsPerFile int

	// StoreTime returns the store timestamp (ms) of the CommitLog record of
	// size bytes at phyOffset; the broker passes a CommitLog lookup.
	// OffsetByTime needs it (the file layout keeps no store time) and calls
	// it while holding the queue's lock, so it must not call back into the
	// store. It may be nil when OffsetByTime is not used.
	StoreTime func(phyOffset int64, size int32) (int64, error)

	// Logger receives warnings (out-of-order dispatch, dirty files dropped
	// by recovery, skipped directory entries). The zero Logger logs nothing.
	Logger zerolog.Logger

	// MaxOpenQueues bounds the queues holding open files at once (each holds
	// at most 2 files and, except read-only, 2 mappings), least recently
	// used first out. 0 means DefaultMaxOpenQueues.
	MaxOpenQueues int

	// FS is the file system; nil means the operating system's. Tests pass a
	// fault-injecting one.
	FS vfs.FS

	// RefillGap, when set, lets Open (not OpenReadOnly) write again the
	// files missing in the middle of a queue (a run of queue offsets
	// between two files, with an entry after it, Gap.PhyTo >= 0, or a
	// file after it with nothing written yet, PhyTo -1) instead of
	// refusing the store. It returns the run's entries from the
	// CommitLog, in offset order: every one whose record the CommitLog
	// holds, from the first whose record is at or past its minimum up to
	// g.To-1; or an error when records that should be there are not.
	// Offsets before the first entry are written as blank units. A run it
	// does not give whole is left missing, and Open refuses the queue.
	RefillGap func(g Gap) ([]cq.Entry, error)
	// MaxRefillEntries bounds the queue offsets of one run RefillGap is
	// asked for, whose entries it holds in memory at once; a longer run
	// is left missing (and the queue refused). 0 is DefaultMaxRefillEntries.
	MaxRefillEntries int64
}

// DefaultMaxRefillEntries is MaxRefillEntries' default: ten files of
// RocketMQ's default 300,000 units, about 120 MB of entries.
const DefaultMaxRefillEntries = 3_000_000

func (o Options) resolve() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("filecq: Options.Dir is empty")
	}
	if o.UnitsPerFile == 0 {
		o.UnitsPerFile = DefaultUnitsPerFile
	}
	if o.UnitsPerFile < 1 || o.UnitsPerFile > maxUnitsPerFile {
		return o, fmt.Errorf("filecq: Options.UnitsPerFile %d: want 1..%d", o.UnitsPerFile, maxUnitsPerFile)
	}
	if o.MaxOpenQueues == 0 {
		o.MaxOpenQueues = DefaultMaxOpenQueues
	}
	if o.MaxOpenQueues < 1 {
		return o, fmt.Errorf("filecq: Options.MaxOpenQueues %d: want at least 1", o.MaxOpenQueues)
	}
	if o.FS == nil {
		o.FS = vfs.OS{}
	}
	return o, nil
}
