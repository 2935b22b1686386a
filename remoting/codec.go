package remoting

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// DefaultMaxFrameSize is Java's frame limit (com.rocketmq.remoting.frameMaxLength):
// 16 MiB, counting the 4-byte length word.
const DefaultMaxFrameSize = 16 << 20

// maxHeaderLen is the largest header the 24-bit length field can describe.
const maxHeaderLen = 1<<24 - 1

// Errors about frames. A server or client that meets one closes the
// connection, as Java does: the byte stream can no longer be trusted.
var (
	// ErrFrameTooLarge is returned when a frame's length word announces more
	// than the configured maximum frame size.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrBadFrame is returned when a frame's length word is shorter than the
	// header-length word that must follow it, when the header length points
	// past the end of the frame, or when Decode is given a slice whose
	// length disagrees with the frame's length word.
	ErrBadFrame = errors.New("malformed frame")
	// ErrUnknownSerializeType is returned when the top byte of a frame's
	// second word is neither 0 (JSON) nor 1 (ROCKETMQ).
	ErrUnknownSerializeType = errors.New("unknown serialize type")
)

// Encode returns cmd as one frame, length word included, with its header in
// cmd.SerializeType's encoding.
func Encode(cmd *Command) ([]byte, error) {
	n := 8 + 128 + len(cmd.Body)
	return AppendEncode(make([]byte, 0, n), cmd)
}

// AppendEncode appends the frame of cmd to dst and returns the extended
// slice. On error dst is returned unchanged.
func AppendEncode(dst []byte, cmd *Command) ([]byte, error) {
	out, err := appendFramePrefix(dst, cmd)
	if err != nil {
		return dst, err
	}
	return append(out, cmd.Body...), nil
}

// appendFramePrefix appends everything of cmd's frame but the body: length
// word, serialize-type/header-length word and header. The length word
// already counts the body, so the body can follow in a separate write.
func appendFramePrefix(dst []byte, cmd *Command) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	switch cmd.SerializeType {
	case SerializeJSON:
		dst = appendJSONHeader(dst, cmd)
	case SerializeRocketMQ:
		dst, err = appendBinaryHeader(dst, cmd)
	default:
		err = fmt.Errorf("%w: %d", ErrUnknownSerializeType, cmd.SerializeType)
	}
	if err != nil {
		return dst[:start], err
	}
	h := len(dst) - start - 8
	if h > maxHeaderLen {
		return dst[:start], fmt.Errorf("%w: header of %d bytes exceeds the 24-bit length field", ErrNotEncodable, h)
	}
	l := 4 + int64(h) + int64(len(cmd.Body))
	if l > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes", ErrNotEncodable, l)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(l))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(cmd.SerializeType)<<24|uint32(h))
	return dst, nil
}

// Decode parses one whole frame, length word included. The returned
// command's Body aliases frame; header strings are copies.
func Decode(frame []byte) (*Command, error) {
	if len(frame) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, need at least 8", ErrBadFrame, len(frame))
	}
	l := int64(binary.BigEndian.Uint32(frame))
	if l != int64(len(frame)-4) {
		return nil, fmt.Errorf("%w: length word says %d, have %d bytes after it", ErrBadFrame, l, len(frame)-4)
	}
	word := binary.BigEndian.Uint32(frame[4:])
	st := byte(word >> 24)
	h := int(word & maxHeaderLen)
	if h > len(frame)-8 {
		return nil, fmt.Errorf("%w: header length %d with %d bytes left", ErrBadFrame, h, len(frame)-8)
	}
	cmd := &Command{SerializeType: st}
	header := frame[8 : 8+h]
	switch st {
	case SerializeJSON:
		if err := decodeJSONHeader(header, cmd); err != nil {
			return nil, err
		}
	case SerializeRocketMQ:
		if err := decodeBinaryHeader(header, cmd); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownSerializeType, st)
	}
	if body := frame[8+h:]; len(body) > 0 {
		cmd.Body = body
	}
	return cmd, nil
}

// FrameLength looks at the start of a byte stream and returns the size of
// the frame there, length word included, or 0 if fewer than 4 bytes are
// buffered. It fails with ErrBadFrame when the length word is below 4 and
// with ErrFrameTooLarge when the frame would exceed maxFrameSize (no limit
// when maxFrameSize <= 0).
func FrameLength(b []byte, maxFrameSize int) (int, error) {
	if len(b) < 4 {
		return 0, nil
	}
	l := int64(int32(binary.BigEndian.Uint32(b)))
	if l < 4 {
		return 0, fmt.Errorf("%w: length word %d is below 4", ErrBadFrame, l)
	}
	total := l + 4
	if maxFrameSize > 0 && total > int64(maxFrameSize) {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, total, maxFrameSize)
	}
	return int(total), nil
}

// FrameReader splits a byte stream into frames.
type FrameReader struct {
	r   *bufio.Reader
	max int
	// chunk is the most ReadFrame allocates ahead of the bytes that
	// arrived (frameReadChunk; tests make it small).
	chunk int
}

// NewFrameReader returns a FrameReader over r that rejects frames larger
// than maxFrameSize bytes (DefaultMaxFrameSize when <= 0).
func NewFrameReader(r io.Reader, maxFrameSize int) *FrameReader {
	return newFrameReaderSize(r, maxFrameSize, 64<<10)
}

// newFrameReaderSize is NewFrameReader with a read buffer of bufSize
// bytes.
func newFrameReaderSize(r io.Reader, maxFrameSize, bufSize int) *FrameReader {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	return &FrameReader{r: bufio.NewReaderSize(r, bufSize), max: maxFrameSize, chunk: frameReadChunk}
}

// ReadFrame returns the next whole frame, length word included, in a new
// slice the caller owns. At a clean end of stream it returns io.EOF; a
// stream that ends inside a frame gives io.ErrUnexpectedEOF.
func (f *FrameReader) ReadFrame() ([]byte, error) {
	head, err := f.r.Peek(4)
	if err != nil {
		if err == io.EOF && len(head) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n, err := FrameLength(head, f.max)
	if err != nil {
		return nil, err
	}
	// The buffer grows with the bytes that arrive, at most doubling: a
	// peer that declares a large frame and sends nothing more holds
	// f.chunk bytes, not the declared size.
	frame := make([]byte, 0, min(n, f.chunk))
	for len(frame) < n {
		want := min(n-len(frame), max(len(frame), f.chunk))
		frame = slices.Grow(frame, want)
		got, err := io.ReadFull(f.r, frame[len(frame):len(frame)+want])
		frame = frame[:len(frame)+got]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return frame, nil
}

// frameReadChunk is the most a FrameReader allocates ahead of the bytes
// that arrived.
const frameReadChunk = 64 << 10
