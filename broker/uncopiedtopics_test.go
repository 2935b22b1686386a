package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// wantSlaveTopicsAt fails unless the store of b records that its topic
// table covers its log below want.
func wantSlaveTopicsAt(t *testing.T, b *testBroker, want int64, when string) {
	t.Helper()
	if at, ok, err := b.db.SlaveTopicsAt(); err != nil || !ok || at != want {
		t.Fatalf("%s, the topic table covers the log below %d (%v, %v), want %d", when, at, ok, err, want)
	}
}

// A slave records how far its copy of the master's topic table covers
// its log: at its first start, the log's end; then the log end before
// each copy it took, or found unchanged; at a start after its log was cut
// back, no further than the end.
func TestSlaveRecordsHowFarItsTopicsGo(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	mc := master.client(nil)
	createTopic(t, mc, "Kept", 1, 1)
	mustSend(t, mc, "Kept", 0, "k-0", "")
	slave := startSlaveOf(t, master, nil)
	wantSlaveTopicsAt(t, slave, 0, "at a new slave's first start")

	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	wantSlaveTopicsAt(t, slave, slave.clog.MaxOffset(), "after a copy of the master's table")
	mustSend(t, mc, "Kept", 0, "k-1", "")
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	wantSlaveTopicsAt(t, slave, slave.clog.MaxOffset(), "after a copy that found the master's table unchanged")

	if err := slave.db.SetSlaveTopicsAt(1 << 40); err != nil {
		t.Fatal(err)
	}
	slave.stop()
	again := startTestBrokerAt(t, slave.store, withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": master.haServerAddr()}))
	wantSlaveTopicsAt(t, again, again.clog.MaxOffset(), "at a slave's start on a log that ends before the record")
}

// A slave's master died before the slave copied a topic's config: the
// slave, started as the master, serves the topic with a config made from
// its queues, and the queues the master added to a topic since the copy.
// A topic the last table it copied lacked (deleted on the master) stays
// unserved, and a topic it copied keeps its config.
func TestPromotedSlaveTakesTheTopicsItNeverCopied(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	// No name server: this slave never learns its master's address, so
	// it copies the master's tables only when told to (syncSlave).
	slave := startSlaveOf(t, master, nil)
	mc := master.client(nil)
	createTopic(t, mc, "Kept", 2, 2)
	mustSend(t, mc, "Kept", 0, "k-0", "")
	createTopic(t, mc, "Gone", 2, 2)
	mustSend(t, mc, "Gone", 1, "g-0", "")
	createTopic(t, mc, "Grown", 2, 2)
	// Shrunk from 4 queues to 2 before the copy: its queue 3 stays cut
	// off.
	createTopic(t, mc, "Shrunk", 4, 4)
	mustSend(t, mc, "Shrunk", 3, "s-3", "")
	createTopic(t, mc, "Shrunk", 2, 2)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	// Deleted on the master, the queues left on the slave (the master
	// said it still held them): what a copy of a table without it does.
	if err := slave.topics.table.Delete("Gone"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, mc, "Late", 4, 4)
	mustSend(t, mc, "Late", 0, "l-0", "")
	mustSend(t, mc, "Late", 3, "l-3", "")
	createTopic(t, mc, "Grown", 6, 6)
	mustSend(t, mc, "Grown", 5, "gr-5", "")
	waitReplicated(t, master, slave)
	if _, ok, err := slave.topics.table.Get("Late"); err != nil || ok {
		t.Fatalf("the slave holds Late's config (%v) before the master died; the test needs it not to", err)
	}
	master.stop()

	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(nil))
	waitTakenUncopied(t, promoted)
	tc, ok, err := promoted.topics.table.Get("Late")
	if err != nil || !ok {
		t.Fatalf("the promoted slave has no config of Late (%v)", err)
	}
	if tc.ReadQueueNums != 4 || tc.WriteQueueNums != 4 || tc.Perm != meta.PermRead|meta.PermWrite {
		t.Errorf("the promoted slave's config of Late: %+v, want 4 read-write queues", tc)
	}
	pc := promoted.client(nil)
	if r := call(t, pc, remoting.PullMessage, pullReq("g", "Late", 3, 0, 0, 0, "*"), nil); r.Code != remoting.Success || pulledBodies(t, r) != "l-3" {
		t.Errorf("pull of Late/3 from the promoted slave: %d %s, want l-3", r.Code, r.Remark)
	}
	for _, q := range []struct {
		topic  string
		queues int
		why    string
	}{
		{"Kept", 2, "the master's"},
		{"Grown", 6, "to cover queue 5, which the master wrote after the slave's copy"},
		{"Shrunk", 2, "the master's, which cut queue 3 off before the copy"},
	} {
		if tc, ok, err := promoted.topics.table.Get(q.topic); err != nil || !ok || tc.ReadQueueNums != q.queues || tc.WriteQueueNums != q.queues {
			t.Errorf("the promoted slave's config of %s: %+v (%v, %v), want %d queues, %s", q.topic, tc, ok, err, q.queues, q.why)
		}
	}
	if r := call(t, pc, remoting.PullMessage, pullReq("g", "Grown", 5, 0, 0, 0, "*"), nil); r.Code != remoting.Success || pulledBodies(t, r) != "gr-5" {
		t.Errorf("pull of Grown/5 from the promoted slave: %d %s, want gr-5", r.Code, r.Remark)
	}
	if _, ok, err := promoted.topics.table.Get("Gone"); err != nil || ok {
		t.Errorf("the promoted slave took Gone, which its master had deleted (%v)", err)
	}
}

