package commitlog_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/rocketkv/rocketkv/commitlog"
)

// offsets is a QueueOffsetAssigner with one counter per queue.
type offsets map[string]int64

func (o offsets) Assign(topic string, queueID int32, n int) int64 {
	k := fmt.Sprintf("%s-%d", topic, queueID)
	base := o[k]
	o[k] = base + int64(n)
	return base
}

func Example() {
	dir, _ := os.MkdirTemp("", "commitlog-example")
	defer os.RemoveAll(dir)
	cfg := commitlog.DefaultConfig(dir)
	cfg.SegmentSize = 1 << 20
	cfg.StoreHost = netip.MustParseAddrPort("192.168.1.10:10911")
	l, err := commitlog.Open(cfg)
	if err != nil {
		panic(err)
	}
	defer l.Close()

	res, err := l.Append(context.Background(), commitlog.AppendRequest{
		Message: &commitlog.Message{
			Topic:      "TopicA",
			QueueID:    1,
			Body:       []byte("hello"),
			Properties: commitlog.FormatProperties(map[string]string{"TAGS": "TagA", "KEYS": "k1"}),
		},
		Assigner: offsets{},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.PhyOffset, res.QueueOffset, res.MsgIDs[0])

	// Tail the log as the dispatcher does.
	r := l.NewReader(l.MinOffset())
	defer r.Close()
	for {
		e, err := r.Next()
		if err == commitlog.ErrNoMoreData {
			break
		}
		if err != nil {
			panic(err)
		}
		m, _ := commitlog.Decode(e.Data)
		tags, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags)
		fmt.Printf("%d %s/%d %q tags=%s tagsCode=%d\n", e.Offset, m.Topic, m.QueueID, m.Body, tags, commitlog.TagsCode(tags))
	}
	// Output:
	// PUT_OK 0 0 C0A8010A00002A9F0000000000000000
	// 0 TopicA/1 "hello" tags=TagA tagsCode=2598919
}
