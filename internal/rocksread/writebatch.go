package rocksread

import (
	"encoding/binary"
)

const writeBatchHeader = 12 // sequence:8, count:4

// batchOp is one record of a write batch.
type batchOp struct {
	cf    uint32
	kind  byte // kindValue, kindDeletion, kindSingleDeletion, kindRangeDeletion, kindMerge
	seq   uint64
	key   []byte // the range start for kindRangeDeletion
	value []byte // the range end for kindRangeDeletion
}

// decodeWriteBatch decodes a WAL record: a write batch whose operations
// take consecutive sequence numbers from the header's. Transaction markers,
// blob indexes and wide-column entities are refused; log data and no-ops
// are skipped. The returned slices point into b.
func decodeWriteBatch(b []byte) ([]batchOp, error) {
	if len(b) < writeBatchHeader {
		return nil, corruptf("write batch of %d bytes", len(b))
	}
	seq := binary.LittleEndian.Uint64(b)
	count := binary.LittleEndian.Uint32(b[8:])
	r := byteReader{b: b[writeBatchHeader:]}
	var ops []batchOp
	for !r.empty() {
		tag := r.byte1()
		op := batchOp{kind: tag}
		switch tag {
		case kindColumnFamilyValue, kindColumnFamilyDeletion, kindColumnFamilySingleDeletion,
			kindColumnFamilyRangeDeletion, kindColumnFamilyMerge:
			op.cf = r.uvarint32()
			op.kind = withoutColumnFamily(tag)
		case kindValue, kindDeletion, kindSingleDeletion, kindRangeDeletion, kindMerge:
		case kindLogData:
			r.lenPrefixed()
			if !r.ok() {
				return nil, corruptf("write batch: log data runs past the record")
			}
			continue
		case kindNoop:
			continue
		case kindBeginPrepare, kindEndPrepare, kindCommit, kindRollback, kindBeginPersistedPrepare,
			kindBeginUnprepare, kindCommitWithTimestamp:
			return nil, unsupportedf("write batch: two-phase commit marker %#x", tag)
		case kindBlobIndex, kindColumnFamilyBlobIndex:
			return nil, unsupportedf("write batch: blob index")
		case kindWideColumnEntity, kindColumnFamilyWideColumn:
			return nil, unsupportedf("write batch: wide-column entity")
		default:
			return nil, corruptf("write batch: unknown record type %#x", tag)
		}
		op.key = r.lenPrefixed()
		if op.kind == kindValue || op.kind == kindRangeDeletion || op.kind == kindMerge {
			op.value = r.lenPrefixed()
		}
		if !r.ok() {
			return nil, corruptf("write batch: record %d runs past the batch", len(ops))
		}
		if uint64(len(ops)) >= uint64(count) {
			return nil, corruptf("write batch: more records than its count %d", count)
		}
		op.seq = seq + uint64(len(ops))
		ops = append(ops, op)
	}
	if uint64(len(ops)) != uint64(count) {
		return nil, corruptf("write batch: %d records, header says %d", len(ops), count)
	}
	return ops, nil
}

// withoutColumnFamily maps a column-family record type to the plain one.
func withoutColumnFamily(tag byte) byte {
	switch tag {
	case kindColumnFamilyValue:
		return kindValue
	case kindColumnFamilyDeletion:
		return kindDeletion
	case kindColumnFamilySingleDeletion:
		return kindSingleDeletion
	case kindColumnFamilyRangeDeletion:
		return kindRangeDeletion
	}
	return kindMerge
}
