package filecq

import (
	"errors"
	"fmt"
	"io"

	"github.com/edsrzf/mmap-go"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

// segment is one open ConsumeQueue file. Reads come from the mapping when
// there is one (a writable store maps the files it reads), otherwise from
// the file (pread). Writes always go through the file (pwrite), as
// RocketMQ's default putConsumeQueueDataByFileChannel does: on a sparse file
// a full disk then fails the write instead of killing the process with
// SIGBUS.
type segment struct {
	start int64 // byte offset of the file's first unit in its queue
	path  string
	f     vfs.File
	m     mmap.MMap // nil when not mapped
	dirty bool      // written since the last sync
}

// read fills p from byte off of the file.
func (sg *segment) read(p []byte, off int64) error {
	if sg.m != nil {
		if off < 0 || off+int64(len(p)) > int64(len(sg.m)) {
			return fmt.Errorf("read %s at %d: beyond the mapping of %d bytes: %w", sg.path, off, len(sg.m), ErrCorrupt)
		}
		copy(p, sg.m[off:])
		return nil
	}
	n, err := sg.f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %s at %d: %w", sg.path, off, err)
}

// write writes p at byte off of the file.
func (sg *segment) write(p []byte, off int64) error {
	sg.dirty = true
	if _, err := sg.f.WriteAt(p, off); err != nil {
		return fmt.Errorf("write %s at %d: %w", sg.path, off, err)
	}
	return nil
}

// close unmaps and closes the file.
func (sg *segment) close() error {
	var uerr error
	if sg.m != nil {
		if err := sg.m.Unmap(); err != nil {
			uerr = fmt.Errorf("unmap %s: %w", sg.path, err)
		}
		sg.m = nil
	}
	if err := sg.f.Close(); err != nil {
		return errors.Join(uerr, fmt.Errorf("close %s: %w", sg.path, err))
	}
	return uerr
}
