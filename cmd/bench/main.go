// Command bench is rocketkv's load generator and storage benchmark.
//
//	bench produce       pipelined producers against a broker, vs the CommitLog's own append rate
//	bench consume       pre-fill, then pull or long-polling consumers over every queue
//	bench e2e-latency   producers at a fixed rate, long-polling consumers, produce-to-consume latency
//	bench cq            the ConsumeQueue layouts (kv, file) at 1k/100k/1M queues, one child process per configuration
//	bench dispatch-lag  the dispatcher behind CommitLog appends at full rate
//	bench pop           pop+ack against pull in the same run, RSS with many messages in flight, revive lateness
//	bench scale         up to a million queues end to end on the broker binary, KV and file ConsumeQueue side by side
//	bench timer         a burst of timer messages due at one instant, pulled: delivery rate and lateness vs plain produce->consume
//	bench txn           transactional sends (half, then commit) vs plain sends
//	bench failover      a controller-mode master killed under a steady producer: time to a new master and its first send vs a cold start
//
// Every subcommand prints the exact configuration, the machine, each run
// and the medians; docs/BENCHMARKS.md records the figures. A subcommand is
// one file with one constructor, added to the root command below.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// newRootCommand builds the bench command from the subcommands'
// constructors.
func newRootCommand() *cobra.Command {
	var cpuProfile, traceOut string
	var gcPercent int
	captures := []*capture{
		{what: "cpu profile", path: &cpuProfile, start: pprof.StartCPUProfile, stop: pprof.StopCPUProfile},
		{what: "execution trace", path: &traceOut, start: trace.Start, stop: trace.Stop},
	}
	root := &cobra.Command{
		Use:           "bench",
		Short:         "rocketkv load generator and storage benchmarks",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if gcPercent > 0 {
				debug.SetGCPercent(gcPercent)
			}
			for _, c := range captures {
				if err := c.begin(); err != nil {
					return err
				}
			}
			return nil
		},
		PersistentPostRunE: func(*cobra.Command, []string) error {
			var errs []error
			for _, c := range captures {
				errs = append(errs, c.end())
			}
			return errors.Join(errs...)
		},
	}
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (with --inprocess: load generator and broker) to the file")
	root.PersistentFlags().StringVar(&traceOut, "trace", "", "write a Go execution trace of this process (go tool trace) to the file")
	root.PersistentFlags().IntVar(&gcPercent, "gogc", 0, "garbage collector target (GOGC) of this process only, not of a broker it starts; with --inprocess, cq and dispatch-lag it applies to the code measured too (0: Go's default or $GOGC)")
	root.AddCommand(
		newProduceCommand(),
		newConsumeCommand(),
		newE2ELatencyCommand(),
		newCQCommand(),
		newCQRunCommand(),
		newDispatchLagCommand(),
		newPopCommand(),
		newScaleCommand(),
		newTimerCommand(),
		newTxnCommand(),
		newFailoverCommand(),
	)
	return root
}

// machineLine describes the machine a figure was measured on: CPU model,
// logical CPUs, GOMAXPROCS and the load average at the time.
func machineLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%s, %d CPUs, GOMAXPROCS %d, %s, load average %s",
		model, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), load)
}

// capture is a runtime recording of this process written to a file
// named by a flag: a CPU profile or an execution trace.
type capture struct {
	what  string
	path  *string // the flag's value; empty: not recorded
	start func(io.Writer) error
	stop  func()
	file  *os.File
}

// begin creates the file and starts recording, when the flag is set.
func (c *capture) begin() error {
	if *c.path == "" {
		return nil
	}
	f, err := os.Create(*c.path)
	if err != nil {
		return fmt.Errorf("%s: %w", c.what, err)
	}
	if err := c.start(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", c.what, err)
	}
	c.file = f
	return nil
}

// end stops recording and closes the file, if begin started one.
func (c *capture) end() error {
	if c.file == nil {
		return nil
	}
	c.stop()
	err := c.file.Close()
	c.file = nil
	if err != nil {
		return fmt.Errorf("%s: %w", c.what, err)
	}
	return nil
}
