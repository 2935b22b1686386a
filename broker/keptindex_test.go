package broker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/kvindex"
)

// A role switch keeps the index open: the Broker elected master uses the
// very database its slave Broker used (closing it waited for Pebble's
// compactions, most of a switch on a large store), and the Supervisor's
// Shutdown closes it, after which the directory opens again and the
// Supervisor's kept index refuses another Broker.
func TestControllerModeSwitchKeepsTheIndexOpen(t *testing.T) {
	ctlAddr := startTestController(t, true, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	a.start()
	b.start()
	if b.isMaster() || !a.isMaster() {
		t.Fatal("the first broker is not the master, or the second is")
	}
	slave := b.sup.Broker()
	kept := slave.db
	if kept == nil || b.sup.index.db != kept {
		t.Fatal("the slave Broker does not run on the Supervisor's kept index")
	}
	a.stop()
	waitUntil(t, 25*time.Second, "the slave to become master", b.isMaster)
	master := b.sup.Broker()
	if master == slave {
		t.Fatal("no new Broker started for the master role")
	}
	if master.db != kept {
		t.Fatal("the master Broker opened the index again: the switch closed the slave's")
	}
	select {
	case <-slave.Closed():
	default:
		t.Fatal("the slave Broker had not closed its stores when the master Broker started on them")
	}
	// The index still serves reads and writes through the new Broker.
	if _, err := master.db.Dispatched(); err != nil {
		t.Fatalf("the kept index after the switch: %v", err)
	}
	sup := b.sup
	b.stop()
	if _, err := sup.index.open(kvindex.Options{Dir: filepath.Join(b.store, kvindex.DirName)}); !errors.Is(err, errIndexClosed) {
		t.Fatalf("the kept index opened after the Supervisor's Shutdown: %v", err)
	}
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(b.store, kvindex.DirName)})
	if err != nil {
		t.Fatalf("the index did not close with the Supervisor: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Supervisor whose first Broker fails to start after opening the index
// (here: an invalid trace topic name, refused once the stores are open)
// closes the index with its failed Start: the store opens again in the
// same process.
func TestControllerModeFailedStartClosesTheIndex(t *testing.T) {
	ctlAddr := startTestController(t, true, true)
	a := newCtlBroker(t, ctlAddr, "")
	a.settings["traceTopicEnable"] = "true"
	a.settings["msgTraceTopicName"] = "bad topic name"
	s := a.newSupervisor(zerolog.Nop())
	var started []*Broker
	s.configure = func(b *Broker) { started = append(started, b) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := s.Start(ctx)
	if err == nil {
		_ = s.Shutdown(ctx)
		t.Fatal("the Supervisor started a Broker with an invalid msgTraceTopicName")
	}
	if len(started) == 0 {
		t.Fatalf("no Broker was started (the start failed before opening the index): %v", err)
	}
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(a.store, kvindex.DirName)})
	if err != nil {
		t.Fatalf("the index stayed open after the failed start: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// While the Broker started last has not closed its stores, no other
// starts on the index and the Supervisor does not close it: each wait
// ends with its context, with an error that says what it waited for,
// and the index stays open.
func TestKeptIndexWaitsForThePreviousBrokersStores(t *testing.T) {
	s := &Supervisor{started: &Broker{closed: make(chan struct{})}}
	dir := t.TempDir()
	db, err := s.index.open(kvindex.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.waitStopped(ctx); err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("waitStopped with the previous Broker running: %v, want the context's end", err)
	}
	if err := s.closeIndex(ctx); err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("closeIndex with the last Broker running: %v, want the context's end", err)
	}
	if again, err := s.index.open(kvindex.Options{Dir: dir}); err != nil || again != db {
		t.Fatalf("the index after the refused close: %v, %v; want it still open", again, err)
	}
	s.started.markClosed()
	if err := s.waitStopped(ctx); err != nil {
		t.Fatalf("waitStopped once the previous Broker closed its stores: %v", err)
	}
	if err := s.closeIndex(ctx); err != nil {
		t.Fatalf("closeIndex once the last Broker closed its stores: %v", err)
	}
	if _, err := s.index.open(kvindex.Options{Dir: dir}); !errors.Is(err, errIndexClosed) {
		t.Fatalf("open after the Supervisor closed the index: %v, want errIndexClosed", err)
	}
}
