package commitlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// recordSize is the size of testMessage("T", q, i, body): 91 + topic 1 +
// properties 28 + body.
func recordSize(body int) int64 { return 120 + int64(body) }

func TestRecordSizeHelper(t *testing.T) {
	n, err := EncodedSize(testMessage("T", 0, 12345678, 77))
	if err != nil || int64(n) != recordSize(77) {
		t.Fatalf("EncodedSize = %d, %v; helper says %d", n, err, recordSize(77))
	}
}

// blankAt checks that a blank filler of size n sits at off.
func blankAt(t *testing.T, l *Log, off int64, n int32) {
	t.Helper()
	if _, err := l.ReadRecord(off); !errors.Is(err, ErrBlank) {
		t.Fatalf("ReadRecord(%d) err = %v, want ErrBlank", off, err)
	}
	v, err := l.Read(off, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if got, ok := BlankSize(v.Data); !ok || got != n {
		t.Fatalf("blank at %d: size %d (%v), want %d", off, got, ok, n)
	}
}

func TestRollOver(t *testing.T) {
	const seg = 4096
	t.Run("exact fit: record+8 == remaining", func(t *testing.T) {
		l := mustOpen(t, testConfig(t, seg))
		defer l.Close()
		r1 := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 880)}) // 1000 bytes
		if r1.WroteBytes != 1000 {
			t.Fatalf("wrote %d", r1.WroteBytes)
		}
		body := int(seg - 1000 - 8 - recordSize(0)) // leaves exactly 8 bytes
		r2 := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, body)})
		if r2.PhyOffset != 1000 || r2.PhyOffset+r2.WroteBytes != seg-8 {
			t.Fatalf("exact-fit record at %d..%d", r2.PhyOffset, r2.PhyOffset+r2.WroteBytes)
		}
		r3 := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 2, 10)})
		if r3.PhyOffset != seg {
			t.Fatalf("third record at %d, want %d", r3.PhyOffset, seg)
		}
		blankAt(t, l, seg-8, 8)
		if n := len(scanAll(t, l)); n != 3 {
			t.Fatalf("scanned %d", n)
		}
	})
	t.Run("one byte too many rolls with a filler of the remaining bytes", func(t *testing.T) {
		l := mustOpen(t, testConfig(t, seg))
		defer l.Close()
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 880)})
		body := int(seg-1000-8-recordSize(0)) + 1
		r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, body)})
		if r.PhyOffset != seg {
			t.Fatalf("record at %d, want %d", r.PhyOffset, seg)
		}
		blankAt(t, l, 1000, seg-1000)
	})
	t.Run("a batch moves whole", func(t *testing.T) {
		l := mustOpen(t, testConfig(t, seg))
		defer l.Close()
		c := newCounter()
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 2880), Assigner: c}) // 3000 bytes
		// Three 500-byte records: the first would fit, the batch does not.
		batch := []*Message{testMessage("T", 0, 1, 380), testMessage("T", 0, 2, 380), testMessage("T", 0, 3, 380)}
		r := mustAppend(t, l, AppendRequest{Batch: batch, Assigner: c})
		if r.PhyOffset != seg || r.WroteBytes != 1500 || len(r.Records) != 3 || r.QueueOffset != 1 {
			t.Fatalf("batch result %+v", r)
		}
		for i, p := range r.Records {
			if p.Offset != seg+int64(i)*500 || p.Size != 500 {
				t.Fatalf("record %d at %+v", i, p)
			}
			v, err := l.ReadRecord(p.Offset)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := Decode(v.Data)
			v.Release()
			if m.QueueOffset != int64(1+i) || m.StoreTimestamp != r.StoreTimestamp || m.PhyOffset != p.Offset {
				t.Fatalf("record %d: %+v", i, m)
			}
			if r.MsgIDs[i] != MessageID(testStoreHost, p.Offset) {
				t.Fatalf("msgId %d", i)
			}
		}
		blankAt(t, l, 3000, seg-3000)
		if c.calls != 2 {
			t.Fatalf("Assign called %d times", c.calls)
		}
	})
	t.Run("segment-sized records", func(t *testing.T) {
		l := mustOpen(t, testConfig(t, seg))
		defer l.Close()
		maxBody := int(seg - 8 - recordSize(0))
		r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, maxBody)})
		if r.PhyOffset != 0 || r.WroteBytes != seg-8 {
			t.Fatalf("largest record: %+v", r)
		}
		r = mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, maxBody)})
		if r.PhyOffset != seg {
			t.Fatalf("second largest record at %d", r.PhyOffset)
		}
		if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 2, maxBody+1)}); !errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("record larger than a segment: %v", err)
		}
		blankAt(t, l, seg-8, 8)
		if n := len(scanAll(t, l)); n != 2 {
			t.Fatalf("scanned %d", n)
		}
	})
}

