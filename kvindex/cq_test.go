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
