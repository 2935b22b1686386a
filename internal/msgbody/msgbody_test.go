package msgbody

import (
	"bytes"
	"compress/zlib"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/rocketkv/rocketkv/commitlog"
)

// Whatever the algorithm, a body that decompresses to more than the limit
// is refused with ErrTooLarge, and one of the limit's size is not: a
// caller tells a body too large from a corrupt one by the error alone.
func TestDecompressRefusesMoreThanTheLimitWithErrTooLarge(t *testing.T) {
	const limit = 4096
	zlibbed := func(b []byte) []byte {
		var out bytes.Buffer
		w := zlib.NewWriter(&out)
		_, _ = w.Write(b)
		_ = w.Close()
		return out.Bytes()
	}
	lz4Framed := func(b []byte) []byte {
		var out bytes.Buffer
		w := lz4.NewWriter(&out)
		_, _ = w.Write(b)
		_ = w.Close()
		return out.Bytes()
	}
	zstdFrame := func(b []byte) []byte { // the size declared in the frame header
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.EncodeAll(b, nil)
	}
	zstdStream := func(b []byte) []byte { // no size declared: known only once decoded
		var out bytes.Buffer
		w, err := zstd.NewWriter(&out)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(b)
		_ = w.Close()
		return out.Bytes()
	}
	for _, c := range []struct {
		name     string
		ct       int32
		compress func([]byte) []byte
	}{
		{"zlib", commitlog.CompressionZLIB, zlibbed},
		{"lz4", commitlog.CompressionLZ4, lz4Framed},
		{"zstd frame", commitlog.CompressionZSTD, zstdFrame},
		{"zstd stream", commitlog.CompressionZSTD, zstdStream},
	} {
		t.Run(c.name, func(t *testing.T) {
			fits := bytes.Repeat([]byte("x"), limit)
			if out, err := Decompress(c.ct, c.compress(fits), limit); err != nil || !bytes.Equal(out, fits) {
				t.Fatalf("%d bytes at a limit of %d: %d bytes, %v", len(fits), limit, len(out), err)
			}
			over := append(fits, 'y')
			if out, err := Decompress(c.ct, c.compress(over), limit); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d bytes over a limit of %d: %d bytes, %v; want ErrTooLarge", len(over), limit, len(out), err)
			}
		})
	}
}
