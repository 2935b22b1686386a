package timer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// Waiting messages by topic (rocketmq_timing_messages).
//
// RocketMQ keeps a count per REAL_TOPIC in memory (TimerMetrics, saved to
// the timermetrics file now and then): TimerMessageStore.doEnqueue adds 1
// for a message it takes in and subtracts 1 for a cancel
// (TIMER_DEL_UNIQKEY), the dequeue subtracts 1 for each message it puts
// (a roll included: the rolled copy is added again when taken in), and a
// cancel that met no message gives its 1 back. rocketkv keeps the same
// count, of the entries of its timer index: 1 for each message's entry,
// -1 for each cancel's, summed by REAL_TOPIC.
//
// It is not saved. CountWaiting counts the index once per process,
// reading the record of each entry from the CommitLog (the index keys
// hold no topic); the hook adds the records it indexes from then on, and
// the delivery rounds (and, on a slave, ForgetDelivered) subtract the
// entries they delete, from the records they read anyway. A count saved
// on disk would be wrong after a crash; one counted from the index is
// right at every start. What it misses until the next start: an entry
// whose record left the CommitLog before the round that drops it (the
// hook counted it, the round cannot tell its topic).
//
// The count runs beside the rest (StartCounting): the dispatcher and the
// rounds go on while it reads, a round waiting at most while it reads a
// page of entries from the index. Until it is done, Waiting reports
// nothing.
//
// Memory is one map entry per topic with timer messages waiting, less
// than the records they count.

// waitingCounts is the count of waiting timer messages by topic.
//
// Lock order: deleteMu before mu. deleteMu is held by whatever deletes
// timer entries, across the deletion and its update of the count, and by
// CountWaiting while it turns the count on and while it reads each page
// of entries from the index: a deletion comes wholly before or after each
// page, so it knows whether the count has seen the entries it deletes.
// mu guards the rest, and is taken by the hook (briefly: the dispatcher
// never waits for a count).
type waitingCounts struct {
	deleteMu sync.Mutex

	mu sync.Mutex
	// on: the hook and the deletions update counts. Set by CountWaiting.
	on bool
	// from is the CommitLog offset from which the hook counts the records
	// it indexes; CountWaiting counts the entries of records before it.
	from int64
	// counting: CountWaiting reads the index, up to the entry read
	// (inclusive): a deletion of an entry of a record before from after
	// it is subtracted, one past it is not (the count will not see it).
	counting bool
	read     kvindex.TimerEntry
	// ready: CountWaiting has counted the index; counts is whole.
	ready  bool
	counts map[string]int64
	// changes counts the changes to counts, the last at changedMs (unix
	// ms): GET_TIMER_METRICS's data version.
	changes   int64
	changedMs int64

	// cancel stops the goroutine of StartCounting, which closes done.
	cancel context.CancelFunc
	done   chan struct{}
}

// waitingDelta is what an entry adds to the count of its REAL_TOPIC: 1
// for a message, -1 for a cancel; delta 0 counts nothing (no REAL_TOPIC,
// as RocketMQ's TimerMessageStore.addMetric skips).
type waitingDelta struct {
	topic string
	delta int64
}

// waitingDeltaOf is the count a parked record of these properties adds;
// topic aliases props.
func waitingDeltaOf(props string) waitingDelta {
	topic, ok := commitlog.LookupProperty(props, commitlog.PropertyRealTopic)
	if !ok {
		return waitingDelta{}
	}
	if _, cancel := commitlog.LookupProperty(props, PropDeleteKey); cancel {
		return waitingDelta{topic, -1}
	}
	return waitingDelta{topic, 1}
}

// add adds deltas to the count and notes the change; the caller holds
// w.mu.
func (w *waitingCounts) add(deltas ...waitingDelta) {
	for _, d := range deltas {
		if d.delta != 0 {
			w.changes++
			w.changedMs = time.Now().UnixMilli()
			break
		}
	}
	addTo(w.counts, deltas...)
}

// addTo adds deltas to counts. A topic whose count comes to 0 is
// forgotten; a new one is copied (not the record's properties).
func addTo(counts map[string]int64, deltas ...waitingDelta) {
	for _, d := range deltas {
		if d.delta == 0 {
			continue
		}
		n, ok := counts[d.topic]
		if !ok {
			d.topic = strings.Clone(d.topic)
		}
		if n += d.delta; n == 0 {
			delete(counts, d.topic)
		} else {
			counts[d.topic] = n
		}
	}
}

// hooked counts a record the hook indexed, at phy; the hook calls it once
// per record (not again when a failed dispatch batch is dispatched
// again).
func (s *Service) hooked(phy int64, m *commitlog.Message) {
	w := &s.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on && phy >= w.from {
		w.add(waitingDeltaOf(m.Properties))
	}
}

