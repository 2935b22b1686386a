package kvindex

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
)

// rawRecord encodes a V1 record at phy; with an empty topic it encodes it
// with a one-byte topic and cuts that out (AppendRecord refuses an empty
// topic; RocketMQ's decoder, and ours, read one).
func rawRecord(t *testing.T, topic string, qid int32, qoff, phy int64, props string) []byte {
	t.Helper()
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	enc := topic
	if enc == "" {
		enc = "x"
	}
	rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: enc, QueueID: qid, QueueOffset: qoff, PhyOffset: phy,
		BornTimestamp: 1, BornHost: host, StoreTimestamp: 1, StoreHost: host, Body: []byte("b"), Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if topic != "" {
		return rec
	}
	at := len(rec) - len(props) - 2 - 1 - 1 // topicLen=1 | 'x' | propsLen:2 | props
	rec = append(append(rec[:at:at], 0), rec[at+2:]...)
	binary.BigEndian.PutUint32(rec, uint32(len(rec)))
	return rec
}

// Records with an empty topic among others', dispatched into both
// layouts: they make no queue in either (the file layout cannot name its
// directory, and dispatch does not stop on it), no key-index entry, and
// the records around them keep their entries and keys; the same keys and
// queue ids under a real topic are not mixed with theirs.
func TestDispatchEmptyTopicRecords(t *testing.T) {
	const seg = 1 << 20
	records := []struct {
		topic string
		qid   int32
		qoff  int64
		props string
	}{
		{"T", 0, 0, "KEYS\x01k\x02"},
		{"", 0, 0, "KEYS\x01k\x02UNIQ_KEY\x01U1\x02"},
		{"", 0, 1, "KEYS\x01k other\x02"},
		{"T", 0, 1, "KEYS\x01k\x02"},
		{"", 7, 0, ""},
		{"0", 0, 0, "KEYS\x01k\x02"}, // where RocketMQ's files would put the empty topic's queue 0
	}
	root := t.TempDir()
	dir := filepath.Join(root, "commitlog")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, seg)
	var phy int64
	offsets := map[string][]int64{}
	for _, r := range records {
		rec := rawRecord(t, r.topic, r.qid, r.qoff, phy, r.props)
		copy(buf[phy:], rec)
		offsets[r.topic] = append(offsets[r.topic], phy)
		phy += int64(len(rec))
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = seg
	s := openStackWith(t, root, cfg, LayoutKV, LayoutFile)
	defer s.close(t)
	if got := s.disp.Dispatched(); got != phy {
		t.Fatalf("dispatched up to %d, want every record's end %d", got, phy)
	}
	for name, st := range map[string]interface {
		Queues(func(string, int32) bool) error
		MaxOffset(string, int32) (int64, error)
	}{"kv": s.store, "file": s.mirror} {
		var queues []string
		_ = st.Queues(func(topic string, qid int32) bool {
			queues = append(queues, fmt.Sprintf("%s/%d", topic, qid))
			return true
		})
		slices.Sort(queues)
		if len(queues) != 2 || queues[0] != "0/0" || queues[1] != "T/0" {
			t.Errorf("%s layout queues %q, want 0/0 and T/0 only", name, queues)
		}
		if hi, err := st.MaxOffset("T", 0); err != nil || hi != 2 {
			t.Errorf("%s layout: T/0 max %d %v, want 2", name, hi, err)
		}
		if hi, err := st.MaxOffset("0", 0); err != nil || hi != 1 {
			t.Errorf("%s layout: 0/0 max %d %v, want 1", name, hi, err)
		}
	}
	for _, q := range []struct {
		topic, key string
		kind       byte
		want       []int64
	}{
		{"T", "k", KindKey, offsets["T"]},
		{"0", "k", KindKey, offsets["0"]},
		{"", "k", KindKey, nil},
		{"", "other", KindKey, nil},
		{"", "U1", KindUniqKey, nil},
	} {
		res, err := s.db.KeyIndex().Lookup(KeyQuery{Topic: q.topic, Key: q.key, Kind: q.kind, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]bool{}
		for _, r := range res {
			got[r.PhyOffset] = true
		}
		if len(got) != len(q.want) {
			t.Errorf("key %q of topic %q: %v, want %v", q.key, q.topic, res, q.want)
		}
		for _, w := range q.want {
			if !got[w] {
				t.Errorf("key %q of topic %q misses %d: %v", q.key, q.topic, w, res)
			}
		}
	}
}
