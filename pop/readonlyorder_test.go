package pop

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/kvindex"
)

// popReadOnly pops up to max messages of queue 0 orderly on a slave
// with attemptID and returns the offsets popped, the orderCountInfo and
// the pop's time.
func (h *orderHarness) popReadOnly(t *testing.T, attemptID string, max int) ([]int64, string, int64) {
	t.Helper()
	res, err := h.svc.PopReadOnly(PopRequest{Group: "G", Topic: orderTestTopic, QueueID: 0, MaxMsgNums: max, InvisibleTime: 1000,
		Order: true, AttemptID: attemptID})
	if err != nil {
		t.Fatalf("read-only pop: %v", err)
	}
	offs, err := ParseMsgOffsetInfo(res.MsgOffsetInfo)
	if err != nil {
		t.Fatalf("msgOffsetInfo %q: %v", res.MsgOffsetInfo, err)
	}
	return offs[InfoKey(FlagNormal, 0)], res.OrderCountInfo, res.PopTime
}

// orderHandle is the handle of an orderly pop of queue 0 at popTime.
func orderHandle(popTime int64) Handle {
	return Handle{PopTime: popTime, InvisibleTime: 1000, ReviveQID: OrderReviveQueue, RetryFlag: FlagNormal, QueueID: 0}
}

// storesNothing fails the test when the store holds an orderly batch or
// a committed offset of the harness's queue: a slave writes neither.
func (h *orderHarness) storesNothing(t *testing.T) {
	t.Helper()
	if st, ok, err := h.svc.store.Order("G", orderTestTopic, 0); err != nil || ok {
		t.Fatalf("the slave stored an orderly batch %+v (%v)", st, err)
	}
	if off, ok, err := h.svc.cfg.Offsets.Get("G", orderTestTopic, 0); err != nil || ok {
		t.Fatalf("the slave stored a committed offset %d (%v)", off, err)
	}
}

// An orderly pop on a slave locks the queue in memory, as RocketMQ's
// slave's ConsumerOrderInfoManager does: another consumer of the group
// gets nothing while the batch is invisible, the same attempt gets the
// batch again, and once the batch is acknowledged on the slave the next
// pop gets the next messages at once. Unacknowledged past its invisible
// time, the batch comes again counted as redelivered. The store holds
// none of it.
func TestSlaveOrderlyPopLocksTheQueueAndItsAcksMoveOn(t *testing.T) {
	h := newOrderHarness(t, 6)
	offs, info, _ := h.popReadOnly(t, "A", 2)
	if fmt.Sprint(offs) != "[0 1]" || info != "0 0 0" {
		t.Fatalf("first pop on the slave: %v %q", offs, info)
	}
	if has, err := h.svc.HasMessageReadOnly("G", orderTestTopic, 0, true, "B"); err != nil || has {
		t.Fatalf("notification on the slave of a locked queue: %v %v, want false", has, err)
	}
	if offs, _, _ := h.popReadOnly(t, "B", 2); len(offs) != 0 {
		t.Fatalf("another consumer's pop of the locked queue on the slave: %v, want nothing", offs)
	}
	if offs, _, _ := h.popReadOnly(t, "A", 2); fmt.Sprint(offs) != "[0 1]" {
		t.Fatalf("the same attempt's pop on the slave: %v, want the batch [0 1] again", offs)
	}
	_, _, popTime := h.popReadOnly(t, "A", 2) // the batch's popTime now
	for _, off := range []int64{0, 1} {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatalf("ack of %d on the slave: %v", off, err)
		}
	}
	if has, err := h.svc.HasMessageReadOnly("G", orderTestTopic, 0, true, "B"); err != nil || !has {
		t.Fatalf("notification on the slave once the batch is acknowledged: %v %v, want true", has, err)
	}
	offs, info, _ = h.popReadOnly(t, "B", 2)
	if fmt.Sprint(offs) != "[2 3]" || info != "0 0 0" {
		t.Fatalf("pop on the slave after the batch's acks: %v %q, want [2 3] at once", offs, info)
	}
	h.now += 1001
	offs, info, _ = h.popReadOnly(t, "C", 2)
	if fmt.Sprint(offs) != "[2 3]" || info == "0 0 0" {
		t.Fatalf("pop on the slave after the invisible time: %v %q, want [2 3] counted as redelivered", offs, info)
	}
	h.storesNothing(t)
}

