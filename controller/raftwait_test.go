package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// unanswered is a raft future raft never answers.
type unanswered struct{ block chan struct{} }

func (u unanswered) Error() error {
	<-u.block
	return nil
}

// A wait for a raft future ends when the controller closes, answered or
// not: Close waits for the scan that proposes, and raft may never answer
// a future it took just before it shut down.
func TestRaftWaitEndsWhenTheControllerCloses(t *testing.T) {
	c := &Controller{stop: make(chan struct{})}
	f := unanswered{block: make(chan struct{})}
	defer close(f.block)
	got := make(chan error, 1)
	go func() { got <- c.raftWait(time.Now(), f) }()
	close(c.stop)
	select {
	case err := <-got:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("raftWait after close: %v, want %v", err, raft.ErrRaftShutdown)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing check
		t.Fatal("raftWait still waits for a future raft never answers after the controller closed")
	}
}
