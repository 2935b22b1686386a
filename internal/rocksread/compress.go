package rocksread

import (
	"bytes"
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Block compression types, the first byte of a block trailer.
const (
	compressionNone        = 0x0
	compressionSnappy      = 0x1
	compressionZlib        = 0x2
	compressionBZip2       = 0x3
	compressionLZ4         = 0x4
	compressionLZ4HC       = 0x5
	compressionXpress      = 0x6
	compressionZSTD        = 0x7
	compressionZSTDNotFinl = 0x40

	// maxBlockSize bounds what a block may claim to decompress to, so a bad
	// size prefix cannot make the reader allocate gigabytes. A RocksDB block
	// holds block_size bytes (RocketMQ: 4 to 32 KiB) or one larger entry.
	maxBlockSize = 64 << 20
)

// decompressor turns a stored block into its entries. It holds the zstd
// decoder, created on first use; close releases it.
type decompressor struct {
	zstd *zstd.Decoder
}

func (d *decompressor) close() {
	if d.zstd != nil {
		d.zstd.Close()
		d.zstd = nil
	}
}

// decompress undoes kind on data. From format_version 2 on, every kind but
// snappy starts with the uncompressed size as a varint32.
func (d *decompressor) decompress(kind byte, data []byte) ([]byte, error) {
	if kind == compressionNone {
		return data, nil
	}
	if kind == compressionSnappy {
		n, err := snappy.DecodedLen(data)
		if err != nil {
			return nil, corruptf("snappy block: %v", err)
		}
		if n > maxBlockSize || n > 32*len(data)+32 {
			return nil, corruptf("snappy block claims %d bytes", n)
		}
		out, err := snappy.Decode(make([]byte, n), data)
		if err != nil {
			return nil, corruptf("snappy block: %v", err)
		}
		return out, nil
	}
	r := byteReader{b: data}
	size := r.uvarint32()
	if !r.ok() || size > maxBlockSize {
		return nil, corruptf("compressed block (type %d): bad size prefix", kind)
	}
	src := r.b
	switch kind {
	case compressionLZ4, compressionLZ4HC:
		if uint64(size) > 255*uint64(len(src))+16 {
			return nil, corruptf("lz4 block: %d bytes cannot come from %d", size, len(src))
		}
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(src, out)
		if err != nil || n != int(size) {
			return nil, corruptf("lz4 block: %d of %d bytes: %v", n, size, err)
		}
		return out, nil
	case compressionZSTD, compressionZSTDNotFinl:
		if d.zstd == nil {
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBlockSize))
			if err != nil {
				return nil, fmt.Errorf("zstd decoder: %w", err)
			}
			d.zstd = dec
		}
		out, err := d.zstd.DecodeAll(src, make([]byte, 0, min(int(size), 64*len(src)+64)))
		if err != nil || len(out) != int(size) {
			return nil, corruptf("zstd block: %d of %d bytes: %v", len(out), size, err)
		}
		return out, nil
	case compressionZlib:
		// RocksDB writes raw deflate (window_bits -14), no zlib header.
		if uint64(size) > 1032*uint64(len(src))+16 {
			return nil, corruptf("zlib block: %d bytes cannot come from %d", size, len(src))
		}
		fr := flate.NewReader(bytes.NewReader(src))
		defer fr.Close()
		out := make([]byte, size)
		if _, err := io.ReadFull(fr, out); err != nil {
			return nil, corruptf("zlib block: %v", err)
		}
		return out, nil
	case compressionBZip2, compressionXpress:
		return nil, unsupportedf("block compression type %d", kind)
	}
	return nil, corruptf("unknown block compression type %d", kind)
}
