package kvindex

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// Pebble reserves every memtable's size in its block cache. A block cache
// no larger than two memtables held no block at all while one memtable
// was being flushed behind a full one, so every table read was a pread
// and a decompression. Open gives Pebble's cache room for the memtables
// on top of CacheSize: blocks read twice are read once.
func TestBlockCacheKeepsBlocksBesideMemtables(t *testing.T) {
	const memtable = 4 << 20
	db, err := Open(Options{Dir: "db", CacheSize: 2 * memtable, MemTableSize: memtable, Logger: zerolog.Nop(), FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 1000)
	put := func(from, to int) {
		b := db.pdb.NewBatch()
		for i := from; i < to; i++ {
			if err := b.Set(fmt.Appendf(nil, "k%08d", i), value, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	// Tables to read, then two full memtables' worth of writes: one
	// memtable full and one growing, as under a steady write load.
	const tabled = 2000
	put(0, tabled)
	if err := db.pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	for from := tabled; from < tabled+2*memtable/len(value); from += 500 {
		put(from, from+500)
	}
	read := func() {
		it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte("k"), UpperBound: fmt.Appendf(nil, "k%08d", tabled)})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if n != tabled {
			t.Fatalf("read %d keys, want %d", n, tabled)
		}
	}
	read()
	before := db.pdb.Metrics().BlockCache
	read()
	after := db.pdb.Metrics().BlockCache
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	if hits == 0 || misses > hits/10 {
		t.Fatalf("second read of the same tables: %d block cache hits, %d misses (cache holds %d bytes in %d blocks)",
			hits, misses, after.Size, after.Count)
	}
}
