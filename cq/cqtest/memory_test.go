package cqtest

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

func TestMemory(t *testing.T) {
	Run(t, MemoryOpener())
}

// The suite must catch a store that gets the contract wrong. Each broken
// variant below is a Memory with one behaviour altered; the scripts or the
// metamorphic comparison must report it.
type broken struct {
	*Memory
	upperOffByOne  bool
	noTruncate     bool
	getIgnoresMax  bool
	noCorrectMin   bool
	reputOverwrite bool
}

func (b *broken) OffsetByTime(topic string, queueID int32, ts int64, bd cq.Boundary) (int64, error) {
	off, err := b.Memory.OffsetByTime(topic, queueID, ts, bd)
	if b.upperOffByOne && bd == cq.Upper && off > 0 {
		off--
	}
	return off, err
}

func (b *broken) Truncate(phy int64) error {
	if b.noTruncate {
		return nil
	}
	return b.Memory.Truncate(phy)
}

func (b *broken) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	if b.getIgnoresMax && max > 0 {
		max = 1 << 20
	}
	return b.Memory.Get(topic, queueID, from, max)
}

func (b *broken) CorrectMin(phy int64) error {
	if b.noCorrectMin {
		return nil
	}
	return b.Memory.CorrectMin(phy)
}

func (b *broken) Put(ds []cq.Dispatch) error {
	if b.reputOverwrite {
		for _, d := range ds {
			hi, _ := b.Memory.MaxOffset(d.Topic, d.QueueID)
			if d.QueueOffset < hi {
				b.Memory.DeleteQueue(d.Topic, d.QueueID)
			}
		}
	}
	return b.Memory.Put(ds)
}

func brokenOpener(mod func(*broken)) Opener {
	inner := MemoryOpener()
	return func(t *testing.T, dir string, log *CommitLog) cq.Store {
		b := &broken{Memory: inner(t, dir, log).(*Memory)}
		mod(b)
		return b
	}
}

var brokenVariants = map[string]func(*broken){
	"upper-off-by-one": func(b *broken) { b.upperOffByOne = true },
	"no-truncate":      func(b *broken) { b.noTruncate = true },
	"get-ignores-max":  func(b *broken) { b.getIgnoresMax = true },
	"no-correct-min":   func(b *broken) { b.noCorrectMin = true },
	"reput-overwrites": func(b *broken) { b.reputOverwrite = true },
}

func TestScriptsCatchBrokenStores(t *testing.T) {
	names, err := fs.Glob(scripts, "testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for variant, mod := range brokenVariants {
		t.Run(variant, func(t *testing.T) {
			var reports []string
			for _, name := range names {
				text, err := scripts.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				runScript(t, brokenOpener(mod), path.Base(name), string(text), func(msg string) {
					reports = append(reports, msg)
				})
			}
			if len(reports) == 0 {
				t.Fatalf("no script noticed the %s store", variant)
			}
			t.Logf("first report: %s", reports[0])
		})
	}
}

var errStop = errors.New("stop")

func TestMetamorphicCatchesBrokenStores(t *testing.T) {
	for variant, mod := range brokenVariants {
		t.Run(variant, func(t *testing.T) {
			var msg string
			func() {
				defer func() {
					if r := recover(); r != nil && r != errStop {
						panic(r)
					}
				}()
				runMetamorphic(t, MetamorphicConfig{Seed: 7, Ops: 2000}, MemoryOpener(), brokenOpener(mod),
					func(m string) { msg = m; panic(errStop) })
			}()
			if msg == "" {
				t.Fatalf("the metamorphic comparison did not notice the %s store", variant)
			}
			t.Logf("reported: %s", firstLine(msg))
		})
	}
}

func TestMetamorphicAgreesWithItself(t *testing.T) {
	// Two Memory stores must never differ: the generator itself is sound.
	for seed := int64(10); seed < 14; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			Metamorphic(t, MetamorphicConfig{Seed: seed, Ops: 2000, Topics: 3, QueuesPerTopic: 2}, MemoryOpener(), MemoryOpener())
		})
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func TestMemoryReopenKeepsFlushedState(t *testing.T) {
	m := NewMemory()
	d := func(off, phy int64) []cq.Dispatch {
		return []cq.Dispatch{{Topic: "T", Entry: cq.Entry{QueueOffset: off, PhyOffset: phy, Size: 1}}}
	}
	if err := m.Put(d(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(d(1, 1)); err != nil {
		t.Fatal(err)
	}
	if hi, _ := m.Reopen().MaxOffset("T", 0); hi != 1 {
		t.Errorf("reopened after one flushed entry: max %d, want 1", hi)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if hi, _ := m.Reopen().MaxOffset("T", 0); hi != 2 {
		t.Errorf("reopened after close: max %d, want 2", hi)
	}
}

func TestCommitLog(t *testing.T) {
	l := NewCommitLog()
	l.Add(0, 10, 100)
	l.Add(10, 5, 101)
	l.Add(15, 5, 102)
	if ts, err := l.StoreTime(10, 5); err != nil || ts != 101 {
		t.Errorf("StoreTime(10, 5) = %d, %v", ts, err)
	}
	if _, err := l.StoreTime(10, 6); !errors.Is(err, ErrNoRecord) {
		t.Errorf("StoreTime with a wrong size: %v, want ErrNoRecord", err)
	}
	l.SetMin(10)
	if _, err := l.StoreTime(0, 10); !errors.Is(err, ErrNoRecord) {
		t.Errorf("StoreTime below the minimum: %v, want ErrNoRecord", err)
	}
	l.Truncate(15)
	if _, err := l.StoreTime(15, 5); !errors.Is(err, ErrNoRecord) {
		t.Errorf("StoreTime after truncation: %v, want ErrNoRecord", err)
	}
	if l.Min() != 10 || l.End() != 15 {
		t.Errorf("min %d end %d, want 10 and 15", l.Min(), l.End())
	}
}
