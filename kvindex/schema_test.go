package kvindex

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"
)

// TestSchemaVersions checks the open rules for the stored layout version:
// a new store gets the current one; a version-1 store (key-index values
// with the store time) opens, read-only without being changed and
// read-write marked as the current version, so that a version-1 build
// refuses it from then on; versions outside what this build reads are
// refused with ErrSchema naming them.
func TestSchemaVersions(t *testing.T) {
	// setVersion writes the version with Pebble directly: Open would
	// refuse the store once the version is out of range.
	setVersion := func(t *testing.T, dir string, v uint32) {
		t.Helper()
		pdb, err := pebble.Open(dir, &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pdb.Set(metaKey(metaSchema), binary.BigEndian.AppendUint32(nil, v), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := pdb.Close(); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	if err := openDBAt(t, dir).Close(); err != nil {
		t.Fatal(err)
	}
	if v := storedSchemaVersion(t, dir); v != schemaVersion {
		t.Fatalf("new store has schema %d, want %d", v, schemaVersion)
	}

	setVersion(t, dir, 1)
	if v := storedSchemaVersion(t, dir); v != 1 {
		t.Fatalf("a read-only open changed schema 1 to %d", v)
	}
	if err := openDBAt(t, dir).Close(); err != nil {
		t.Fatal(err)
	}
	if v := storedSchemaVersion(t, dir); v != schemaVersion {
		t.Fatalf("schema 1 opened for writing stays %d, want %d", v, schemaVersion)
	}

	for _, bad := range []uint32{0, schemaVersion + 1} {
		setVersion(t, dir, bad)
		_, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
		if !errors.Is(err, ErrSchema) {
			t.Fatalf("schema %d: open error %v, want ErrSchema", bad, err)
		}
	}
}

// storedSchemaVersion opens the index at dir read-only (which never
// upgrades it) and returns the layout version it records.
func storedSchemaVersion(t *testing.T, dir string) uint32 {
	t.Helper()
	db, err := Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return schemaVersionOf(t, db)
}

// schemaVersionOf returns the layout version db records.
func schemaVersionOf(t *testing.T, db *DB) uint32 {
	t.Helper()
	v, err := db.get(metaKey(metaSchema))
	if err != nil || len(v) != 4 {
		t.Fatalf("schema value %x, %v", v, err)
	}
	return binary.BigEndian.Uint32(v)
}