// An orderly ack on a slave of an offset outside the batch its pop
// handed out is ErrIllegalOffset (RocketMQ's MESSAGE_ILLEGAL), the
// other offsets acknowledged all the same; an ack of an earlier batch
// changes nothing; without a batch, the offset after the acknowledged
// one is committed in memory (RocketMQ's commitAndNext without an
// OrderInfo), so the acks of a batch popped from the master move the
// slave past it.
func TestSlaveOrderlyAcksAsRocketMQsSlave(t *testing.T) {
	h := newOrderHarness(t, 6)
	if _, err := h.svc.AckBatchReadOnly([]AckEntry{{Group: "G", Topic: orderTestTopic, Offsets: []int64{0, 1, 2}, PopTime: 7, Orderly: true}}); err != nil {
		t.Fatalf("acks on the slave of a batch popped from the master: %v", err)
	}
	offs, _, popTime := h.popReadOnly(t, "A", 2)
	if fmt.Sprint(offs) != "[3 4]" {
		t.Fatalf("pop on the slave after acks of [0 1 2]: %v, want [3 4]", offs)
	}
	if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, 4, orderHandle(popTime-1)); err != nil {
		t.Fatalf("ack of an earlier batch: %v", err)
	}
	results, err := h.svc.AckBatchReadOnly([]AckEntry{
		{Group: "G", Topic: orderTestTopic, Offsets: []int64{3, 5}, PopTime: popTime, Orderly: true},
		{Group: "G", Topic: orderTestTopic, Offsets: []int64{4}, PopTime: popTime, Orderly: true},
	})
	if !errors.Is(err, ErrIllegalOffset) {
		t.Fatalf("batch ack on the slave with an offset outside the batch: %v, want ErrIllegalOffset", err)
	}
	if len(results) != 2 || results[0].Deleted != 1 || results[1].Deleted != 1 {
		t.Fatalf("batch ack results %+v, want one acknowledged by each entry", results)
	}
	if offs, _, _ := h.popReadOnly(t, "B", 2); fmt.Sprint(offs) != "[5]" {
		t.Fatalf("pop on the slave after its batch's acks: %v, want [5]", offs)
	}
	h.storesNothing(t)
}

// A change of invisible time of an orderly message on a slave moves its
// deadline in the slave's memory: the queue stays locked past the pop's
// invisible time. Below the committed offset it is answered with zero
// fields, as RocketMQ answers it.
func TestSlaveOrderlyChangeInvisibleTime(t *testing.T) {
	h := newOrderHarness(t, 4)
	_, _, popTime := h.popReadOnly(t, "A", 2)
	h.now += 300
	res, err := h.svc.ChangeInvisibleTimeReadOnly("G", orderTestTopic, 0, 0, orderHandle(popTime), 5000)
	want := ChangeResult{PopTime: popTime, InvisibleTime: h.now + 5000 - popTime, ReviveQID: OrderReviveQueue, Changed: true}
	if err != nil || res != want {
		t.Fatalf("change on the slave: %+v %v, want %+v", res, err, want)
	}
	if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, 1, orderHandle(popTime)); err != nil {
		t.Fatal(err)
	}
	h.now += 1000 // past the pop's invisible time, not the change's
	if offs, _, _ := h.popReadOnly(t, "B", 2); len(offs) != 0 {
		t.Fatalf("pop on the slave before the changed deadline: %v, want nothing", offs)
	}
	h.now += 5000
	offs, _, popTime := h.popReadOnly(t, "B", 2)
	if fmt.Sprint(offs) != "[0 1]" {
		t.Fatalf("pop on the slave after the changed deadline: %v, want [0 1]", offs)
	}
	for _, off := range offs {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := h.svc.ChangeInvisibleTimeReadOnly("G", orderTestTopic, 0, 0, orderHandle(popTime), 5000); err != nil || res != (ChangeResult{}) {
		t.Fatalf("change on the slave below the committed offset: %+v %v, want zero fields", res, err)
	}
	h.storesNothing(t)
}

