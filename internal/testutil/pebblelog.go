package testutil

import "testing"

// PebbleLogger is a Pebble logger for tests that open a store's index
// with Pebble itself: it keeps Pebble's informational lines out of the
// test output and turns its errors into test errors.
type PebbleLogger struct{ T testing.TB }

// Infof drops an informational line.
func (PebbleLogger) Infof(string, ...any) {}

// Errorf reports an error of Pebble's as a test error.
func (l PebbleLogger) Errorf(format string, args ...any) { l.T.Errorf(format, args...) }

// Fatalf stops the test.
func (l PebbleLogger) Fatalf(format string, args ...any) { l.T.Fatalf(format, args...) }
