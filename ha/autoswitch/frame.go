package autoswitch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State is RocketMQ's HAConnectionState; its ordinal leads every frame.
type State int32

// The states. Frames carry StateHandshake or StateTransfer only.
const (
	StateReady     State = 0
	StateHandshake State = 1
	StateTransfer  State = 2
	StateSuspend   State = 3
	StateShutdown  State = 4
)

// String names the state as RocketMQ does.
func (s State) String() string {
	switch s {
	case StateReady:
		return "READY"
	case StateHandshake:
		return "HANDSHAKE"
	case StateTransfer:
		return "TRANSFER"
	case StateSuspend:
		return "SUSPEND"
	case StateShutdown:
		return "SHUTDOWN"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Frame sizes (AutoSwitchHAClient and AutoSwitchHAConnection).
const (
	// SlaveHandshakeSize is the slave's handshake.
	SlaveHandshakeSize = 4 + 2 + 2 + 8
	// SlaveReportSize is the slave's transfer-state report.
	SlaveReportSize = 4 + 8
	// HandshakeHeaderSize is the master's handshake answer before its
	// epoch entries.
	HandshakeHeaderSize = 4 + 4 + 8 + 4
	// TransferHeaderSize is the master's transfer header.
	TransferHeaderSize = HandshakeHeaderSize + 8 + 8
	// EpochEntrySize is one epoch entry in the master's handshake.
	EpochEntrySize = 4 + 8
	// MaxHandshakeEntries is the most epoch entries a RocketMQ master
	// sends (its handshake buffer holds 1000).
	MaxHandshakeEntries = 1000
	// MaxTransferBody bounds a transfer's body: RocketMQ's slave reads
	// whole frames into a 4 MiB buffer.
	MaxTransferBody = 4<<20 - TransferHeaderSize
)

// ErrProtocol is returned for bytes that break the AutoSwitch protocol: a
// state other than HANDSHAKE or TRANSFER, a size out of bounds, a negative
// offset or broker id, a flag other than 0 or 1.
var ErrProtocol = errors.New("autoswitch: protocol violation")

// SlaveHandshake is the slave's first frame.
type SlaveHandshake struct {
	// SyncFromLastFile asks an empty slave's master to start at its
	// newest segment rather than its first offset (syncFromLastFile).
	SyncFromLastFile bool
	// AsyncLearner is a slave that never joins the in-sync set
	// (asyncLearner).
	AsyncLearner bool
	// BrokerID is the slave's broker id, given by the controller.
	BrokerID int64
}

// MasterHandshake is the master's answer to a handshake.
type MasterHandshake struct {
	// MaxOffset is the master's CommitLog end.
	MaxOffset int64
	// LastEpoch is the master's highest epoch (-1 with none).
	LastEpoch int32
	// Entries are the master's epochs (EndOffsets not sent).
	Entries []EpochEntry
}

// TransferHeader leads a transfer of CommitLog bytes (or a heartbeat,
// with no body).
type TransferHeader struct {
	// BodySize is the number of CommitLog bytes that follow.
	BodySize int32
	// Offset is where they start in the CommitLog (-1 in a heartbeat of
	// a master that has not found where to start).
	Offset int64
	// Epoch and EpochStartOffset are the epoch entry of the master that
	// holds Offset.
	Epoch            int32
	EpochStartOffset int64
	// ConfirmOffset is the master's confirm offset: what its in-sync
	// set holds.
	ConfirmOffset int64
}

func putBool(b []byte, v bool) []byte {
	if v {
		return binary.BigEndian.AppendUint16(b, 1)
	}
	return binary.BigEndian.AppendUint16(b, 0)
}

// AppendSlaveHandshake appends the slave's handshake:
// state HANDSHAKE, syncFromLastFile, asyncLearner, brokerId.
func AppendSlaveHandshake(b []byte, h SlaveHandshake) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(StateHandshake))
	b = putBool(b, h.SyncFromLastFile)
	b = putBool(b, h.AsyncLearner)
	return binary.BigEndian.AppendUint64(b, uint64(h.BrokerID))
}

// AppendSlaveReport appends the slave's report of its CommitLog end:
// state TRANSFER, offset.
func AppendSlaveReport(b []byte, offset int64) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(StateTransfer))
	return binary.BigEndian.AppendUint64(b, uint64(offset))
}

