package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// segmentNames lists the CommitLog segment files in dir.
func segmentNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if len(e.Name()) == 20 {
			names = append(names, e.Name())
		}
	}
	return names
}

// With storePathCommitLog set the segments go there and only there, the
// lock, abort and checkpoint files stay in storePathRootDir (where
// RocketMQ keeps them), and a restart reads the messages back.
func TestStorePathCommitLogElsewhere(t *testing.T) {
	root, clogDir := t.TempDir(), filepath.Join(t.TempDir(), "clog-disk")
	o := map[string]string{"storePathCommitLog": clogDir, "mappedFileSizeCommitLog": "65536"}
	b := startTestBrokerAt(t, root, o)
	c := b.client(nil)
	for i := 0; i < 100; i++ { // 100 records of ~2 KiB: several 64 KiB segments
		mustSend(t, c, "PathTopic", 0, fmt.Sprintf("body-%03d-%02000d", i, i), "")
	}
	b.stop()

	if n := len(segmentNames(t, clogDir)); n < 2 {
		t.Fatalf("%d segments in %s, want several", n, clogDir)
	}
	if _, err := os.Stat(filepath.Join(root, "commitlog")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s/commitlog exists (%v): segments written beside the root", root, err)
	}
	for _, name := range []string{"lock", "checkpoint"} {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Errorf("%s not in the store root: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(clogDir, name)); err == nil {
			t.Errorf("%s written into the CommitLog directory", name)
		}
	}

	b = startTestBrokerAt(t, root, o)
	if b.clog.MaxOffset() == 0 {
		t.Fatal("restarted with an empty CommitLog")
	}
	got := pullAllOf(t, b, b.client(nil), "PathTopic", 0)
	if len(got) != 100 {
		t.Fatalf("%d messages after restart, want 100", len(got))
	}
	for i, m := range got {
		if want := fmt.Sprintf("body-%03d-%02000d", i, i); string(m.Body) != want {
			t.Fatalf("message %d: body %.20q, want %.20q", i, m.Body, want)
		}
	}
}

// pullAllOf pulls every message of a queue, in as many pulls as it takes.
func pullAllOf(t *testing.T, b *testBroker, c *remoting.Client, topic string, qid int32) []commitlog.Message {
	t.Helper()
	b.caughtUp()
	var out []commitlog.Message
	for off := int64(0); ; {
		resp := call(t, c, remoting.PullMessage, pullReq("inspect", topic, qid, off, 0, 0, "*"), nil)
		if resp.Code != remoting.Success {
			return out
		}
		msgs := decodeRecords(t, resp.Body)
		if len(msgs) == 0 {
			return out
		}
		out = append(out, msgs...)
		off = header(t, resp, "nextBeginOffset")
	}
}

// A RocketMQ store whose CommitLog lives elsewhere (storePathCommitLog on
// its own disk) opens with the key set and serves the messages RocketMQ
// wrote: the same as the fixture's CommitLog holds, queue by queue.
func TestOpenRocketMQStoreWithCommitLogElsewhere(t *testing.T) {
	fixture := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean")
	want := fixtureMessages(t, filepath.Join(fixture, "commitlog"))
	store := testutil.CopyStore(t, fixture)
	clogDir := filepath.Join(t.TempDir(), "commitlog-disk")
	if err := os.Rename(filepath.Join(store, "commitlog"), clogDir); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384",
		"autoCreateTopicEnable": "false", "storePathCommitLog": clogDir})
	if _, err := os.Stat(filepath.Join(store, "commitlog")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an empty %s/commitlog was created (%v)", store, err)
	}
	c := b.client(nil)
	for q, bodies := range want {
		var got []string
		for _, m := range pullAllOf(t, b, c, q.topic, q.qid) {
			got = append(got, string(m.Body))
		}
		// The scheduler may append a delay message that came due since
		// the fixture was written; the fixture's come first.
		if len(got) > len(bodies) {
			got = got[:len(bodies)]
		}
		if !reflect.DeepEqual(got, bodies) {
			t.Errorf("%s/%d serves %d messages %q, want the fixture's %d %q", q.topic, q.qid, len(got), got, len(bodies), bodies)
		}
	}
}

// fixtureQueue names a queue of the fixture.
type fixtureQueue struct {
	topic string
	qid   int32
}

// fixtureMessages reads the bodies of TopicA's and TopicB's messages from
// a RocketMQ CommitLog directory, queue by queue in queue-offset order.
func fixtureMessages(t *testing.T, dir string) map[fixtureQueue][]string {
	t.Helper()
	l, err := commitlog.OpenReadOnlyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out := map[fixtureQueue][]string{}
	it := l.NewIterator(l.MinOffset())
	for {
		e, err := it.Next()
		if errors.Is(err, commitlog.ErrNoMoreData) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := commitlog.Decode(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != "TopicA" && m.Topic != "TopicB" {
			continue
		}
		q := fixtureQueue{m.Topic, m.QueueID}
		out[q] = append(out[q], string(m.Body))
	}
	if len(out) == 0 {
		t.Fatal("no TopicA or TopicB message in the fixture")
	}
	return out
}
