package main

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// Records with an empty topic past the end of the 4.9.8 fixture's
// CommitLog (encoded with a one-byte topic that is then cut out: nothing
// of ours writes one) are reported as what the first open leaves out of
// the ConsumeQueue and the key index, not as the records of a topic
// RocketMQ deleted (named "").
func TestCheckRocketMQEmptyTopicRecords(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	f, err := os.OpenFile(filepath.Join(store, "commitlog", "00000000000000049152"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	phy := int64(53272) // the fixture's end
	for qid := range int32(2) {
		rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: "x", QueueID: qid, PhyOffset: phy,
			BornTimestamp: 1, BornHost: host, StoreTimestamp: 1, StoreHost: host, Body: []byte("b")})
		if err != nil {
			t.Fatal(err)
		}
		at := len(rec) - 2 - 1 - 1 // topicLen=1 | 'x' | propsLen:2 (no properties)
		rec = append(append(rec[:at:at], 0), rec[at+2:]...)
		binary.BigEndian.PutUint32(rec, uint32(len(rec)))
		if _, err := f.WriteAt(rec, phy-49152); err != nil {
			t.Fatal(err)
		}
		phy += int64(len(rec))
	}
	out := mustKvdump(t, "--store", store, "check-rocketmq")
	if !strings.Contains(out, "2 CommitLog records have an empty topic") {
		t.Errorf("report does not count the empty-topic records:\n%s", out)
	}
	if strings.Contains(out, "topics RocketMQ deleted") {
		t.Errorf("empty-topic records reported as a deleted topic's:\n%s", out)
	}
}
