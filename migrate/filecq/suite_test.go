package filecq_test

import (
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// opener opens a filecq store with the given file size and LRU bound,
// reading store times from the suite's CommitLog stand-in.
func opener(unitsPerFile, maxOpenQueues int, fs vfs.FS) cqtest.Opener {
	return func(t *testing.T, dir string, log *cqtest.CommitLog) cq.Store {
		t.Helper()
		s, err := filecq.Open(filecq.Options{
			Dir:           dir,
			UnitsPerFile:  unitsPerFile,
			StoreTime:     log.StoreTime,
			MaxOpenQueues: maxOpenQueues,
			FS:            fs,
		})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}
}

func TestSuite(t *testing.T) {
	for _, c := range []struct {
		units, open int
		fs          vfs.FS
	}{
		{10, 4, noSyncFS{}},  // the fixture's file size
		{3, 1, noSyncFS{}},   // many files per queue, constant eviction
		{1000, 64, vfs.OS{}}, // few files, real fsync
	} {
		t.Run(fmt.Sprintf("units-%d-open-%d", c.units, c.open), func(t *testing.T) {
			cqtest.Run(t, opener(c.units, c.open, c.fs))
		})
	}
}

// The metamorphic comparison between two file layouts of different file
// sizes: the file size must never change an answer.
func TestMetamorphicFileSizes(t *testing.T) {
	for seed := int64(100); seed < 103; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cqtest.Metamorphic(t, cqtest.MetamorphicConfig{Seed: seed, Ops: 1500}, opener(7, 2, noSyncFS{}), opener(300, 16, noSyncFS{}))
		})
	}
}
