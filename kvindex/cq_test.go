package kvindex

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// ownedCQ is a KV ConsumeQueue that owns its database, as the suite needs:
// closing the store releases the directory for the next open.
type ownedCQ struct {
	*CQ
}

func (o ownedCQ) Close() error {
	if err := o.CQ.Close(); err != nil {
		return err
	}
	return o.CQ.db.Close()
}

// memFS keeps one in-memory file system per test so that the suite's
// reopens find their data: the suite checks logic, and syncs to a real disk
// would make it slow. Durability is tested on disk by the crash tests.
var memFS sync.Map // test name -> vfs.FS

func openKVStore(t *testing.T, dir string, _ *cqtest.CommitLog) cq.Store {
	fs, _ := memFS.LoadOrStore(t.Name(), vfs.NewMem())
	db, err := Open(Options{Dir: dir, CacheSize: 8 << 20, MemTableSize: 4 << 20, Logger: zerolog.Nop(), FS: fs.(vfs.FS)})
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := db.ConsumeQueue(64) // a small bounds cache exercises evictions
	// Small tails and chunks of 4 entries: the suite's queues are short,
	// and the cache must answer as the database would at every size.
	c.cache = newCQCache(8, 16, 4)
	return ownedCQ{c}
}

func TestKVConsumeQueueSuite(t *testing.T) {
	cqtest.Run(t, openKVStore)
}

// The two layouts answer every query the same way on the same random
// workload (the metamorphic comparison of STYLE.md).
func TestKVAgreesWithFileLayout(t *testing.T) {
	openFile := func(t *testing.T, dir string, log *cqtest.CommitLog) cq.Store {
		s, err := filecq.Open(filecq.Options{Dir: dir, UnitsPerFile: 10, StoreTime: log.StoreTime, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatalf("open file cq: %v", err)
		}
		return s
	}
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			cqtest.Metamorphic(t, cqtest.MetamorphicConfig{Seed: seed, Ops: 800}, openKVStore, openFile)
		})
	}
}

// SeedStarts sets where an empty queue stands, survives a reopen, and
// leaves queues that hold entries alone; new entries follow the seed.
func TestSeedStarts(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	c := db.ConsumeQueue(64)
	if err := c.Put([]cq.Dispatch{{Topic: "Full", QueueID: 0, Entry: cq.Entry{QueueOffset: 0, PhyOffset: 0, Size: 10}}}); err != nil {
		t.Fatal(err)
	}
	err = c.SeedStarts([]QueueStart{{"Empty", 0, 9}, {"Full", 0, 5}, {"Zero", 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	bounds := func(c *CQ, topic string) (int64, int64) {
		t.Helper()
		lo, err := c.MinOffset(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		hi, err := c.MaxOffset(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		return lo, hi
	}
	if lo, hi := bounds(c, "Empty"); lo != 9 || hi != 9 {
		t.Fatalf("seeded empty queue: [%d, %d), want [9, 9)", lo, hi)
	}
	if lo, hi := bounds(c, "Full"); lo != 0 || hi != 1 {
		t.Fatalf("a queue with an entry: [%d, %d), want it unchanged [0, 1)", lo, hi)
	}
	if lo, hi := bounds(c, "Zero"); lo != 0 || hi != 0 {
		t.Fatalf("a seed of 0: [%d, %d)", lo, hi)
	}
	if err := c.Put([]cq.Dispatch{{Topic: "Empty", QueueID: 0, Entry: cq.Entry{QueueOffset: 9, PhyOffset: 10, Size: 10}}}); err != nil {
		t.Fatalf("an entry at the seeded offset: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if lo, hi := bounds(db.ConsumeQueue(64), "Empty"); lo != 9 || hi != 10 {
		t.Fatalf("after a reopen: [%d, %d), want [9, 10)", lo, hi)
	}
}
