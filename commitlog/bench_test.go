package commitlog

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkAppend measures Append throughput against a raw sequential
// write() of the same record bytes to a plain file, run right after it on
// the same disk, and reports:
//
//	log-MB/s   record bytes appended per second (all writers)
//	raw-MB/s   the baseline: one goroutine write()-ing the same records
//	log/raw    the ratio of the two
//
// Async: the log's background flusher msyncs every 500 ms (the default
// FlushInterval), and so does a goroutine beside the baseline's write loop
// with fdatasync. The baseline runs before and after
// the log and the faster run counts; every phase starts after sync(2) so
// that one phase's dirty pages do not slow the next. Sync (every append waits for its
// group commit): the baseline calls fdatasync after every g records, where
// g is the log's average group size in the same run (appends / flushes).
// Sync cases also report the append latency p99 (p99-ms), the median and
// 99th percentile latency of one 4 KiB write+fdatasync measured in the same
// run (sync-ms, sync-p99-ms), p99-ms/sync-ms, and the average number of
// records per group commit (recs/flush), and the bytes the process queued
// for the disk during the log phase per record byte appended (disk/log,
// from /proc/self/io's write_bytes, which the kernel counts when a page of
// the mapping becomes dirty: a large folio re-dirtied after a flush counts,
// and is written, whole).
func BenchmarkAppend(b *testing.B) {
	for _, flush := range []FlushType{AsyncFlush, SyncFlush} {
		for _, body := range []int{1024, 4096} {
			for _, writers := range []int{1, 8, 64} {
				name := fmt.Sprintf("%s/%dKiB/w%d", map[FlushType]string{AsyncFlush: "async", SyncFlush: "sync"}[flush], body/1024, writers)
				b.Run(name, func(b *testing.B) { benchAppend(b, flush, body, writers) })
			}
		}
	}
}

type benchAssigner struct{ next int64 }

// Assign is called under the log's append lock, so it needs no lock.
func (a *benchAssigner) Assign(string, int32, int) int64 { a.next++; return a.next - 1 }

func benchAppend(b *testing.B, flush FlushType, body, writers int) {
	dir := b.TempDir()
	cfg := DefaultConfig(dir)
	cfg.FlushType = flush
	cfg.StoreHost = testStoreHost
	l, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	msgs := make([]*Message, writers)
	for w := range msgs {
		msgs[w] = testMessage("BenchTopic", int32(w%8), w, body)
	}
	recSize, _ := EncodedSize(msgs[0])
	isSync := flush == SyncFlush
	per := make([]int, writers)
	for i := 0; i < b.N; i++ {
		per[i%writers]++
	}
	var lat [][]time.Duration
	if isSync {
		lat = make([][]time.Duration, writers)
		for w := range lat {
			lat[w] = make([]time.Duration, 0, per[w])
		}
	}
	a := &benchAssigner{}
	rec := make([]byte, recSize)
	if _, err := AppendRecord(rec[:0], msgs[0]); err != nil {
		b.Fatal(err)
	}
	// The async baseline runs before and after the log (best of the two
	// counts), each phase starting from a clean page cache (sync(2)).
	var rawBefore time.Duration
	if !isSync {
		unix.Sync()
		rawBefore, _ = rawSequentialWrite(b, dir, rec, b.N, 0)
	}
	unix.Sync()
	flushes0 := l.flushes.Load()
	written0, haveIO := processWriteBytes()
	ctx := context.Background()
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			req := AppendRequest{Message: msgs[w], Assigner: a, WaitFlush: isSync}
			for i := 0; i < per[w]; i++ {
				t0 := time.Now()
				r, err := l.Append(ctx, req)
				if err != nil || r.Status != PutOK {
					b.Errorf("append: %v %v", err, r.Status)
					return
				}
				if isSync {
					lat[w] = append(lat[w], time.Since(t0))
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	written1, _ := processWriteBytes()
	flushes := l.flushes.Load() - flushes0
	group := 0
	if isSync {
		group = max(1, int((int64(b.N)+flushes-1)/max(flushes, 1)))
	}
	unix.Sync()
	rawElapsed, groupSyncs := rawSequentialWrite(b, dir, rec, b.N, group)
	if !isSync {
		rawElapsed = min(rawElapsed, rawBefore)
	}
	total := float64(b.N) * float64(recSize)
	logMBs := total / elapsed.Seconds() / 1e6
	rawMBs := total / rawElapsed.Seconds() / 1e6
	b.ReportMetric(logMBs, "log-MB/s")
	b.ReportMetric(rawMBs, "raw-MB/s")
	b.ReportMetric(logMBs/rawMBs, "log/raw")
	if isSync {
		var all []time.Duration
		for _, ls := range lat {
			all = append(all, ls...)
		}
		slices.Sort(all)
		p99 := all[min(len(all)-1, len(all)*99/100)]
		one, oneP99 := fdatasyncLatency(b, dir)
		b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms")
		b.ReportMetric(float64(one.Microseconds())/1e3, "sync-ms")
		b.ReportMetric(float64(oneP99.Microseconds())/1e3, "sync-p99-ms")
		b.ReportMetric(float64(p99)/float64(one), "p99/sync")
		// The same against one fdatasync of a group's bytes, in the raw
		// baseline (no appenders, no waiters to wake).
		if len(groupSyncs) > 0 {
			slices.Sort(groupSyncs)
			gp99 := groupSyncs[min(len(groupSyncs)-1, len(groupSyncs)*99/100)]
			b.ReportMetric(float64(gp99.Microseconds())/1e3, "group-sync-p99-ms")
			b.ReportMetric(float64(p99)/float64(gp99), "p99/group-sync-p99")
		}
		b.ReportMetric(float64(b.N)/float64(max(flushes, 1)), "recs/flush")
		if haveIO {
			b.ReportMetric(float64(written1-written0)/total, "disk/log")
		}
	}
}

// processWriteBytes reads write_bytes from /proc/self/io: the bytes this
// process caused to be sent to storage so far. It reports false where the
// file is missing or unreadable.
func processWriteBytes() (int64, bool) {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// rawSequentialWrite writes rec n times with write() to a new plain file in
// dir. When group > 0 it calls fdatasync after every group records and at
// the end (the sync policy); otherwise a background goroutine calls
// fdatasync every DefaultFlushInterval, like the log's async flusher (the
// async policy). It returns the elapsed time of the write loop and, under
// the sync policy, how long each fdatasync took.
func rawSequentialWrite(b *testing.B, dir string, rec []byte, n, group int) (time.Duration, []time.Duration) {
	p := filepath.Join(dir, "raw")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(p)
	defer f.Close()
	fd := int(f.Fd())
	stop := make(chan struct{})
	var bg sync.WaitGroup
	if group == 0 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			t := time.NewTicker(DefaultFlushInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					unix.Fdatasync(fd)
				}
			}
		}()
	}
	var syncs []time.Duration
	start := time.Now()
	in := 0
	for i := 0; i < n; i++ {
		if _, err := unix.Write(fd, rec); err != nil {
			b.Fatal(err)
		}
		if group > 0 {
			if in++; in == group || i == n-1 {
				t0 := time.Now()
				if err := unix.Fdatasync(fd); err != nil {
					b.Fatal(err)
				}
				syncs = append(syncs, time.Since(t0))
				in = 0
			}
		}
	}
	elapsed := time.Since(start)
	close(stop)
	bg.Wait()
	return elapsed, syncs
}