// waitTakenUncopied waits until b, started as the master on a store that
// served as a slave, took the topics it never copied: it forgot the
// record of how far its copies went, and cleans unused topics again.
func waitTakenUncopied(t *testing.T, b *testBroker) {
	t.Helper()
	waitFor(t, "the promoted slave to take the topics it never copied", func() bool {
		_, ok, err := b.db.SlaveTopicsAt()
		return err == nil && !ok && !b.takingUncopied.Load()
	})
}

// The take of the topics a promoted slave never copied runs while the
// broker serves: what its walk found is checked again before it writes.
// A topic deleted since the walk, or whose deletion is under way, is not
// brought back; a config grown since is kept as it is; a config created
// since (a send auto-created it) is only raised to cover the queues.
func TestPromotedSlavesTakeKeepsWhatChangedSinceItsWalk(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, q := range []struct {
		topic  string
		queues int
		wrote  int32
	}{{"Deleted", 2, 1}, {"Deleting", 2, 1}, {"Grown", 2, 3}, {"Created", 4, 5}, {"Untouched", 1, 2}} {
		createTopic(t, c, q.topic, q.queues, q.queues)
		// Every queue up to the one written past the count holds an
		// entry, as a master's round robin leaves them.
		createTopic(t, c, q.topic, int(q.wrote)+1, int(q.wrote)+1)
		for qid := range q.wrote + 1 {
			mustSend(t, c, q.topic, qid, q.topic, "")
		}
		createTopic(t, c, q.topic, q.queues, q.queues)
	}
	b.caughtUp()
	for _, topic := range []string{"Deleted", "Deleting", "Created", "Untouched"} {
		if err := b.topics.table.Delete(topic); err != nil {
			t.Fatal(err)
		}
	}
	found, err := b.walkUncopied(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 5 {
		t.Fatalf("the walk found %+v, want the 5 topics", found)
	}

	// What happens between the walk and the write.
	if err := b.dropTopicQueues("Deleted"); err != nil {
		t.Fatal(err)
	}
	b.topics.beginDeletion("Deleting")
	grown := meta.NewTopicConfig("Grown", 8)
	grown.Attributes = map[string]string{meta.AttrMessageType: "FIFO"}
	created := meta.NewTopicConfig("Created", 3)
	created.Perm = meta.PermRead
	if err := b.topics.put(grown, created); err != nil {
		t.Fatal(err)
	}

	if err := b.coverUncopied(0, found); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"Deleted", "Deleting"} {
		if tc, ok, err := b.topics.table.Get(topic); err != nil || ok {
			t.Errorf("the take brought %s back (%+v, %v)", topic, tc, err)
		}
	}
	if tc, ok, err := b.topics.table.Get("Grown"); err != nil || !ok || tc.WriteQueueNums != 8 || tc.Attributes[meta.AttrMessageType] != "FIFO" {
		t.Errorf("Grown after the take: %+v (%v, %v), want the config grown meanwhile, 8 queues, FIFO", tc, ok, err)
	}
	if tc, ok, err := b.topics.table.Get("Created"); err != nil || !ok || tc.ReadQueueNums != 6 || tc.WriteQueueNums != 6 || tc.Perm != meta.PermRead {
		t.Errorf("Created after the take: %+v (%v, %v), want the config created meanwhile raised to 6 queues, read-only kept", tc, ok, err)
	}
	if tc, ok, err := b.topics.table.Get("Untouched"); err != nil || !ok || tc.WriteQueueNums != 3 {
		t.Errorf("Untouched after the take: %+v (%v, %v), want taken with 3 queues", tc, ok, err)
	}
}

