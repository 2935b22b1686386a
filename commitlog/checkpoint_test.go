package commitlog

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

func TestCheckpointWrittenOnClose(t *testing.T) {
	dir := fixtureStore(t, store498)
	cfg := DefaultConfig(dir)
	clock := testutil.NewClock(time.UnixMilli(1_900_000_000_000))
	cfg.Now = clock.Now
	cfg.Logger = testLogger(t)
	l := mustOpen(t, cfg)
	mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, 1, 10)})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4096 {
		t.Fatalf("checkpoint is %d bytes, want 4096", len(b))
	}
	be := binary.BigEndian
	got := []int64{int64(be.Uint64(b[0:])), int64(be.Uint64(b[8:])), int64(be.Uint64(b[16:])), int64(be.Uint64(b[24:])), int64(be.Uint64(b[32:]))}
	want := []int64{1_900_000_000_000, 1795976100430, 1795976100391, 0, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("checkpoint field %d = %d, want %d (all: %v)", i, got[i], want[i], got)
		}
	}
	if !allZero(b[40:]) {
		t.Fatal("checkpoint bytes 40.. are not zero")
	}
}

func TestCheckpointMinTimestamp(t *testing.T) {
	for _, tc := range []struct {
		ck   Checkpoint
		want int64
	}{
		{Checkpoint{}, 0},
		{Checkpoint{PhysicMsgTimestamp: 10_000}, 7_000},
		{Checkpoint{PhysicMsgTimestamp: 10_000, LogicsMsgTimestamp: 9_000}, 7_000}, // logics is RocketMQ's, never written here
		{Checkpoint{PhysicMsgTimestamp: 10_000, LogicsMsgTimestamp: 19_000}, 7_000},
		{Checkpoint{LogicsMsgTimestamp: 2_000}, 0},
	} {
		if got := tc.ck.MinTimestamp(); got != tc.want {
			t.Errorf("%+v.MinTimestamp() = %d, want %d", tc.ck, got, tc.want)
		}
	}
}

// TestAbnormalRecoveryStartsFromCheckpoint checks the segment choice of
// spec 2.7 on a log written by this package: the last segment whose first
// record is at or before the checkpoint time minus 3 s.
func TestAbnormalRecoveryStartsFromCheckpoint(t *testing.T) {
	cfg := testConfig(t, 4096)
	clock := testutil.NewClock(time.UnixMilli(1_800_000_000_000))
	cfg.Now = clock.Now
	l := mustOpen(t, cfg)
	for i := 0; i < 40; i++ {
		clock.Set(clock.Now().Add(time.Second))
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 880)})
	}
	last := clock.Now().UnixMilli()
	var firstTS []int64
	for s := int64(0); s < l.MaxOffset(); s += 4096 {
		v, err := l.ReadRecord(s)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := Decode(v.Data)
		v.Release()
		firstTS = append(firstTS, m.StoreTimestamp)
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	for i := len(firstTS) - 1; i >= 0; i-- {
		if firstTS[i] <= last-3000 {
			want = int64(i) * 4096
			break
		}
	}
	if want == 0 {
		t.Fatal("test setup: no segment qualifies")
	}
	markAbort(t, cfg.Dir)
	l = mustOpen(t, cfg)
	defer l.Close()
	if info := l.RecoveryInfo(); !info.Abnormal || info.FirstScanned != want || info.EndOffset != end {
		t.Fatalf("recovery %+v, want first scanned %d, end %d", info, want, end)
	}
}

// SetMasterFlushedOffset lands in the checkpoint file at byte 24 (on
// Close at the latest), leaves the other fields alone, survives a reopen,
// and is refused once the Log is closed.
func TestSetMasterFlushedOffsetIsPersisted(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.Logger = testLogger(t)
	l := mustOpen(t, cfg)
	mustAppend(t, l, AppendRequest{Message: testMessage("TopicA", 0, 1, 10)})
	if err := l.SetMasterFlushedOffset(123456); err != nil {
		t.Fatal(err)
	}
	if got := l.Checkpoint().MasterFlushedOffset; got != 123456 {
		t.Fatalf("Checkpoint().MasterFlushedOffset = %d, want 123456", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.SetMasterFlushedOffset(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetMasterFlushedOffset after Close: %v, want ErrClosed", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	if got := int64(be.Uint64(b[24:])); got != 123456 {
		t.Fatalf("checkpoint bytes 24..32 = %d, want 123456", got)
	}
	if int64(be.Uint64(b[0:])) == 0 {
		t.Fatal("physicMsgTimestamp not written beside masterFlushedOffset")
	}
	l = mustOpen(t, cfg)
	defer l.Close()
	if got := l.Checkpoint().MasterFlushedOffset; got != 123456 {
		t.Fatalf("after reopen MasterFlushedOffset = %d, want 123456", got)
	}
}
