package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rocketkv/rocketkv/kvindex"
)

// keptIndex is the index a controller-mode Supervisor keeps open across
// the role switches of its Brokers: each Broker's openStores takes it
// (the first opens it) and its closeStores leaves it open, and the
// Supervisor closes it at its Shutdown, after the last Broker stopped.
//
// Closing the index was most of a switch on a large store: Pebble's
// Close waits for the compactions running and cannot cancel them (0.9 of
// a 1.2 s switch at a million queues, 3 s of a 3.9 s one), and the new
// Broker then opened the same files again. Everything the index holds in
// memory (its caches of offsets, positions and checkpoints) follows the
// writes made through it, so the next Broker finds it as a reopen would
// and the same recovery (Dispatcher.Recover, a cut included) runs on it.
// A Supervisor starts a Broker only once the one before has closed its
// stores (Supervisor.waitStopped), so two Brokers never share it.
type keptIndex struct {
	mu     sync.Mutex
	db     *kvindex.DB
	closed bool
}

// errIndexClosed is returned by keptIndex.open once the Supervisor has
// closed the index (a start racing its Shutdown).
var errIndexClosed = errors.New("the supervisor closed the index: it is shutting down")

// open returns the index, opening it with opts at the first call.
func (k *keptIndex) open(opts kvindex.Options) (*kvindex.DB, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errIndexClosed
	}
	if k.db != nil {
		return k.db, nil
	}
	db, err := kvindex.Open(opts)
	if err != nil {
		return nil, err
	}
	k.db = db
	return db, nil
}

// close closes the index if it was opened; later opens fail.
func (k *keptIndex) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.db == nil {
		return nil
	}
	db := k.db
	k.db = nil
	if err := db.Close(); err != nil {
		return fmt.Errorf("close the index kept across role switches: %w", err)
	}
	return nil
}
