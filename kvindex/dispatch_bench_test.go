package kvindex

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// BenchmarkDispatch measures the dispatcher alone: b.N records of 1 KiB
// (8 queues of one topic, with TAGS, KEYS and UNIQ_KEY properties) are
// appended to the CommitLog before the timer starts, and the time is the
// dispatcher's indexing them from the start of the log.
func BenchmarkDispatch(b *testing.B) {
	root := b.TempDir()
	db, err := Open(Options{Dir: filepath.Join(root, DirName), Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cfg := crashLogConfig(root)
	cfg.SegmentSize = 1 << 30
	l, err := commitlog.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	store := db.ConsumeQueue(0)
	offsets := NewQueueOffsets(store, 0, zerolog.Nop())
	body := make([]byte, 1024)
	for i := 0; i < b.N; i++ {
		qid := int32(i % 8)
		m := &commitlog.Message{
			Topic: "BenchDispatch", QueueID: qid, Body: body,
			Properties:    fmt.Sprintf("TAGS\x01tag%d\x02KEYS\x01order-%d\x02UNIQ_KEY\x017F000001%024X\x02", i%3, i, i),
			BornTimestamp: time.Now().UnixMilli(),
			BornHost:      netip.MustParseAddrPort("127.0.0.1:5000"),
		}
		if err := offsets.Acquire(m.Topic, qid); err != nil {
			b.Fatal(err)
		}
		_, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: offsets})
		offsets.Release(m.Topic, qid)
		if err != nil {
			b.Fatal(err)
		}
	}
	disp, err := NewDispatcher(DispatcherOptions{Log: l, DB: db, Store: store, Offsets: offsets, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := disp.Recover(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	disp.Start()
	defer disp.Close()
	if err := disp.CatchUp(context.Background()); err != nil {
		b.Fatal(err)
	}
}
