package commitlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

func TestAppendReadBasic(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	clock := testutil.NewClock(time.UnixMilli(1_700_000_000_123))
	cfg.Now = clock.Now
	l := mustOpen(t, cfg)
	defer l.Close()
	if l.MaxOffset() != 0 || l.MinOffset() != 0 {
		t.Fatalf("empty log: min %d max %d", l.MinOffset(), l.MaxOffset())
	}
	c := newCounter()
	var results []AppendResult
	for i := 0; i < 50; i++ {
		clock.Set(time.UnixMilli(1_700_000_000_123 + int64(i)))
		results = append(results, mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", int32(i%2), i, 100+i), Assigner: c}))
	}
	if c.calls != 50 {
		t.Fatalf("Assign called %d times, want 50", c.calls)
	}
	var end int64
	for i, r := range results {
		if r.PhyOffset != end || len(r.Records) != 1 || r.Records[0].Offset != end {
			t.Fatalf("append %d at %d, want %d", i, r.PhyOffset, end)
		}
		if r.QueueOffset != int64(i/2) {
			t.Fatalf("append %d queue offset %d, want %d", i, r.QueueOffset, i/2)
		}
		if r.MsgIDs[0] != MessageID(testStoreHost, end) {
			t.Fatalf("msgId %s", r.MsgIDs[0])
		}
		if r.StoreTimestamp != 1_700_000_000_123+int64(i) {
			t.Fatalf("store timestamp %d", r.StoreTimestamp)
		}
		v, err := l.ReadRecord(r.PhyOffset)
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeWith(v.Data, DecodeOptions{VerifyCRC: true})
		if err != nil {
			t.Fatal(err)
		}
		want := testMessage("TopicA", int32(i%2), i, 100+i)
		if m.PhyOffset != r.PhyOffset || m.QueueOffset != r.QueueOffset || m.StoreTimestamp != r.StoreTimestamp ||
			m.StoreHost != testStoreHost || string(m.Body) != string(want.Body) || m.Properties != want.Properties ||
			m.QueueID != want.QueueID || int64(m.StoreSize) != r.WroteBytes {
			t.Fatalf("record %d decoded as %+v", i, m)
		}
		v.Release()
		end += r.WroteBytes
	}
	if l.MaxOffset() != end {
		t.Fatalf("MaxOffset %d, want %d", l.MaxOffset(), end)
	}
	if got := scanAll(t, l); len(got) != 50 {
		t.Fatalf("scanned %d records", len(got))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() != end {
		t.Fatalf("FlushedOffset %d after Flush, want %d", l.FlushedOffset(), end)
	}
	if l.Checkpoint().PhysicMsgTimestamp != 1_700_000_000_123+49 {
		t.Fatalf("checkpoint physic timestamp %d", l.Checkpoint().PhysicMsgTimestamp)
	}
}

func TestReadErrors(t *testing.T) {
	l := mustOpen(t, testConfig(t, 8192))
	defer l.Close()
	r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 10)})
	size := r.Records[0].Size
	for _, tc := range []struct {
		off  int64
		size int32
	}{{0, size + 1}, {-1, 10}, {0, 0}, {int64(size), 1}, {8190, 10}} {
		if _, err := l.Read(tc.off, tc.size); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("Read(%d, %d) err = %v, want ErrOffsetOutOfRange", tc.off, tc.size, err)
		}
	}
	if _, err := l.ReadRecord(int64(size)); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("ReadRecord past end: %v", err)
	}
	if _, err := l.ReadRecord(4); err == nil {
		t.Errorf("ReadRecord inside a record must fail")
	}
	v, err := l.Read(0, size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(v.Data); err != nil {
		t.Fatal(err)
	}
	v.Release()
	v.Release() // idempotent
}

func TestOpenLocked(t *testing.T) {
	cfg := testConfig(t, 8192)
	l := mustOpen(t, cfg)
	if _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.Dir, "lock"))
	if err != nil || string(b) != "lock" {
		t.Fatalf("lock file = %q, %v", b, err)
	}
	pid, err := os.ReadFile(filepath.Join(cfg.Dir, "abort"))
	if err != nil || string(pid) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("abort file = %q, %v", pid, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "abort")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("abort file still there after Close: %v", err)
	}
	if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 1, 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	l2 := mustOpen(t, cfg)
	if l2.RecoveryInfo().Abnormal {
		t.Fatal("recovery after Close must be normal")
	}
	l2.Close()
}

func TestConfigValidation(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no dir":            func(c *Config) { c.Dir = "" },
		"tiny segment":      func(c *Config) { c.SegmentSize = 100 },
		"bad flush type":    func(c *Config) { c.FlushType = 7 },
		"bad deleteWhen":    func(c *Config) { c.DeleteWhen = []int{24} },
		"negative segments": func(c *Config) { c.SegmentSize = -1 },
	} {
		cfg := testConfig(t, 8192)
		mut(&cfg)
		if l, err := Open(cfg); err == nil {
			l.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
	// Zero fields take the defaults.
	c, err := Config{Dir: "x"}.withDefaults()
	if err != nil || c.SegmentSize != DefaultSegmentSize || c.FlushInterval != DefaultFlushInterval ||
		c.MaxMessageSize != DefaultMaxMessageSize || len(c.DeleteWhen) != 1 || c.DeleteWhen[0] != 4 || c.FS == nil || c.Now == nil {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

func TestOpenMapFailure(t *testing.T) {
	cfg := testConfig(t, 8192)
	l := mustOpen(t, cfg)
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	l.Close()
	ffs := vfs.NewFaulty(vfs.OS{})
	ffs.FailMaps(1)
	cfg.FS = ffs
	if _, err := Open(cfg); !errors.Is(err, ErrMapFailed) {
		t.Fatalf("Open with a failing mmap: %v", err)
	}
	// The failed Open released the lock: a normal Open works.
	cfg.FS = nil
	l = mustOpen(t, cfg)
	defer l.Close()
	if l.MaxOffset() == 0 {
		t.Fatal("records lost")
	}
}
