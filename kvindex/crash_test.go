package kvindex

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// The crash tests re-run this test binary as a child process that writes
// to a store until it is killed.
const (
	childEnvDispatch = "KVINDEX_CRASH_DISPATCH_DIR"
	childEnvOffsets  = "KVINDEX_CRASH_OFFSETS_DIR"
	childEnvMigrate  = "KVINDEX_CRASH_MIGRATE_DIR"
	childEnvCatchUp  = "KVINDEX_CRASH_CATCHUP_DIR"
	// childEnvWALSync set to "interval" opens the child's index with
	// WALSyncInterval.
	childEnvWALSync = "KVINDEX_CRASH_WAL_SYNC"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnvDispatch); dir != "" {
		os.Exit(runDispatchChild(dir))
	}
	if dir := os.Getenv(childEnvOffsets); dir != "" {
		os.Exit(runOffsetsChild(dir))
	}
	if dir := os.Getenv(childEnvMigrate); dir != "" {
		os.Exit(runMigrateChild(dir))
	}
	if dir := os.Getenv(childEnvCatchUp); dir != "" {
		os.Exit(runCatchUpChild(dir))
	}
	if dir := os.Getenv(childEnvRebuild); dir != "" {
		os.Exit(runRebuildChild(dir))
	}
	if dir := os.Getenv(childEnvRebuildAlone); dir != "" {
		os.Exit(runRebuildAloneChild(dir))
	}
	if dir := os.Getenv(childEnvWALFull); dir != "" {
		os.Exit(runWALFullChild(dir))
	}
	if dir := os.Getenv(childEnvCorrectMin); dir != "" {
		os.Exit(runCorrectMinChild(dir))
	}
	if dir := os.Getenv(childEnvRestart); dir != "" {
		os.Exit(runRestartChild(dir))
	}
	os.Exit(m.Run())
}

const (
	crashTopics = 20
	crashQueues = 50
)

func crashLogConfig(root string) commitlog.Config {
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 256 << 10 // many roll-overs
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return cfg
}

// fatalT lets the child reuse openStack, which reports through testing.TB.
type fatalT struct{ testing.TB }

func (fatalT) Helper() {}
func (fatalT) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(3)
}
func (fatalT) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(3) }
func (fatalT) Error(args ...any) { fmt.Fprintln(os.Stderr, args...) }
func (fatalT) Cleanup(func())    {}

// runDispatchChild appends random messages over crashTopics x crashQueues
// queues from four goroutines, with the dispatcher running, until it is
// killed (SIGKILL) or asked to stop (SIGTERM: clean shutdown).
func runDispatchChild(root string) int {
	t := fatalT{}
	stackLogger = zerolog.New(os.Stderr).Level(zerolog.WarnLevel)
	s := openStack(t, root, crashLogConfig(root))
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
			body := make([]byte, 600)
			for ctx.Err() == nil {
				topic := fmt.Sprintf("T%d", rng.IntN(crashTopics))
				qid := int32(rng.IntN(crashQueues))
				m := &commitlog.Message{
					Topic: topic, QueueID: qid,
					Body:          body[:50+rng.IntN(500)],
					Properties:    fmt.Sprintf("TAGS\x01tag%d\x02KEYS\x01k%d\x02", rng.IntN(3), rng.IntN(1000)),
					BornTimestamp: time.Now().UnixMilli(),
					BornHost:      netip.MustParseAddrPort("127.0.0.1:5000"),
				}
				if err := s.offsets.Acquire(topic, qid); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				_, err := s.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: s.offsets})
				s.offsets.Release(topic, qid)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(5)
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	s.close(t)
	return 0
}

// Random appends over 1000 queues with the dispatcher running, SIGKILLed at
// random moments (and cleanly stopped now and then): afterwards every
// record is reachable through its queue at its offset, every queue is
// gapless, and no index entry points past the log or at a record of
// another queue.
func TestDispatchSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	const runs = 14
	for i := 0; i < runs; i++ {
		cmd, _ := testutil.StartChild(t, childEnvDispatch+"="+root)
		time.Sleep(time.Duration(30+rng.IntN(250)) * time.Millisecond)
		if i%5 == 4 {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("clean stop %d: %v", i, err)
			}
		} else {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	s := openStack(t, root, crashLogConfig(root))
	defer s.close(t)
	verifyIndex(t, s)
}

