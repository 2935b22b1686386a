package kvindex

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// The record of the last POP_ROLLBACK reads back as written, survives a
// reopen, and a torn value is an error, not a record.
func TestPopRollbackRecord(t *testing.T) {
	dir := t.TempDir()
	d := openDBAt(t, dir)
	if _, ok, err := d.LastPopRollback(); err != nil || ok {
		t.Fatalf("before any rollback: %v %v", ok, err)
	}
	want := PopRollback{Topic: "rmq_sys_REVIVE_LOG_DefaultCluster", From: 42, At: 1700000000000}
	if err := d.SetPopRollback(want); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDBAt(t, dir)
	if got, ok, err := d.LastPopRollback(); err != nil || !ok || got != want {
		t.Fatalf("after a reopen: %+v %v %v, want %+v", got, ok, err, want)
	}
	if err := d.pdb.Set(metaKey(metaPopRollback), []byte{1, 2, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.LastPopRollback(); !errors.Is(err, ErrBadKey) || ok {
		t.Fatalf("a torn record: %v %v", ok, err)
	}
}
