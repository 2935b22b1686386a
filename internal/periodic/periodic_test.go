package periodic

import (
	"context"
	"testing"
	"time"
)

func TestRunCallsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, func(context.Context) { calls <- struct{}{} })
	}()
	for i := 0; i < 3; i++ {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d never came", i+1)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestRunDoesNotCallAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	Run(ctx, time.Hour, func(context.Context) { called = true })
	if called {
		t.Fatal("called with its context already ended")
	}
}

// RunVarying asks for the interval before every wait, so a changed
// interval applies from the next wait on, and returns once ctx ends.
func TestRunVaryingAsksTheIntervalEachTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var asked int
	calls := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunVarying(ctx, func() time.Duration { asked++; return time.Millisecond },
			func(context.Context) { calls <- struct{}{} })
	}()
	for i := 0; i < 3; i++ {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d never came", i+1)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunVarying did not return after its context ended")
	}
	if asked < 3 {
		t.Fatalf("interval asked %d times for 3 calls", asked)
	}
}

// RunDelayed waits its first delay once, then its interval: with a first
// delay of an hour nothing runs, with a short one the calls come at the
// interval after it.
func TestRunDelayedWaitsItsFirstDelayOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunDelayed(ctx, time.Hour, time.Millisecond, func(context.Context) { calls <- struct{}{} })
	}()
	select {
	case <-calls:
		t.Fatal("a call came before the first delay of an hour")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-done

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go RunDelayed(ctx, time.Millisecond, time.Millisecond, func(context.Context) { calls <- struct{}{} })
	for i := 0; i < 3; i++ {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d never came", i+1)
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a sleep whose context lives did not report its time ran out")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	select {
	case ran := <-done:
		if ran {
			t.Fatal("a cancelled sleep reported its hour ran out")
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("a cancelled sleep went on")
	}
}
