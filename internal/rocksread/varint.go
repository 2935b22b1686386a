package rocksread

import (
	"encoding/binary"
	"math"
)

// byteReader decodes RocksDB's little-endian varints and length-prefixed
// slices from a buffer. The first failure sticks: later reads return zero
// values and ok() reports false, so a decoder checks once at the end of a
// record instead of after every field.
type byteReader struct {
	b   []byte
	bad bool
}

func (r *byteReader) uvarint64() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *byteReader) uvarint32() uint32 {
	v := r.uvarint64()
	if v > math.MaxUint32 {
		r.bad = true
		return 0
	}
	return uint32(v)
}

// svarint64 is RocksDB's PutVarsignedint64: zigzag, then varint.
func (r *byteReader) svarint64() int64 {
	u := r.uvarint64()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *byteReader) bytes(n uint64) []byte {
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// lenPrefixed is a varint32 length followed by that many bytes.
func (r *byteReader) lenPrefixed() []byte {
	n := r.uvarint32()
	return r.bytes(uint64(n))
}

func (r *byteReader) byte1() byte {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *byteReader) ok() bool { return !r.bad }

func (r *byteReader) empty() bool { return len(r.b) == 0 }