// fdatasyncLatency returns the median and the 99th percentile time of
// appending 4 KiB to a file and fdatasync-ing it, over 101 tries.
func fdatasyncLatency(b *testing.B, dir string) (p50, p99 time.Duration) {
	p := filepath.Join(dir, "fsync-probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(p)
	defer f.Close()
	buf := make([]byte, 4096)
	var ds []time.Duration
	for i := 0; i < 101; i++ {
		t0 := time.Now()
		if _, err := unix.Write(int(f.Fd()), buf); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// BenchmarkDecode measures decoding a fixture-like record.
func BenchmarkDecode(b *testing.B) {
	rec, err := AppendRecord(nil, testMessage("TopicA", 1, 1, 1024))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Decode(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookupProperty measures the dispatcher's per-record lookups.
func BenchmarkLookupProperty(b *testing.B) {
	props := "CLUSTER\x01DefaultCluster\x02KEYS\x01orderA-0 customer-0\x02TAGS\x01TagA\x02UNIQ_KEY\x01C0A8011410921B6D3586000186A00000"
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		LookupProperty(props, PropertyTags)
		LookupProperty(props, PropertyKeys)
		LookupProperty(props, PropertyUniqID)
	}
}

// BenchmarkRewriteProperties measures the send path's rewrite of a
// message's properties (one key dropped, one set).
func BenchmarkRewriteProperties(b *testing.B) {
	props := "CLUSTER\x01DefaultCluster\x02KEYS\x01orderA-0 customer-0\x02TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x01C0A8011410921B6D3586000186A00000\x02"
	set := [2]string{PropertyRealTopic, "TopicA"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		RewriteProperties(props, []string{"WAIT"}, set)
	}
}

// BenchmarkAppendReplica measures a slave's apply path: AppendReplica of
// 32 KiB pieces (one op each) of a master's log of 1 KiB-body records, cut
// at arbitrary bytes as the HA transfer cuts them. The master's pieces are
// read beforehand; each replica's segment is faulted in before its pieces
// are timed, as the prefaulter keeps it ahead of the write position, so
// the figure is the copy and the record walk, not the page faults.
func BenchmarkAppendReplica(b *testing.B) {
	const segSize = 16 << 20
	mcfg := testConfig(b, segSize)
	m := mustOpen(b, mcfg)
	defer m.Close()
	c := newCounter()
	for i := 0; m.MaxOffset() < segSize/2; i++ {
		mustAppend(b, m, AppendRequest{Message: testMessage("BenchTopic", int32(i%8), i, 1024), Assigner: c})
	}
	var pieces [][]byte
	for from := int64(0); from < m.MaxOffset(); {
		v, err := m.ReadStream(from, 32<<10)
		if err != nil {
			b.Fatal(err)
		}
		pieces = append(pieces, bytes.Clone(v.Data))
		from += int64(len(v.Data))
		v.Release()
	}
	var r *Log
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	b.SetBytes(32 << 10)
	b.ReportAllocs()
	b.ResetTimer()
	var off int64
	for i := 0; i < b.N; i++ {
		p := pieces[i%len(pieces)]
		if i%len(pieces) == 0 {
			// A fresh replica, its first piece taken and its segment
			// faulted in untimed.
			b.StopTimer()
			if r != nil {
				r.Close()
			}
			cfg := testConfig(b, segSize)
			cfg.Replica = true
			r = mustOpen(b, cfg)
			if err := r.AppendReplica(0, p); err != nil {
				b.Fatal(err)
			}
			if err := r.activeSegment().populate(0, segSize); err != nil {
				b.Fatal(err)
			}
			off = int64(len(p))
			b.StartTimer()
			continue
		}
		if err := r.AppendReplica(off, p); err != nil {
			b.Fatal(err)
		}
		off += int64(len(p))
	}
	b.StopTimer()
	if r.MaxOffset() == 0 {
		b.Fatalf("the replica took no whole record (replicated to %d)", r.ReplicaOffset())
	}
}
