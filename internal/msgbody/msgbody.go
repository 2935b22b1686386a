// Package msgbody decompresses message bodies as RocketMQ's clients do:
// a Remoting producer's body compressed with the algorithm its sysFlag
// names (zlib, LZ4 or Zstandard), bounded so that a hostile body cannot
// make the caller allocate without limit. The gRPC proxy hands consumers
// the plain body; bin/admin prints it. grpcproxy's FuzzDecompress and
// FuzzInflate drive both functions with arbitrary bytes.
package msgbody

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/rocketkv/rocketkv/commitlog"
)

// ErrTooLarge is Inflate's and Decompress's error for a body that
// decompresses to more than the limit.
var ErrTooLarge = errors.New("decompressed body exceeds the limit")

// Decompress inflates body, compressed with the algorithm ct
// (commitlog.CompressionType of the record's sysFlag), refusing more than
// limit bytes of output.
func Decompress(ct int32, body []byte, limit int) ([]byte, error) {
	switch ct {
	case commitlog.CompressionZLIB:
		return Inflate(func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }, body, limit)
	case commitlog.CompressionLZ4:
		return Inflate(func(r io.Reader) (io.Reader, error) { return lz4.NewReader(r), nil }, body, limit)
	case commitlog.CompressionZSTD:
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(limit)))
		if err != nil {
			return nil, fmt.Errorf("zstd body: %w", err)
		}
		defer d.Close()
		out, err := d.DecodeAll(body, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, fmt.Errorf("zstd body: %w (%d bytes): %w", ErrTooLarge, limit, err)
		}
		if err != nil {
			return nil, fmt.Errorf("zstd body: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("body compressed with unknown type %#x", ct)
}

// Inflate reads all of a compressed body through open, refusing more than
// limit bytes of output (ErrTooLarge).
func Inflate(open func(io.Reader) (io.Reader, error), body []byte, limit int) ([]byte, error) {
	r, err := open(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)
	}
	return out, nil
}
