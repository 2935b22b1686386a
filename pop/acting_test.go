package pop

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// An acting master's revive puts through its RemotePut, one message at a
// time and without the property naming the delivery, never through the
// broker's own Put; when a put fails, the messages put before it are
// done and the others go back to their checkpoint, due after the
// backoff, and are put by a later round.
func TestActingReviveGivesBackWhatTheRemotePutDidNotStore(t *testing.T) {
	l := openTestLog(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var entries []cq.Entry
	for i, body := range []string{"m0", "m1", "m2"} {
		res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{Topic: "T", Body: []byte(body), BornHost: host, StoreHost: host}})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, cq.Entry{QueueOffset: int64(i), PhyOffset: res.PhyOffset, Size: res.Records[0].Size})
	}
	db := openIndex(t)
	now := time.UnixMilli(1_000_000)
	pb := &puttingBroker{}
	s := &Service{cfg: Config{Now: func() time.Time { return now }, ReviveBatch: 100, OnQueueReady: func(string, string, int32) {},
		Log: l, CQ: &oneQueue{topic: "T", entries: entries}, Broker: pb, Offsets: db.ConsumerOffsets()},
		store: db.Pop(), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1), log: zerolog.Nop()}
	s.lowDeadline.Store(math.MaxInt64)
	putCheckpoints(t, s, kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 0, Offsets: []int64{0, 1, 2}, PopTime: 900_000, InvisibleTime: 60_000, VisibleAt: 960_000})

	var remote []string
	failAt := "m1"
	s.acting.Store(&actingRevive{put: func(_ context.Context, m *commitlog.Message) error {
		if _, ok := commitlog.LookupProperty(m.Properties, kvindex.PropertyRevivedFrom); ok {
			t.Errorf("remote put of %s with %s", m.Body, kvindex.PropertyRevivedFrom)
		}
		if m.Topic != RetryTopicV1("T", "G") || m.ReconsumeTimes != 1 {
			t.Errorf("remote put of %s to %s with reconsumeTimes %d", m.Body, m.Topic, m.ReconsumeTimes)
		}
		if string(m.Body) == failAt {
			return errors.New("put to remote broker failed")
		}
		remote = append(remote, string(m.Body))
		return nil
	}})

	if _, err := s.ReviveOnce(context.Background()); err != nil {
		t.Fatalf("revive round: %v", err)
	}
	if !slices.Equal(remote, []string{"m0"}) || len(pb.put) != 0 {
		t.Fatalf("remote puts %q and %d local ones, want [m0] and none", remote, len(pb.put))
	}
	var left []kvindex.Checkpoint
	if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool { left = append(left, c); return true }); err != nil {
		t.Fatal(err)
	}
	reviving, err := s.store.CountReviveIntents()
	if err != nil {
		t.Fatal(err)
	}
	due := now.UnixMilli() + reviveBackoff[0].Milliseconds()
	if len(left) != 1 || !slices.Equal(left[0].Offsets, []int64{1, 2}) || left[0].VisibleAt != due || left[0].Attempts != 1 || reviving != 0 {
		t.Fatalf("after the failed put: checkpoints %+v, %d messages reviving; want offsets 1 and 2 due at %d, none reviving", left, reviving, due)
	}
	if st := s.ReviveStats(); st.Retried != 1 {
		t.Fatalf("revive stats %+v, want 1 retried", st)
	}

	failAt = ""
	now = time.UnixMilli(due)
	if _, err := s.ReviveOnce(context.Background()); err != nil {
		t.Fatalf("revive round: %v", err)
	}
	if !slices.Equal(remote, []string{"m0", "m1", "m2"}) {
		t.Fatalf("remote puts %q, want m0, m1, m2 once each", remote)
	}
}
