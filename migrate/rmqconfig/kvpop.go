package rmqconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rocketkv/rocketkv/internal/rocksread"
)

// KVPopDir is where RocketMQ 5's KV POP (popConsumerKVServiceInit and
// popConsumerKVServiceEnable) keeps one RocksDB record per message in
// flight, under storePathRootDir.
const KVPopDir = "kvStore"

// ErrRocksDBPopState: the store keeps POP messages in flight in RocksDB
// (KVPopDir), which rocketkv does not import.
var ErrRocksDBPopState = errors.New("the RocketMQ store keeps POP messages in flight in RocksDB")

// CheckPopState refuses a store whose KVPopDir holds POP messages in
// flight. Messages popped and not acked through RocketMQ's KV POP are
// recorded only there, and its consumer offsets may already stand past
// them: opening the store without them would never re-deliver them.
// RocketMQ's exportPopRecord (POP_ROLLBACK) turns the records into
// check-point messages of the revive topic, which the import takes over;
// the directory is then moved aside. The directory is read (with
// internal/rocksread) to count them: one whose popState column family is
// empty (every pop acked or revived) holds nothing in flight and is no
// reason to refuse; one that cannot be read is.
func CheckPopState(root string) error {
	dir := filepath.Join(root, KVPopDir)
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("look for RocketMQ's KV POP state in %s: %w", dir, err)
	case len(entries) == 0:
		return nil
	}
	const way = "on the RocketMQ broker run mqadmin exportPopRecord -b <its address> (the in-flight messages go to the revive topic, which rocketkv takes over), stop it, then move %s aside"
	n, err := countPopRecords(dir)
	if err != nil {
		return fmt.Errorf("%w: %s cannot be read (%v); "+way, ErrRocksDBPopState, dir, err, dir)
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s holds %d POP messages in flight; "+way, ErrRocksDBPopState, dir, n, dir)
}

// popStateCF is KV POP's column family, one record per message in flight.
const popStateCF = "popState"

// countPopRecords counts the live records of dir's popState column family
// (0 when it has none).
func countPopRecords(dir string) (int, error) {
	db, err := rocksread.Open(dir)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n := 0
	err = db.Scan(popStateCF, func(k, v []byte) error {
		n++
		return nil
	})
	if errors.Is(err, rocksread.ErrNoColumnFamily) {
		return 0, nil
	}
	return n, err
}