// AppendMasterHandshake appends the master's handshake answer: state
// HANDSHAKE, body size, max offset, last epoch, then per entry its epoch
// and start offset. At most MaxHandshakeEntries entries are sent, the
// newest.
func AppendMasterHandshake(b []byte, h MasterHandshake) []byte {
	es := h.Entries
	if len(es) > MaxHandshakeEntries {
		es = es[len(es)-MaxHandshakeEntries:]
	}
	b = binary.BigEndian.AppendUint32(b, uint32(StateHandshake))
	b = binary.BigEndian.AppendUint32(b, uint32(len(es)*EpochEntrySize))
	b = binary.BigEndian.AppendUint64(b, uint64(h.MaxOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(h.LastEpoch))
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return b
}

// AppendTransferHeader appends a transfer header: state TRANSFER, body
// size, offset, epoch, epoch start offset, confirm offset.
func AppendTransferHeader(b []byte, h TransferHeader) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(StateTransfer))
	b = binary.BigEndian.AppendUint32(b, uint32(h.BodySize))
	b = binary.BigEndian.AppendUint64(b, uint64(h.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(h.EpochStartOffset))
	return binary.BigEndian.AppendUint64(b, uint64(h.ConfirmOffset))
}

// buffer holds a stream's received bytes until whole frames are in.
type buffer struct {
	buf []byte
	off int
}

func (r *buffer) feed(p []byte) {
	if r.off > 0 && r.off == len(r.buf) {
		r.buf, r.off = r.buf[:0], 0
	} else if r.off > len(r.buf)/2 {
		n := copy(r.buf, r.buf[r.off:])
		r.buf, r.off = r.buf[:n], 0
	}
	r.buf = append(r.buf, p...)
}

func (r *buffer) unread() []byte { return r.buf[r.off:] }

// SlaveFrame is one frame of the slave: a handshake or a report.
type SlaveFrame struct {
	// State is StateHandshake (Handshake set) or StateTransfer (Offset
	// set).
	State     State
	Handshake SlaveHandshake
	Offset    int64
}

// SlaveReader cuts the slave's stream into frames. Not safe for
// concurrent use.
type SlaveReader struct{ b buffer }

// Feed appends received bytes.
func (r *SlaveReader) Feed(p []byte) { r.b.feed(p) }

// Next returns the next whole frame; ok is false when none is buffered
// yet, and err wraps ErrProtocol for bytes that cannot be one.
func (r *SlaveReader) Next() (f SlaveFrame, ok bool, err error) {
	b := r.b.unread()
	if len(b) < 4 {
		return f, false, nil
	}
	f.State = State(int32(binary.BigEndian.Uint32(b)))
	switch f.State {
	case StateHandshake:
		if len(b) < SlaveHandshakeSize {
			return f, false, nil
		}
		sync, learner := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:])
		if sync > 1 || learner > 1 {
			return f, false, fmt.Errorf("%w: slave handshake flags syncFromLastFile=%d asyncLearner=%d (0 or 1)", ErrProtocol, sync, learner)
		}
		f.Handshake = SlaveHandshake{SyncFromLastFile: sync == 1, AsyncLearner: learner == 1, BrokerID: int64(binary.BigEndian.Uint64(b[8:]))}
		if f.Handshake.BrokerID < 0 {
			return f, false, fmt.Errorf("%w: slave handshake with broker id %d", ErrProtocol, f.Handshake.BrokerID)
		}
		r.b.off += SlaveHandshakeSize
	case StateTransfer:
		if len(b) < SlaveReportSize {
			return f, false, nil
		}
		f.Offset = int64(binary.BigEndian.Uint64(b[4:]))
		if f.Offset < 0 {
			return f, false, fmt.Errorf("%w: slave reports offset %d", ErrProtocol, f.Offset)
		}
		r.b.off += SlaveReportSize
	default:
		return f, false, fmt.Errorf("%w: slave frame in state %s (HANDSHAKE or TRANSFER)", ErrProtocol, f.State)
	}
	return f, true, nil
}

