package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
)

// revived is a re-delivered message as a pop returns it: stored at store,
// first popped at firstPop, re-delivered reconsume times, with
// RKV_VISIBLE_AT set to visibleAt when it is not empty.
func revived(store, firstPop int64, reconsume int32, visibleAt string) popclient.Message {
	props := map[string]string{pop.PropertyFirstPopTime: msText(firstPop)}
	if visibleAt != "" {
		props[propVisibleAt] = visibleAt
	}
	var m popclient.Message
	m.StoreTimestamp = store
	m.ReconsumeTimes = reconsume
	m.Properties = commitlog.FormatProperties(props)
	return m
}

// msText is ms in decimal, as the broker writes times into properties.
func msText(ms int64) string { return strconv.FormatInt(ms, 10) }

// TestReviveTallyLateness: a copy without RKV_VISIBLE_AT is late by its
// store time past the deadline (1ST_POP_TIME + invisible); a staged copy
// by the later of its store time and its RKV_VISIBLE_AT, so a copy stored
// well ahead of the deadline is not counted early (negative lateness), and
// one stored after its RKV_VISIBLE_AT is counted from the store time.
// Only first re-deliveries are measured; staged ones are counted.
func TestReviveTallyLateness(t *testing.T) {
	const firstPop, inv = 1_000_000, 20 * time.Second
	deadline := int64(firstPop) + inv.Milliseconds()
	tally := &reviveTally{invisible: inv}
	for _, c := range []struct {
		m       popclient.Message
		popTime int64
	}{
		// Not staged: stored 7 ms after the deadline.
		{revived(deadline+7, firstPop, 1, ""), deadline + 9},
		// Staged: stored 3 s ahead of the deadline, poppable 2 ms after it.
		{revived(deadline-3000, firstPop, 1, msText(deadline+2)), deadline + 2},
		// Staged, but the re-put itself landed after RKV_VISIBLE_AT.
		{revived(deadline+40, firstPop, 1, msText(deadline-500)), deadline + 41},
		// A second re-delivery: not measured.
		{revived(deadline+90_000, firstPop, 2, msText(deadline+60_000)), deadline + 60_000},
	} {
		tally.add(c.m, c.popTime)
	}
	if err := tally.err(); err != nil {
		t.Fatalf("no copy came early, got %v", err)
	}
	want := []int64{7, 2, 40}
	if len(tally.late) != len(want) {
		t.Fatalf("lateness %v, want %v", tally.late, want)
	}
	for i := range want {
		if tally.late[i] != want[i] {
			t.Fatalf("lateness %v, want %v", tally.late, want)
		}
	}
	if tally.staged != 2 {
		t.Fatalf("%d staged, want 2 (the first re-deliveries carrying %s)", tally.staged, propVisibleAt)
	}
	var r popRun
	r.setLateness(tally)
	if r.revived != 3 || r.staged != 2 || r.lateMax != 40 || r.lateP50 != 7 {
		t.Fatalf("run: revived %d staged %d p50 %d max %d, want 3, 2, 7, 40", r.revived, r.staged, r.lateP50, r.lateMax)
	}
}

// TestReviveTallyEarlyDelivery: a staged copy handed out by a pop whose
// popTime is below its RKV_VISIBLE_AT is a broker fault, counted with the
// worst gap, on a second re-delivery too; one popped exactly at its time
// is not. An RKV_VISIBLE_AT that is not a number is a fault too.
func TestReviveTallyEarlyDelivery(t *testing.T) {
	const firstPop, inv = 5_000_000, 10 * time.Second
	deadline := int64(firstPop) + inv.Milliseconds()
	tally := &reviveTally{invisible: inv}
	tally.add(revived(deadline-2000, firstPop, 1, msText(deadline)), deadline)      // on time
	tally.add(revived(deadline-2000, firstPop, 1, msText(deadline)), deadline-1)    // 1 ms early
	tally.add(revived(deadline-2000, firstPop, 2, msText(deadline+30)), deadline-5) // 35 ms early
	if tally.early != 2 || tally.earliest != 35 {
		t.Fatalf("early %d, worst %d ms, want 2 and 35", tally.early, tally.earliest)
	}
	err := tally.err()
	if err == nil || !strings.Contains(err.Error(), "2 staged revive copies popped before their RKV_VISIBLE_AT, the worst 35 ms before it") {
		t.Fatalf("err %v, want the count and the worst gap of the early deliveries", err)
	}

	bad := &reviveTally{invisible: inv}
	bad.add(revived(deadline, firstPop, 1, "soon"), deadline)
	if err := bad.err(); err == nil || !strings.Contains(err.Error(), `not ms since the epoch (the first: "soon")`) {
		t.Fatalf("err %v, want the malformed %s named", err, propVisibleAt)
	}
	if len(bad.late) != 0 {
		t.Fatalf("a copy with a malformed %s measured: %v", propVisibleAt, bad.late)
	}
}
