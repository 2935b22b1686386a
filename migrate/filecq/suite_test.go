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
	// The fixture's file size.
	t.Run("units-10-open-4", func(t *testing.T) { cqtest.Run(t, opener(10, 4, vfs.NoSync{})) })
	// Many files per queue, one queue open at a time: constant eviction.
	t.Run("units-3-open-1", func(t *testing.T) { cqtest.Run(t, opener(3, 1, vfs.NoSync{})) })
	// Few files, and the real fsync.
	t.Run("units-1000-open-64", func(t *testing.T) { cqtest.RunScripts(t, opener(1000, 64, vfs.OS{})) })
}

// The metamorphic comparison between two file layouts of different file
// sizes: the file size must never change an answer.
func TestMetamorphicFileSizes(t *testing.T) {
	for seed := int64(100); seed < 102; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cqtest.Metamorphic(t, cqtest.MetamorphicConfig{Seed: seed, Ops: 1000}, opener(7, 2, vfs.NoSync{}), opener(300, 16, vfs.NoSync{}))
		})
	}
}
