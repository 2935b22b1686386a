// Command kvdump prints what a rocketkv store's index holds, decoded from
// the key schema of kvindex (kvindex/doc.go), and checks the index against
// the CommitLog.
//
//	kvdump [--store DIR | --broker HOST:PORT] [--json] COMMAND [flags]
//
//	summary   key count and bytes per keyspace, dispatched offset against
//	          the CommitLog's end (the lag), topic and queue counts, POP
//	          messages in flight, open and ended transactions, timer
//	          messages waiting, ACL 2.0 users and access lists
//	cq        queue ranges and entries of a topic, optionally joined with
//	          the CommitLog record (--with-message)
//	offsets   committed consumer offsets with their lag
//	topics    topic configs
//	groups    subscription group configs
//	users     ACL 2.0 users, passwords masked (--show-passwords)
//	acls      ACL 2.0 access lists, one policy entry a row
//	keys      message-key index lookups
//	raw       any key range, decoded where the schema knows the keyspace
//	pop       POP in-flight messages by deadline (--group, --topic,
//	          --due-before), or orderly pop batches (--orderly)
//	txn       open transaction half messages in CommitLog order and ended
//	          transactions (--open, --ended, --due-before)
//	timer     timer messages waiting for their delivery time, earliest
//	          first, with their destination (--due-before)
//	verify    checks every ConsumeQueue entry against the CommitLog; exit
//	          status 1 when it finds differences
//	compare-cq compares a double-write store's Pebble and file
//	          ConsumeQueues (--topic, --from); exit status 1 when they
//	          differ (stopped stores only)
//	import-dledger writes the messages of a RocketMQ store of DLedger
//	          mode (enableDLegerCommitLog) into a new rocketkv store
//	          (--out), queue offsets kept
//
// Output is an aligned table, or with --json one JSON object per line.
// Large ranges stream: nothing is loaded whole.
//
// kvdump never modifies a store. On a stopped store it opens the index and
// the CommitLog read-only and holds shared locks that keep a broker from
// starting meanwhile; on a store a running broker holds it refuses, and
// --broker asks the broker for a consistent checkpoint of its index
// (request code remoting.CheckpointIndex) and reads that, with the
// CommitLog read up to the checkpoint's dispatched offset. kvdump must run
// on the broker's machine to read the checkpoint.
//
// Exit status: 0 on success, 1 when verify or compare-cq found
// differences, 2 on any other error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvdump:", err)
	}
	os.Exit(exitStatus(err))
}

// errDifferences is returned (wrapped with the count) by verify when the
// index and the CommitLog disagree.
var errDifferences = errors.New("the index differs from the CommitLog")

// Exit statuses.
const (
	exitOK          = 0
	exitDifferences = 1
	exitError       = 2
)

// exitStatus maps the result of execute to the process exit status.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errDifferences):
		return exitDifferences
	default:
		return exitError
	}
}

// execute runs kvdump with the command-line arguments args, writing
// results to stdout and warnings to stderr.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newRootCommand(stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
