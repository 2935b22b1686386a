package filecq

import (
	"encoding/binary"
	"fmt"
	"math"
)

// UnitSize is the size of one ConsumeQueue unit in bytes.
const UnitSize = 20

// DefaultUnitsPerFile is RocketMQ's default number of units per file
// (mappedFileSizeConsumeQueue = 300,000 x 20 = 6,000,000 bytes).
const DefaultUnitsPerFile = 300_000

// blankSize is the size field of the blank units RocketMQ writes below the
// first entry of a queue whose first file does not start at its first
// offset.
const blankSize = math.MaxInt32

// maxQueueOffset keeps queue offset x UnitSize inside int64.
const maxQueueOffset = math.MaxInt64/UnitSize - 1

// unit is one decoded 20-byte unit.
type unit struct {
	phy  int64
	size int32
	tags int64
}

func decodeUnit(b []byte) unit {
	return unit{
		phy:  int64(binary.BigEndian.Uint64(b[0:8])),
		size: int32(binary.BigEndian.Uint32(b[8:12])),
		tags: int64(binary.BigEndian.Uint64(b[12:20])),
	}
}

func encodeUnit(b []byte, u unit) {
	binary.BigEndian.PutUint64(b[0:8], uint64(u.phy))
	binary.BigEndian.PutUint32(b[8:12], uint32(u.size))
	binary.BigEndian.PutUint64(b[12:20], uint64(u.tags))
}

// valid is RocketMQ's recovery test: the scan of a file stops at the first
// unit failing it (normally the zero tail).
func (u unit) valid() bool { return u.phy >= 0 && u.size > 0 }

// blank reports a pre-fill unit (phy 0, size 0x7FFFFFFF, tags 0). Blank
// units pass the recovery test but are never entries.
func (u unit) blank() bool { return u.phy == 0 && u.size == blankSize && u.tags == 0 }

// end is the CommitLog offset just past the record, 0 for a blank unit.
func (u unit) end() int64 {
	if u.blank() {
		return 0
	}
	return u.phy + int64(u.size)
}

var blankUnit = unit{phy: 0, size: blankSize, tags: 0}

// FileName returns the name of the file whose first unit sits at the given
// byte offset of its queue: the offset as 20 zero-padded decimal digits.
func FileName(byteOffset int64) string { return fmt.Sprintf("%020d", byteOffset) }

// parseFileName returns the byte offset a file name stands for. Like
// RocketMQ it accepts any run of decimal digits.
func parseFileName(name string) (int64, bool) {
	if name == "" || len(name) > 20 {
		return 0, false
	}
	var v int64
	for _, c := range []byte(name) {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
