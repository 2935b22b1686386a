package rocksread

import (
	"encoding/binary"
)

// blockHandle locates a block in a table file: its offset and its size
// without the 5-byte trailer.
type blockHandle struct {
	offset, size uint64
}

const (
	blockTrailerSize = 5
	// dataBlockHashBit marks a data block that ends with a hash index
	// (kDataBlockBinaryAndHash) in the top bit of its restart count.
	dataBlockHashBit = 1 << 31
	maxBlockEntries  = 1 << 26
)

func decodeHandle(r *byteReader) blockHandle {
	return blockHandle{offset: r.uvarint64(), size: r.uvarint64()}
}

// blockIter walks the entries of one uncompressed block in order. Keys are
// rebuilt from their shared prefixes into a buffer the iterator owns;
// values point into the block.
//
// With deltaValues (index blocks of format_version 4 and 5) entries carry
// no value length: a value at a restart point is a full block handle, any
// other value is the signed size difference to the previous handle, whose
// offset follows from the previous one.
type blockIter struct {
	data        []byte // entries only
	restarts    []byte // the restart array, 4 bytes per restart
	off         int
	nextRestart int // index into restarts of the next restart point at or after off
	key         []byte
	value       []byte
	deltaValues bool
	handle      blockHandle // the decoded value, with deltaValues
	name        string
	err         error
}

// newBlockIter splits a block into its entries and restart array. A data
// block's hash index (if any) is stepped over; nothing here needs it.
func newBlockIter(b []byte, name string, deltaValues bool) (*blockIter, error) {
	if len(b) < 4 {
		return nil, corruptf("%s: block of %d bytes", name, len(b))
	}
	end := len(b) - 4
	footer := binary.LittleEndian.Uint32(b[end:])
	numRestarts := uint64(footer)
	if footer&dataBlockHashBit != 0 {
		numRestarts = uint64(footer &^ dataBlockHashBit)
		if end < 2 {
			return nil, corruptf("%s: hash index without its bucket count", name)
		}
		buckets := int(binary.LittleEndian.Uint16(b[end-2:]))
		end -= 2 + buckets
		if end < 0 {
			return nil, corruptf("%s: hash index of %d buckets in a %d-byte block", name, buckets, len(b))
		}
	}
	if numRestarts == 0 || numRestarts*4 > uint64(end) {
		return nil, corruptf("%s: %d restarts in a %d-byte block", name, numRestarts, len(b))
	}
	start := end - int(numRestarts)*4
	it := &blockIter{data: b[:start], restarts: b[start:end], name: name, deltaValues: deltaValues}
	if binary.LittleEndian.Uint32(it.restarts) != 0 {
		return nil, corruptf("%s: first restart point is not 0", name)
	}
	return it, nil
}

func (it *blockIter) restartAt(i int) int {
	return int(binary.LittleEndian.Uint32(it.restarts[i*4:]))
}

// next advances to the next entry. It returns false at the end of the block
// or on an error (see it.err).
func (it *blockIter) next() bool {
	if it.err != nil || it.off >= len(it.data) {
		return false
	}
	atRestart := false
	for it.nextRestart < len(it.restarts)/4 && it.restartAt(it.nextRestart) <= it.off {
		atRestart = it.restartAt(it.nextRestart) == it.off
		it.nextRestart++
	}
	r := byteReader{b: it.data[it.off:]}
	shared := r.uvarint32()
	nonShared := r.uvarint32()
	var valueLen uint32
	if !it.deltaValues {
		valueLen = r.uvarint32()
	}
	if !r.ok() {
		it.err = corruptf("%s offset %d: bad entry header", it.name, it.off)
		return false
	}
	if int(shared) > len(it.key) || (atRestart && shared != 0) {
		it.err = corruptf("%s offset %d: entry shares %d bytes of a %d-byte key", it.name, it.off, shared, len(it.key))
		return false
	}
	delta := r.bytes(uint64(nonShared))
	if !r.ok() {
		it.err = corruptf("%s offset %d: key runs past the block", it.name, it.off)
		return false
	}
	it.key = append(it.key[:shared], delta...)
	if it.deltaValues {
		before := len(r.b)
		if atRestart {
			it.handle = decodeHandle(&r)
		} else {
			d := r.svarint64()
			size := int64(it.handle.size) + d
			if size < 0 {
				it.err = corruptf("%s offset %d: negative block size", it.name, it.off)
				return false
			}
			it.handle = blockHandle{offset: it.handle.offset + it.handle.size + blockTrailerSize, size: uint64(size)}
		}
		if !r.ok() {
			it.err = corruptf("%s offset %d: bad block handle", it.name, it.off)
			return false
		}
		used := before - len(r.b)
		it.value = it.data[len(it.data)-before : len(it.data)-before+used]
	} else {
		it.value = r.bytes(uint64(valueLen))
		if !r.ok() {
			it.err = corruptf("%s offset %d: value runs past the block", it.name, it.off)
			return false
		}
	}
	it.off = len(it.data) - len(r.b)
	return true
}
