package rocksread

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// Block checksum types, the first byte of a table footer.
const (
	checksumNone     = 0
	checksumCRC32c   = 1
	checksumXXHash   = 2
	checksumXXHash64 = 3
	checksumXXH3     = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcMaskDelta is the constant RocksDB (and LevelDB) add when they store a
// CRC next to the data it covers, so a CRC of bytes holding CRCs is not
// itself a CRC.
const crcMaskDelta = 0xa282ead8

func unmaskCRC(masked uint32) uint32 {
	rot := masked - crcMaskDelta
	return rot>>17 | rot<<15
}

// blockChecksum computes the checksum stored in a block trailer: over the
// block's bytes and then the compression type byte that follows them.
// XXH3 hashes the block alone and mixes the last byte in by multiplication
// rather than streaming it.
func blockChecksum(kind byte, data []byte, last byte) (uint32, bool) {
	switch kind {
	case checksumCRC32c:
		c := crc32.Update(0, castagnoli, data)
		c = crc32.Update(c, castagnoli, []byte{last})
		return (c>>15 | c<<17) + crcMaskDelta, true
	case checksumXXHash:
		return xxh32WithLast(data, last), true
	case checksumXXHash64:
		d := xxhash.New()
		_, _ = d.Write(data)
		_, _ = d.Write([]byte{last})
		return uint32(d.Sum64()), true
	case checksumXXH3:
		const lastByteMix = 0x6b9083d9
		return uint32(xxh3.Hash(data)) ^ uint32(last)*lastByteMix, true
	}
	return 0, false
}

func checksumName(kind byte) string {
	switch kind {
	case checksumNone:
		return "none"
	case checksumCRC32c:
		return "crc32c"
	case checksumXXHash:
		return "xxHash"
	case checksumXXHash64:
		return "xxHash64"
	case checksumXXH3:
		return "XXH3"
	}
	return "unknown"
}

// XXH32 (seed 0), which RocksDB's kxxHash checksum uses; no module in
// go.mod exports it.
const (
	xxp1 uint32 = 2654435761
	xxp2 uint32 = 2246822519
	xxp3 uint32 = 3266489917
	xxp4 uint32 = 668265263
	xxp5 uint32 = 374761393
)

func xxh32WithLast(data []byte, last byte) uint32 {
	buf := make([]byte, len(data)+1)
	copy(buf, data)
	buf[len(data)] = last
	return xxh32(buf)
}

func xxh32(b []byte) uint32 {
	n := len(b)
	var h uint32
	if n >= 16 {
		p1, p2 := xxp1, xxp2 // variables: the sums wrap, as XXH32 wants
		v1 := p1 + p2
		v2 := p2
		v3 := uint32(0)
		v4 := 0 - p1
		round := func(v, lane uint32) uint32 {
			return bits.RotateLeft32(v+lane*xxp2, 13) * xxp1
		}
		for len(b) >= 16 {
			v1 = round(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = round(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = xxp5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h += binary.LittleEndian.Uint32(b) * xxp3
		h = bits.RotateLeft32(h, 17) * xxp4
		b = b[4:]
	}
	for _, c := range b {
		h += uint32(c) * xxp5
		h = bits.RotateLeft32(h, 11) * xxp1
	}
	h ^= h >> 15
	h *= xxp2
	h ^= h >> 13
	h *= xxp3
	h ^= h >> 16
	return h
}