// verifyIndex checks the whole index against the whole log.
func verifyIndex(t *testing.T, s *stack) {
	t.Helper()
	type qk struct {
		topic string
		qid   int32
	}
	counts := map[qk]int64{}
	r := s.log.NewReader(s.log.MinOffset())
	defer r.Close()
	records := 0
	for {
		e, err := r.Next()
		if err == commitlog.ErrNoMoreData || (err != nil && strings.Contains(err.Error(), "no more data")) {
			break
		}
		if err != nil {
			t.Fatalf("scan log: %v", err)
		}
		m, err := commitlog.DecodeWith(e.Data, commitlog.DecodeOptions{VerifyCRC: true})
		if err != nil {
			t.Fatalf("record at %d: %v", e.Offset, err)
		}
		records++
		counts[qk{m.Topic, m.QueueID}]++
		got, err := s.store.Get(m.Topic, m.QueueID, m.QueueOffset, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].PhyOffset != e.Offset || got[0].Size != e.Size {
			t.Fatalf("record %s/%d@%d at %d not reachable through its queue: %v", m.Topic, m.QueueID, m.QueueOffset, e.Offset, got)
		}
		tags, _ := commitlog.LookupProperty(m.Properties, "TAGS")
		if got[0].TagsCode != commitlog.TagsCode(tags) || got[0].StoreTimestamp != m.StoreTimestamp {
			t.Fatalf("entry of %s/%d@%d has tags %d time %d", m.Topic, m.QueueID, m.QueueOffset, got[0].TagsCode, got[0].StoreTimestamp)
		}
	}
	if records < 1000 {
		t.Fatalf("only %d records written; the test did not exercise much", records)
	}
	end := s.log.MaxOffset()
	for q, n := range counts {
		maxOff, _ := s.store.MaxOffset(q.topic, q.qid)
		if maxOff != n {
			t.Errorf("%s/%d: max offset %d but the log holds %d records (gap or orphan entries)", q.topic, q.qid, maxOff, n)
		}
		entries, err := s.store.Get(q.topic, q.qid, 0, int(n)+10)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(entries)) != n {
			t.Errorf("%s/%d: %d readable entries from 0, want %d (gap)", q.topic, q.qid, len(entries), n)
		}
		for _, e := range entries {
			if e.End() > end {
				t.Errorf("%s/%d@%d points past the log end %d", q.topic, q.qid, e.QueueOffset, end)
			}
		}
	}
	queues := 0
	_ = s.store.Queues(func(topic string, qid int32) bool {
		queues++
		if _, ok := counts[qk{topic, qid}]; !ok {
			t.Errorf("index has queue %s/%d with no record in the log", topic, qid)
		}
		return true
	})
	t.Logf("%d records in %d queues verified", records, queues)
}

// runOffsetsChild commits increasing consumer offsets from four goroutines
// (each owning its own queues) and prints each commit once it returned.
// openChildIndex opens a crash-test child's index with the WALSync mode
// childEnvWALSync names and prints "ready", or prints why it could not.
func openChildIndex(opts Options) (*DB, bool) {
	if os.Getenv(childEnvWALSync) == "interval" {
		opts.WALSync = WALSyncInterval
	}
	db, err := Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, false
	}
	fmt.Println("ready")
	return db, true
}

func runOffsetsChild(root string) int {
	db, ok := openChildIndex(Options{Dir: root, Logger: zerolog.Nop()})
	if !ok {
		return 3
	}
	offsets := db.ConsumerOffsets()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// Start above anything an earlier run committed.
			for off := time.Now().UnixMicro(); ; off++ {
				qid := int32(w*10 + int(off%10))
				if err := offsets.Set("G", "T", qid, off); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d\n", qid, off)
				_ = out.Flush()
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	return 0
}

// Every consumer-offset commit that returned survives SIGKILL, with
// either WALSync mode: under WALSyncInterval a commit returns once its log
// bytes reached the kernel, without an fdatasync.
func TestConsumerOffsetsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	for _, mode := range []string{"always", "interval"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(childEnvWALSync, mode)
			consumerOffsetsSurviveSIGKILL(t)
		})
	}
}

func consumerOffsetsSurviveSIGKILL(t *testing.T) {
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	acked := map[int32]int64{}
	for i := 0; i < 5; i++ {
		cmd, _, lines := testutil.StartChildLines(t, childEnvOffsets+"="+root)
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		testutil.KillChild(cmd)
		for l := range lines {
			var q int32
			var off int64
			if _, err := fmt.Sscanf(l, "%d %d", &q, &off); err != nil {
				continue // the line torn by the kill was never fully acknowledged
			}
			acked[q] = max(acked[q], off)
		}
		db, err := Open(Options{Dir: root, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		for q, want := range acked {
			got, ok, err := db.ConsumerOffsets().Get("G", "T", q)
			if err != nil || !ok || got < want {
				t.Fatalf("run %d: queue %d: stored offset %d (%v %v), but %d was acknowledged", i, q, got, ok, err, want)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no commit was acknowledged")
	}
	t.Logf("%d queues, highest acknowledged offsets verified after 5 kills", len(acked))
}