// deleteWaiting deletes entries from the index and, while the count is
// on, subtracts what they counted: deltas returns it, one per entry, and
// is called only then (it may read the records).
func (s *Service) deleteWaiting(entries []kvindex.TimerEntry, deltas func() ([]waitingDelta, error)) error {
	if len(entries) == 0 {
		return nil
	}
	w := &s.waiting
	w.deleteMu.Lock()
	defer w.deleteMu.Unlock()
	w.mu.Lock()
	on := w.on // turned on only under deleteMu
	w.mu.Unlock()
	var d []waitingDelta
	if on {
		var err error
		if d, err = deltas(); err != nil {
			return err
		}
	}
	if err := s.timers.Delete(entries); err != nil {
		return err
	}
	if d == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.on {
		return nil // the count failed meanwhile
	}
	for i, e := range entries {
		if e.PhyOffset >= w.from || !w.counting || !after(e, w.read) {
			w.add(waitingDelta{d[i].topic, -d[i].delta})
		}
	}
	return nil
}

// after reports whether e comes after r in the index's order.
func after(e, r kvindex.TimerEntry) bool {
	return e.DeliverMs > r.DeliverMs || (e.DeliverMs == r.DeliverMs && e.PhyOffset > r.PhyOffset)
}

// countPage is how many entries CountWaiting reads from the index at a
// time (Service.countPage; tests lower it).
const countPage = 4096

// StartCounting runs CountWaiting in a goroutine of its own, which
// StopCounting stops and waits for; done, when set, is called with its
// result in that goroutine. Call it once.
func (s *Service) StartCounting(ctx context.Context, done func(n int, took time.Duration, err error)) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{})
	w := &s.waiting
	w.mu.Lock()
	w.cancel, w.done = cancel, ch
	w.mu.Unlock()
	go func() {
		defer close(ch)
		start := time.Now()
		n, err := s.CountWaiting(ctx)
		if done != nil {
			done(n, time.Since(start), err)
		}
	}()
}

