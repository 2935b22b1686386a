package main

import (
	"math"
	"runtime"
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

// The configured processor count is applied unless GOMAXPROCS is set in
// the environment; 0 adds one to the runtime's default.
func TestApplyMaxProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		name       string
		configured int
		env        map[string]string
		want       int
	}{
		{"default adds one", 0, nil, 5},
		{"configured", 2, nil, 2},
		{"GOMAXPROCS set", 7, map[string]string{"GOMAXPROCS": "4"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(4) // what the runtime chose at start
			got := applyMaxProcs(configs.Broker{GoMaxProcs: tc.configured}, env(tc.env))
			if got != tc.want || runtime.GOMAXPROCS(0) != tc.want {
				t.Fatalf("reported %d, runtime has %d; want %d", got, runtime.GOMAXPROCS(0), tc.want)
			}
		})
	}
}