// copiedPair reports the harness's group and topic as the master's
// table has them; noPair reports none.
func copiedPair(group, topic string) bool { return group == "G" && topic == orderTestTopic }
func noPair(string, string) bool          { return false }

// What a slave's orderly acks committed holds until the slave
// copies its master's offsets; a copy whose table has the group's pair
// replaces it, behind the slave's own (an offset reset backward on the
// master: the acknowledged messages come again) or ahead of it, as
// RocketMQ's slave sync puts the master's table over its own; a copy
// without the pair leaves it.
func TestSlaveOrderlyProgressAndTheCopiedOffset(t *testing.T) {
	h := newOrderHarness(t, 8)
	_, _, popTime := h.popReadOnly(t, "A", 2)
	for _, off := range []int64{0, 1} {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, popTime = h.popReadOnly(t, "A", 2)
	for _, off := range []int64{2, 3} {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatal(err)
		}
	}
	// The master's offset behind the slave's own, but a copy without the
	// pair: the slave goes on from its own.
	if err := h.svc.cfg.Offsets.Set("G", orderTestTopic, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.OffsetsCopied(noPair); err != nil {
		t.Fatal(err)
	}
	if offs, _, _ := h.popReadOnly(t, "A", 1); fmt.Sprint(offs) != "[4]" {
		t.Fatalf("pop on the slave after a copy without the group: %v, want [4]", offs)
	}
	// A copy with the pair, behind: back to the master's offset.
	if err := h.svc.OffsetsCopied(copiedPair); err != nil {
		t.Fatal(err)
	}
	if q := h.svc.slaveOrd.get(queueKey{"G", orderTestTopic, 0}); q.hasCommitted {
		t.Fatalf("the slave kept its own committed offset %d over a copy of 1", q.committed)
	}
	h.now += 2000 // past the batch [4]'s invisible time
	offs, _, popTime := h.popReadOnly(t, "B", 2)
	if fmt.Sprint(offs) != "[1 2]" {
		t.Fatalf("pop on the slave after a copy behind it: %v, want [1 2]", offs)
	}
	for _, off := range offs {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatal(err)
		}
	}
	// A copy with the pair, ahead: the slave goes on from there.
	if err := h.svc.cfg.Offsets.Set("G", orderTestTopic, 0, 6); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.OffsetsCopied(copiedPair); err != nil {
		t.Fatal(err)
	}
	if offs, _, _ := h.popReadOnly(t, "B", 2); fmt.Sprint(offs) != "[6 7]" {
		t.Fatalf("pop on the slave after a copy ahead of it: %v, want [6 7]", offs)
	}
}

