package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// settledTreeState returns treeState once two readings 50 ms apart agree
// (within 5 s).
func settledTreeState(t *testing.T, root string) map[string][3]any {
	t.Helper()
	prev := testutil.TreeState(t, root)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		cur := testutil.TreeState(t, root)
		if reflect.DeepEqual(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatalf("store %s keeps changing", root)
	return nil
}

// kvdump refuses a store a running broker holds, with a message saying
// what to do, and neither creates nor changes a file. The broker holds
// two locks (the CommitLog's and the index's); either is enough.
func TestLockedStoreRefused(t *testing.T) {
	sc, _ := buildScenario(t, false)
	msg := lockedMessage(sc.root)
	check := func(what string) {
		t.Helper()
		// The lock holder's own background work (Pebble deleting the
		// files an open made obsolete) must be over before the store is
		// compared, or it is taken for kvdump's doing.
		before := settledTreeState(t, sc.root)
		time.Sleep(5 * time.Millisecond) // a changed mtime would differ
		for _, args := range [][]string{{"summary"}, {"verify"}, {"--json", "cq", "--topic", "TopicA"}} {
			out, _, err := runKvdump(t, append([]string{"--store", sc.root}, args...)...)
			if err == nil || err.Error() != msg || exitStatus(err) != exitError || out != "" {
				t.Errorf("%s, kvdump %v: error %v, output %q; want %q", what, args, err, out, msg)
			}
		}
		if after := testutil.TreeState(t, sc.root); !reflect.DeepEqual(before, after) {
			t.Errorf("%s: kvdump changed the store:\n%v\n%v", what, before, after)
		}
	}

	// The CommitLog's lock, as commitlog.Open takes it.
	lk, err := vfs.OS{}.Lock(filepath.Join(sc.root, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	check("CommitLog locked")
	_ = lk.Close()

	// The index held by its writer.
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(sc.root, kvindex.DirName), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	check("index locked")
	_ = db.Close()

	// The whole broker stack running.
	s := openTestStore(t, sc.root, 0)
	if _, _, err := runKvdump(t, "--store", sc.root, "summary"); err == nil || err.Error() != msg {
		t.Errorf("running stack: %v, want %q", err, msg)
	}
	s.close(t)

	// Stopped again, it reads; while it reads, a broker cannot start.
	mustKvdump(t, "--store", sc.root, "summary")
	st, err := openStore(context.Background(), &globalOptions{store: sc.root}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commitlog.Open(commitlog.DefaultConfig(sc.root)); !errors.Is(err, commitlog.ErrLocked) {
		t.Errorf("broker started while kvdump reads: %v", err)
	}
	if _, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(sc.root, kvindex.DirName), Logger: zerolog.Nop()}); !errors.Is(err, kvindex.ErrLocked) {
		t.Errorf("index opened for writing while kvdump reads: %v", err)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}
}

// fakeBroker answers CheckpointIndex as the broker does (a checkpoint of
// its live index) and then appends one more message, so that the log
// runs ahead of the checkpoint.
type fakeBroker struct {
	t  *testing.T
	s  *testStore
	mu sync.Mutex
	n  int
	// dirs are the checkpoint directories written.
	dirs []string
}

func (b *fakeBroker) serve(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if req.Code != remoting.CheckpointIndex {
		return remoting.NotSupportedResponse(req)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	dir := req.ExtFields[remoting.CheckpointFieldDir]
	if dir == "" {
		dir = filepath.Join(b.s.root, "checkpoints", strconv.Itoa(b.n))
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
	}
	if err := b.s.db.Checkpoint(dir); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.dirs = append(b.dirs, dir)
	if err := b.appendOne(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{remoting.CheckpointFieldPath: dir, remoting.CheckpointFieldStoreRoot: b.s.root}
	return resp
}

// dir returns the i-th checkpoint directory written (-1: the last).
func (b *fakeBroker) dir(i int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 {
		i = len(b.dirs) + i
	}
	return b.dirs[i]
}

func (b *fakeBroker) appendOne() error {
	s := b.s
	if err := s.offsets.Acquire("TopicA", 0); err != nil {
		return err
	}
	_, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: &commitlog.Message{
		Topic: "TopicA", QueueID: 0, Body: []byte("after the checkpoint"), BornHost: testBornHost,
		Properties: commitlog.FormatProperties(map[string]string{"TAGS": "Late"}),
	}})
	s.offsets.Release("TopicA", 0)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.disp.CatchUp(ctx)
}

func startServer(t *testing.T, h remoting.Handler) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", EventLoops: 1, Workers: 2}, h, zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv.Addr().String()
}

// With --broker, kvdump reads a consistent checkpoint of a running
// broker's index (the broker keeps appending meanwhile) and the CommitLog
// up to the checkpoint's dispatched offset, then deletes the checkpoint.
func TestBrokerCheckpoint(t *testing.T) {
	sc, s := buildScenario(t, true)
	defer s.close(t)
	fb := &fakeBroker{t: t, s: s}
	addr := startServer(t, remoting.RespondFunc(fb.serve))

	if _, _, err := runKvdump(t, "--store", sc.root, "summary"); err == nil || err.Error() != lockedMessage(sc.root) {
		t.Fatalf("without --broker: %v", err)
	}

	// The checkpoint holds exactly what was written before it: the message
	// the broker appends after it is not in the queue.
	rows := [][]string{{"TOPIC", "QUEUE", "OFFSET", "PHY", "SIZE", "TAGSCODE", "STORETIME"}}
	for _, m := range sc.queue("TopicA", 0) {
		rows = append(rows, []string{m.topic, "0", num(m.qoff), num(m.res.PhyOffset), num(m.res.WroteBytes), num(commitlogTags(m.tags)), ts()})
	}
	want := alignRows([]string{"TOPIC", "QUEUE", "MIN", "MAX"}, []string{"TopicA", "0", "0", "3"}) + "\n" + alignRows(rows...)
	if got := mustKvdump(t, "--broker", addr, "cq", "--topic", "TopicA", "--queue", "0"); got != want {
		t.Errorf("cq through the broker:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(fb.dir(0)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint %s left behind: %v", fb.dir(0), err)
	}

	// The summary shows the checkpoint's dispatched offset against the
	// log's current end: the lag is what was appended since.
	dispatched := s.log.MaxOffset()
	out := mustKvdump(t, "--broker", addr, "--keep-checkpoint", "summary")
	end := s.log.MaxOffset()
	for _, re := range []string{
		fmt.Sprintf(`(?m)^broker +%s \(checkpoint\)$`, regexp.QuoteMeta(addr)),
		fmt.Sprintf(`(?m)^index +%s$`, regexp.QuoteMeta(fb.dir(1))),
		fmt.Sprintf(`(?m)^dispatched offset +%d$`, dispatched),
		fmt.Sprintf(`(?m)^commitlog +\[0, %d\)$`, end),
		fmt.Sprintf(`(?m)^lag \(bytes\) +%d$`, end-dispatched),
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("summary through the broker lacks %s:\n%s", re, out)
		}
	}
	if _, err := os.Stat(fb.dir(1)); err != nil {
		t.Errorf("--keep-checkpoint: %v", err)
	}

	// verify reads the log only up to the checkpoint: the records appended
	// after it are not reported missing.
	// Two messages were appended by the earlier requests: 9 in all.
	dispatched = s.log.MaxOffset()
	out = mustKvdump(t, "--broker", addr, "verify", "--log-scan")
	want = fmt.Sprintf("verified 9 entries in 3 queues (and 9 CommitLog records) against the CommitLog [0, %d), dispatched %d: 0 differences\n",
		s.log.MaxOffset(), dispatched)
	if out != want || s.log.MaxOffset() <= dispatched {
		t.Errorf("verify through the broker:\n%s\nwant:\n%s", out, want)
	}

	// --checkpoint-dir names the directory.
	dir := filepath.Join(t.TempDir(), "ckpt")
	mustKvdump(t, "--broker", addr, "--checkpoint-dir", dir, "--keep-checkpoint", "topics")
	if fb.dir(-1) != dir {
		t.Errorf("checkpoint written to %s, asked for %s", fb.dir(-1), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading the checkpoint created a LOCK file: %v", err)
	}

	// A server that does not know the request.
	other := startServer(t, remoting.NewMux())
	if _, _, err := runKvdump(t, "--broker", other, "summary"); err == nil || !regexp.MustCompile(`does not answer the checkpoint request \(code 10001\)`).MatchString(err.Error()) {
		t.Errorf("broker without checkpoints: %v", err)
	}
}

func commitlogTags(tags string) int64 { return commitlog.TagsCode(tags) }

// removeCheckpoint deletes only what looks like a Pebble checkpoint.
func TestRemoveCheckpointGuard(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"000005.sst", "MANIFEST-000001", "OPTIONS-000003", "marker.manifest.000001.MANIFEST-000001"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(t.TempDir(), "notpebble")
	if err := os.MkdirAll(filepath.Join(other, "commitlog"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeCheckpoint(other); err == nil {
		t.Error("removed a directory holding a commitlog directory")
	}
	if _, err := os.Stat(filepath.Join(other, "commitlog")); err != nil {
		t.Errorf("guard failed: %v", err)
	}
	if err := removeCheckpoint("relative/dir"); err == nil {
		t.Error("removed a relative path")
	}
	if err := removeCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint not removed: %v", err)
	}
}
