package rmqconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KVPopDir is where RocketMQ 5's KV POP (popConsumerKVServiceInit and
// popConsumerKVServiceEnable) keeps one RocksDB record per message in
// flight, under storePathRootDir.
const KVPopDir = "kvStore"

// ErrRocksDBPopState: the store keeps POP in-flight state in RocksDB
// (KVPopDir), which rocketkv does not read.
var ErrRocksDBPopState = errors.New("the RocketMQ store keeps POP messages in flight in RocksDB")

// CheckPopState refuses a store with a non-empty KVPopDir. Messages
// popped and not acked through RocketMQ's KV POP are recorded only there,
// and its consumer offsets may already stand past them: opening the store
// without them would never re-deliver them. RocketMQ's exportPopRecord
// (POP_ROLLBACK) turns the records into check-point messages of the revive
// topic, which the import takes over; the directory is then moved aside.
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
	return fmt.Errorf("%w: %s; on the RocketMQ broker run mqadmin exportPopRecord -b <its address> (the in-flight messages go to the revive topic, which rocketkv takes over), stop it, then move %s aside",
		ErrRocksDBPopState, dir, dir)
}
