package broker

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// fatalRecorder is a testing.TB whose Fatalf records its message and ends
// the calling goroutine, as testing.T's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failureOf runs check against a fatalRecorder on a goroutine of its own
// and returns the message it failed with ("" when it did not), or what it
// panicked with.
func failureOf(check func(testing.TB)) (msg string, panicked any) {
	rec := &fatalRecorder{}
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		check(rec)
	}()
	// Goexit runs the deferred recover too, which returns nil then.
	panicked = <-done
	return rec.msg, panicked
}

// The response helpers fail the test with a message that says what was
// wrong instead of panicking: a missing or malformed field, no response
// at all, a held pull that ended without one.
func TestResponseHelpersFailWithAMessage(t *testing.T) {
	b := startTestBroker(t, nil)
	failedPull := make(chan pullAnswer, 1)
	failedPull <- pullAnswer{err: errors.New("connection reset")}
	for _, tc := range []struct {
		name  string
		check func(testing.TB)
		want  string
	}{
		{"missing field", func(tb testing.TB) {
			header(tb, &remoting.Command{Code: remoting.SystemError, Remark: "boom"}, "offset")
		},
			`response field offset="" of an answer 1 "boom"`},
		{"malformed field", func(tb testing.TB) {
			header(tb, &remoting.Command{ExtFields: map[string]string{"offset": "x"}}, "offset")
		}, `response field offset="x"`},
		{"no response", func(tb testing.TB) { header(tb, nil, "queueOffset") }, "response field queueOffset: no response"},
		{"held pull without a response", func(tb testing.TB) { stillHeld(tb, b, failedPull, "a message of tag b") },
			"the held pull answered no response (connection reset) after a message of tag b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, panicked := failureOf(tc.check)
			if panicked != nil {
				t.Fatalf("panicked with %v, want a test failure", panicked)
			}
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("failed with %q, want a message with %q", msg, tc.want)
			}
		})
	}
}