func TestAppendValidation(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	cfg.MaxMessageSize = 1000
	l := mustOpen(t, cfg)
	defer l.Close()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		req  AppendRequest
		want error
	}{
		"no message":    {AppendRequest{}, ErrInvalidAppend},
		"body too big":  {AppendRequest{Message: testMessage("T", 0, 0, 1001)}, ErrMessageTooLarge},
		"batch too big": {AppendRequest{Batch: []*Message{testMessage("T", 0, 0, 600), testMessage("T", 0, 1, 600)}}, ErrMessageTooLarge},
		"mixed topics":  {AppendRequest{Batch: []*Message{testMessage("T", 0, 0, 1), testMessage("U", 0, 1, 1)}}, ErrInvalidAppend},
		"mixed queues":  {AppendRequest{Batch: []*Message{testMessage("T", 0, 0, 1), testMessage("T", 1, 1, 1)}}, ErrInvalidAppend},
		"nil in batch":  {AppendRequest{Batch: []*Message{testMessage("T", 0, 0, 1), nil}}, ErrInvalidAppend},
		"props too big": {AppendRequest{Message: &Message{Topic: "T", Properties: strings.Repeat("x", 32768)}}, ErrPropertiesTooLarge},
		"empty topic":   {AppendRequest{Message: &Message{}}, ErrTopicTooLong},
	} {
		if _, err := l.Append(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(cctx, AppendRequest{Message: testMessage("T", 0, 0, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	if l.MaxOffset() != 0 {
		t.Fatalf("failed appends wrote %d bytes", l.MaxOffset())
	}
	// A long topic goes to V2.
	r := mustAppend(t, l, AppendRequest{Message: testMessage(strings.Repeat("r", 200), 0, 0, 5)})
	v, _ := l.ReadRecord(r.PhyOffset)
	m, err := Decode(v.Data)
	v.Release()
	if err != nil || m.Magic != MagicV2 || len(m.Topic) != 200 {
		t.Fatalf("long topic: %+v, %v", m, err)
	}
}

func TestTransactionQueueOffsets(t *testing.T) {
	l := mustOpen(t, testConfig(t, 1<<20))
	defer l.Close()
	c := newCounter()
	prep := testMessage("T", 0, 0, 10)
	prep.SysFlag = TransactionPrepared
	prep.QueueOffset = 77
	r := mustAppend(t, l, AppendRequest{Message: prep, Assigner: c})
	if c.calls != 0 || r.QueueOffset != 0 {
		t.Fatalf("prepared record: Assign called %d times, queue offset %d", c.calls, r.QueueOffset)
	}
	rb := testMessage("T", 0, 1, 10)
	rb.SysFlag = TransactionRollback
	commit := testMessage("T", 0, 2, 10)
	commit.SysFlag = TransactionCommit
	r = mustAppend(t, l, AppendRequest{Batch: []*Message{testMessage("T", 0, 3, 1), rb, commit}, Assigner: c})
	if c.calls != 1 || r.QueueOffset != 0 {
		t.Fatalf("batch: %d calls, base %d", c.calls, r.QueueOffset)
	}
	want := []int64{0, 0, 0, 1}
	for i, m := range scanAll(t, l) {
		if m.QueueOffset != want[i] {
			t.Fatalf("record %d queue offset %d, want %d", i, m.QueueOffset, want[i])
		}
	}
	// Without an assigner the message's own queue offset is kept.
	own := testMessage("T", 0, 4, 1)
	own.QueueOffset = 1234
	if r := mustAppend(t, l, AppendRequest{Message: own}); r.QueueOffset != 1234 {
		t.Fatalf("own queue offset: %d", r.QueueOffset)
	}
}

func TestDiskFull(t *testing.T) {
	const seg = 8192
	cfg := testConfig(t, seg)
	ffs := vfs.NewFaulty(vfs.OS{})
	cfg.FS = ffs
	l := mustOpen(t, cfg)
	defer l.Close()
	c := newCounter()
	app := func(body int) (AppendResult, error) {
		return l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, body), Assigner: c})
	}
	// The first segment is created by the first append, the second is
	// preallocated in the background right after.
	if _, err := app(880); err != nil {
		t.Fatal(err)
	}
	l.waitPrealloc()
	ffs.SetDiskFull(true)
	for l.MaxOffset() < seg {
		if _, err := app(880); err != nil {
			t.Fatalf("roll into the preallocated segment: %v", err)
		}
	}
	l.waitPrealloc() // the preallocation of the third segment failed
	for {
		before, calls := l.MaxOffset(), c.calls
		r, err := app(880)
		if err == nil {
			if r.PhyOffset >= 2*seg {
				t.Fatal("appended into a third segment on a full disk")
			}
			continue
		}
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("err = %v, want ErrDiskFull", err)
		}
		if l.MaxOffset() != before || c.calls != calls {
			t.Fatalf("failed append changed the log: max %d -> %d, Assign calls %d -> %d", before, l.MaxOffset(), calls, c.calls)
		}
		// No filler was written and no file was left behind.
		s := l.activeSegment()
		if !allZero(s.data[before-s.start:]) {
			t.Fatal("a failed roll wrote into the old segment")
		}
		if _, err := os.Stat(segPath(cfg.Dir, 2*seg)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("half-created segment left: %v", err)
		}
		break
	}
	n := len(scanAll(t, l))
	ffs.SetDiskFull(false)
	r, err := app(880)
	if err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
	if r.PhyOffset != 2*seg {
		t.Fatalf("append at %d, want %d", r.PhyOffset, 2*seg)
	}
	if got := len(scanAll(t, l)); got != n+1 {
		t.Fatalf("%d records, want %d", got, n+1)
	}
	// A mapping failure is reported as ErrMapFailed, also leaving the log as it was.
	l.waitPrealloc()
	ffs.FailMaps(2)
	for {
		before := l.MaxOffset()
		_, err := app(880)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrMapFailed) || l.MaxOffset() != before {
			t.Fatalf("err = %v, max %d -> %d", err, before, l.MaxOffset())
		}
		break
	}
}

