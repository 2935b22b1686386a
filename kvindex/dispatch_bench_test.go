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
	"github.com/rocketkv/rocketkv/meta"
)

// BenchmarkDispatch measures the dispatcher alone: b.N records of 1 KiB
// (8 queues of one topic, with TAGS, KEYS and UNIQ_KEY properties) are
// appended to the CommitLog before the timer starts, and the time is the
// dispatcher's indexing them from the start of the log.
func BenchmarkDispatch(b *testing.B) { benchDispatch(b, nil, benchCompaction{}) }

// BenchmarkDispatchNotifier is BenchmarkDispatch with a Notifier: idle
// (nothing held: no tag codes collected) and held (a request held on
// every queue of the topic whose match rejects every dispatch, so every
// batch collects, groups and sorts the codes and asks the match once per
// queue), against none in the same run.
func BenchmarkDispatchNotifier(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchDispatch(b, nil, benchCompaction{}) })
	b.Run("idle", func(b *testing.B) { benchDispatch(b, NewNotifier(), benchCompaction{}) })
	b.Run("held", func(b *testing.B) {
		n := NewNotifier()
		w := n.WaitMatch("BenchDispatch", AnyQueue, func(Arrival) bool { return false }, func() {})
		defer w.Cancel()
		benchDispatch(b, n, benchCompaction{})
	})
}

// BenchmarkDispatchCompaction is BenchmarkDispatch with the topic
// compacted (cleanup.policy=COMPACTION: each record copied into the
// index, the copy of the key's previous message deleted), against the
// topic not compacted in the same run: with every key distinct (nothing
// superseded) and with 1,000 keys (nearly every message supersedes one),
// and the topic not compacted while another one is.
func BenchmarkDispatchCompaction(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchDispatch(b, nil, benchCompaction{}) })
	b.Run("plain/another-topic-compacted", func(b *testing.B) { benchDispatch(b, nil, benchCompaction{other: true}) })
	b.Run("compacted/distinct-keys", func(b *testing.B) { benchDispatch(b, nil, benchCompaction{on: true}) })
	b.Run("compacted/1k-keys", func(b *testing.B) { benchDispatch(b, nil, benchCompaction{on: true, keys: 1000}) })
}

// benchCompaction says whether benchDispatch's topic is compacted, and
// over how many message keys (0: every message its own).
type benchCompaction struct {
	on   bool
	keys int
	// other compacts another topic only: what the dispatch of a topic
	// not compacted pays when some topic is.
	other bool
}

// BenchmarkDispatchReplica is BenchmarkDispatch on a slave (Replica: the
// dispatcher looks each batch's queues up for a restart, and a NewTopic
// hook notes the topic), against a master in the same run.
func BenchmarkDispatchReplica(b *testing.B) {
	b.Run("master", func(b *testing.B) { benchDispatch(b, nil, benchCompaction{}) })
	b.Run("replica", func(b *testing.B) {
		benchDispatch(b, nil, benchCompaction{}, func(o *DispatcherOptions) {
			o.Replica, o.NewTopic = true, func(string) {}
		})
	})
}

// benchDispatch times the dispatch of b.N records; adjust changes the
// dispatcher's options.
func benchDispatch(b *testing.B, n *Notifier, bc benchCompaction, adjust ...func(*DispatcherOptions)) {
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
		key := i
		if bc.keys > 0 {
			key = i % bc.keys
		}
		m := &commitlog.Message{
			Topic: "BenchDispatch", QueueID: qid, Body: body,
			Properties:    fmt.Sprintf("TAGS\x01tag%d\x02KEYS\x01order-%d\x02UNIQ_KEY\x017F000001%024X\x02", i%3, key, i),
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
	var compaction *Compaction
	if bc.on || bc.other {
		name := "BenchDispatch"
		if bc.other {
			name = "AnotherTopic"
		}
		tc := meta.NewTopicConfig(name, 8)
		tc.Attributes[meta.AttrCleanupPolicy] = "COMPACTION"
		compaction = NewCompaction(db, []meta.TopicConfig{tc})
	}
	opts := DispatcherOptions{Log: l, DB: db, Store: store, Offsets: offsets, Notifier: n, Compaction: compaction, Logger: zerolog.Nop()}
	for _, f := range adjust {
		f(&opts)
	}
	disp, err := NewDispatcher(opts)
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
