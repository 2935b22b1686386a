package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/rocketkv/rocketkv/configs"
)

// The configured GC target and memory limit are applied unless the
// environment already set them, and the settings in force are reported.
func TestApplyGCSettings(t *testing.T) {
	prevGC := debug.SetGCPercent(-1)
	debug.SetGCPercent(prevGC)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevGC)
		debug.SetMemoryLimit(prevLimit)
	})
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		name           string
		gcPercent, mib int
		env            map[string]string
		wantGC         int
		wantLimit      int64
	}{
		{"configured", 400, 1024, nil, 400, 1 << 30},
		{"no limit", 250, 0, nil, 250, math.MaxInt64},
		{"GOGC set", 400, 512, map[string]string{"GOGC": "150"}, 150, 512 << 20},
		{"GOMEMLIMIT set", 300, 512, map[string]string{"GOMEMLIMIT": "3GiB"}, 300, 3 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the runtime took from the environment at start.
			debug.SetGCPercent(150)
			debug.SetMemoryLimit(3 << 30)
			gc, limit := applyGCSettings(configs.Broker{GCPercent: tc.gcPercent, MemoryLimitMiB: tc.mib}, env(tc.env))
			if gc != tc.wantGC || limit != tc.wantLimit {
				t.Fatalf("reported gcPercent %d, limit %d; want %d, %d", gc, limit, tc.wantGC, tc.wantLimit)
			}
			if got := debug.SetGCPercent(prevGC); got != tc.wantGC {
				t.Fatalf("runtime gcPercent %d, want %d", got, tc.wantGC)
			}
			if got := debug.SetMemoryLimit(prevLimit); got != tc.wantLimit {
				t.Fatalf("runtime memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