// A slave's orderly and non-orderly pops of a group share one offset
// entry, as RocketMQ's slave has one offset table: the orderly acks move
// the group's non-orderly pops on, the start a non-orderly pop took for
// a group without an offset is where the orderly pop starts, and a
// client's commit of the queue's offset on the slave replaces the entry.
func TestSlaveOrderlyAndNonOrderlyPopsShareTheOffset(t *testing.T) {
	h := newOrderHarness(t, 8)
	plain := func(initMode int32) []int64 {
		t.Helper()
		return h.plainPopReadOnly(t, "G", initMode)
	}
	// A group without an offset, InitMax: the non-orderly pop starts at
	// the last message, and so does the orderly one after it.
	if offs := plain(InitMax); fmt.Sprint(offs) != "[7]" {
		t.Fatalf("non-orderly pop with InitMax: %v, want [7]", offs)
	}
	h.now += 2000 // past its invisible time
	if offs, _, _ := h.popReadOnly(t, "A", 2); fmt.Sprint(offs) != "[7]" {
		t.Fatalf("orderly pop after a non-orderly one took the start: %v, want [7]", offs)
	}

	h = newOrderHarness(t, 8)
	_, _, popTime := h.popReadOnly(t, "A", 3)
	for _, off := range []int64{0, 1, 2} {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatal(err)
		}
	}
	if offs := plain(InitMin); fmt.Sprint(offs) != "[3]" {
		t.Fatalf("non-orderly pop after orderly acks of [0 1 2]: %v, want [3]", offs)
	}
	// A client's commit on the slave replaces the entry.
	if err := h.svc.CommitOffset("G", orderTestTopic, 0, 5); err != nil {
		t.Fatal(err)
	}
	if offs, _, _ := h.popReadOnly(t, "B", 1); fmt.Sprint(offs) != "[5]" {
		t.Fatalf("orderly pop after a commit of 5 on the slave: %v, want [5]", offs)
	}
}

// restartSlave replaces the harness's service by a new one over the same
// store, as a restart of the slave does, and loads what the slave's own
// pops kept; it returns how many queues the new one holds.
func (h *orderHarness) restartSlave(t *testing.T) int {
	t.Helper()
	if err := h.svc.Close(); err != nil {
		t.Fatal(err)
	}
	svc, err := New(h.svc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	n, err := svc.LoadSlaveState()
	if err != nil {
		t.Fatalf("load the slave's own pop state: %v", err)
	}
	h.svc = svc
	return n
}

// What a slave's own pops, orderly acks and changes of invisible time
// keep survives a restart of the slave, as RocketMQ's slave loads its
// consumerOffset.json and consumerOrderInfo.json: the batch still locks
// the queue for another consumer, its acknowledgements and moved
// deadlines hold, the acks after the restart move the group on from
// there, and the start a pop took for a group without an offset stays.
// What a copy of the master's offsets or a client's commit dropped does
// not come back, and a batch unused for a day is dropped at the start.
// None of it is in the master's keyspaces of the slave's store.
func TestSlaveOrderlyStateSurvivesARestart(t *testing.T) {
	h := newOrderHarness(t, 8)
	_, _, popTime := h.popReadOnly(t, "A", 3)
	if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, 0, orderHandle(popTime)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.ChangeInvisibleTimeReadOnly("G", orderTestTopic, 0, 1, orderHandle(popTime), 5000); err != nil {
		t.Fatal(err)
	}
	// A non-orderly pop of another group without an offset pins its start.
	res, err := h.svc.PopReadOnly(PopRequest{Group: "P", Topic: orderTestTopic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: 1000, InitMode: InitMax})
	if err != nil || len(res.Records) != 1 {
		t.Fatalf("non-orderly pop of a group without an offset: %d messages, %v", len(res.Records), err)
	}
	// G's queue, P's and P's pop-retry queue, whose start P's pop took
	// too (as RocketMQ's pop commits the start of every queue it reads).
	if n := h.restartSlave(t); n != 3 {
		t.Fatalf("the restarted slave holds %d queues of its own pops, want 3", n)
	}
	h.storesNothing(t)

	if offs, _, _ := h.popReadOnly(t, "B", 2); len(offs) != 0 {
		t.Fatalf("another consumer's pop of the locked queue after the restart: %v, want nothing", offs)
	}
	// Past the batch's own invisible time, but not past the deadline the
	// change of invisible time gave offset 1: still locked.
	h.now += 1500
	if offs, _, _ := h.popReadOnly(t, "B", 2); len(offs) != 0 {
		t.Fatalf("pop after the batch's invisible time, before offset 1's moved deadline: %v, want nothing", offs)
	}
	for _, off := range []int64{1, 2} {
		if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, off, orderHandle(popTime)); err != nil {
			t.Fatalf("ack of %d after the restart: %v", off, err)
		}
	}
	if offs, info, _ := h.popReadOnly(t, "B", 2); fmt.Sprint(offs) != "[3 4]" || info != "0 0 0" {
		t.Fatalf("pop after the batch's acks across the restart: %v %q, want [3 4] not redelivered", offs, info)
	}
	h.now += 2000 // the last pop's batch and P's message visible again
	plain := func() []int64 {
		t.Helper()
		return h.plainPopReadOnly(t, "P", InitMin)
	}
	if offs := plain(); fmt.Sprint(offs) != "[7]" {
		t.Fatalf("non-orderly pop of group P after the restart: %v, want [7] (its start, InitMax, kept)", offs)
	}

	// The copy of the master's offsets drops G's own entry for good.
	if err := h.svc.cfg.Offsets.Set("G", orderTestTopic, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.OffsetsCopied(copiedPair); err != nil {
		t.Fatal(err)
	}
	// A client's commit on the slave drops P's.
	if err := h.svc.CommitOffset("P", orderTestTopic, 0, 2); err != nil {
		t.Fatal(err)
	}
	h.restartSlave(t)
	if offs, _, _ := h.popReadOnly(t, "C", 2); fmt.Sprint(offs) != "[1 2]" {
		t.Fatalf("orderly pop after a copy of 1 and a restart: %v, want [1 2]", offs)
	}
	if offs := plain(); fmt.Sprint(offs) != "[2]" {
		t.Fatalf("non-orderly pop after a commit of 2 and a restart: %v, want [2]", offs)
	}

	// A day later the batch is dropped at the start, from the store too;
	// the offset stays.
	h.now += orderIdleSpan + 1
	h.restartSlave(t)
	var kept []kvindex.SlaveOwn
	if err := h.svc.store.EachSlaveOwn(func(o kvindex.SlaveOwn) bool { kept = append(kept, o); return true }); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].Group != "G" || kept[0].Batch != nil || kept[0].Committed != 1 || kept[1].Group != "P" || kept[1].Topic == orderTestTopic {
		t.Fatalf("the store after a start a day later: %+v, want G's offset 1 without a batch and P's start on its pop-retry queue", kept)
	}
}

