package kvindex

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// At debug level every committed checkpoint write is logged with the
// checkpoint it names and what it holds afterwards; a deletion says so.
func TestCommittedCheckpointWritesAreTracedAtDebugLevel(t *testing.T) {
	db := openTestDB(t)
	var logged bytes.Buffer
	db.log = zerolog.New(&logged).Level(zerolog.DebugLevel)
	s := db.Pop()
	c := Checkpoint{Group: "G", Topic: "T", QueueID: 2, CKOffset: 40, PopTime: 1_000_000, InvisibleTime: 60_000,
		VisibleAt: 1_060_000, Offsets: []int64{40, 41, 43}}
	putCheckpoints(t, s, c)
	b := s.NewBatch()
	if err := b.DeleteCheckpoint(&c); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines logged, want 2:\n%s", len(lines), logged.String())
	}
	for i, want := range []string{
		`"topic":"T","queue":2,"ckOffset":40,"popTime":1000000,"deleted":false,"offsets":3,"first":40,"last":43`,
		`"topic":"T","queue":2,"ckOffset":40,"popTime":1000000,"deleted":true,"offsets":0`,
	} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "pop state: checkpoint written") {
			t.Errorf("line %d: %s\nwant it to hold %s", i, lines[i], want)
		}
	}

	logged.Reset()
	db.log = zerolog.New(&logged).Level(zerolog.InfoLevel)
	putCheckpoints(t, s, c)
	if logged.Len() != 0 {
		t.Errorf("a commit at info level logged %q", logged.String())
	}
}
