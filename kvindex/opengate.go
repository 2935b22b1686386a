package kvindex

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// openGate is the index's Pebble compaction scheduler. It grants nothing
// until open is called, and from then on grants compactions up to the
// concurrency Pebble asks for, as Pebble's own default scheduler does.
//
// Why a gate: Pebble's Open schedules compactions for the debt it finds (a
// write-heavy run leaves hundreds of MiB in L0) and then, before it
// returns, waits for every running compaction to finish so that it can list
// obsolete files. The reopen of a broker stopped under load therefore
// lasted as long as one compaction (4-5 s here). With the gate closed
// during Open, the first compactions start right after Open returns, while
// the broker already serves. Pebble does not export its default scheduler,
// so this one replaces it rather than wrapping it.
//
// It is used only on a database that exists at the format version this
// build asks for: a format upgrade may wait inside Open for compactions of
// its own.
//
// Goroutine: one granter, started by Register and stopped by Unregister. It
// wakes every 100 ms (Pebble's interval), when a compaction ends and when
// Pebble reports more allowed concurrency, and grants what the database is
// waiting for. TrySchedule grants directly when there is room.
type openGate struct {
	mu           sync.Mutex
	db           pebble.DBForCompaction
	opened       bool
	registered   bool
	unregistered bool
	running      int // compactions granted and not Done

	poke chan struct{}
	stop chan struct{}
	done chan struct{}
}

// gateInterval is how often the granter looks for waiting compactions
// without being poked.
const gateInterval = 100 * time.Millisecond

func newOpenGate() *openGate {
	return &openGate{poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// open lets compactions run from now on.
func (g *openGate) open() {
	g.mu.Lock()
	g.opened = true
	g.mu.Unlock()
	g.wake()
}

func (g *openGate) wake() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// Register implements pebble.CompactionScheduler.
func (g *openGate) Register(_ int, db pebble.DBForCompaction) {
	g.mu.Lock()
	g.db = db
	g.registered = true
	g.mu.Unlock()
	go g.granter()
}

// abandon stops the granter after a failed Open: Pebble does not
// unregister its scheduler when Open fails after registering it.
func (g *openGate) abandon() { g.Unregister() }

// Unregister implements pebble.CompactionScheduler: it returns once the
// granter, the only caller into the database besides TrySchedule, has
// stopped. Calls after the first, or before Register, do nothing.
func (g *openGate) Unregister() {
	g.mu.Lock()
	first := g.registered && !g.unregistered
	g.unregistered = true
	g.mu.Unlock()
	if first {
		close(g.stop)
		<-g.done
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (g *openGate) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened || g.unregistered || g.db.GetAllowedWithoutPermission() <= g.running {
		return false, nil
	}
	g.running++
	return true, gateHandle{g}
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler.
func (g *openGate) UpdateGetAllowedWithoutPermission() { g.wake() }

func (g *openGate) granter() {
	defer close(g.done)
	tick := time.NewTicker(gateInterval)
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
		case <-g.poke:
		}
		g.grant()
	}
}

// grant hands the database as many compactions as it is waiting for and
// allowed to run.
func (g *openGate) grant() {
	for {
		g.mu.Lock()
		if !g.opened || g.unregistered || g.db.GetAllowedWithoutPermission() <= g.running {
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		if waiting, _ := g.db.GetWaitingCompaction(); !waiting {
			return
		}
		// Counted before Schedule: the compaction may finish (and call
		// Done) before Schedule returns.
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
		if !g.db.Schedule(gateHandle{g}) {
			g.mu.Lock()
			g.running--
			g.mu.Unlock()
			return
		}
	}
}

// gateHandle is the grant of one compaction.
type gateHandle struct{ g *openGate }

// Started implements pebble.CompactionGrantHandle.
func (gateHandle) Started() {}

// MeasureCPU implements pebble.CompactionGrantHandle.
func (gateHandle) MeasureCPU(pebble.CompactionGoroutineKind) {}

// CumulativeStats implements pebble.CompactionGrantHandle.
func (gateHandle) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle: the granter looks for the
// next waiting compaction.
func (h gateHandle) Done() {
	h.g.mu.Lock()
	h.g.running--
	h.g.mu.Unlock()
	h.g.wake()
}

// gateOpen reports whether Open should hold compactions back for the
// database in dir: only for one that exists at the newest format (see
// openGate).
func gateOpen(po *pebble.Options, dir string) bool {
	desc, err := pebble.Peek(dir, po.FS)
	return err == nil && desc.Exists && desc.FormatMajorVersion >= pebble.FormatNewest
}
