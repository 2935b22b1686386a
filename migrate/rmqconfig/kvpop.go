package rmqconfig

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/internal/rocksread"
)

// KVPopDir is where RocketMQ 5's KV POP (popConsumerKVServiceInit and
// popConsumerKVServiceEnable) keeps one RocksDB record per message in
// flight, under storePathRootDir.
const KVPopDir = "kvStore"

// ErrRocksDBPopState: the store keeps POP messages in flight in RocksDB
// (KVPopDir) that cannot be imported: the directory cannot be read, or a
// record of it does not decode.
var ErrRocksDBPopState = errors.New("the RocketMQ store keeps POP messages in flight in RocksDB")

// popStateCF is KV POP's column family, one record per message in flight.
const popStateCF = "popState"

// PopRecord is one message in flight of RocketMQ's KV POP
// (PopConsumerRecord): popped by Group from Topic's queue QueueID at
// Offset and neither acked nor revived yet. Topic is the topic the
// message was read from: a pop-retry topic for a retried message, and
// Offset is an offset of that topic's queue. RocketMQ's revive re-puts
// the message found there, once VisibleAt (popTime + invisibleTime) has
// passed, into the group's pop-retry topic with reconsumeTimes + 1.
//
// The record's retryFlag is not read: RocketMQ writes it at a pop (1 or
// 2 for a pop-retry topic) but 0 whatever the topic when it rewrites the
// record at a change of invisible time, and its revive tells a retried
// message by its topic's name alone. The import does the same
// (pop.RetryFlagOf of Topic).
type PopRecord struct {
	Group, Topic string
	QueueID      int32
	Offset       int64
	// PopTime and InvisibleTime are the pop's (ms); a revive that failed
	// wrote the record again with the time of the failure and the
	// invisible time lengthened by its backoff.
	PopTime, InvisibleTime int64
	// VisibleAt is the record's deadline (ms since the epoch): PopTime +
	// InvisibleTime, the first field of its key.
	VisibleAt int64
	// AttemptTimes counts the revives of the record that failed.
	AttemptTimes int32
	// AttemptID is the pop request's attemptId ("" when it had none).
	AttemptID string
}

// popRecordJSON is PopConsumerRecord as fastjson writes it, but for its
// retryFlag (see PopRecord); the pointers tell a field left out from a
// zero.
type popRecordJSON struct {
	PopTime       *int64  `json:"popTime"`
	GroupID       *string `json:"groupId"`
	TopicID       *string `json:"topicId"`
	QueueID       *int32  `json:"queueId"`
	InvisibleTime *int64  `json:"invisibleTime"`
	Offset        *int64  `json:"offset"`
	AttemptTimes  int32   `json:"attemptTimes"`
	AttemptID     *string `json:"attemptId"`
}

// maxPopName bounds the group and topic of a record: rocketkv's index
// keys hold a name in at most this many bytes.
const maxPopName = 1<<16 - 1

// PopRecordKey is the key RocketMQ's PopConsumerRecord.getKeyBytes gives
// r: [visibleAt int64][group]'@'[topic]'@'[queueId int32]'@'[offset
// int64], big-endian.
func PopRecordKey(r PopRecord) []byte {
	k := make([]byte, 0, 8+len(r.Group)+1+len(r.Topic)+1+4+1+8)
	k = binary.BigEndian.AppendUint64(k, uint64(r.VisibleAt))
	k = append(append(k, r.Group...), '@')
	k = append(append(k, r.Topic...), '@')
	k = append(binary.BigEndian.AppendUint32(k, uint32(r.QueueID)), '@')
	return binary.BigEndian.AppendUint64(k, uint64(r.Offset))
}

