package kvindex

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// The RocketMQ import markers read back absent on a new database, read
// back what was written after a reopen, and report a malformed value as
// ErrBadKey rather than as present.
func TestRocketMQImportMeta(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	if at, ok, err := db.RocketMQConfigImported(); at != 0 || ok || err != nil {
		t.Fatalf("config import on a new database: %d %v %v", at, ok, err)
	}
	if ms, ok, err := db.RocketMQTimerProgress(); ms != 0 || ok || err != nil {
		t.Fatalf("timer progress on a new database: %d %v %v", ms, ok, err)
	}
	if ok, err := db.RocketMQPopImported(); ok || err != nil {
		t.Fatalf("POP import on a new database: %v %v", ok, err)
	}

	if err := db.MarkRocketMQConfigImported(txnBase); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRocketMQTimerProgress(txnBase + 7); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkRocketMQPopImported(txnBase + 9); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDBAt(t, dir)
	if at, ok, err := db.RocketMQConfigImported(); at != txnBase || !ok || err != nil {
		t.Errorf("config import after reopen: %d %v %v, want %d", at, ok, err, txnBase)
	}
	if ms, ok, err := db.RocketMQTimerProgress(); ms != txnBase+7 || !ok || err != nil {
		t.Errorf("timer progress after reopen: %d %v %v, want %d", ms, ok, err, txnBase+7)
	}
	if ok, err := db.RocketMQPopImported(); !ok || err != nil {
		t.Errorf("POP import after reopen: %v %v", ok, err)
	}

	// Each marker is its own key: overwriting one leaves the others.
	if err := db.SetRocketMQTimerProgress(-1); err != nil {
		t.Fatal(err)
	}
	if ms, ok, err := db.RocketMQTimerProgress(); ms != -1 || !ok || err != nil {
		t.Errorf("timer progress rewritten: %d %v %v, want -1", ms, ok, err)
	}
	if at, _, _ := db.RocketMQConfigImported(); at != txnBase {
		t.Errorf("config import %d after the timer progress changed, want %d", at, txnBase)
	}

	for _, name := range []string{metaConfigImported, metaTimerProgress, metaPopImported} {
		if err := db.pdb.Set(metaKey(name), []byte{1, 2, 3}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := db.RocketMQConfigImported(); ok || !errors.Is(err, ErrBadKey) {
		t.Errorf("malformed config import: %v %v", ok, err)
	}
	if _, ok, err := db.RocketMQTimerProgress(); ok || !errors.Is(err, ErrBadKey) {
		t.Errorf("malformed timer progress: %v %v", ok, err)
	}
	if ok, err := db.RocketMQPopImported(); ok || !errors.Is(err, ErrBadKey) {
		t.Errorf("malformed POP import: %v %v", ok, err)
	}
}