func TestConcurrentAppendAndTail(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	l := mustOpen(t, cfg)
	defer l.Close()
	c := newCounter()
	const writers, perWriter = 8, 150
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A tailing reader runs during the appends, waiting without polling.
	tailed := make(chan int, 1)
	go func() {
		r := l.NewReader(0)
		defer r.Close()
		n := 0
		for n < writers*perWriter {
			e, err := r.Next()
			if err == ErrNoMoreData {
				if err := r.Wait(ctx); err != nil {
					break
				}
				continue
			}
			if err != nil {
				break
			}
			if _, err := Check(e.Data, true); err != nil {
				break
			}
			n++
		}
		tailed <- n
	}()
	var wg sync.WaitGroup
	results := make([][]AppendResult, writers)
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; {
				var req AppendRequest
				q := int32((w + i) % 3)
				if i%10 == 9 && i+3 <= perWriter {
					req.Batch = []*Message{testMessage("T", q, i, 50+i), testMessage("T", q, i+1, 60), testMessage("T", q, i+2, 70)}
				} else {
					req.Message = testMessage("T", q, i, 100+w*10+i%200)
				}
				req.Assigner = c
				r, err := l.Append(context.Background(), req)
				if err != nil {
					errs <- err
					return
				}
				results[w] = append(results[w], r)
				i += len(r.Records)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case n := <-tailed:
		if n != writers*perWriter {
			t.Fatalf("tailing reader saw %d records", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tailing reader did not finish")
	}
	msgs := scanAll(t, l)
	if len(msgs) != writers*perWriter {
		t.Fatalf("scanned %d records", len(msgs))
	}
	byOffset := map[int64]Message{}
	seen := map[string]map[int64]bool{}
	for _, m := range msgs {
		byOffset[m.PhyOffset] = m
		k := fmt.Sprint(m.QueueID)
		if seen[k] == nil {
			seen[k] = map[int64]bool{}
		}
		if seen[k][m.QueueOffset] {
			t.Fatalf("queue %s offset %d assigned twice", k, m.QueueOffset)
		}
		seen[k][m.QueueOffset] = true
	}
	for k, offs := range seen {
		for i := int64(0); i < int64(len(offs)); i++ {
			if !offs[i] {
				t.Fatalf("queue %s: offset %d missing (%d entries)", k, i, len(offs))
			}
		}
	}
	for _, rs := range results {
		for _, r := range rs {
			for i, p := range r.Records {
				m, ok := byOffset[p.Offset]
				if !ok || m.StoreSize != p.Size || m.StoreTimestamp != r.StoreTimestamp {
					t.Fatalf("result record %+v not found as written", p)
				}
				if i > 0 && p.Offset != r.Records[i-1].Offset+int64(r.Records[i-1].Size) {
					t.Fatal("batch records not contiguous")
				}
			}
		}
	}
}

func TestSyncFlushGroupCommit(t *testing.T) {
	cfg := testConfig(t, 256<<10)
	cfg.FlushType = SyncFlush
	l := mustOpen(t, cfg)
	defer l.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				r, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", int32(w), i, 500), WaitFlush: true})
				if err != nil {
					errs <- err
					return
				}
				if r.Status != PutOK {
					errs <- fmt.Errorf("status %v", r.Status)
					return
				}
				if end := r.PhyOffset + r.WroteBytes; l.FlushedOffset() < end {
					errs <- fmt.Errorf("returned before flush: flushed %d < %d", l.FlushedOffset(), end)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSyncFlushTimeout(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	cfg.FlushType = SyncFlush
	cfg.SyncFlushTimeout = 20 * time.Millisecond
	l := mustOpen(t, cfg)
	defer l.Close()
	release := make(chan struct{})
	hook := func() { <-release }
	l.flushHook.Store(&hook)
	r, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10), WaitFlush: true})
	if err != nil || r.Status != FlushDiskTimeout {
		t.Fatalf("blocked flush: %+v, %v; want FLUSH_DISK_TIMEOUT", r, err)
	}
	// The record stays in the log.
	if v, err := l.ReadRecord(r.PhyOffset); err != nil {
		t.Fatal(err)
	} else {
		v.Release()
	}
	// Without WaitFlush nothing waits.
	if r, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 1, 10)}); err != nil || r.Status != PutOK {
		t.Fatalf("no wait: %+v, %v", r, err)
	}
	close(release)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() != l.MaxOffset() {
		t.Fatalf("flushed %d of %d", l.FlushedOffset(), l.MaxOffset())
	}
}

