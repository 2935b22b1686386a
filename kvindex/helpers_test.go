package kvindex

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// openTestDB opens a fresh database in a temporary directory, closed when
// the test ends.
func openTestDB(t testing.TB) *DB {
	t.Helper()
	return openDBAt(t, t.TempDir())
}

func openDBAt(t testing.TB, dir string) *DB {
	t.Helper()
	db, err := Open(Options{Dir: dir, CacheSize: 8 << 20, MemTableSize: 4 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// openDBOn opens the database in directory "kvindex" of fs (a crashable
// file system, for crash tests), closed when the test ends.
func openDBOn(t testing.TB, fs vfs.FS) *DB {
	t.Helper()
	db, err := Open(Options{Dir: "kvindex", FS: fs, CacheSize: 8 << 20, MemTableSize: 4 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// putCheckpoints stores checkpoints through one committed PopBatch.
func putCheckpoints(t testing.TB, s *PopStore, cs ...Checkpoint) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for i := range cs {
		if err := b.PutCheckpoint(&cs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}
