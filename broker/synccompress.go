package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave copies its master's metadata with RocketMQ's GET_ALL_* requests,
// whose answers are JSON tables in one frame. At a million queues those
// tables pass the 16 MiB a frame may hold (some 94,000 topics in
// GET_ALL_TOPIC_CONFIG; in GET_ALL_CONSUMER_OFFSET about 12 bytes a queue
// and group), and the copy failed every time, as it does between Apache
// RocketMQ brokers. A rocketkv slave asks with syncFieldAccept, and a
// rocketkv master answers a table of syncCompressMin bytes or more
// zstd-compressed, naming it in syncFieldEncoding (the tables shrink
// about tenfold). Apache RocketMQ ignores the field both ways: its master
// answers plain JSON, and a rocketkv master answers its slaves, which do
// not ask, plain JSON.
const (
	// syncFieldAccept is the request's ext field: "zstd".
	syncFieldAccept = "rkvAcceptEncoding"
	// syncFieldEncoding is the answer's ext field when its body is
	// compressed: "zstd".
	syncFieldEncoding = "rkvContentEncoding"
	syncEncodingZstd  = "zstd"
	// syncCompressMin is the smallest body worth compressing.
	syncCompressMin = 64 << 10
	// maxSyncBody bounds a decompressed answer: a hostile or broken
	// master cannot make the slave allocate much more. A million topics'
	// table is some 180 MB of JSON.
	maxSyncBody = 256 << 20
	// syncMaxWindow bounds the window a compressed answer may ask the
	// decoder for (newSyncEncoder's frames use at most 8 MiB).
	syncMaxWindow = 16 << 20
)

// compressedForSlaves answers as f, compressing a large body for a slave
// that accepts it.
func (b *Broker) compressedForSlaves(f remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := f(ctx, conn, req)
		if resp == nil || resp.Code != remoting.Success || req.ExtFields[syncFieldAccept] != syncEncodingZstd ||
			len(resp.Body) < syncCompressMin {
			return resp
		}
		resp.Body = b.syncEncoder.EncodeAll(resp.Body, make([]byte, 0, len(resp.Body)/4))
		if resp.ExtFields == nil {
			resp.ExtFields = map[string]string{}
		}
		resp.ExtFields[syncFieldEncoding] = syncEncodingZstd
		return resp
	}
}

// newSyncEncoder returns the encoder of compressed metadata answers: one
// goroutine per call of EncodeAll, none of its own.
func newSyncEncoder() (*zstd.Encoder, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder for slaves' metadata copies: %w", err)
	}
	return enc, nil
}

// syncBody returns the body of a master's metadata answer, decompressed
// when the master compressed it.
func syncBody(resp *remoting.Command) ([]byte, error) {
	switch enc := resp.ExtFields[syncFieldEncoding]; enc {
	case "":
		return resp.Body, nil
	case syncEncodingZstd:
		return decompressSyncBody(resp.Body, maxSyncBody)
	default:
		return nil, fmt.Errorf("the master's answer is in an encoding this slave does not know: %q", enc)
	}
}

// decompressSyncBody decompresses a zstd answer into exactly the bytes
// its frame header declares (newSyncEncoder's EncodeAll declares them),
// at most limit: a body that does not declare its size, declares more,
// or holds more or less than it declares is refused without allocating
// more than it declared. (A one-shot decode grows its output as frames
// come, to several times the limit before refusing them.)
func decompressSyncBody(body []byte, limit int64) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(body); err != nil {
		return nil, fmt.Errorf("the master's compressed answer (%d bytes): frame header: %w", len(body), err)
	}
	if !h.HasFCS || h.FrameContentSize > uint64(limit) {
		return nil, fmt.Errorf("the master's compressed answer (%d bytes) declares no size, or more than %d bytes (%d)", len(body), limit, h.FrameContentSize)
	}
	d, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(syncMaxWindow), zstd.WithDecoderMaxMemory(uint64(limit)))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	defer d.Close()
	out := make([]byte, h.FrameContentSize)
	if _, err := io.ReadFull(d, out); err != nil {
		return nil, fmt.Errorf("decompress the master's answer (%d bytes, %d declared): %w", len(body), len(out), err)
	}
	var more [1]byte
	if n, err := io.ReadFull(d, more[:]); n != 0 || !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decompress the master's answer (%d bytes): more than the %d bytes declared, or bad bytes after them: %v", len(body), len(out), err)
	}
	return out, nil
}

// A rocketkv slave also names the data version of its topic and group
// tables (syncFieldHaveVersion, "counter:timestamp"), and a rocketkv
// master whose table has that version answers syncFieldNotModified with
// no body instead of the table: the slave takes a table over only when
// its version changed, and a million topics' table need not be built and
// sent every minute to be thrown away.
const (
	syncFieldHaveVersion = "rkvHaveVersion"
	syncFieldNotModified = "rkvNotModified"
)

// versionField encodes a data version for syncFieldHaveVersion.
func versionField(v meta.DataVersion) string {
	return strconv.FormatInt(v.Counter, 10) + ":" + strconv.FormatInt(v.Timestamp, 10)
}

// unlessUnchanged answers as f, or syncFieldNotModified when the request
// names the version the table has now.
func unlessUnchanged(version func() meta.DataVersion, f remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		if have, ok := req.ExtFields[syncFieldHaveVersion]; ok && have == versionField(version()) {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.ExtFields = map[string]string{syncFieldNotModified: "true"}
			return resp
		}
		return f(ctx, conn, req)
	}
}
