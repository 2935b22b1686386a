package commitlog

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A store migrated from RocketMQ keeps RocketMQ's LogicsMsgTimestamp in
// the checkpoint for good (rocketkv never writes that field): an abnormal
// recovery still starts near the last flush (PhysicMsgTimestamp), not at
// the segment of the migration, which would rescan with CRCs everything
// written since.
func TestAMigratedCheckpointDoesNotRescanTheLog(t *testing.T) {
	cfg := testConfig(t, 4096)
	clock := testutil.NewClock(time.UnixMilli(1_800_000_000_000))
	cfg.Now = clock.Now
	l := mustOpen(t, cfg)
	migratedAt := clock.Now().UnixMilli() - 60_000 // RocketMQ's last CQ put, before any segment here
	for i := 0; i < 40; i++ {
		clock.Set(clock.Now().Add(time.Second))
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 880)})
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The checkpoint as a migrated store has it: RocketMQ's logics field.
	ckPath := filepath.Join(cfg.Dir, "checkpoint")
	patchFile(t, ckPath, func(b []byte) { binary.BigEndian.PutUint64(b[8:], uint64(migratedAt)) })
	markAbort(t, cfg.Dir)
	l = mustOpen(t, cfg)
	defer l.Close()
	info := l.RecoveryInfo()
	if info.EndOffset != end {
		t.Fatalf("end %d, want %d", info.EndOffset, end)
	}
	if info.FirstScanned == 0 {
		t.Fatalf("abnormal recovery scanned the whole log (%d records from offset 0, end %d) although PhysicMsgTimestamp is the last record's; checkpoint %+v",
			info.Records, end, l.Checkpoint())
	}
}

// A nil message in a multi-dispatch append is ErrInvalidAppend, not a
// panic.
func TestMultiDispatchOfANilMessageIsInvalid(t *testing.T) {
	l := mustOpen(t, testConfig(t, 64<<10))
	defer l.Close()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Append panicked instead of returning ErrInvalidAppend: %v", r)
		}
	}()
	_, err := l.Append(context.Background(), AppendRequest{Batch: []*Message{nil}, Assigner: newCounter(), MultiDispatch: []string{"lmq"}})
	if !errors.Is(err, ErrInvalidAppend) {
		t.Fatalf("err %v, want ErrInvalidAppend", err)
	}
}