// WaitFlushed confirms, once for many appends made without WaitFlush,
// that they are flushed under SyncFlush, and reports a flush that does
// not come in time.
func TestWaitFlushed(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	cfg.FlushType = SyncFlush
	cfg.SyncFlushTimeout = 20 * time.Millisecond
	l := mustOpen(t, cfg)
	defer l.Close()
	release := make(chan struct{})
	hook := func() { <-release }
	l.flushHook.Store(&hook)
	var end int64
	for i := 0; i < 3; i++ {
		r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, i, 10)})
		end = r.PhyOffset + r.WroteBytes
	}
	if l.WaitFlushed(context.Background(), end) {
		t.Fatal("WaitFlushed reported a blocked flush as done")
	}
	close(release)
	// The released flush may take longer than SyncFlushTimeout on a busy
	// machine: wait for it without a deadline, then WaitFlushed must
	// confirm it at once.
	if err := l.WaitDurable(context.Background(), end); err != nil {
		t.Fatalf("WaitDurable on a released flush: %v", err)
	}
	if !l.WaitFlushed(context.Background(), end) || l.FlushedOffset() < end {
		t.Fatalf("WaitFlushed after the flush: flushed %d, want at least %d", l.FlushedOffset(), end)
	}

	// Under AsyncFlush nothing is waited for.
	async := mustOpen(t, testConfig(t, 64<<10))
	defer async.Close()
	r := mustAppend(t, async, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	if !async.WaitFlushed(context.Background(), r.PhyOffset+r.WroteBytes) {
		t.Fatal("WaitFlushed waited under AsyncFlush")
	}
}