// A slave restarted as a master takes over what its own pops kept: its
// own committed offset replaces the copied one and raises a copied pop
// position behind it, its orderly batch replaces a copied batch popped
// earlier but not one popped later, an offset past the queue's end is
// not taken, and the slave's entries are gone.
func TestTakeOverSlaveState(t *testing.T) {
	h := newOrderHarness(t, 8)
	_, _, popTime := h.popReadOnly(t, "A", 2)
	if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, 0, orderHandle(popTime)); err != nil {
		t.Fatal(err)
	}
	write := func(fn func(b *kvindex.PopBatch) error) {
		t.Helper()
		b := h.svc.store.NewBatch()
		defer b.Close()
		if err := fn(b); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
	}
	// What the slave copied of the old master: G's position behind its own
	// offset, and a batch of H's popped after the one H's pop on the slave
	// handed out; and an own offset of K past the queue's end.
	write(func(b *kvindex.PopBatch) error {
		if err := b.SetPosition("G", orderTestTopic, 0, 0); err != nil {
			return err
		}
		if err := b.SetOrder(&kvindex.OrderState{Group: "H", Topic: orderTestTopic, PopTime: popTime + 10, Messages: []kvindex.OrderMessage{{QueueOffset: 5}}}); err != nil {
			return err
		}
		return b.SetSlaveOwn(&kvindex.SlaveOwn{Group: "H", Topic: orderTestTopic, Committed: 4,
			Batch: &kvindex.OrderState{Group: "H", Topic: orderTestTopic, PopTime: popTime, Messages: []kvindex.OrderMessage{{QueueOffset: 4}}}})
	})
	write(func(b *kvindex.PopBatch) error {
		return b.SetSlaveOwn(&kvindex.SlaveOwn{Group: "K", Topic: orderTestTopic, Committed: 100})
	})
	n, err := h.svc.TakeOverSlaveState()
	if err != nil || n != 3 {
		t.Fatalf("take over: %d queues, %v; want 3", n, err)
	}
	check := func(group string, wantOff int64, wantOK bool, wantBatchPopTime int64) {
		t.Helper()
		off, ok, err := h.svc.cfg.Offsets.Get(group, orderTestTopic, 0)
		if err != nil || ok != wantOK || off != wantOff {
			t.Errorf("%s's committed offset: %d %v %v, want %d %v", group, off, ok, err, wantOff, wantOK)
		}
		st, ok, err := h.svc.store.Order(group, orderTestTopic, 0)
		if err != nil || ok != (wantBatchPopTime != 0) || st.PopTime != wantBatchPopTime {
			t.Errorf("%s's orderly batch: %+v %v %v, want one popped at %d", group, st, ok, err, wantBatchPopTime)
		}
	}
	check("G", 1, true, popTime)
	check("H", 4, true, popTime+10)
	check("K", 0, false, 0)
	if pos, ok, err := h.svc.store.Position("G", orderTestTopic, 0); err != nil || !ok || pos != 1 {
		t.Errorf("G's pop position: %d %v %v, want 1", pos, ok, err)
	}
	if err := h.svc.store.EachSlaveOwn(func(o kvindex.SlaveOwn) bool { t.Errorf("left: %+v", o); return true }); err != nil {
		t.Fatal(err)
	}
}

