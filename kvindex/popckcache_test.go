package kvindex

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ckModel is what the database must hold: every live checkpoint by queue
// and name.
type ckModel map[ckModelQueue]map[CheckpointName]Checkpoint

type ckModelQueue struct {
	group string
	queue int32
}

// minInFlight is MinInFlightReplacing's answer worked out from the model.
func (m ckModel) minInFlight(q ckModelQueue, from int64, replaced *Checkpoint) (int64, bool) {
	bound := max(from-MaxCheckpointSpan+1, 0)
	best, ok := int64(0), false
	for name, c := range m[q] {
		if c.CKOffset < bound {
			continue
		}
		offs := c.Offsets
		if replaced != nil && name == (CheckpointName{replaced.CKOffset, replaced.PopTime}) {
			offs = replaced.Offsets
		}
		if len(offs) > 0 && (!ok || offs[0] < best) {
			best, ok = offs[0], true
		}
	}
	return best, ok
}

// inFlight is InFlightCount's answer worked out from the model, without
// a limit.
func (m ckModel) inFlight(q ckModelQueue, from int64) int64 {
	bound := max(from-MaxCheckpointSpan+1, 0)
	var n int64
	for _, c := range m[q] {
		if c.CKOffset >= bound {
			n += int64(len(c.Offsets))
		}
	}
	return n
}

// checkCacheAccounting fails when the cache's byte count is not the sum of
// its queues' or passes the budget.
func checkCacheAccounting(t *testing.T, cc *checkpointCache) {
	t.Helper()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	sum := 0
	cc.queues.RemoveIf(func(_ string, q *ckQueue) bool {
		want := ckQueueOverhead
		for _, c := range q.cks {
			want += ckEntrySize(c)
		}
		if q.bytes-want < 0 || q.bytes-want > 1<<10 { // the key's length is the rest
			t.Errorf("queue accounted at %d bytes, its checkpoints make %d", q.bytes, want)
		}
		sum += q.bytes
		return false
	})
	if sum != cc.bytes {
		t.Errorf("cache accounts %d bytes, its queues %d", cc.bytes, sum)
	}
	if cc.bytes > cc.budget {
		t.Errorf("cache holds %d bytes, over its budget of %d", cc.bytes, cc.budget)
	}
}

