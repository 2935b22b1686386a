package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes of the protocol's headers.
const (
	// ReportSize is the size of a slave's report.
	ReportSize = 8
	// TransferHeaderSize is the size of a transfer's header.
	TransferHeaderSize = 8 + 4
	// MaxTransferBody bounds a transfer's body: RocketMQ's slave reads
	// whole transfers, header included, into a 4 MiB buffer
	// (DefaultHAClient.READ_MAX_BUFFER_SIZE) and never completes a longer
	// one, so no master sends more in one transfer.
	MaxTransferBody = 4<<20 - TransferHeaderSize
)

// ErrProtocol is returned for bytes that break the HA protocol: a
// negative offset, a body size below 0 or above MaxTransferBody.
var ErrProtocol = errors.New("ha: protocol violation")

// appendTransferHeader appends a transfer's header.
func appendTransferHeader(b []byte, offset int64, size int) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	return binary.BigEndian.AppendUint32(b, uint32(size))
}

// appendReport appends a slave's report.
func appendReport(b []byte, offset int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(offset))
}

// transferReader cuts the master's byte stream into transfers. Bytes are
// fed as they arrive; next returns whole transfers. Not safe for
// concurrent use.
type transferReader struct {
	buf []byte // unread bytes
	off int    // start of the unread bytes in buf
}

// feed appends received bytes.
func (r *transferReader) feed(p []byte) {
	if r.off > 0 && r.off == len(r.buf) {
		r.buf, r.off = r.buf[:0], 0
	} else if r.off > len(r.buf)/2 {
		n := copy(r.buf, r.buf[r.off:])
		r.buf, r.off = r.buf[:n], 0
	}
	r.buf = append(r.buf, p...)
}

// next returns the next whole transfer: its offset and body (valid until
// the next feed). ok is false when the buffered bytes hold no whole
// transfer yet; err wraps ErrProtocol for a header that cannot be valid.
func (r *transferReader) next() (offset int64, body []byte, ok bool, err error) {
	b := r.buf[r.off:]
	if len(b) < TransferHeaderSize {
		return 0, nil, false, nil
	}
	offset = int64(binary.BigEndian.Uint64(b))
	size := int32(binary.BigEndian.Uint32(b[8:]))
	if offset < 0 {
		return 0, nil, false, fmt.Errorf("%w: transfer at negative offset %d", ErrProtocol, offset)
	}
	if size < 0 || size > MaxTransferBody {
		return 0, nil, false, fmt.Errorf("%w: transfer body of %d bytes (at most %d)", ErrProtocol, size, MaxTransferBody)
	}
	if len(b) < TransferHeaderSize+int(size) {
		return 0, nil, false, nil
	}
	body = b[TransferHeaderSize : TransferHeaderSize+int(size) : TransferHeaderSize+int(size)]
	r.off += TransferHeaderSize + int(size)
	return offset, body, true, nil
}

// buffered reports how many received bytes are not consumed yet.
func (r *transferReader) buffered() int { return len(r.buf) - r.off }

// decodeReports reads the slave's reports in p, a read of the stream
// together with pending, the bytes of an unfinished report left by the
// previous call. It returns the last whole report (ok false when none),
// the bytes left over and an error wrapping ErrProtocol for a negative
// offset.
func decodeReports(pending, p []byte) (last int64, ok bool, rest []byte, err error) {
	b := append(pending, p...)
	for len(b) >= ReportSize {
		v := int64(binary.BigEndian.Uint64(b))
		if v < 0 {
			return 0, false, nil, fmt.Errorf("%w: slave reports offset %d", ErrProtocol, v)
		}
		last, ok = v, true
		b = b[ReportSize:]
	}
	return last, ok, append(pending[:0], b...), nil
}