// WaitDurable outlasts any number of SyncFlushTimeouts (a flush that
// comes late is waited for, not given up on) and gives up only when its
// context ends or the log closes; the flush hook comes from the Config.
func TestWaitDurable(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	cfg.FlushType = SyncFlush
	cfg.SyncFlushTimeout = 10 * time.Millisecond
	var stalled sync.Mutex
	cfg.BeforeFlush = func() { stalled.Lock(); stalled.Unlock() }
	l := mustOpen(t, cfg)
	stalled.Lock()
	r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	end := r.PhyOffset + r.WroteBytes
	done := make(chan error, 1)
	go func() { done <- l.WaitDurable(context.Background(), end) }()
	select {
	case err := <-done:
		t.Fatalf("WaitDurable returned %v while the flush was stalled for 10 timeouts", err)
	case <-time.After(100 * time.Millisecond):
	}
	stalled.Unlock()
	if err := <-done; err != nil || l.FlushedOffset() < end {
		t.Fatalf("WaitDurable after the stall: %v, flushed %d of %d", err, l.FlushedOffset(), end)
	}

	stalled.Lock()
	r = mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 10)})
	end = r.PhyOffset + r.WroteBytes
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.WaitDurable(ctx, end); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDurable past its context: %v", err)
	}
	go func() { done <- l.WaitDurable(context.Background(), end) }()
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitDurable across Close: %v", err)
	}
	stalled.Unlock()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	async := mustOpen(t, testConfig(t, 64<<10))
	defer async.Close()
	r = mustAppend(t, async, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	if err := async.WaitDurable(context.Background(), r.PhyOffset+r.WroteBytes); err != nil {
		t.Fatalf("WaitDurable under AsyncFlush: %v", err)
	}
}

func TestNotifyAndWaitBeyond(t *testing.T) {
	l := mustOpen(t, testConfig(t, 64<<10))
	ch := l.Notify()
	done := make(chan error, 1)
	go func() { done <- l.WaitBeyond(context.Background(), 0) }()
	r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-ch
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.WaitBeyond(ctx, r.WroteBytes); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitBeyond with a cancelled context: %v", err)
	}
	go func() { done <- l.WaitBeyond(context.Background(), r.WroteBytes) }()
	l.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitBeyond across Close: %v", err)
	}
}

// Callers that hold a view only sometimes release it unconditionally.
func TestNilViewReleasesNothing(t *testing.T) {
	var v *View
	v.Release() // must not panic
}

// Under SyncFlush a confirmed reader (the dispatcher's) sees a record only
// once it is flushed, and its Wait returns when the flush comes; a plain
// reader, and a confirmed one with ReadUncommitted or under AsyncFlush,
// see it at once.
func TestConfirmedReaderStopsAtTheFlush(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flush     FlushType
		uncommit  bool
		waitFlush bool // the record is seen only after the flush
	}{
		{"sync", SyncFlush, false, true},
		{"sync, readUnCommitted", SyncFlush, true, false},
		{"async", AsyncFlush, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 64<<10)
			cfg.FlushType, cfg.ReadUncommitted = tc.flush, tc.uncommit
			cfg.FlushInterval = time.Hour // the async flusher stays out of the way
			l := mustOpen(t, cfg)
			defer l.Close()
			held := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(held) }) }
			defer release() // before Close, whose flush the hook would hold
			hook := func() { <-held }
			l.flushHook.Store(&hook)
			confirmed, plain := l.NewConfirmedReader(0), l.NewReader(0)
			defer confirmed.Close()
			defer plain.Close()
			r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
			if e, err := plain.Next(); err != nil || e.Offset != r.PhyOffset {
				t.Fatalf("plain reader: %+v, %v", e, err)
			}
			e, err := confirmed.Next()
			if !tc.waitFlush {
				release()
				if err != nil || e.Offset != r.PhyOffset {
					t.Fatalf("confirmed reader: %+v, %v; want the record at once", e, err)
				}
				return
			}
			if !errors.Is(err, ErrNoMoreData) {
				t.Fatalf("confirmed reader before the flush: %+v, %v; want ErrNoMoreData", e, err)
			}
			if got := l.ConfirmedOffset(); got != r.PhyOffset {
				t.Fatalf("confirmed offset before the flush %d, want %d", got, r.PhyOffset)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err = confirmed.Wait(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait with the flush held: %v, want the deadline", err)
			}
			release()
			if err := confirmed.Wait(context.Background()); err != nil {
				t.Fatalf("Wait after the flush: %v", err)
			}
			if e, err := confirmed.Next(); err != nil || e.Offset != r.PhyOffset {
				t.Fatalf("confirmed reader after the flush: %+v, %v", e, err)
			}
		})
	}
}
