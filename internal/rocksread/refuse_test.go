package rocksread

import (
	"encoding/binary"
	"errors"
	"testing"
)

// The newest version of a key decides what Scan does with it: a merge
// operand (RocketMQ configures a merge operator but never merges; ldb
// cannot write one) or a blob index is refused, a deletion hides the key.
func TestVisitRefusesWhatItCannotResolve(t *testing.T) {
	cover := newTombstoneCover(nil)
	called := 0
	fn := func(k, v []byte) error { called++; return nil }
	for kind, want := range map[byte]error{
		kindMerge:                 ErrUnsupported,
		kindBlobIndex:             ErrUnsupported,
		kindWideColumnEntity:      ErrUnsupported,
		kindDeletionWithTimestamp: ErrUnsupported,
		kindLogData:               ErrCorrupt,
		kindDeletion:              nil,
		kindSingleDeletion:        nil,
	} {
		err := visit(&entry{key: []byte("k"), seq: 1, kind: kind}, cover, fn)
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("kind %#x: %v, want %v", kind, err, want)
		}
	}
	if called != 0 {
		t.Fatalf("fn called %d times for keys with no value", called)
	}
}

// Write batch records ldb cannot produce, built by hand from the layout
// (sequence:8, count:4, then tag-led records): a merge decodes (Scan
// refuses it if it is a key's newest version), a two-phase-commit marker
// is refused, a count that disagrees with the records is corrupt.
func TestWriteBatchRecordsLDBCannotWrite(t *testing.T) {
	batch := func(count uint32, recs ...byte) []byte {
		b := make([]byte, writeBatchHeader, writeBatchHeader+len(recs))
		binary.LittleEndian.PutUint64(b, 100)
		binary.LittleEndian.PutUint32(b[8:], count)
		return append(b, recs...)
	}
	ops, err := decodeWriteBatch(batch(1, kindColumnFamilyMerge, 3, 1, 'k', 1, 'v'))
	if err != nil || len(ops) != 1 || ops[0].kind != kindMerge || ops[0].cf != 3 || ops[0].seq != 100 {
		t.Fatalf("merge record: %+v %v", ops, err)
	}
	if _, err := decodeWriteBatch(batch(0, kindBeginPrepare)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("2PC marker: %v, want ErrUnsupported", err)
	}
	if _, err := decodeWriteBatch(batch(2, kindValue, 1, 'k', 1, 'v')); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("count 2 for one record: %v, want ErrCorrupt", err)
	}
	ops, err = decodeWriteBatch(batch(1, kindLogData, 2, 'x', 'y', kindNoop, kindSingleDeletion, 1, 'k'))
	if err != nil || len(ops) != 1 || ops[0].kind != kindSingleDeletion {
		t.Fatalf("log data and no-op skipped: %+v %v", ops, err)
	}
}