// StopCounting stops the goroutine of StartCounting, if any, and waits
// for it.
func (s *Service) StopCounting() {
	w := &s.waiting
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// CountWaiting counts the timer messages waiting by topic, for Waiting,
// and keeps the count from then on. Call it once (the service needs
// Options.Dispatched), before or after the dispatcher starts: it waits
// for the dispatcher to commit the records the hook has seen, then reads
// the record of every entry of the index (a million entries: see
// BenchmarkCountWaiting). It returns how many entries it counted. On an
// error the count stays off and Waiting reports nothing.
func (s *Service) CountWaiting(ctx context.Context) (int, error) {
	if s.dispatched == nil {
		return 0, errors.New("count waiting timer messages: the service has no Options.Dispatched")
	}
	w := &s.waiting
	w.deleteMu.Lock()
	w.mu.Lock()
	// From here the hook counts what it sees: records past the last it
	// saw and past the dispatched offset (the start of any batch it is
	// in). Every entry of an earlier record, of this process's hook or an
	// earlier one, is the index's to count.
	w.on, w.from, w.counting, w.read, w.ready, w.counts = true, max(s.hookedBelow.Load(), s.dispatched()), true,
		kvindex.TimerEntry{DeliverMs: -1}, false, map[string]int64{}
	from := w.from
	w.mu.Unlock()
	w.deleteMu.Unlock()
	n, local, err := s.countIndex(ctx, from)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counting = false
	if err != nil {
		w.on, w.counts = false, nil
		return n, fmt.Errorf("count waiting timer messages: %w", err)
	}
	for topic, c := range local {
		w.add(waitingDelta{topic, c})
	}
	w.ready = true
	return n, nil
}

// countIndex counts by topic the entries of records before from, once the
// dispatcher has committed them all.
func (s *Service) countIndex(ctx context.Context, from int64) (int, map[string]int64, error) {
	for s.dispatched() < from {
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("wait for the dispatch of %d: %w", from, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	w := &s.waiting
	counts := map[string]int64{}
	n := 0
	next := kvindex.TimerEntry{}
	for {
		if err := ctx.Err(); err != nil {
			return n, nil, err
		}
		w.deleteMu.Lock()
		page, err := s.timers.DueFrom(next.DeliverMs, next.PhyOffset, math.MaxInt64, s.countPage)
		if err == nil {
			w.mu.Lock()
			if len(page) < s.countPage {
				w.read = kvindex.TimerEntry{DeliverMs: math.MaxInt64, PhyOffset: math.MaxInt64}
			} else {
				w.read = page[len(page)-1]
			}
			w.mu.Unlock()
		}
		w.deleteMu.Unlock()
		if err != nil {
			return n, nil, err
		}
		var counted []kvindex.TimerEntry
		for _, e := range page {
			if e.PhyOffset < from { // else the hook counts it
				counted = append(counted, e)
			}
		}
		deltas, err := s.readDeltas(counted)
		if err != nil {
			return n, nil, err
		}
		for _, d := range deltas {
			if d.delta != 0 {
				n++
				addTo(counts, d)
			}
		}
		if len(page) < s.countPage {
			return n, counts, nil
		}
		last := page[len(page)-1]
		next = kvindex.TimerEntry{DeliverMs: last.DeliverMs, PhyOffset: last.PhyOffset + 1}
	}
}

// TopicWaiting is how many timer messages wait for one topic.
type TopicWaiting struct {
	Topic    string
	Messages int64
}

// Waiting returns the topics with timer messages waiting, those with the
// most first (ties by name), at most limit of them, and how many topics
// have some; ok is false until CountWaiting has counted. A topic whose
// count is below 1 (more cancels than messages of it waiting) is left
// out.
func (s *Service) Waiting(limit int) (rows []TopicWaiting, topics int, ok bool) {
	w := &s.waiting
	w.mu.Lock()
	if !w.ready {
		w.mu.Unlock()
		return nil, 0, false
	}
	rows = make([]TopicWaiting, 0, len(w.counts))
	for t, n := range w.counts {
		if n > 0 {
			rows = append(rows, TopicWaiting{t, n})
		}
	}
	w.mu.Unlock()
	topics = len(rows)
	if len(rows) > limit {
		slices.SortFunc(rows, func(a, b TopicWaiting) int {
			return cmp.Or(cmp.Compare(b.Messages, a.Messages), strings.Compare(a.Topic, b.Topic))
		})
		rows = rows[:limit]
	}
	return rows, topics, true
}

// WaitingTotal returns how many timer messages wait, over every topic:
// each message's entry counts 1 and each cancel's -1, as RocketMQ's
// timing wheel counts its slots (getAllCongestNum, the runtime info's
// timerCongestNum); never below 0. ok is false until CountWaiting has
// counted.
func (s *Service) WaitingTotal() (n int64, ok bool) {
	w := &s.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ready {
		return 0, false
	}
	for _, c := range w.counts {
		n += c
	}
	return max(n, 0), true
}

// WaitingTable is the whole count of waiting timer messages by topic.
type WaitingTable struct {
	// Topics holds every topic with messages waiting (a count above 0),
	// in no order.
	Topics []TopicWaiting
	// Changes counts the changes to the count since it began, the last
	// at ChangedMs (unix milliseconds; 0 while nothing changed).
	Changes   int64
	ChangedMs int64
}

// Table returns the whole count of waiting timer messages (RocketMQ's
// TimerMetrics timingCount, which GET_TIMER_METRICS answers), or false
// until CountWaiting has counted.
func (s *Service) Table() (WaitingTable, bool) {
	w := &s.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ready {
		return WaitingTable{}, false
	}
	t := WaitingTable{Topics: make([]TopicWaiting, 0, len(w.counts)), Changes: w.changes, ChangedMs: w.changedMs}
	for topic, n := range w.counts {
		if n > 0 {
			t.Topics = append(t.Topics, TopicWaiting{topic, n})
		}
	}
	return t, true
}

// readDeltas reads the records of entries and returns what each counted
// (nothing for one gone from the CommitLog). Records are independent:
// up to GOMAXPROCS goroutines read them, each a share of entries.
func (s *Service) readDeltas(entries []kvindex.TimerEntry) ([]waitingDelta, error) {
	deltas := make([]waitingDelta, len(entries))
	workers := min(runtime.GOMAXPROCS(0), maxReaders, (len(entries)+minPerReader-1)/minPerReader)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(entries); i += workers {
				d, err := s.readDelta(entries[i].PhyOffset)
				if err != nil {
					errs[w] = err
					return
				}
				deltas[i] = d
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return deltas, nil
}

// maxReaders bounds the goroutines of readDeltas, and minPerReader is the
// least share of records worth a goroutine.
const (
	maxReaders   = 8
	minPerReader = 256
)

// readDelta reads the record at phy and returns what it counts; nothing
// when it is gone from the CommitLog. It reads the properties alone when
// the service has Options.Properties.
func (s *Service) readDelta(phy int64) (waitingDelta, error) {
	var props string
	var ok bool
	var err error
	if s.properties != nil {
		props, ok, err = s.properties(phy)
	} else {
		var m commitlog.Message
		m, ok, err = s.store.Read(phy)
		props = m.Properties
	}
	if commitlog.NoRecordAt(err) || (err == nil && !ok) {
		return waitingDelta{}, nil
	}
	if err != nil {
		return waitingDelta{}, fmt.Errorf("read timer message at %d: %w", phy, err)
	}
	return waitingDeltaOf(props), nil
}