// A client's commit on a slave (CommitOffset) writes the committed offset
// and drops the slave's own entry of the queue, the orderly batch kept,
// in one write: the store as a crash would leave it at each sync of its
// log during the commit (the synced data only, pebble's crashable
// in-memory file system) holds both changes or neither. Before, the
// broker wrote the offset and the service dropped the entry in a second
// write, and a crash between them left the entry over the client's
// commit.
func TestSlaveCommitOffsetIsOneWrite(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var armed atomic.Bool
	var mu sync.Mutex
	var crashes []*vfs.MemFS
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if armed.Load() && strings.HasSuffix(op.Path, ".log") {
				mu.Lock()
				crashes = append(crashes, mem.CrashClone(vfs.CrashCloneCfg{}))
				mu.Unlock()
			}
		}
		return nil
	}))
	db, err := kvindex.Open(kvindex.Options{Dir: "index", FS: fs, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := newOrderHarnessOn(t, 8, db)
	_, _, popTime := h.popReadOnly(t, "A", 2)
	if _, err := h.svc.AckReadOnly("G", orderTestTopic, 0, 0, orderHandle(popTime)); err != nil {
		t.Fatal(err)
	}
	// state is what a store holds of the queue: its committed offset (-1
	// without one) and the slave's own entry (-2 without one).
	state := func(db *kvindex.DB) (committed, own int64, batch bool) {
		t.Helper()
		committed, own = -1, -2
		if off, ok, err := db.ConsumerOffsets().Get("G", orderTestTopic, 0); err != nil {
			t.Fatal(err)
		} else if ok {
			committed = off
		}
		if err := db.Pop().EachSlaveOwn(func(o kvindex.SlaveOwn) bool {
			if o.Group == "G" && o.Topic == orderTestTopic && o.QueueID == 0 {
				own, batch = o.Committed, o.Batch != nil
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return committed, own, batch
	}
	if c, o, b := state(db); c != -1 || o != 1 || !b {
		t.Fatalf("before the commit: offset %d, own entry %d (batch %v); want none, 1 with the batch", c, o, b)
	}

	armed.Store(true)
	if err := h.svc.CommitOffset("G", orderTestTopic, 0, 6); err != nil {
		t.Fatal(err)
	}
	armed.Store(false)
	mu.Lock()
	crashes = append(crashes, mem.CrashClone(vfs.CrashCloneCfg{}))
	mu.Unlock()
	for i, crashed := range crashes {
		cdb, err := kvindex.Open(kvindex.Options{Dir: "index", FS: crashed, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatalf("open the store as crash %d left it: %v", i, err)
		}
		c, o, b := state(cdb)
		if err := cdb.Close(); err != nil {
			t.Fatal(err)
		}
		before := c == -1 && o == 1
		after := c == 6 && o == -1
		if !before && !after || !b {
			t.Fatalf("crash %d of %d during the slave's commit left offset %d and own entry %d (batch %v): want none and 1, or 6 and none, the batch kept",
				i, len(crashes), c, o, b)
		}
		if i == len(crashes)-1 && !after {
			t.Fatalf("after the slave's commit the store holds offset %d and own entry %d, want 6 and none", c, o)
		}
	}
}

// plainPopReadOnly pops one message of queue 0 for group without order
// on the slave's service, and returns the offsets it handed out.
func (h *orderHarness) plainPopReadOnly(t *testing.T, group string, initMode int32) []int64 {
	t.Helper()
	res, err := h.svc.PopReadOnly(PopRequest{Group: group, Topic: orderTestTopic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: 1000, InitMode: initMode})
	if err != nil {
		t.Fatal(err)
	}
	offs, err := ParseMsgOffsetInfo(res.MsgOffsetInfo)
	if err != nil {
		t.Fatal(err)
	}
	return offs[InfoKey(FlagNormal, 0)]
}

// The orderly batch a slave's pop handed out, which the proxy did not
// deliver (it was a demoted master's answer) and gave back (its
// messages' invisible time changed to a second, grpcproxy's
// giveBackOrderly), locks the queue no longer once the broker is made
// its group's master again (TakeOverSlaveState): the master's next pop
// gets the batch's messages a second after the give-back, counted once
// redelivered, where a batch not given back holds the queue for its
// whole invisible time.
func TestSlaveBatchGivenBackDoesNotLockTheTakenOverQueue(t *testing.T) {
	for _, givenBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("given back %v", givenBack), func(t *testing.T) {
			h := newOrderHarness(t, 4)
			const invisible = 30_000
			res, err := h.svc.PopReadOnly(PopRequest{Group: "G", Topic: orderTestTopic, QueueID: 0, MaxMsgNums: 2, InvisibleTime: invisible,
				Order: true, AttemptID: "dropped"})
			if err != nil {
				t.Fatalf("read-only pop: %v", err)
			}
			handle := Handle{PopTime: res.PopTime, InvisibleTime: invisible, ReviveQID: OrderReviveQueue, RetryFlag: FlagNormal}
			if givenBack {
				for _, off := range []int64{0, 1} {
					if _, err := h.svc.ChangeInvisibleTimeReadOnly("G", orderTestTopic, 0, off, handle, 1000); err != nil {
						t.Fatalf("give-back of %d on the slave: %v", off, err)
					}
				}
			}
			if n, err := h.svc.TakeOverSlaveState(); err != nil || n != 1 {
				t.Fatalf("take over: %d queues, %v; want 1", n, err)
			}
			h.now += 1000
			offs, info := h.pop(t, "next", 2)
			if !givenBack {
				if len(offs) != 0 {
					t.Fatalf("the master's pop within the batch's invisible time: %v, want nothing (the batch holds the queue)", offs)
				}
				h.now += invisible
				offs, info = h.pop(t, "later", 2)
			}
			if fmt.Sprint(offs) != "[0 1]" || info == "0 0 0" {
				t.Fatalf("the master's pop: %v %q, want [0 1] counted as redelivered", offs, info)
			}
		})
	}
}
