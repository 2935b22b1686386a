package pop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// orderTestTopic is the topic of the orderly tests' queue (queue 0).
const orderTestTopic = "OT"

// orderHarness is a Service over one queue of messages with a clock the
// test moves.
type orderHarness struct {
	svc *Service
	now int64 // ms; read by the Service's clock
}

// newOrderHarness stores n messages in queue 0 of orderTestTopic and
// returns a Service over them whose clock starts at 1,000,000 ms.
func newOrderHarness(t *testing.T, n int) *orderHarness {
	t.Helper()
	return newOrderHarnessOn(t, n, openIndex(t))
}

// newOrderHarnessOn is newOrderHarness with the Service's state in db.
func newOrderHarnessOn(t *testing.T, n int, db *kvindex.DB) *orderHarness {
	t.Helper()
	l := openTestLog(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var entries []cq.Entry
	for i := range n {
		m := &commitlog.Message{Topic: orderTestTopic, Body: []byte(fmt.Sprintf("m%d", i)), BornHost: host, StoreHost: host}
		res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, cq.Entry{QueueOffset: int64(i), PhyOffset: res.PhyOffset, Size: res.Records[0].Size})
	}
	h := &orderHarness{now: 1_000_000}
	svc, err := New(Config{DB: db, CQ: &oneQueue{topic: orderTestTopic, entries: entries}, Log: l, Offsets: db.ConsumerOffsets(),
		Broker: &puttingBroker{}, QuietOrderLockRelease: true, Now: func() time.Time { return time.UnixMilli(h.now) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	h.svc = svc
	return h
}

// pop pops up to max messages of queue 0 orderly with attemptID and
// returns the offsets popped and the orderCountInfo.
func (h *orderHarness) pop(t *testing.T, attemptID string, max int) ([]int64, string) {
	t.Helper()
	res, err := h.svc.Pop(PopRequest{Group: "G", Topic: orderTestTopic, QueueID: 0, MaxMsgNums: max, InvisibleTime: 1000,
		Order: true, AttemptID: attemptID})
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	offs, err := ParseMsgOffsetInfo(res.MsgOffsetInfo)
	if err != nil {
		t.Fatalf("msgOffsetInfo %q: %v", res.MsgOffsetInfo, err)
	}
	return offs[InfoKey(FlagNormal, 0)], res.OrderCountInfo
}

// committed is the group's committed offset of queue 0.
func (h *orderHarness) committed(t *testing.T) int64 {
	t.Helper()
	off, _, err := h.svc.cfg.Offsets.Get("G", orderTestTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// batch is the queue's orderly batch.
func (h *orderHarness) batch(t *testing.T) kvindex.OrderState {
	t.Helper()
	st, ok, err := h.svc.store.Order("G", orderTestTopic, 0)
	if err != nil || !ok {
		t.Fatalf("orderly batch: %v %v", ok, err)
	}
	return st
}

// A pop repeating the batch's attemptId keeps the batch's whole count
// table, as RocketMQ's OrderInfo.mergeOffsetConsumedCount does for the
// same attemptId: counts of offsets the new batch no longer holds stay
// (and are reported in orderCountInfo), so that they are there when a
// later retry or the next attempt delivers those offsets again. The
// per-queue entry is the smallest count of the table, 0 when the table
// and the batch differ in size (ConsumerOrderInfoManager.update).
func TestSameAttemptKeepsCountsOfOffsetsLeftOut(t *testing.T) {
	type step struct {
		name    string
		advance int64 // ms the clock moves first
		ack     []int64
		attempt string
		max     int
		offsets string
		info    string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a retry with a smaller batch, then a full one", []step{
			{name: "first delivery", attempt: "A", max: 2, offsets: "[0 1]", info: "0 0 0"},
			{name: "next attempt after expiry", advance: 2000, attempt: "B", max: 2, offsets: "[0 1]", info: "0 qo0%0 1;0 qo0%1 1;0 0 1"},
			{name: "retry of B for one message", attempt: "B", max: 1, offsets: "[0]", info: "0 qo0%0 1;0 qo0%1 1;0 0 0"},
			{name: "retry of B for two again", attempt: "B", max: 2, offsets: "[0 1]", info: "0 qo0%0 1;0 qo0%1 1;0 0 1"},
			{name: "next attempt after expiry", advance: 2000, attempt: "C", max: 2, offsets: "[0 1]", info: "0 qo0%0 2;0 qo0%1 2;0 0 2"},
		}},
		{"a retry after an ack moved the batch on", []step{
			{name: "first delivery", attempt: "A", max: 2, offsets: "[0 1]", info: "0 0 0"},
			{name: "next attempt after expiry", advance: 2000, attempt: "B", max: 2, offsets: "[0 1]", info: "0 qo0%0 1;0 qo0%1 1;0 0 1"},
			{name: "retry of B after acking 0", ack: []int64{0}, attempt: "B", max: 2, offsets: "[1 2]", info: "0 qo0%1 1;0 qo0%0 1;0 0 1"},
			{name: "next attempt after expiry", advance: 2000, attempt: "C", max: 2, offsets: "[1 2]", info: "0 qo0%1 2;0 qo0%2 1;0 0 1"},
		}},
		{"a different attempt drops the counts left out", []step{
			{name: "first delivery", attempt: "A", max: 2, offsets: "[0 1]", info: "0 0 0"},
			{name: "next attempt after expiry", advance: 2000, attempt: "B", max: 2, offsets: "[0 1]", info: "0 qo0%0 1;0 qo0%1 1;0 0 1"},
			{name: "retry of B for one message", attempt: "B", max: 1, offsets: "[0]", info: "0 qo0%0 1;0 qo0%1 1;0 0 0"},
			{name: "attempt C for one message", advance: 2000, attempt: "C", max: 1, offsets: "[0]", info: "0 qo0%0 2;0 0 2"},
			{name: "retry of C for two", attempt: "C", max: 2, offsets: "[0 1]", info: "0 qo0%0 2;0 0 0"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newOrderHarness(t, 4)
			for _, s := range tc.steps {
				h.now += s.advance
				if len(s.ack) > 0 {
					st := h.batch(t)
					if _, err := h.svc.AckMany("G", orderTestTopic, 0, 0, s.ack, st.PopTime, st.InvisibleTime, true); err != nil {
						t.Fatalf("%s: ack %v: %v", s.name, s.ack, err)
					}
				}
				offs, info := h.pop(t, s.attempt, s.max)
				if fmt.Sprint(offs) != s.offsets || info != s.info {
					t.Fatalf("%s: popped %v with orderCountInfo %q, want %s with %q", s.name, offs, info, s.offsets, s.info)
				}
				h.now++ // each pop its own popTime
			}
		})
	}
}

// The counts kept for offsets left out of a batch survive a reopen of
// the index: they are part of the stored batch.
func TestCarriedCountsAreStored(t *testing.T) {
	h := newOrderHarness(t, 4)
	h.pop(t, "A", 2)
	h.now += 2000
	h.pop(t, "B", 2)
	h.now++
	h.pop(t, "B", 1)
	st := h.batch(t)
	if fmt.Sprint(st.Messages) != "[{0 1 0}]" || fmt.Sprint(st.Carried) != "[{1 1}]" {
		t.Fatalf("stored batch %+v, want message 0 counted once and offset 1's count carried", st)
	}
}

// An orderly ack of several offsets, one of them outside the batch,
// acknowledges the others all the same and reports the stray offset
// (RocketMQ's AckMessageProcessor calls commitAndNext for each offset:
// one answering -1 sets MESSAGE_ILLEGAL on the response, the loop goes on
// and the later offsets commit).
func TestOrderlyAckGoesOnPastAnOffsetOutsideTheBatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		offsets   []int64
		illegal   bool
		deleted   int
		committed int64
		acked     uint64
	}{
		{"stray offset first", []int64{3, 0, 1}, true, 2, 2, 0b11},
		{"stray offset between", []int64{0, 3, 1}, true, 2, 2, 0b11},
		{"stray offset last", []int64{0, 1, 3}, true, 2, 2, 0b11},
		{"only the stray offset", []int64{3}, true, 0, 0, 0},
		{"stray offset, a gap left", []int64{1, 3}, true, 1, 0, 0b10},
		{"all in the batch", []int64{1, 0}, false, 2, 2, 0b11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newOrderHarness(t, 4)
			h.pop(t, "", 2)
			st := h.batch(t)
			res, err := h.svc.AckMany("G", orderTestTopic, 0, 0, tc.offsets, st.PopTime, st.InvisibleTime, true)
			if got := errors.Is(err, ErrIllegalOffset); got != tc.illegal || (err != nil && !got) {
				t.Fatalf("ack %v: error %v, want illegal offset %v", tc.offsets, err, tc.illegal)
			}
			if res.Deleted != tc.deleted || h.committed(t) != tc.committed || h.batch(t).Acked != tc.acked {
				t.Fatalf("ack %v: deleted %d, committed %d, acked %b; want %d, %d, %b",
					tc.offsets, res.Deleted, h.committed(t), h.batch(t).Acked, tc.deleted, tc.committed, tc.acked)
			}
		})
	}
}

// In a batch ack, an orderly entry with an offset outside its batch does
// not stop the entries after it: each is acknowledged, and the error
// tells of the stray offset.
func TestBatchAckGoesOnPastAnOrderlyEntryWithAStrayOffset(t *testing.T) {
	h := newOrderHarness(t, 4)
	h.pop(t, "", 2)
	st := h.batch(t)
	entry := func(offsets ...int64) AckEntry {
		return AckEntry{Group: "G", Topic: orderTestTopic, Offsets: offsets, PopTime: st.PopTime, InvisibleTime: st.InvisibleTime, Orderly: true}
	}
	results, err := h.svc.AckBatch([]AckEntry{entry(3), entry(0), entry(1)})
	if !errors.Is(err, ErrIllegalOffset) {
		t.Fatalf("batch ack with a stray offset: %v, want ErrIllegalOffset", err)
	}
	if len(results) != 3 || results[0].Deleted != 0 || results[1].Deleted != 1 || results[2].Deleted != 1 {
		t.Fatalf("batch ack results %+v, want every entry's", results)
	}
	if got := h.committed(t); got != 2 {
		t.Fatalf("committed %d after the batch ack, want 2", got)
	}
}

// A change of invisible time of an orderly message answers the handle's
// popTime and invisibleTime = now + the new invisible time - popTime
// whether or not the batch holds the message, as RocketMQ's
// ChangeInvisibleTimeProcessor does once the offset is not below the
// committed one (updateNextVisibleTime matching nothing changes nothing
// there either).
func TestOrderlyChangeInvisibleTimeAnswersTheNewDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offset  int64
		popTime int64 // 0: the batch's
		changed bool
	}{
		{"message of the batch", 1, 0, true},
		{"offset outside the batch", 3, 0, false},
		{"handle of another batch", 1, 42, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newOrderHarness(t, 4)
			h.pop(t, "", 2)
			st := h.batch(t)
			popTime := st.PopTime
			if tc.popTime != 0 {
				popTime = tc.popTime
			}
			h.now += 300
			hd := Handle{CKOffset: 0, PopTime: popTime, InvisibleTime: st.InvisibleTime, ReviveQID: OrderReviveQueue}
			res, err := h.svc.ChangeInvisibleTime("G", orderTestTopic, 0, tc.offset, hd, 5000)
			if err != nil {
				t.Fatalf("change: %v", err)
			}
			want := ChangeResult{PopTime: popTime, InvisibleTime: h.now + 5000 - popTime, ReviveQID: OrderReviveQueue, Changed: tc.changed}
			if res != want {
				t.Fatalf("change answered %+v, want %+v", res, want)
			}
		})
	}
}