// DecodePopRecord decodes one record of the popState column family: the
// value (fastjson) gives the fields, and the key must be the one RocketMQ
// builds from them (PopRecordKey), its deadline popTime + invisibleTime.
// Anything else is an error saying what does not hold.
func DecodePopRecord(key, value []byte) (PopRecord, error) {
	var v popRecordJSON
	if err := json.Unmarshal(value, &v); err != nil {
		return PopRecord{}, fmt.Errorf("value is not a PopConsumerRecord: %w", err)
	}
	var missing []string
	for name, absent := range map[string]bool{"popTime": v.PopTime == nil, "groupId": v.GroupID == nil,
		"topicId": v.TopicID == nil, "queueId": v.QueueID == nil, "invisibleTime": v.InvisibleTime == nil, "offset": v.Offset == nil} {
		if absent {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return PopRecord{}, fmt.Errorf("value lacks %s", strings.Join(slices.Sorted(slices.Values(missing)), ", "))
	}
	r := PopRecord{Group: *v.GroupID, Topic: *v.TopicID, QueueID: *v.QueueID, Offset: *v.Offset,
		PopTime: *v.PopTime, InvisibleTime: *v.InvisibleTime, AttemptTimes: v.AttemptTimes}
	if v.AttemptID != nil {
		r.AttemptID = *v.AttemptID
	}
	switch {
	case r.Group == "" || r.Topic == "":
		return PopRecord{}, fmt.Errorf("value has an empty groupId or topicId")
	case len(r.Group) > maxPopName || len(r.Topic) > maxPopName:
		return PopRecord{}, fmt.Errorf("groupId or topicId longer than %d bytes", maxPopName)
	case r.QueueID < 0 || r.Offset < 0:
		return PopRecord{}, fmt.Errorf("negative queueId %d or offset %d", r.QueueID, r.Offset)
	case r.PopTime < 0 || r.InvisibleTime < 0 || r.PopTime > (1<<62) || r.InvisibleTime > (1<<62):
		return PopRecord{}, fmt.Errorf("popTime %d or invisibleTime %d out of range", r.PopTime, r.InvisibleTime)
	case r.AttemptTimes < 0:
		return PopRecord{}, fmt.Errorf("negative attemptTimes %d", r.AttemptTimes)
	}
	r.VisibleAt = r.PopTime + r.InvisibleTime
	if want := PopRecordKey(r); !bytes.Equal(key, want) {
		return PopRecord{}, fmt.Errorf("key %x is not the one its value gives (%x: deadline %d, %s@%s@%d@%d)",
			key, want, r.VisibleAt, r.Group, r.Topic, r.QueueID, r.Offset)
	}
	return r, nil
}

// refusalWay says what to do with a KVPopDir rocketkv cannot import.
const refusalWay = "on the RocketMQ broker run mqadmin exportPopRecord -b <its address> (the in-flight messages go to the revive topic, which rocketkv takes over), stop it, then move %s aside"

// ReadPopState reads every record of root's KVPopDir, in key order
// (deadline first): the POP messages RocketMQ's KV POP holds in flight.
// A store without the directory, or with an empty one, has none. A
// directory that cannot be read, or a record that does not decode, is an
// error wrapping ErrRocksDBPopState that names the directory (and the
// record) and the way out: messages in flight are never left out.
func ReadPopState(root string) ([]PopRecord, error) {
	var out []PopRecord
	if err := scanPopState(root, func(r PopRecord) { out = append(out, r) }); err != nil {
		return nil, err
	}
	return out, nil
}

// scanPopState calls each with every record of root's KVPopDir, in key
// order, as ReadPopState reads them; it stops at the first error
// ReadPopState returns (each may have been called for the records
// before it).
func scanPopState(root string, each func(PopRecord)) error {
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
	db, err := rocksread.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %s cannot be read (%v); "+refusalWay, ErrRocksDBPopState, dir, err, dir)
	}
	defer db.Close()
	err = db.Scan(popStateCF, func(k, v []byte) error {
		r, err := DecodePopRecord(k, v)
		if err != nil {
			return fmt.Errorf("%w: %s holds a record that does not decode (key %x, value %q): %v; "+refusalWay,
				ErrRocksDBPopState, dir, k, truncated(v), err, dir)
		}
		each(r)
		return nil
	})
	switch {
	case err == nil, errors.Is(err, rocksread.ErrNoColumnFamily):
		return nil
	case errors.Is(err, ErrRocksDBPopState):
		return err
	default:
		return fmt.Errorf("%w: %s cannot be read (%v); "+refusalWay, ErrRocksDBPopState, dir, err, dir)
	}
}

// truncated shortens a value for an error message.
func truncated(v []byte) string {
	if len(v) > 200 {
		return string(v[:200]) + "..."
	}
	return string(v)
}

// CheckPopState reads root's KVPopDir as ReadPopState does and returns
// how many POP messages in flight it holds, which the first open imports
// (the broker reads them with ReadPopState): RocketMQ's KV POP records
// them only there, with its consumer offsets past them. It refuses (an
// error wrapping ErrRocksDBPopState) a directory that cannot be read or a
// record that does not decode, as the first open does before anything is
// imported.
//
// It counts the records as it reads them, holding none.
func CheckPopState(root string) (int, error) {
	n := 0
	if err := scanPopState(root, func(PopRecord) { n++ }); err != nil {
		return 0, err
	}
	return n, nil
}