// TestCheckpointCacheMatchesTheDatabase runs 500 steps of random pops, acks, revive
// moves and abandoned batches over a few queues and checks after each
// step that MinInFlight, MinInFlightReplacing, InFlightCount and
// Checkpoint answer what the committed checkpoints say, with the cache at its defaults and with
// limits small enough that queues are evicted, found oversized and
// reloaded.
func TestCheckpointCacheMatchesTheDatabase(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		budget, maxQueue, retry int
	}{
		{"defaults", defaultCheckpointCacheBytes, maxQueueCheckpoints, oversizedRetry},
		{"tight", 1500, 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDB(t)
			db.cks.budget, db.cks.maxQueue, db.cks.retry = tc.budget, tc.maxQueue, tc.retry
			s := db.Pop()
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			queues := []ckModelQueue{{"g", 0}, {"g", 1}, {"h", 0}}
			model := ckModel{}
			base := map[ckModelQueue]int64{}
			popTime := int64(1000)
			pick := func(q ckModelQueue) (Checkpoint, bool) {
				if len(model[q]) == 0 {
					return Checkpoint{}, false
				}
				names := make([]CheckpointName, 0, len(model[q]))
				for n := range model[q] {
					names = append(names, n)
				}
				slices.SortFunc(names, func(a, b CheckpointName) int {
					return cmp.Or(cmp.Compare(a.CKOffset, b.CKOffset), cmp.Compare(a.PopTime, b.PopTime))
				})
				c := model[q][names[rng.IntN(len(names))]]
				c.Offsets = slices.Clone(c.Offsets)
				return c, true
			}
			for step := range 500 {
				b := s.NewBatch()
				next := ckModel{}
				for q, cks := range model {
					next[q] = map[CheckpointName]Checkpoint{}
					for n, c := range cks {
						next[q][n] = c
					}
				}
				for range 1 + rng.IntN(3) {
					q := queues[rng.IntN(len(queues))]
					if next[q] == nil {
						next[q] = map[CheckpointName]Checkpoint{}
					}
					c, ok := pick(q)
					if ok {
						c = next[q][CheckpointName{c.CKOffset, c.PopTime}]
						c.Offsets = slices.Clone(c.Offsets)
					}
					_, live := next[q][CheckpointName{c.CKOffset, c.PopTime}]
					switch op := rng.IntN(10); {
					case op < 4 || !ok || !live: // a pop
						popTime++
						ck := base[q] + int64(rng.IntN(40))
						var offs []int64
						for o := ck; o < ck+int64(1+rng.IntN(40)); o++ {
							if rng.IntN(3) > 0 || len(offs) == 0 {
								offs = append(offs, o)
							}
						}
						base[q] += int64(rng.IntN(20))
						n := Checkpoint{Group: q.group, Topic: "T", QueueID: q.queue, CKOffset: ck, PopTime: popTime,
							InvisibleTime: 60000, VisibleAt: popTime + 60000, Offsets: offs}
						if err := b.PutCheckpoint(&n); err != nil {
							t.Fatal(err)
						}
						next[q][CheckpointName{ck, popTime}] = n
					case op < 7: // an ack of some of its offsets
						kept := c.Offsets[:0:0]
						for _, o := range c.Offsets {
							if rng.IntN(2) == 0 {
								kept = append(kept, o)
							}
						}
						c.Offsets = kept
						if err := b.RewriteCheckpoint(&c); err != nil {
							t.Fatal(err)
						}
						if len(kept) == 0 {
							delete(next[q], CheckpointName{c.CKOffset, c.PopTime})
						} else {
							next[q][CheckpointName{c.CKOffset, c.PopTime}] = c
						}
					case op < 8: // a revive that delivered everything
						if err := b.DeleteCheckpoint(&c); err != nil {
							t.Fatal(err)
						}
						delete(next[q], CheckpointName{c.CKOffset, c.PopTime})
					default: // a failed revive moves the deadline
						moved := c
						moved.Offsets = slices.Clone(c.Offsets)
						moved.VisibleAt += 1000
						moved.Attempts++
						if err := b.MoveCheckpoint(&c, &moved); err != nil {
							t.Fatal(err)
						}
						next[q][CheckpointName{c.CKOffset, c.PopTime}] = moved
					}
				}
				if rng.IntN(8) == 0 {
					b.Close() // abandoned: nothing changes
				} else {
					if err := b.Commit(false); err != nil {
						t.Fatal(err)
					}
					b.Close()
					model = next
				}
				for _, q := range queues {
					// MinInFlight's callers pass a bound at or below
					// every offset in flight (the committed offset).
					low := base[q] + MaxCheckpointSpan
					for _, c := range model[q] {
						low = min(low, c.Offsets[0])
					}
					froms := []int64{0, low, rng.Int64N(low + 1)}
					for _, from := range froms {
						got, ok, err := s.MinInFlight(q.group, "T", q.queue, from)
						want, wantOK := model.minInFlight(q, from, nil)
						if err != nil || ok != wantOK || (ok && got != want) {
							t.Fatalf("step %d: MinInFlight(%v, from %d) = %d %v %v, want %d %v", step, q, from, got, ok, err, want, wantOK)
						}
						// The count, in full and stopped past a limit
						// below it (a caller learns only that it passed).
						wantN := model.inFlight(q, from)
						if n, err := s.InFlightCount(q.group, "T", q.queue, from, math.MaxInt64); err != nil || n != wantN {
							t.Fatalf("step %d: InFlightCount(%v, from %d) = %d %v, want %d", step, q, from, n, err, wantN)
						}
						if wantN > 0 {
							limit := rng.Int64N(wantN)
							if n, err := s.InFlightCount(q.group, "T", q.queue, from, limit); err != nil || n <= limit || n > wantN {
								t.Fatalf("step %d: InFlightCount(%v, from %d, limit %d) = %d %v, want in (%d, %d]", step, q, from, limit, n, err, limit, wantN)
							}
						}
					}
					if c, ok := pick(q); ok {
						if len(c.Offsets) > 1 {
							c.Offsets = c.Offsets[1:]
						}
						got, ok, err := s.MinInFlightReplacing(q.group, "T", q.queue, 0, &c)
						want, wantOK := model.minInFlight(q, 0, &c)
						if err != nil || ok != wantOK || (ok && got != want) {
							t.Fatalf("step %d: MinInFlightReplacing(%v) = %d %v %v, want %d %v", step, q, got, ok, err, want, wantOK)
						}
					}
					for name, want := range model[q] {
						got, ok, err := s.Checkpoint(q.group, "T", q.queue, name.CKOffset, name.PopTime)
						if err != nil || !ok || fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("step %d: Checkpoint(%v %v) = %+v %v %v, want %+v", step, q, name, got, ok, err, want)
						}
						got.Offsets[0] = -1 // the caller's copy: must not reach the cache
					}
				}
				checkCacheAccounting(t, db.cks)
			}
		})
	}
}

