package kvindex

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// maxIndexedKeyLen is the longest message key the key index stores; longer
// words of KEYS are not indexed (RocketMQ hashes them; a lookup by such a
// key is not a use case worth megabyte keys).
const maxIndexedKeyLen = 1024

// KeyIndex answers "which messages of topic T carry key K" from keyspaces
// 0x20 and 0x21.
type KeyIndex struct {
	db *DB
	// minPhy is the CommitLog minimum last given to DropBelow: entries
	// below it that share a bucket with kept ones are filtered out.
	minPhy atomic.Int64

	// last is the time range last written for one bucket (the one the
	// dispatcher is filling), so that a batch widens it without reading
	// it back. Truncate and DropBelow forget it.
	lastMu sync.Mutex
	last   struct {
		valid  bool
		bucket int64
		r      [2]int64
	}
}

// KeyIndex returns the message-key index.
func (d *DB) KeyIndex() *KeyIndex { return d.keys }

// keyBatch accumulates the key-index writes of one dispatch batch. The
// entries go into the Pebble batch in key order at flush (sortedsets.go).
type keyBatch struct {
	buckets map[int64][2]int64 // bucket -> min, max store time
	key     []byte
	sets    sortedSets
}

// add indexes one record: each space-separated word of keys (KindKey) and
// uniq (KindUniqKey). flush adds them to the Pebble batch.
func (kb *keyBatch) add(topic, keys, uniq string, phy, storeTs int64) {
	added := false
	put := func(kind byte, k string) {
		if k == "" || len(k) > maxIndexedKeyLen {
			return
		}
		kb.key = appendKeyIndexKey(kb.key[:0], topic, kind, k, phy)
		// No value: the store time is in the record, which every lookup
		// reads anyway to verify it; the bucket's time range narrows a
		// query before that. (8 bytes per message mattered: without them
		// the whole index is 30 instead of 35 bytes per message.)
		kb.sets.add(kb.key, nil)
		added = true
	}
	if uniq != "" {
		put(KindUniqKey, uniq)
	}
	for keys != "" {
		var w string
		w, keys, _ = strings.Cut(keys, " ")
		put(KindKey, w)
	}
	if added {
		if kb.buckets == nil {
			kb.buckets = make(map[int64][2]int64, 1)
		}
		bk := keyBucket(phy)
		r, ok := kb.buckets[bk]
		if !ok {
			r = [2]int64{storeTs, storeTs}
		}
		kb.buckets[bk] = [2]int64{min(r[0], storeTs), max(r[1], storeTs)}
	}
}

// flush adds the entries to b in key order and writes the bucket time
// ranges, widened by what the database already has for them.
func (kb *keyBatch) flush(d *DB, b *pebble.Batch) error {
	if err := kb.sets.emit(b); err != nil {
		return fmt.Errorf("index message keys: %w", err)
	}
	k := d.keys
	k.lastMu.Lock()
	defer k.lastMu.Unlock()
	for bk, r := range kb.buckets {
		if k.last.valid && k.last.bucket == bk {
			r[0] = min(r[0], k.last.r[0])
			r[1] = max(r[1], k.last.r[1])
		} else {
			old, err := d.get(keyBucketKey(bk))
			if err != nil {
				return fmt.Errorf("read key bucket %d: %w", bk, err)
			}
			if len(old) == 16 {
				r[0] = min(r[0], int64(binary.BigEndian.Uint64(old)))
				r[1] = max(r[1], int64(binary.BigEndian.Uint64(old[8:])))
			}
		}
		// A range wider than what commits is harmless (a lookup scans a
		// bucket it need not), so the cache is updated before the commit.
		if !k.last.valid || bk >= k.last.bucket {
			k.last.valid, k.last.bucket, k.last.r = true, bk, r
		}
		v := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(r[0]))
		v = binary.BigEndian.AppendUint64(v, uint64(r[1]))
		if err := b.Set(keyBucketKey(bk), v, nil); err != nil {
			return fmt.Errorf("write key bucket %d: %w", bk, err)
		}
	}
	clear(kb.buckets)
	return nil
}

// KeyQuery selects key-index entries.
type KeyQuery struct {
	Topic string
	Key   string
	// Kind is KindKey or KindUniqKey.
	Kind byte
	// Begin and End bound the store time (ms, inclusive); End 0 means no
	// upper bound. Buckets outside the range are skipped (0x21); within
	// one, an entry's store time is its own when it has one (entries of
	// earlier builds) or the one Verify reads from the record.
	Begin, End int64
	// Max caps the number of results (0 = 64).
	Max int
	// MinPhyOffset skips entries below it (the CommitLog's minimum).
	MinPhyOffset int64
	// Verify, when set, is asked about each candidate before it is
	// returned; the broker checks that the record still exists and
	// carries the key, so entries left pointing at a truncated or
	// rewritten record are never returned. It returns the record's store
	// time, which the time range is applied to. Without Verify, entries
	// that carry no store time are returned whatever the range.
	Verify func(KeyIndexEntry) (storeTimestamp int64, ok bool)
}

