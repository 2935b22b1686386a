package rocksread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Physical record types of RocksDB's log format (MANIFEST and WAL files).
const (
	logBlockSize     = 32 << 10
	logHeaderSize    = 7
	logRecyclableHdr = 11

	logZero                  = 0
	logFull                  = 1
	logFirst                 = 2
	logMiddle                = 3
	logLast                  = 4
	logRecyclableFull        = 5
	logRecyclableFirst       = 6
	logRecyclableMiddle      = 7
	logRecyclableLast        = 8
	logSetCompression        = 9
	logTimestampSize         = 10
	logRecyclableTimestamp   = 11
	logRecordSafeIgnoreMask  = 1 << 7
	maxLogicalRecordSize     = 1 << 30
	timestampSizeEntryLength = 6
)

// errTornTail reports a log that ends inside a record: the writer was
// stopped mid-write (or is still writing). Readers treat the records before
// it as the whole log, as RocksDB's recovery does.
var errTornTail = errors.New("log ends inside a record")

// logReader returns the logical records of one MANIFEST or WAL file, block
// by block, without holding the whole file.
type logReader struct {
	rd      io.Reader
	name    string
	logNum  uint64 // the file's number; recyclable records carry it
	buf     []byte
	n       int   // valid bytes in buf
	pos     int   // next header within buf
	base    int64 // file offset of buf[0]
	eof     bool
	scratch []byte
}

func newLogReader(rd io.Reader, name string, logNum uint64) *logReader {
	return &logReader{rd: rd, name: name, logNum: logNum, buf: make([]byte, logBlockSize)}
}

func (r *logReader) fill() error {
	r.base += int64(r.n)
	n, err := io.ReadFull(r.rd, r.buf)
	r.n, r.pos = n, 0
	switch {
	case err == nil:
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		r.eof = true
	default:
		return fmt.Errorf("read %s: %w", r.name, err)
	}
	return nil
}

// next returns the next logical record. The slice is valid until the next
// call. io.EOF ends a clean log; errTornTail a log cut inside a record;
// an ErrCorrupt error a record whose checksum or framing is wrong.
func (r *logReader) next() ([]byte, error) {
	r.scratch = r.scratch[:0]
	inFragment := false
	end := func() ([]byte, error) {
		if inFragment {
			return nil, errTornTail
		}
		return nil, io.EOF
	}
	for {
		if r.n-r.pos < logHeaderSize {
			// The rest of a block too short for a header is zero padding.
			if r.eof {
				if r.n-r.pos > 0 && !allZero(r.buf[r.pos:r.n]) {
					return nil, errTornTail
				}
				return end()
			}
			if err := r.fill(); err != nil {
				return nil, err
			}
			continue
		}
		h := r.buf[r.pos:r.n]
		stored := binary.LittleEndian.Uint32(h[0:4])
		length := int(binary.LittleEndian.Uint16(h[4:6]))
		typ := h[6]
		if typ == logZero && length == 0 {
			// Preallocated, never written space: the log ends here.
			return end()
		}
		hdr := logHeaderSize
		recyclable := false
		switch typ {
		case logRecyclableFull, logRecyclableFirst, logRecyclableMiddle, logRecyclableLast, logRecyclableTimestamp:
			hdr, recyclable = logRecyclableHdr, true
		}
		if len(h) < hdr+length {
			if r.eof {
				return nil, errTornTail
			}
			return nil, corruptf("%s offset %d: record of %d bytes crosses a block boundary", r.name, r.base+int64(r.pos), length)
		}
		payload := h[hdr : hdr+length]
		crc := crc32.Update(0, castagnoli, h[6:hdr])
		crc = crc32.Update(crc, castagnoli, payload)
		if crc != unmaskCRC(stored) {
			if r.eof && r.pos+hdr+length == r.n {
				// The last record of a file being written: RocksDB's
				// recovery stops here too.
				return nil, errTornTail
			}
			return nil, corruptf("%s offset %d: record checksum mismatch", r.name, r.base+int64(r.pos))
		}
		at := r.base + int64(r.pos)
		r.pos += hdr + length
		if recyclable && uint64(binary.LittleEndian.Uint32(h[7:11])) != r.logNum&0xffffffff {
			// A record left over from the file's previous life.
			return end()
		}
		switch typ {
		case logFull, logRecyclableFull:
			if inFragment {
				return nil, corruptf("%s offset %d: full record inside a fragmented one", r.name, at)
			}
			return payload, nil
		case logFirst, logRecyclableFirst:
			if inFragment {
				return nil, corruptf("%s offset %d: first fragment inside a fragmented record", r.name, at)
			}
			inFragment = true
			r.scratch = append(r.scratch, payload...)
		case logMiddle, logRecyclableMiddle, logLast, logRecyclableLast:
			if !inFragment {
				return nil, corruptf("%s offset %d: fragment without a first one", r.name, at)
			}
			if len(r.scratch)+len(payload) > maxLogicalRecordSize {
				return nil, corruptf("%s offset %d: record larger than %d bytes", r.name, at, maxLogicalRecordSize)
			}
			r.scratch = append(r.scratch, payload...)
			if typ == logLast || typ == logRecyclableLast {
				return r.scratch, nil
			}
		case logSetCompression:
			if len(payload) == 0 || payload[0] != 0 {
				return nil, unsupportedf("%s offset %d: compressed WAL (wal_compression)", r.name, at)
			}
		case logTimestampSize, logRecyclableTimestamp:
			if len(payload)%timestampSizeEntryLength != 0 {
				return nil, corruptf("%s offset %d: timestamp size record of %d bytes", r.name, at, len(payload))
			}
			for i := 0; i < len(payload); i += timestampSizeEntryLength {
				if binary.LittleEndian.Uint16(payload[i+4:]) != 0 {
					return nil, unsupportedf("%s offset %d: user-defined timestamps in column family %d", r.name, at, binary.LittleEndian.Uint32(payload[i:]))
				}
			}
		default:
			if typ&logRecordSafeIgnoreMask == 0 {
				return nil, corruptf("%s offset %d: unknown record type %d", r.name, at, typ)
			}
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