// TestCheckpointCacheAnswersFromMemory shows that a loaded queue is
// answered from memory: a checkpoint written behind the cache's back
// (straight into the database) is not seen by MinInFlight, while one
// written through a PopBatch is.
func TestCheckpointCacheAnswersFromMemory(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	put := func(c Checkpoint) { t.Helper(); putCheckpoints(t, s, c) }
	put(Checkpoint{Group: "g", Topic: "T", CKOffset: 10, PopTime: 1, InvisibleTime: 9, VisibleAt: 10, Offsets: []int64{10, 11}})
	if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 10 {
		t.Fatalf("min in flight: %d %v %v", off, ok, err)
	}
	behind := Checkpoint{Group: "g", Topic: "T", CKOffset: 5, PopTime: 2, InvisibleTime: 9, VisibleAt: 11, Offsets: []int64{5}}
	if err := db.pdb.Set(checkpointKey(nil, "g", "T", 0, 5, 2), checkpointValue(nil, &behind), nil); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 10 {
		t.Fatalf("min in flight with a write behind the cache: %d %v %v, want 10 from memory", off, ok, err)
	}
	put(Checkpoint{Group: "g", Topic: "T", CKOffset: 7, PopTime: 3, InvisibleTime: 9, VisibleAt: 12, Offsets: []int64{8}})
	if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 8 {
		t.Fatalf("min in flight after a committed pop: %d %v %v, want 8", off, ok, err)
	}
	// A checkpoint the cache lacks is still read from the database.
	if c, ok, err := s.Checkpoint("g", "T", 0, 5, 2); err != nil || !ok || c.Offsets[0] != 5 {
		t.Fatalf("checkpoint behind the cache: %+v %v %v", c, ok, err)
	}
}

// TestCheckpointCacheRefusesAStaleLoad: a load during which a commit wrote
// to the queue installs nothing, and a failed batch drops what it touched.
func TestCheckpointCacheRefusesAStaleLoad(t *testing.T) {
	cc := newCheckpointCache(1 << 20)
	prefix := groupTopicQueue(nil, prefixPopCK, "g", "T", 0)
	c := &Checkpoint{Group: "g", Topic: "T", CKOffset: 3, PopTime: 1, Offsets: []int64{3}}
	update := []ckUpdate{{queue: string(prefix), c: c}}

	if !cc.startLoad(prefix) {
		t.Fatal("startLoad refused the first load")
	}
	if cc.startLoad(prefix) {
		t.Fatal("startLoad accepted a second load of the same queue")
	}
	cc.apply(update) // committed while the load scanned
	cc.finishLoad(prefix, 0, nil, true)
	if _, handled, load := cc.minInFlight(prefix, 0, nil); handled || !load {
		t.Fatalf("a stale load was installed (handled %v, load %v)", handled, load)
	}

	if !cc.startLoad(prefix) {
		t.Fatal("startLoad refused after the stale load ended")
	}
	cc.finishLoad(prefix, 0, []*Checkpoint{c}, true)
	if best, handled, _ := cc.minInFlight(prefix, 0, nil); !handled || best != 3 {
		t.Fatalf("clean load: best %d handled %v", best, handled)
	}
	cc.forget(update)
	if _, handled, _ := cc.minInFlight(prefix, 0, nil); handled {
		t.Fatal("a queue touched by a failed batch is still held")
	}
	if cc.bytes != 0 {
		t.Fatalf("empty cache accounts %d bytes", cc.bytes)
	}
}

// TestCheckpointCacheOversizedQueue: a queue with more checkpoints than a
// queue may hold is answered from the database, and loaded again once it
// has shrunk and its retry count has run out.
func TestCheckpointCacheOversizedQueue(t *testing.T) {
	db := openTestDB(t)
	db.cks.maxQueue, db.cks.retry = 3, 2
	s := db.Pop()
	var cks []Checkpoint
	for i := range int64(5) {
		cks = append(cks, Checkpoint{Group: "g", Topic: "T", CKOffset: 10 * i, PopTime: i + 1, InvisibleTime: 9, VisibleAt: 10, Offsets: []int64{10*i + 5}})
	}
	putCheckpoints(t, s, cks...)
	prefix := groupTopicQueue(nil, prefixPopCK, "g", "T", 0)
	held := func() bool {
		db.cks.mu.Lock()
		defer db.cks.mu.Unlock()
		q, ok := db.cks.queues.Peek(string(prefix))
		return ok && !q.oversized
	}
	if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 5 {
		t.Fatalf("min in flight: %d %v %v", off, ok, err)
	}
	if held() {
		t.Fatal("a queue of 5 checkpoints is held with a limit of 3")
	}
	b := s.NewBatch()
	for _, c := range cks[:3] {
		if err := b.DeleteCheckpoint(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for range 2 {
		if off, ok, err := s.MinInFlight("g", "T", 0, 0); err != nil || !ok || off != 35 {
			t.Fatalf("min in flight after deletes: %d %v %v", off, ok, err)
		}
	}
	if !held() {
		t.Fatal("the queue was not loaded again once it shrank and its retries ran out")
	}
}

// BenchmarkPopPosition reads a cached pop position, as every pop does for
// each queue it visits (and for each busy queue it counts).
func BenchmarkPopPosition(b *testing.B) {
	db := openTestDB(b)
	s := db.Pop()
	const group, topic = "consumer_group_benchmark_pop", "BenchPopTopic_1234567890"
	pb := s.NewBatch()
	if err := pb.SetPosition(group, topic, 3, 100); err != nil {
		b.Fatal(err)
	}
	if err := pb.Commit(false); err != nil {
		b.Fatal(err)
	}
	pb.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := s.Position(group, topic, 3); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
