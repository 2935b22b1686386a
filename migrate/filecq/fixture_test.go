package filecq_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// The RocketMQ 4.9.8 store written by Apache RocketMQ itself, and its own
// read-back (see the fixture's README).
var fixtureDir = filepath.Join("..", "..", "..", "shared", "fixtures", "rocketmq-store-4.9.8")

type fixtureQueue struct {
	Topic     string   `json:"topic"`
	QueueID   int32    `json:"queueId"`
	MinOffset int64    `json:"minOffset"`
	MaxOffset int64    `json:"maxOffset"`
	Files     []string `json:"files"`
	// Entries are [queueOffset, commitLogOffset, size, tagsCode].
	Entries [][]int64 `json:"-"`
}

// entriesKey is the JSON key of the entries; a struct tag cannot name it
// (it holds commas).
const entriesKey = "entries[queueOffset,commitLogOffset,size,tagsCode]"

func (q *fixtureQueue) UnmarshalJSON(b []byte) error {
	type plain fixtureQueue
	if err := json.Unmarshal(b, (*plain)(q)); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e, ok := raw[entriesKey]
	if !ok {
		return fmt.Errorf("queue %s/%d: no %q", q.Topic, q.QueueID, entriesKey)
	}
	return json.Unmarshal(e, &q.Entries)
}

type fixtureMessage struct {
	CommitLogOffset int64 `json:"commitLogOffset"`
	StoreSize       int32 `json:"storeSize"`
	StoreTimestamp  int64 `json:"storeTimestamp"`
}

type fixture struct {
	Settings struct {
		MappedFileSizeConsumeQueue int `json:"mappedFileSizeConsumeQueue"`
	} `json:"settings"`
	View struct {
		Messages      []fixtureMessage `json:"messages"`
		ConsumeQueues []fixtureQueue   `json:"consumeQueues"`
	} `json:"view"`
}

func loadFixture(t *testing.T) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "expected.json"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("RocketMQ fixture not found at %s", fixtureDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	if f.Settings.MappedFileSizeConsumeQueue != 200 || len(f.View.ConsumeQueues) == 0 || len(f.View.Messages) == 0 {
		t.Fatalf("expected.json is not what this test was written for: %+v, %d queues, %d messages",
			f.Settings, len(f.View.ConsumeQueues), len(f.View.Messages))
	}
	return f
}

// storeTime looks store timestamps up in the fixture's messages, as the
// broker's CommitLog lookup would.
func (f fixture) storeTime() func(int64, int32) (int64, error) {
	m := make(map[int64]fixtureMessage)
	for _, msg := range f.View.Messages {
		m[msg.CommitLogOffset] = msg
	}
	return func(phy int64, size int32) (int64, error) {
		msg, ok := m[phy]
		if !ok || msg.StoreSize != size {
			return 0, fmt.Errorf("no record of %d bytes at %d", size, phy)
		}
		return msg.StoreTimestamp, nil
	}
}

