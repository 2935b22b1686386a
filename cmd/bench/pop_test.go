package main

import (
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPopSmoke runs `bench pop` for a moment, revive included, so it does
// not rot; it checks the summary is printed, never a figure. The revived
// messages are drained while revive runs, and with --drain-after after it.
func TestPopSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("smoke runs start brokers")
	}
	for name, extra := range map[string][]string{"drain while reviving": nil, "drain after": {"--drain-after", "300ms"}} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"pop", "--inprocess", "--dir", t.TempDir(), "--broker-set", "mappedFileSizeCommitLog=8388608",
				"--runs", "1", "--queues", "2", "--messages", "300", "--consumers", "2", "--hold", "200", "--invisible", "3s", "--timeout", "1m",
				"--ack-inflight", "2"}, extra...)
			out := runBench(t, args...)
			// 300 messages popped and acked, then 200 more plus those 300
			// popped again and left to expire: all 500 must come back
			// through revive.
			for _, want := range []string{"pop/pull", "revive p99 ms", "in flight", "revived 500,", "with mappedFileSizeCommitLog=8388608", "CPU of this process per message: pull", "CPU/msg pop+ack"} {
				if !strings.Contains(out, want) {
					t.Fatalf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// With --stream-rate the held messages stay in flight and the lateness is
// measured on a stream of pops of a second group: every streamed message
// (rate x duration) must come back through revive.
func TestPopStreamSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("smoke runs start brokers")
	}
	out := runBench(t, "pop", "--inprocess", "--dir", t.TempDir(), "--broker-set", "mappedFileSizeCommitLog=8388608",
		"--runs", "1", "--queues", "2", "--messages", "100", "--consumers", "2", "--hold", "100", "--invisible", "10m",
		"--stream-rate", "200", "--stream-for", "1s", "--stream-invisible", "1s", "--timeout", "1m")
	for _, want := range []string{" in flight: RSS", "(asked 200), first re-deliveries measured", "revive p99 ms"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	// Every streamed message comes back through revive; a send that timed
	// out on a loaded machine may be missing from the count.
	m := regexp.MustCompile(`first re-deliveries measured (\d+),`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no count of re-deliveries:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 190 || n > 200 {
		t.Fatalf("%d of the 200 streamed messages re-delivered, want at least 190:\n%s", n, out)
	}
}

// Flags that need others, or contradict them, are refused before anything
// starts.
func TestPopRefusesFlagCombinations(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stream-rate", "10"}, "--stream-rate needs --hold"},
		{[]string{"--drain-after", "1s"}, "--drain-after needs --hold"},
		{[]string{"--hold", "10", "--drain-after", "-1s"}, "--drain-after needs --hold"},
		{[]string{"--hold", "10", "--stream-rate", "10", "--drain-after", "1s"}, "does not go with --stream-rate"},
	} {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"pop"}, tc.args...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pop %v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
