package broker

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/migrate/cqcompare"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// emptyTopicRecord returns a V1 CommitLog record whose topic is empty (a
// topic length byte of 0), which RocketMQ's decoder reads and neither
// RocketMQ's send path nor commitlog.AppendRecord writes: it is encoded
// with a one-byte topic, which is then cut out.
func emptyTopicRecord(t *testing.T, phy int64, qid int32, qoff int64, props string) []byte {
	t.Helper()
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	now := time.Now().UnixMilli()
	rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: "x", QueueID: qid, QueueOffset: qoff, PhyOffset: phy,
		BornTimestamp: now, BornHost: host, StoreTimestamp: now, StoreHost: host, Body: []byte("no topic"), Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	// ... body | topicLen=1 | 'x' | propsLen:2 | props
	at := len(rec) - len(props) - 2 - 1 - 1
	if rec[at] != 1 || rec[at+1] != 'x' {
		t.Fatalf("topic not where expected in the encoded record")
	}
	out := append(append(append([]byte(nil), rec[:at]...), 0), rec[at+2:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)))
	if m, err := commitlog.Decode(out); err != nil || m.Topic != "" || m.PhyOffset != phy {
		t.Fatalf("the cut record decodes as %+v, %v", m, err)
	}
	return out
}

// fixtureEnd is where RocketMQ 4.9.8 ended the fixture's CommitLog, in its
// last 16 KiB file.
const fixtureEnd, fixtureLastFile = 53272, 49152

// appendEmptyTopicRecords writes two records with an empty topic (queues 0
// and 1, the first with a key TopicA's records have too) past the end of
// the fixture store's CommitLog, with the entries RocketMQ's dispatch
// would have written for them, as if RocketMQ had stored them, and
// returns where they end.
func appendEmptyTopicRecords(t *testing.T, store string) int64 {
	t.Helper()
	path := filepath.Join(store, "commitlog", "00000000000000049152")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	phy := int64(fixtureEnd)
	for qid, props := range []string{"KEYS\x01orderA-0\x02UNIQ_KEY\x017F0000010001000000000000000000AA\x02", "TAGS\x01t\x02"} {
		rec := emptyTopicRecord(t, phy, int32(qid), 0, props)
		if _, err := f.WriteAt(rec, phy-fixtureLastFile); err != nil {
			t.Fatal(err)
		}
		// RocketMQ's dispatch files the entry under consumequeue/ + "" +
		// "/<queueId>": a file where a topic's queue directory goes.
		cqDir := filepath.Join(store, "consumequeue", strconv.Itoa(qid))
		if err := os.MkdirAll(cqDir, 0o755); err != nil {
			t.Fatal(err)
		}
		unit := make([]byte, 10*filecq.UnitSize) // the fixture's files hold 10 units
		binary.BigEndian.PutUint64(unit, uint64(phy))
		binary.BigEndian.PutUint32(unit[8:], uint32(len(rec)))
		if err := os.WriteFile(filepath.Join(cqDir, filecq.FileName(0)), unit, 0o644); err != nil {
			t.Fatal(err)
		}
		phy += int64(len(rec))
	}
	return phy
}

// A CommitLog record with an empty topic, in a RocketMQ store opened for
// the first time, names no queue: RocketMQ refuses such a topic to every
// client (send, pull, query, topic creation), and its file ConsumeQueue
// would put it in consumequeue/<queueId>/, a topic directory's place.
// Every layout leaves it out of the ConsumeQueue and the key index
// instead of stopping dispatch on it (the file layout cannot name its
// directory); the other topics keep every message and key, and the
// records after it are dispatched.
func TestOpenRocketMQStoreWithAnEmptyTopicRecord(t *testing.T) {
	for _, storeType := range []string{"kv", "file", "double-write"} {
		t.Run(storeType, func(t *testing.T) {
			store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
			end := appendEmptyTopicRecords(t, store)
			settings := map[string]string{"mappedFileSizeCommitLog": "16384"}
			switch storeType {
			case "file":
				settings["storeType"] = "file"
			case "double-write":
				settings["rocksdbCQDoubleWriteEnable"] = "true"
			}
			b := startTestBrokerAt(t, store, settings)
			if got := b.clog.MaxOffset(); got != end {
				t.Fatalf("CommitLog ends at %d, want %d (after the empty-topic records)", got, end)
			}
			c := b.client(nil)
			if resp := mustSend(t, c, "TopicA", 0, "after the empty topic", ""); header(t, resp, "queueOffset") != 16 {
				t.Fatalf("a new TopicA/0 message got queue offset %s, want 16", resp.ExtFields["queueOffset"])
			}
			b.caughtUp()
			for _, s := range []cq.Store{b.cqs, b.cqMirror} {
				if s == nil {
					continue
				}
				_ = s.Queues(func(topic string, qid int32) bool {
					if topic == "" {
						t.Errorf("a queue %d of the empty topic was made", qid)
					}
					return true
				})
				for q, want := range []int64{17, 16, 18, 19} {
					if hi, err := s.MaxOffset("TopicA", int32(q)); err != nil || hi != want {
						t.Errorf("TopicA/%d max offset %d %v, want %d", q, hi, err, want)
					}
				}
			}
			if got := queryKey(t, c, "TopicA", "orderA-0"); len(got) != 1 || got[0].Topic != "TopicA" || got[0].PhyOffset != 0 {
				t.Errorf("TopicA's key orderA-0: %d records (%v), want its one at 0", len(got), got)
			}
			if b.fileCQ != nil && b.kvCQ != nil {
				r, err := cqcompare.Compare(context.Background(), b.kvCQ, b.fileCQ, [2]string{"kv", "file"}, cqcompare.Options{Bounds: b.disp.QuiescedMinima})
				if err != nil || !r.OK() {
					t.Errorf("layouts disagree: %v %s", err, r.String())
				}
			}
		})
	}
}