// treeDigest hashes the names, sizes, modes, modification times and
// contents of every file under root.
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %v %d\n", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkFixtureQueues compares every queue with RocketMQ's read-back.
func checkFixtureQueues(t *testing.T, s *filecq.Store, f fixture) {
	t.Helper()
	var wantQueues []string
	for _, fq := range f.View.ConsumeQueues {
		if len(fq.Files) > 0 {
			wantQueues = append(wantQueues, fmt.Sprintf("%s/%d", fq.Topic, fq.QueueID))
		}
		lo, err1 := s.MinOffset(fq.Topic, fq.QueueID)
		hi, err2 := s.MaxOffset(fq.Topic, fq.QueueID)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if lo != fq.MinOffset || hi != fq.MaxOffset {
			t.Errorf("%s/%d: bounds [%d, %d), RocketMQ has [%d, %d)", fq.Topic, fq.QueueID, lo, hi, fq.MinOffset, fq.MaxOffset)
		}
		es, err := s.Get(fq.Topic, fq.QueueID, fq.MinOffset, int(fq.MaxOffset-fq.MinOffset)+10)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]int64
		for _, e := range es {
			got = append(got, []int64{e.QueueOffset, e.PhyOffset, int64(e.Size), e.TagsCode})
		}
		if !slices.EqualFunc(got, fq.Entries, slices.Equal) {
			t.Errorf("%s/%d entries:\ngot  %v\nwant %v", fq.Topic, fq.QueueID, got, fq.Entries)
		}
	}
	var gotQueues []string
	if err := s.Queues(func(topic string, id int32) bool {
		gotQueues = append(gotQueues, fmt.Sprintf("%s/%d", topic, id))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(gotQueues)
	slices.Sort(wantQueues)
	if !slices.Equal(gotQueues, wantQueues) {
		t.Errorf("queues:\ngot  %v\nwant %v (those with files)", gotQueues, wantQueues)
	}
}

// checkFixtureTimes checks OffsetByTime on every queue against the
// definition (first entry stored at or after ts / last at or before),
// computed here from expected.json's store timestamps.
func checkFixtureTimes(t *testing.T, s *filecq.Store, f fixture) {
	t.Helper()
	lookup := f.storeTime()
	checked := 0
	for _, fq := range f.View.ConsumeQueues {
		if len(fq.Entries) == 0 {
			continue
		}
		var times []int64
		for _, e := range fq.Entries {
			ts, err := lookup(e[1], int32(e[2]))
			if err != nil {
				t.Fatalf("%s/%d: %v", fq.Topic, fq.QueueID, err)
			}
			if len(times) > 0 && ts < times[len(times)-1] {
				t.Fatalf("%s/%d: store times go backwards; the reference answers below assume they do not", fq.Topic, fq.QueueID)
			}
			times = append(times, ts)
		}
		candidates := []int64{times[0] - 1000, times[len(times)-1] + 1000}
		for _, ts := range times {
			candidates = append(candidates, ts-1, ts, ts+1)
		}
		for _, ts := range candidates {
			lower, upper := fq.MaxOffset, fq.MinOffset
			for i, v := range times {
				off := fq.Entries[i][0]
				if v >= ts && lower == fq.MaxOffset {
					lower = off
				}
				if v <= ts {
					upper = off
				}
			}
			gotLower, err1 := s.OffsetByTime(fq.Topic, fq.QueueID, ts, cq.Lower)
			gotUpper, err2 := s.OffsetByTime(fq.Topic, fq.QueueID, ts, cq.Upper)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if gotLower != lower || gotUpper != upper {
				t.Errorf("%s/%d at %d: lower %d upper %d, want %d and %d", fq.Topic, fq.QueueID, ts, gotLower, gotUpper, lower, upper)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Errorf("only %d time searches checked", checked)
	}
}

func TestFixtureOpen(t *testing.T) {
	f := loadFixture(t)
	dir := testutil.CopyStore(t, filepath.Join(fixtureDir, "clean"))
	before := treeDigest(t, filepath.Join(dir, "consumequeue"))
	s, err := filecq.Open(filecq.Options{Dir: dir, UnitsPerFile: 10, StoreTime: f.storeTime()})
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureQueues(t, s, f)
	checkFixtureTimes(t, s, f)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Opening and reading a clean store changes nothing of it.
	if after := treeDigest(t, filepath.Join(dir, "consumequeue")); after != before {
		t.Errorf("opening and reading the store changed its consumequeue directory")
	}
}

// The store continues a RocketMQ queue where RocketMQ stopped: TopicA/0
// holds 16 entries, so the next unit is unit 6 of file 00000000000000000200.
func TestFixtureContinue(t *testing.T) {
	f := loadFixture(t)
	dir := testutil.CopyStore(t, filepath.Join(fixtureDir, "clean"))
	s, err := filecq.Open(filecq.Options{Dir: dir, UnitsPerFile: 10, StoreTime: f.storeTime()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "consumequeue", "TopicA", "0", "00000000000000000200")
	orig := readFile(t, path)
	// The CommitLog's max offset is 53272 = 0xd018.
	d := cq.Dispatch{Topic: "TopicA", QueueID: 0, Entry: cq.Entry{QueueOffset: 16, PhyOffset: 53272, Size: 100, TagsCode: 0}}
	if err := s.Put([]cq.Dispatch{d}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(orig)
	copy(want[6*filecq.UnitSize:], unhex(t, "000000000000d018 00000064 0000000000000000"))
	checkBytes(t, path, want)
	s, err = filecq.Open(filecq.Options{Dir: dir, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if hi, _ := s.MaxOffset("TopicA", 0); hi != 17 {
		t.Errorf("max after reopen %d, want 17", hi)
	}
}

// OpenReadOnly reads the fixture in place and leaves it as it was.
func TestFixtureReadOnlyInPlace(t *testing.T) {
	f := loadFixture(t)
	root := filepath.Join(fixtureDir, "clean")
	before := treeDigest(t, root)
	s, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 10, StoreTime: f.storeTime()})
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureQueues(t, s, f)
	checkFixtureTimes(t, s, f)
	if n := s.OpenMappings(); n != 0 {
		t.Errorf("a read-only store holds %d mappings, want 0", n)
	}
	if err := s.CorrectMin(20000); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(40000); err != nil {
		t.Fatal(err)
	}
	if err := s.Put([]cq.Dispatch{{Topic: "TopicA", Entry: cq.Entry{QueueOffset: 16, PhyOffset: 53272, Size: 100}}}); !errors.Is(err, filecq.ErrReadOnly) {
		t.Errorf("Put on a read-only store: %v, want ErrReadOnly", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := treeDigest(t, root); after != before {
		t.Fatalf("OpenReadOnly changed the fixture")
	}
}