// An ack that frees an orderly queue wakes the pops held on it even with
// QuietOrderLockRelease (enableNotifyAfterPopOrderLockRelease=false),
// which quiets only the lock's running out, as RocketMQ's ackOrderly
// notifies regardless: else a FIFO consumer's held receive slept its
// whole poll time after every batch it acknowledged.
func TestAnOrderlyAckWakesHeldPopsWhateverTheLockReleaseNotice(t *testing.T) {
	h := newOrderHarness(t, 4) // QuietOrderLockRelease
	woken := 0
	h.svc.cfg.OnQueueReady = func(string, string, int32) { woken++ }
	offs, _ := h.pop(t, "", 2)
	st := h.batch(t)
	if _, err := h.svc.AckMany("G", orderTestTopic, 0, offs[0], offs, st.PopTime, st.InvisibleTime, true); err != nil {
		t.Fatal(err)
	}
	if woken == 0 {
		t.Fatalf("batch %v acknowledged, the queue free, and no held pop woken", offs)
	}
}

// An orderly batch left unacknowledged for more than 24 h is forgotten,
// as RocketMQ's ConsumerOrderInfoManager.autoClean drops it: the next pop
// delivers the same messages counted from 0, not as a redelivery. Within
// the 24 h they count on.
func TestAnOrderlyBatchIdleForADayIsForgotten(t *testing.T) {
	h := newOrderHarness(t, 4)
	if offs, info := h.pop(t, "A", 2); fmt.Sprint(offs) != "[0 1]" || info != "0 0 0" {
		t.Fatalf("first pop %v %q", offs, info)
	}
	h.now += 2000 // past the invisible time
	if offs, info := h.pop(t, "B", 2); fmt.Sprint(offs) != "[0 1]" || info == "0 0 0" {
		t.Fatalf("pop after the invisible time: %v %q, want [0 1] counted as redelivered", offs, info)
	}
	h.now += 25 * 3600 * 1000
	if offs, info := h.pop(t, "C", 2); fmt.Sprint(offs) != "[0 1]" || info != "0 0 0" {
		t.Fatalf("pop 25 h later: %v %q, want [0 1] counted afresh (\"0 0 0\")", offs, info)
	}
}

// A change of invisible time of an orderly message below the committed
// offset changes nothing and is answered with zero fields, as RocketMQ's
// ChangeInvisibleTimeProcessor returns its response without setting them
// (primitive fields, written as 0), not with the handle's.
func TestOrderlyChangeBelowTheCommittedOffsetAnswersZeroFields(t *testing.T) {
	h := newOrderHarness(t, 4)
	offs, _ := h.pop(t, "", 2)
	st := h.batch(t)
	if _, err := h.svc.AckMany("G", orderTestTopic, 0, offs[0], offs, st.PopTime, st.InvisibleTime, true); err != nil {
		t.Fatal(err)
	}
	hd := Handle{PopTime: st.PopTime, InvisibleTime: st.InvisibleTime, ReviveQID: OrderReviveQueue}
	res, err := h.svc.ChangeInvisibleTime("G", orderTestTopic, 0, 0, hd, 5000)
	if err != nil || res != (ChangeResult{}) {
		t.Fatalf("change below the committed offset: %+v %v, want zero fields", res, err)
	}
}
