package kvindex

import (
	"context"
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// KeyspaceDiskUsage attributes table bytes to the keyspace that holds the
// keys: after a compaction the ConsumeQueue keyspace holds about the bytes
// of its entries, an unused keyspace none.
func TestKeyspaceDiskUsage(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	const topics, queues, perQueue = 50, 8, 50 // 20,000 entries
	phy := int64(0)
	for ti := range topics {
		for q := range queues {
			ds := make([]cq.Dispatch, perQueue)
			for off := range ds {
				ds[off] = cq.Dispatch{Topic: fmt.Sprintf("T%d", ti), QueueID: int32(q), Entry: cq.Entry{
					QueueOffset: int64(off), PhyOffset: phy, Size: 200, TagsCode: phy, StoreTimestamp: phy,
				}}
				phy += 200
			}
			if err := c.Put(ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	cqBytes, err := db.KeyspaceDiskUsage(PrefixCQ)
	if err != nil {
		t.Fatal(err)
	}
	popBytes, err := db.KeyspaceDiskUsage(0x50)
	if err != nil {
		t.Fatal(err)
	}
	all, err := db.KeyspaceDiskUsage(0xff)
	if err != nil {
		t.Fatal(err)
	}
	// 20,000 entries of 51 logical bytes, compressed: well above a byte
	// and well below the logical size each.
	if cqBytes < 20000 || cqBytes > 20000*51 {
		t.Errorf("cq keyspace %d bytes for 20,000 entries", cqBytes)
	}
	if popBytes >= cqBytes/10 {
		t.Errorf("empty pop keyspace %d bytes, cq %d", popBytes, cqBytes)
	}
	if all > cqBytes {
		t.Errorf("keyspace 0xff %d bytes", all)
	}
}