// Lookup returns the matching entries, newest CommitLog position first.
func (k *KeyIndex) Lookup(q KeyQuery) ([]KeyIndexEntry, error) {
	if q.Max <= 0 {
		q.Max = 64
	}
	q.MinPhyOffset = max(q.MinPhyOffset, k.minPhy.Load())
	end := q.End
	if end <= 0 {
		end = 1<<63 - 1
	}
	inRange := func(ts int64) bool { return ts >= q.Begin && ts <= end }
	var buckets []int64
	err := k.db.Scan([]byte{prefixKeyBucket}, func(key, v []byte) bool {
		if len(key) != 9 || len(v) != 16 {
			return true
		}
		lo, hi := int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
		if hi < q.Begin || lo > end {
			return true
		}
		buckets = append(buckets, int64(binary.BigEndian.Uint64(key[1:])))
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("key lookup %s/%q: %w", q.Topic, q.Key, err)
	}
	var out []KeyIndexEntry
	for i := len(buckets) - 1; i >= 0 && len(out) < q.Max; i-- {
		p := keyIndexPrefix(buckets[i], q.Topic, q.Kind, q.Key)
		var entries []KeyIndexEntry
		var derr error
		err := k.db.Scan(p, func(key, v []byte) bool {
			e, err := decodeKeyIndex(key, v)
			if err != nil {
				derr = fmt.Errorf("key index entry %x: %w", key, err)
				return false
			}
			if e.PhyOffset >= q.MinPhyOffset && (e.StoreTimestamp == 0 || inRange(e.StoreTimestamp)) {
				entries = append(entries, e)
			}
			return true
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return nil, fmt.Errorf("key lookup %s/%q: %w", q.Topic, q.Key, err)
		}
		for j := len(entries) - 1; j >= 0 && len(out) < q.Max; j-- {
			e := entries[j]
			if q.Verify != nil {
				ts, ok := q.Verify(e)
				if !ok || !inRange(ts) {
					continue
				}
				e.StoreTimestamp = ts
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// DropBelow removes every bucket that lies wholly below minPhyOffset, the
// CommitLog's new minimum after retention, with two range deletions.
func (k *KeyIndex) DropBelow(minPhyOffset int64) error {
	k.noteMin(minPhyOffset)
	k.forgetLast()
	bk := keyBucket(minPhyOffset)
	if bk == 0 {
		return nil
	}
	b := k.db.pdb.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{prefixKeyIndex}, binary.BigEndian.AppendUint64([]byte{prefixKeyIndex}, uint64(bk)), nil); err != nil {
		return fmt.Errorf("drop key index below %d: %w", minPhyOffset, err)
	}
	if err := b.DeleteRange([]byte{prefixKeyBucket}, keyBucketKey(bk), nil); err != nil {
		return fmt.Errorf("drop key index below %d: %w", minPhyOffset, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("drop key index below %d: %w", minPhyOffset, err)
	}
	return nil
}

// forgetLast drops the cached range of the bucket being filled.
func (k *KeyIndex) forgetLast() {
	k.lastMu.Lock()
	k.last.valid = false
	k.lastMu.Unlock()
}

// noteMin raises the minimum below which lookups return nothing.
func (k *KeyIndex) noteMin(minPhyOffset int64) {
	for {
		cur := k.minPhy.Load()
		if cur >= minPhyOffset || k.minPhy.CompareAndSwap(cur, minPhyOffset) {
			return
		}
	}
}

// Truncate removes the entries of records at or after phyOffset: whole
// buckets past it with a range deletion, and a scan of the bucket holding
// it.
func (k *KeyIndex) Truncate(phyOffset int64) error {
	k.forgetLast()
	bk := keyBucket(phyOffset)
	b := k.db.pdb.NewBatch()
	defer b.Close()
	next := binary.BigEndian.AppendUint64([]byte{prefixKeyIndex}, uint64(bk+1))
	if err := b.DeleteRange(next, []byte{prefixKeyIndex + 1}, nil); err != nil {
		return fmt.Errorf("truncate key index at %d: %w", phyOffset, err)
	}
	if err := b.DeleteRange(keyBucketKey(bk+1), []byte{prefixKeyBucket + 1}, nil); err != nil {
		return fmt.Errorf("truncate key index at %d: %w", phyOffset, err)
	}
	var derr error
	err := k.db.Scan(binary.BigEndian.AppendUint64([]byte{prefixKeyIndex}, uint64(bk)), func(key, v []byte) bool {
		e, err := decodeKeyIndex(key, v)
		if err != nil {
			derr = fmt.Errorf("key index entry %x: %w", key, err)
			return false
		}
		if e.PhyOffset >= phyOffset {
			if err := b.Delete(key, nil); err != nil {
				derr = err
				return false
			}
		}
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("truncate key index at %d: %w", phyOffset, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("truncate key index at %d: %w", phyOffset, err)
	}
	return nil
}
