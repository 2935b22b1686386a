package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// checkpointFileSize is the size of RocketMQ's checkpoint file.
const checkpointFileSize = 4096

// Checkpoint is the content of the store's 4 KiB checkpoint file: five
// big-endian int64 at offsets 0, 8, 16, 24 and 32 (the rest is zero).
type Checkpoint struct {
	// PhysicMsgTimestamp is the store time of the last flushed record.
	PhysicMsgTimestamp int64
	// LogicsMsgTimestamp is the store time of the last record put into a
	// ConsumeQueue (written by RocketMQ; kept as found by this package).
	LogicsMsgTimestamp int64
	// IndexMsgTimestamp is the end time of the last flushed IndexFile
	// (kept as found).
	IndexMsgTimestamp int64
	// MasterFlushedOffset is HA bookkeeping: a slave's note of its
	// master's flushed offset, kept as found unless SetMasterFlushedOffset
	// changes it.
	MasterFlushedOffset int64
	// ConfirmPhyOffset is the confirmed (replicated) offset: the last
	// confirm limit set (Log.SetConfirmLimit), else kept as found.
	ConfirmPhyOffset int64
}

// MinTimestamp returns the timestamp abnormal recovery compares segments'
// first store timestamps with: PhysicMsgTimestamp minus 3 s, floored at 0.
// RocketMQ's getMinTimestamp also takes LogicsMsgTimestamp when smaller,
// to rebuild its file ConsumeQueue from there; rocketkv keeps its index
// progress in Pebble and never writes that field, so in a store migrated
// from RocketMQ it stays at the migration's time for good and would make
// every abnormal start scan everything written since.
func (c Checkpoint) MinTimestamp() int64 {
	return max(c.PhysicMsgTimestamp-3000, 0)
}

func (c Checkpoint) marshal() []byte {
	b := make([]byte, checkpointFileSize)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(c.PhysicMsgTimestamp))
	be.PutUint64(b[8:], uint64(c.LogicsMsgTimestamp))
	be.PutUint64(b[16:], uint64(c.IndexMsgTimestamp))
	be.PutUint64(b[24:], uint64(c.MasterFlushedOffset))
	be.PutUint64(b[32:], uint64(c.ConfirmPhyOffset))
	return b
}

func unmarshalCheckpoint(b []byte) Checkpoint {
	be := binary.BigEndian
	return Checkpoint{
		PhysicMsgTimestamp:  int64(be.Uint64(b[0:])),
		LogicsMsgTimestamp:  int64(be.Uint64(b[8:])),
		IndexMsgTimestamp:   int64(be.Uint64(b[16:])),
		MasterFlushedOffset: int64(be.Uint64(b[24:])),
		ConfirmPhyOffset:    int64(be.Uint64(b[32:])),
	}
}

// ReadCheckpointFile reads the checkpoint file of the store rooted at
// root (<root>/checkpoint) without opening the log or creating the file:
// the values an Open would start from. A short file reads as zeros, as
// Open reads it; a missing one is an error wrapping fs.ErrNotExist.
func ReadCheckpointFile(root string) (Checkpoint, error) {
	path := filepath.Join(root, checkpointName)
	f, err := os.Open(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, 40)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return Checkpoint{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	clear(b[n:])
	return unmarshalCheckpoint(b), nil
}

// checkpointFile is the open checkpoint file.
type checkpointFile struct {
	f vfs.File
}

// openCheckpoint opens (creating if needed) the checkpoint file and reads
// it. A missing or short file reads as zeros.
func openCheckpoint(fs vfs.FS, path string) (*checkpointFile, Checkpoint, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, Checkpoint{}, fmt.Errorf("open checkpoint %s: %w", path, err)
	}
	b := make([]byte, 40)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, Checkpoint{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	clear(b[n:])
	return &checkpointFile{f: f}, unmarshalCheckpoint(b), nil
}

// write stores c and syncs it.
func (cf *checkpointFile) write(c Checkpoint) error {
	if _, err := cf.f.WriteAt(c.marshal(), 0); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", cf.f.Name(), err)
	}
	if err := cf.f.Sync(); err != nil {
		return fmt.Errorf("sync checkpoint %s: %w", cf.f.Name(), err)
	}
	return nil
}
