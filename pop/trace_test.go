package pop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

// queueRead is one "pop: read a queue" debug line.
type queueRead struct {
	Topic        string `json:"topic"`
	Queue        int32  `json:"queue"`
	Start        int64  `json:"start"`
	Known        bool   `json:"known"`
	Position     int64  `json:"position"`
	HasPosition  bool   `json:"hasPosition"`
	Committed    int64  `json:"committed"`
	HasCommitted bool   `json:"hasCommitted"`
	From         int64  `json:"from"`
	Next         int64  `json:"next"`
	Max          int64  `json:"max"`
	Taken        int    `json:"taken"`
	First        int64  `json:"first"`
	Last         int64  `json:"last"`
}

// readsOf returns the queue reads of topic in a JSON log.
func readsOf(t *testing.T, log []byte, topic string) []queueRead {
	t.Helper()
	var out []queueRead
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		var line struct {
			Message string `json:"message"`
			queueRead
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Bytes(), err)
		}
		if line.Message == "pop: read a queue" && line.Topic == topic {
			out = append(out, line.queueRead)
		}
	}
	return out
}

// At debug level each queue read of a pop is logged with where it started
// and why (the recorded position and committed offset), what the queue
// held and what the pop took; nothing is logged above debug level.
func TestPopTracesEachQueueReadAtDebugLevel(t *testing.T) {
	h := newStageHarness(t, 4)
	var logged bytes.Buffer
	h.svc.log = zerolog.New(&logged).Level(zerolog.DebugLevel)
	pop := func(n int) {
		t.Helper()
		if _, err := h.svc.Pop(PopRequest{Group: "G", Topic: "T", QueueID: 0, MaxMsgNums: n, InvisibleTime: 60_000}); err != nil {
			t.Fatal(err)
		}
	}
	pop(3)
	pop(3)
	reads := readsOf(t, logged.Bytes(), "T")
	want := []queueRead{
		// A new group: no position, no committed offset; it starts at
		// the queue's minimum and takes three of four.
		{Topic: "T", Start: 0, Known: false, Position: 0, HasPosition: false, HasCommitted: false,
			From: 0, Next: 3, Max: 4, Taken: 3, First: 0, Last: 2},
		// Then from the position the first pop recorded; the committed
		// offset stays at the first message in flight.
		{Topic: "T", Start: 3, Known: true, Position: 3, HasPosition: true, Committed: 0, HasCommitted: true,
			From: 3, Next: 4, Max: 4, Taken: 1, First: 3, Last: 3},
	}
	if len(reads) != len(want) {
		t.Fatalf("%d reads of T logged, want %d; log:\n%s", len(reads), len(want), logged.String())
	}
	for i := range want {
		if reads[i] != want[i] {
			t.Errorf("read %d: %+v, want %+v", i, reads[i], want[i])
		}
	}
	// The first pop was full after T; the second, with room left, read
	// the pop-retry queue too.
	if n := len(readsOf(t, logged.Bytes(), RetryTopicV1("T", "G"))); n != 1 {
		t.Errorf("%d reads of the pop-retry queue logged, want 1; log:\n%s", n, logged.String())
	}

	logged.Reset()
	h.svc.log = zerolog.New(&logged).Level(zerolog.InfoLevel)
	pop(3)
	if logged.Len() != 0 {
		t.Errorf("a pop at info level logged %q", logged.String())
	}
}

// ackTrace is one "pop: ack" debug line.
type ackTrace struct {
	Message string `json:"message"`
	Found   bool   `json:"found"`
	Matched bool   `json:"matched"`
	Removed int    `json:"removed"`
}

// An ack's trace tells a handle that names no checkpoint from one that
// names a checkpoint it does not match (a stale invisible time), and both
// from an ack that removed offsets.
func TestAckTraceTellsAStaleHandleFromAMissingCheckpoint(t *testing.T) {
	h := newStageHarness(t, 2)
	var logged bytes.Buffer
	h.svc.log = zerolog.New(&logged).Level(zerolog.DebugLevel)
	res, err := h.svc.Pop(PopRequest{Group: "G", Topic: "T", QueueID: 0, MaxMsgNums: 1, InvisibleTime: 60_000})
	if err != nil || len(res.Records) != 1 {
		t.Fatalf("pop: %d records, %v", len(res.Records), err)
	}
	handle := Handle{CKOffset: 0, PopTime: res.PopTime, InvisibleTime: res.InvisibleTime}
	stale := handle
	stale.InvisibleTime = 30_000
	for _, ack := range []Handle{stale, handle, handle} {
		if _, err := h.svc.Ack("G", "T", 0, 0, ack); err != nil {
			t.Fatal(err)
		}
	}
	var got []ackTrace
	sc := bufio.NewScanner(&logged)
	for sc.Scan() {
		var line ackTrace
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Bytes(), err)
		}
		if line.Message == "pop: ack" {
			got = append(got, line)
		}
	}
	want := []ackTrace{
		// The checkpoint is there, the handle's invisible time is not its.
		{Message: "pop: ack", Found: true, Matched: false, Removed: 0},
		// The right handle removes the offset.
		{Message: "pop: ack", Found: true, Matched: true, Removed: 1},
		// Its only offset gone, the checkpoint is too.
		{Message: "pop: ack", Found: false, Matched: false, Removed: 0},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ack traces %+v, want %+v", got, want)
	}
}