// While a promoted slave takes the topics its master never gave it a
// copy of, mqadmin cleanUnusedTopic is refused: it would drop their
// queues, which no config covers until the take ends.
func TestCleanUnusedTopicWaitsForThePromotedSlavesTake(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "Uncopied", 0, "u", "")
	b.caughtUp()
	if err := b.topics.table.Delete("Uncopied"); err != nil {
		t.Fatal(err)
	}
	b.takingUncopied.Store(true)
	if r := call(t, c, remoting.CleanUnusedTopic, nil, nil); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "still taking") {
		t.Errorf("CLEAN_UNUSED_TOPIC during the take: %d %s, want SYSTEM_ERROR naming the take", r.Code, r.Remark)
	}
	if _, hi := queueBounds(t, c, "Uncopied"); hi != 1 {
		t.Errorf("Uncopied's max offset %d after the refused clean, want its entry kept", hi)
	}
	b.takingUncopied.Store(false)
	if r := call(t, c, remoting.CleanUnusedTopic, nil, nil); r.Code != remoting.Success {
		t.Fatalf("CLEAN_UNUSED_TOPIC after the take: %d %s", r.Code, r.Remark)
	}
	if _, hi := queueBounds(t, c, "Uncopied"); hi != 0 {
		t.Errorf("Uncopied's max offset %d after the clean, want dropped", hi)
	}
}

// A take of the topics a promoted slave never copied that fails is logged
// and tried again; the record of how far the slave's copies went stays
// until one succeeds, and so does the refusal to clean unused topics. A
// broker that stops meanwhile leaves the record for its next start.
func TestPromotedSlavesTakeIsTriedAgainAfterAnError(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.log = zerolog.New(logs) })
	if err := b.db.SetSlaveTopicsAt(0); err != nil {
		t.Fatal(err)
	}
	failures := make(chan error, 2)
	failures <- errors.New("injected read failure")
	take := func(ctx context.Context, at int64) error {
		select {
		case err := <-failures:
			return err
		default:
			return b.takeUncopiedTopics(ctx, at)
		}
	}
	b.takingUncopied.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.takeUncopiedLoop(context.Background(), 0, take, 50*time.Millisecond)
	}()
	<-done
	if lines := logLines(logs, "take the topics this broker's master had given no copy of when it died: their messages stay unserved until it succeeds"); len(lines) != 1 || !strings.Contains(fmt.Sprint(lines[0]["error"]), "injected") {
		t.Errorf("failed takes logged: %v, want the one injected", lines)
	}
	waitTakenUncopied(t, b)

	// Stopped while it waits to try again: the record stays.
	if err := b.db.SetSlaveTopicsAt(0); err != nil {
		t.Fatal(err)
	}
	failures <- errors.New("injected read failure")
	ctx, cancel := context.WithCancel(context.Background())
	b.takingUncopied.Store(true)
	done = make(chan struct{})
	go func() {
		defer close(done)
		b.takeUncopiedLoop(ctx, 0, take, time.Hour)
	}()
	waitFor(t, "the second take to fail", func() bool { return len(failures) == 0 })
	cancel()
	<-done
	if _, ok, err := b.db.SlaveTopicsAt(); err != nil || !ok {
		t.Errorf("the record after a stop during the retry wait: %v %v, want it kept", ok, err)
	}
	if b.takingUncopied.Load() {
		t.Error("the loop ended and still refuses to clean unused topics")
	}
}
