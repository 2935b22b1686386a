package rocksread

import "encoding/binary"

// Value types of internal keys and write batch records (RocksDB
// db/dbformat.h). The column-family variants appear only in write batches.
const (
	kindDeletion                   = 0x0
	kindValue                      = 0x1
	kindMerge                      = 0x2
	kindLogData                    = 0x3
	kindColumnFamilyDeletion       = 0x4
	kindColumnFamilyValue          = 0x5
	kindColumnFamilyMerge          = 0x6
	kindSingleDeletion             = 0x7
	kindColumnFamilySingleDeletion = 0x8
	kindBeginPrepare               = 0x9
	kindEndPrepare                 = 0xA
	kindCommit                     = 0xB
	kindRollback                   = 0xC
	kindNoop                       = 0xD
	kindColumnFamilyRangeDeletion  = 0xE
	kindRangeDeletion              = 0xF
	kindColumnFamilyBlobIndex      = 0x10
	kindBlobIndex                  = 0x11
	kindBeginPersistedPrepare      = 0x12
	kindBeginUnprepare             = 0x13
	kindDeletionWithTimestamp      = 0x14
	kindCommitWithTimestamp        = 0x15
	kindWideColumnEntity           = 0x16
	kindColumnFamilyWideColumn     = 0x17

	internalKeyTrailer = 8
)

// internalKey is a user key with the sequence number and type RocksDB
// appends to it: 8 little-endian bytes, seq<<8 | type.
type internalKey struct {
	userKey []byte
	seq     uint64
	kind    byte
}

func parseInternalKey(b []byte) (internalKey, error) {
	if len(b) < internalKeyTrailer {
		return internalKey{}, corruptf("internal key of %d bytes", len(b))
	}
	n := len(b) - internalKeyTrailer
	t := binary.LittleEndian.Uint64(b[n:])
	return internalKey{userKey: b[:n], seq: t >> 8, kind: byte(t)}, nil
}

// entry is one version of a key from a table or the WAL.
type entry struct {
	key   []byte
	seq   uint64
	kind  byte
	value []byte
}
