package dledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Entry layout constants (DLedgerEntry, DLedgerMmapFileStore, MmapFileList).
const (
	// HeaderSize is the size of an entry's header, the body length
	// included: RocketMQ's DLedgerEntry.BODY_OFFSET. A message's physical
	// offset in a DLedger CommitLog is its entry's pos + HeaderSize.
	HeaderSize = 48
	// IndexUnitSize is the size of one index file entry.
	IndexUnitSize = 32
	// MagicNormal is the magic of an entry holding a message (MAGIC_1).
	MagicNormal int32 = 1
	// MagicNoop is the magic of DLedger master's NOOP entries (no body).
	MagicNoop int32 = 2
	// MagicConfigChange is the magic DLedger master reserves for
	// configuration changes.
	MagicConfigChange int32 = 3
	// BlankMagic starts the blank that fills a data file's end.
	BlankMagic int32 = -1
	// MinBlank is the room DLedger keeps after an entry for a blank's
	// magic and length (MIN_BLANK_LEN).
	MinBlank = 8
)

// Errors of the decoder. Each is wrapped with the file and position.
var (
	// ErrTruncated: the bytes end inside an entry (a torn write, or a
	// file cut short).
	ErrTruncated = errors.New("dledger entry truncated")
	// ErrBadMagic: the magic is none of DLedger's.
	ErrBadMagic = errors.New("bad dledger magic")
	// ErrBadEntry: the header contradicts itself or its place (its size,
	// body length or pos field, its index or term against the entry
	// before).
	ErrBadEntry = errors.New("bad dledger entry")
)

// Entry is one decoded DLedger entry. Body aliases the bytes it was
// decoded from.
type Entry struct {
	Magic    int32
	Size     int32
	Index    int64
	Term     int64
	Pos      int64
	Channel  int32
	ChainCRC int32
	BodyCRC  int32
	Body     []byte
}

// validMagic reports whether m is a magic some DLedger version writes.
func validMagic(m int32) bool {
	return m == MagicNormal || m == MagicNoop || m == MagicConfigChange
}

// DecodeEntry decodes the entry at the start of b, which lies at offset
// pos of the log. It checks the magic (ErrBadMagic), that the size, the
// body length and the pos field agree with each other and with pos
// (ErrBadEntry), and that b holds the whole entry (ErrTruncated). It does
// not handle blanks or zeros: see Reader.
func DecodeEntry(b []byte, pos int64) (Entry, error) {
	if len(b) < HeaderSize {
		return Entry{}, fmt.Errorf("%w: %d bytes left of a %d-byte header", ErrTruncated, len(b), HeaderSize)
	}
	be := binary.BigEndian
	e := Entry{
		Magic:    int32(be.Uint32(b[0:])),
		Size:     int32(be.Uint32(b[4:])),
		Index:    int64(be.Uint64(b[8:])),
		Term:     int64(be.Uint64(b[16:])),
		Pos:      int64(be.Uint64(b[24:])),
		Channel:  int32(be.Uint32(b[32:])),
		ChainCRC: int32(be.Uint32(b[36:])),
		BodyCRC:  int32(be.Uint32(b[40:])),
	}
	bodyLen := int32(be.Uint32(b[44:]))
	if !validMagic(e.Magic) {
		return Entry{}, fmt.Errorf("%w %d (%#08x)", ErrBadMagic, e.Magic, uint32(e.Magic))
	}
	if e.Size < HeaderSize || bodyLen < 0 || int64(bodyLen)+HeaderSize != int64(e.Size) {
		return Entry{}, fmt.Errorf("%w: size %d, body length %d (the size must be %d + the body length)", ErrBadEntry, e.Size, bodyLen, HeaderSize)
	}
	if e.Pos != pos {
		return Entry{}, fmt.Errorf("%w: its pos field says %d", ErrBadEntry, e.Pos)
	}
	if e.Index < 0 || e.Term < 0 {
		return Entry{}, fmt.Errorf("%w: index %d, term %d", ErrBadEntry, e.Index, e.Term)
	}
	if int64(len(b)) < int64(e.Size) {
		return Entry{}, fmt.Errorf("%w: %d bytes left of a %d-byte entry", ErrTruncated, len(b), e.Size)
	}
	e.Body = b[HeaderSize:e.Size]
	return e, nil
}

// IndexEntry is one decoded entry of DLedger's index files.
type IndexEntry struct {
	Magic int32
	Pos   int64
	Size  int32
	Index int64
	Term  int64
}

// DecodeIndexEntry decodes the 32-byte index entry at the start of b.
func DecodeIndexEntry(b []byte) (IndexEntry, error) {
	if len(b) < IndexUnitSize {
		return IndexEntry{}, fmt.Errorf("%w: %d bytes left of a %d-byte index entry", ErrTruncated, len(b), IndexUnitSize)
	}
	be := binary.BigEndian
	return IndexEntry{
		Magic: int32(be.Uint32(b[0:])),
		Pos:   int64(be.Uint64(b[4:])),
		Size:  int32(be.Uint32(b[12:])),
		Index: int64(be.Uint64(b[16:])),
		Term:  int64(be.Uint64(b[24:])),
	}, nil
}
