package kvindex

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// Shape of the schema-2 store the migration crash test upgrades: pops of
// migratePopSize messages over migrateQueues queues.
const (
	migrateQueues   = 8
	migratePerQueue = 12_500
	migratePopSize  = 32
)

// runMigrateChild opens (and so upgrades) the index at root, says so, and
// waits to be killed.
func runMigrateChild(root string) int {
	fmt.Println("ready")
	db, err := Open(Options{Dir: root, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Println("opened")
	_ = db // held open until the kill
	select {}
}

// writeSchema2Store writes a schema-2 index at dir holding one in-flight
// record (and its ack-index entry) per message of the migrate* shape, and
// returns the records' group/topic/queue/offset names.
func writeSchema2Store(t *testing.T, dir string) map[[2]int64]bool {
	t.Helper()
	db := openDBAt(t, dir)
	want := map[[2]int64]bool{}
	wb := db.pdb.NewBatch()
	for q := int32(0); q < migrateQueues; q++ {
		for off := int64(0); off < migratePerQueue; off++ {
			ck := off - off%migratePopSize
			r := InFlight{Group: "g", Topic: "T", QueueID: q, QueueOffset: off, CKOffset: ck,
				PopTime: 1_000_000 + ck, InvisibleTime: 60_000, VisibleAt: 1_060_000 + ck}
			_ = wb.Set(popInFlightKey(nil, &r), popInFlightValue(nil, &r), nil)
			v := binary.BigEndian.AppendUint64(nil, uint64(r.VisibleAt))
			v = binary.BigEndian.AppendUint64(v, uint64(r.PopTime))
			v = binary.BigEndian.AppendUint64(v, uint64(r.InvisibleTime))
			_ = wb.Set(popAckKey(nil, r.Group, r.Topic, r.QueueID, r.QueueOffset), v, nil)
			want[[2]int64{int64(q), off}] = true
		}
	}
	_ = wb.Set(metaKey(metaSchema), binary.BigEndian.AppendUint32(nil, 2), nil)
	if err := wb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// storeSchemaState opens the index at dir read-only (which never upgrades)
// and returns its schema version, how many schema-2 records and ack-index
// entries it holds, and the messages its checkpoints hold in flight.
func storeSchemaState(t *testing.T, dir string) (ver uint32, legacy, acks int, inFlight map[[2]int64]bool) {
	t.Helper()
	db, err := Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ver = schemaVersionOf(t, db)
	_ = db.Scan([]byte{prefixPopInFlight}, func(_, _ []byte) bool { legacy++; return true })
	_ = db.Scan([]byte{prefixPopAckIndex}, func(_, _ []byte) bool { acks++; return true })
	inFlight = map[[2]int64]bool{}
	err = db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(c Checkpoint) bool {
		for _, off := range c.Offsets {
			inFlight[[2]int64{int64(c.QueueID), off}] = true
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return ver, legacy, acks, inFlight
}

// The upgrade of a schema-2 store (per-message in-flight records become
// checkpoints) is one synced batch: a broker killed while it upgrades
// leaves either the old layout at version 2, which the next start upgrades
// again, or the new one at version 3, never a mix, and no in-flight
// message is lost either way. Each kill hits a fresh copy of the old store
// at a random moment of the child's start.
func TestPopSchemaUpgradeSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	template := t.TempDir()
	want := writeSchema2Store(t, template)
	window := testutil.KillWindow(t, childEnvMigrate+"="+testutil.CopyStore(t, template), "opened")
	rng := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	var before, after int
	for i := 0; i < 10; i++ {
		dir := testutil.CopyStore(t, template)
		cmd, _, lines := testutil.StartChildLines(t, childEnvMigrate+"="+dir)
		time.Sleep(time.Duration(rng.Int64N(int64(window) + 1)))
		testutil.KillChild(cmd)
		opened := false
		for l := range lines { // closed when the killed child's stdout ends
			opened = opened || l == "opened"
		}
		ver, legacy, acks, inFlight := storeSchemaState(t, dir)
		switch {
		case ver == 2 && !opened && legacy == len(want) && acks == len(want) && len(inFlight) == 0:
			before++
		case ver == schemaVersion && legacy == 0 && acks == 0 && len(inFlight) == len(want):
			for m := range want {
				if !inFlight[m] {
					t.Fatalf("kill %d: message %v was in flight before the upgrade, not after it", i, m)
				}
			}
			after++
		default:
			t.Fatalf("kill %d (child opened: %v): schema %d with %d old records, %d ack-index entries and %d messages in checkpoints (want %d messages, in one layout)",
				i, opened, ver, legacy, acks, len(inFlight), len(want))
		}
		// The next start finishes what the killed one began.
		if err := openDBAt(t, dir).Close(); err != nil {
			t.Fatal(err)
		}
		if ver, legacy, acks, inFlight = storeSchemaState(t, dir); ver != schemaVersion || legacy != 0 || acks != 0 || len(inFlight) != len(want) {
			t.Fatalf("kill %d: after a clean start schema %d with %d old records, %d ack-index entries and %d messages in checkpoints (want %d)",
				i, ver, legacy, acks, len(inFlight), len(want))
		}
	}
	t.Logf("upgrade of %d records took up to %v; %d kills before it committed, %d after", len(want), window*2/3, before, after)
}