// MasterFrame is one frame of the master: a handshake answer or a
// transfer.
type MasterFrame struct {
	// State is StateHandshake (Handshake set) or StateTransfer (Transfer
	// and Body set).
	State     State
	Handshake MasterHandshake
	Transfer  TransferHeader
	// Body is the transfer's CommitLog bytes, valid until the next Feed.
	Body []byte
}

// MasterReader cuts the master's stream into frames. Not safe for
// concurrent use.
type MasterReader struct{ b buffer }

// Feed appends received bytes.
func (r *MasterReader) Feed(p []byte) { r.b.feed(p) }

// Buffered reports how many received bytes are not consumed yet.
func (r *MasterReader) Buffered() int { return len(r.b.unread()) }

// Next returns the next whole frame; ok is false when none is buffered
// yet, and err wraps ErrProtocol for bytes that cannot be one.
func (r *MasterReader) Next() (f MasterFrame, ok bool, err error) {
	b := r.b.unread()
	if len(b) < HandshakeHeaderSize {
		return f, false, nil
	}
	f.State = State(int32(binary.BigEndian.Uint32(b)))
	size := int32(binary.BigEndian.Uint32(b[4:]))
	offset := int64(binary.BigEndian.Uint64(b[8:]))
	epoch := int32(binary.BigEndian.Uint32(b[16:]))
	switch f.State {
	case StateHandshake:
		if size < 0 || size%EpochEntrySize != 0 || size > MaxHandshakeEntries*EpochEntrySize {
			return f, false, fmt.Errorf("%w: master handshake with %d bytes of epoch entries (a multiple of %d, at most %d)", ErrProtocol, size, EpochEntrySize, MaxHandshakeEntries*EpochEntrySize)
		}
		if offset < 0 || epoch < -1 {
			return f, false, fmt.Errorf("%w: master handshake with max offset %d, last epoch %d", ErrProtocol, offset, epoch)
		}
		if len(b) < HandshakeHeaderSize+int(size) {
			return f, false, nil
		}
		f.Handshake = MasterHandshake{MaxOffset: offset, LastEpoch: epoch}
		body := b[HandshakeHeaderSize : HandshakeHeaderSize+int(size)]
		for len(body) > 0 {
			e := EpochEntry{Epoch: int32(binary.BigEndian.Uint32(body)), StartOffset: int64(binary.BigEndian.Uint64(body[4:]))}
			if e.Epoch < 0 || e.StartOffset < 0 {
				return f, false, fmt.Errorf("%w: master handshake with epoch entry %s", ErrProtocol, e)
			}
			if n := len(f.Handshake.Entries); n > 0 {
				if last := f.Handshake.Entries[n-1]; e.Epoch <= last.Epoch || e.StartOffset <= last.StartOffset {
					return f, false, fmt.Errorf("%w: master handshake with epoch entry %s after %s", ErrProtocol, e, last)
				}
			}
			f.Handshake.Entries = append(f.Handshake.Entries, e)
			body = body[EpochEntrySize:]
		}
		f.Handshake.Entries = withEnds(f.Handshake.Entries)
		r.b.off += HandshakeHeaderSize + int(size)
	case StateTransfer:
		if size < 0 || size > MaxTransferBody {
			return f, false, fmt.Errorf("%w: transfer body of %d bytes (at most %d)", ErrProtocol, size, MaxTransferBody)
		}
		if offset < -1 || (size > 0 && (offset < 0 || epoch < 0)) {
			return f, false, fmt.Errorf("%w: transfer of %d bytes at offset %d in epoch %d", ErrProtocol, size, offset, epoch)
		}
		if len(b) < TransferHeaderSize+int(size) {
			return f, false, nil
		}
		f.Transfer = TransferHeader{BodySize: size, Offset: offset, Epoch: epoch,
			EpochStartOffset: int64(binary.BigEndian.Uint64(b[20:])), ConfirmOffset: int64(binary.BigEndian.Uint64(b[28:]))}
		end := TransferHeaderSize + int(size)
		f.Body = b[TransferHeaderSize:end:end]
		r.b.off += end
	default:
		return f, false, fmt.Errorf("%w: master frame in state %s (HANDSHAKE or TRANSFER)", ErrProtocol, f.State)
	}
	return f, true, nil
}
