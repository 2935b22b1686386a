package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
)

// testStore is a CommitLog, an index and a running dispatcher over one
// store root, wired as the broker wires them.
type testStore struct {
	root    string
	log     *commitlog.Log
	db      *kvindex.DB
	cq      *kvindex.CQ
	offsets *kvindex.QueueOffsets
	disp    *kvindex.Dispatcher
}

var (
	testStoreHost = netip.MustParseAddrPort("192.168.7.1:10911")
	testBornHost  = netip.MustParseAddrPort("10.0.0.1:4000")
	// testClock is the store time of every record appended by the tests.
	testClock = time.Date(2026, 5, 6, 7, 8, 9, 123e6, time.UTC)
)

// openTestStore opens (creating) the store at root. segSize 0 keeps the
// size of an existing store's files (1 GiB for a new one). dispatch
// functions adjust the dispatcher's options (hooks) before it starts.
func openTestStore(t testing.TB, root string, segSize int64, dispatch ...func(*kvindex.DispatcherOptions)) *testStore {
	t.Helper()
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(root, kvindex.DirName), CacheSize: 8 << 20, MemTableSize: 4 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	from, err := db.Dispatched()
	if err != nil {
		t.Fatal(err)
	}
	cfg := commitlog.DefaultConfig(root)
	if segSize > 0 {
		cfg.SegmentSize = segSize
	}
	cfg.RecoverFrom = from
	cfg.StoreHost = testStoreHost
	cfg.Now = func() time.Time { return testClock }
	l, err := commitlog.Open(cfg)
	if err != nil {
		_ = db.Close()
		t.Fatalf("open commitlog: %v", err)
	}
	s := &testStore{root: root, log: l, db: db, cq: db.ConsumeQueue(0)}
	s.offsets = kvindex.NewQueueOffsets(s.cq, 0, zerolog.Nop())
	// A long prune interval keeps every journal record, so the key counts
	// the tests expect do not depend on timing.
	do := kvindex.DispatcherOptions{Log: l, DB: db, Store: s.cq, Offsets: s.offsets, PruneInterval: time.Hour, Logger: zerolog.Nop()}
	for _, f := range dispatch {
		f(&do)
	}
	s.disp, err = kvindex.NewDispatcher(do)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.disp.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	s.disp.Start()
	s.catchUp(t)
	return s
}

func (s *testStore) catchUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatalf("catch up: %v", err)
	}
}

// send appends one message as the broker's send path does (queue offset
// assigned at append) and waits until it is indexed, so that every message
// is its own dispatch batch.
func (s *testStore) send(t testing.TB, topic string, qid int32, props map[string]string, body string) commitlog.AppendResult {
	t.Helper()
	return s.sendMessage(t, &commitlog.Message{Topic: topic, QueueID: qid, Body: []byte(body), Properties: commitlog.FormatProperties(props)})
}

// sendMessage is send for a message the caller builds (a transaction's
// committed copy carries its SysFlag and PreparedTransactionOffset); the
// born host and time are the tests' when unset.
func (s *testStore) sendMessage(t testing.TB, m *commitlog.Message) commitlog.AppendResult {
	t.Helper()
	if !m.BornHost.IsValid() {
		m.BornHost = testBornHost
	}
	if m.BornTimestamp == 0 {
		m.BornTimestamp = testClock.UnixMilli() - 5
	}
	if err := s.offsets.Acquire(m.Topic, m.QueueID); err != nil {
		t.Fatal(err)
	}
	res, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: m})
	s.offsets.Release(m.Topic, m.QueueID)
	if err != nil {
		t.Fatal(err)
	}
	s.catchUp(t)
	return res
}

func (s *testStore) close(t testing.TB) {
	t.Helper()
	if err := s.disp.Close(); err != nil {
		t.Error(err)
	}
	if err := s.log.Close(); err != nil {
		t.Error(err)
	}
	if err := s.db.Close(); err != nil {
		t.Error(err)
	}
}

// runKvdump runs kvdump in-process and returns its standard output, its
// standard error and its error.
func runKvdump(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

// mustKvdump runs kvdump and fails the test on an error.
func mustKvdump(t testing.TB, args ...string) string {
	t.Helper()
	out, stderr, err := runKvdump(t, args...)
	if err != nil {
		t.Fatalf("kvdump %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// alignRows builds the text of a table the way the README describes
// kvdump's tables: cells left-aligned in columns two spaces apart, each
// column as wide as its widest cell, the last column not padded.
func alignRows(rows ...[]string) string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// jsonLines decodes one JSON object per line into maps.
func jsonLines(t testing.TB, out string) []map[string]any {
	t.Helper()
	var res []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", line, err)
		}
		res = append(res, m)
	}
	return res
}

// asJSON turns v into the generic form jsonLines produces, for comparing.
func asJSON(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func checkJSON(t testing.TB, what string, got []map[string]any, want ...map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d JSON lines, want %d:\n%v", what, len(got), len(want), got)
		return
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s line %d:\n got %v\nwant %v", what, i, got[i], want[i])
		}
	}
}

// The key layout of kvindex/doc.go, spelled out independently of kvindex
// so the tests can corrupt a store through Pebble.

func keyString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// docCQKey is 0x10 | topicLen uint16 | topic | queueId int32 | queueOffset int64.
func docCQKey(topic string, qid int32, off int64) []byte {
	b := keyString16([]byte{0x10}, topic)
	b = binary.BigEndian.AppendUint32(b, uint32(qid))
	return binary.BigEndian.AppendUint64(b, uint64(off))
}

// docCQValue is phyOffset int64 | size int32 | tagsCode int64 | storeTimestamp int64.
func docCQValue(phy int64, size int32, tags, ts int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(phy))
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint64(b, uint64(tags))
	return binary.BigEndian.AppendUint64(b, uint64(ts))
}

// docTimerKey is 0x70 | deliverMs int64 | phyOffset int64 (value: size
// int32).
func docTimerKey(deliverMs, phy int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{0x70}, uint64(deliverMs)), uint64(phy))
}

// editIndex opens a closed store's index with Pebble directly and applies
// edit to it.
func editIndex(t testing.TB, root string, edit func(db *pebble.DB)) {
	t.Helper()
	db, err := pebble.Open(filepath.Join(root, kvindex.DirName), &pebble.Options{Logger: testutil.PebbleLogger{T: t}})
	if err != nil {
		t.Fatal(err)
	}
	edit(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
