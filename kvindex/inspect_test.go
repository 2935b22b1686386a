package kvindex

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
)

// inspectClock is the store time of every record the inspection tests
// append.
var inspectClock = time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)

// written is what a test appended: the record and the entry the dispatcher
// must have made for it.
type written struct {
	topic string
	qid   int32
	keys  string
	uniq  string
	res   commitlog.AppendResult
}

func appendForInspect(t *testing.T, s *stack, topic string, qid int32, props map[string]string) commitlog.AppendResult {
	t.Helper()
	if err := s.offsets.Acquire(topic, qid); err != nil {
		t.Fatal(err)
	}
	defer s.offsets.Release(topic, qid)
	res, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: &commitlog.Message{
		Topic: topic, QueueID: qid, Body: []byte("body of " + topic),
		Properties: commitlog.FormatProperties(props), BornHost: netip.MustParseAddrPort("10.0.0.1:4000"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Every key a dispatched store holds decodes to exactly what was written:
// meta, ConsumeQueue entries, key index and buckets (through the
// dispatcher), consumer offsets and configs (through their tables).
func TestDecodeKeyDispatchedStore(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 64 << 10
	cfg.Now = func() time.Time { return inspectClock }
	s := openStack(t, root, cfg)

	var ws []written
	for i, w := range []written{
		{topic: "TopicA", qid: 0, keys: "k1 k2", uniq: "U1"},
		{topic: "TopicA", qid: 1, keys: "k3", uniq: "U2"},
		{topic: "TopicA", qid: 0, uniq: "U3"},
		{topic: "TopicB", qid: 3, keys: "k1"},
	} {
		props := map[string]string{"TAGS": []string{"TagA", "TagB", "", "TagA"}[i], "KEYS": w.keys, "UNIQ_KEY": w.uniq}
		w.res = appendForInspect(t, s, w.topic, w.qid, props)
		ws = append(ws, w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range []OffsetUpdate{{"G1", "TopicA", 0, 1}, {"G2", "TopicB", 3, 0}} {
		if err := s.db.ConsumerOffsets().Set(u.Group, u.Topic, u.QueueID, u.Offset); err != nil {
			t.Fatal(err)
		}
	}
	topics, err := s.db.Topics(0)
	if err != nil {
		t.Fatal(err)
	}
	tc := meta.NewTopicConfig("TopicA", 2)
	if err := topics.Put(tc); err != nil {
		t.Fatal(err)
	}
	groups, err := s.db.Groups(0)
	if err != nil {
		t.Fatal(err)
	}
	gc := meta.NewSubscriptionGroupConfig("G1")
	if err := groups.Put(gc); err != nil {
		t.Fatal(err)
	}
	forbidden, err := s.db.GroupForbiddens(0)
	if err != nil {
		t.Fatal(err)
	}
	gf := meta.GroupForbidden{Group: "G9", Topics: map[string]int{"TopicA": 4, "TopicB": 6}}
	if err := forbidden.Put(gf); err != nil {
		t.Fatal(err)
	}
	end := s.log.MaxOffset()
	s.close(t)

	db, err := Open(Options{Dir: filepath.Join(root, DirName), ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string][]Record{}
	if err := db.Scan(nil, func(k, v []byte) bool {
		r, err := DecodeKey(k, v)
		if err != nil {
			t.Errorf("key %x: %v", k, err)
			return true
		}
		if r.Keyspace().Prefix != k[0] {
			t.Errorf("key %x decoded as keyspace %v", k, r.Keyspace())
		}
		if r.String() == "" {
			t.Errorf("key %x: empty String", k)
		}
		got[r.Keyspace().Name] = append(got[r.Keyspace().Name], r)
		return true
	}); err != nil {
		t.Fatal(err)
	}

	ts := inspectClock.UnixMilli()
	var wantCQ, wantKeys []Record
	queueNext := map[string]int64{}
	for i, w := range ws {
		q := w.topic + "/" + string(rune('0'+w.qid))
		wantCQ = append(wantCQ, CQEntryRecord{Topic: w.topic, QueueID: w.qid, QueueOffset: queueNext[q],
			PhyOffset: w.res.PhyOffset, Size: int32(w.res.WroteBytes),
			TagsCode: commitlog.TagsCode([]string{"TagA", "TagB", "", "TagA"}[i]), StoreTimestamp: ts})
		queueNext[q]++
		if w.uniq != "" {
			wantKeys = append(wantKeys, KeyIndexRecord{Bucket: 0, Topic: w.topic, Kind: KindUniqKey, Key: w.uniq, PhyOffset: w.res.PhyOffset})
		}
		for _, k := range strings.Fields(w.keys) {
			wantKeys = append(wantKeys, KeyIndexRecord{Bucket: 0, Topic: w.topic, Kind: KindKey, Key: k, PhyOffset: w.res.PhyOffset})
		}
	}
	// Keys sort by (topic, queue, offset) and (bucket, topic, kind, key, phy).
	sortRecords(wantCQ)
	sortRecords(wantKeys)
	check := func(name string, want []Record) {
		t.Helper()
		if !reflect.DeepEqual(got[name], want) {
			t.Errorf("%s records:\n got %v\nwant %v", name, got[name], want)
		}
	}
	check("cq", wantCQ)
	check("key-index", wantKeys)
	check("key-bucket", []Record{KeyBucketRecord{Bucket: 0, MinStoreTimestamp: ts, MaxStoreTimestamp: ts}})
	check("consumer-offset", []Record{
		ConsumerOffsetRecord{Group: "G1", Topic: "TopicA", QueueID: 0, Offset: 1},
		ConsumerOffsetRecord{Group: "G2", Topic: "TopicB", QueueID: 3, Offset: 0},
	})
	check("topic-config", []Record{TopicConfigRecord{Name: "TopicA", Config: tc}})
	check("group-config", []Record{GroupConfigRecord{Name: "G1", Config: gc}})
	check("group-forbidden", []Record{GroupForbiddenRecord{Name: "G9", Forbidden: gf}})
	if s := got["group-forbidden"][0].String(); s != `group="G9" "TopicA"=4 "TopicB"=6` {
		t.Errorf("group forbidden record shows %s", s)
	}
	check("cq-min", nil)
	metas := got["meta"]
	if len(metas) != 6 {
		t.Fatalf("meta records %v", metas)
	}
	// "cqWritten.kv" < "dispatched" < "groupForbiddenVer" < "groupsVer" < "schema" < "topicsVer"
	if metas[0] != (CQWrittenRecord{Layout: LayoutKV, Offset: end}) || metas[1] != (DispatchedRecord{Offset: end}) ||
		metas[4] != (SchemaRecord{Version: schemaVersion}) {
		t.Errorf("meta records %v, want kv written and dispatched %d and schema %d", metas, end, schemaVersion)
	}
	for i, table := range map[int]string{2: "groupForbidden", 3: "groups", 5: "topics"} {
		v, ok := metas[i].(DataVersionRecord)
		if !ok || v.Table != table || v.Counter != 1 || v.Timestamp <= 0 {
			t.Errorf("meta record %d: %#v, want %s version 1", i, metas[i], table)
		}
	}
	for _, r := range got["cq-journal"] {
		j := r.(CQJournalRecord)
		if j.FirstPhyOffset < 0 || j.EndPhyOffset > end || len(j.Queues) == 0 {
			t.Errorf("journal record %v outside the log [0,%d)", j, end)
		}
	}
}

func sortRecords(rs []Record) {
	key := func(r Record) string {
		switch r := r.(type) {
		case CQEntryRecord:
			return string(cqKey(r.Topic, r.QueueID, r.QueueOffset))
		case KeyIndexRecord:
			return string(appendKeyIndexKey(nil, r.Topic, r.Kind, r.Key, r.PhyOffset))
		}
		panic("unsorted type")
	}
	sort.Slice(rs, func(i, j int) bool { return key(rs[i]) < key(rs[j]) })
}

// The journal and min keyspaces, written by Put and CorrectMin, decode to
// what those calls wrote; QueueRanges and ScanQueue agree with the CQ.
func TestDecodeJournalMinAndQueueRanges(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	var entries []cq.Dispatch
	for i := int64(0); i < 5; i++ {
		entries = append(entries, cq.Dispatch{Topic: "A", QueueID: 0, Entry: cq.Entry{QueueOffset: i, PhyOffset: 1000 + 100*i, Size: 100, TagsCode: i, StoreTimestamp: 7}})
	}
	entries = append(entries,
		cq.Dispatch{Topic: "B", QueueID: 1, Entry: cq.Entry{QueueOffset: 0, PhyOffset: 1050, Size: 10, StoreTimestamp: 7}},
		cq.Dispatch{Topic: "B", QueueID: 1, Entry: cq.Entry{QueueOffset: 1, PhyOffset: 1150, Size: 10, StoreTimestamp: 7}},
		cq.Dispatch{Topic: "B", QueueID: -1, Entry: cq.Entry{QueueOffset: 0, PhyOffset: 1600, Size: 10, StoreTimestamp: 7}},
	)
	if err := c.Put(entries); err != nil {
		t.Fatal(err)
	}
	var journal []Record
	_ = db.Scan([]byte{PrefixCQJournal}, func(k, v []byte) bool {
		r, err := DecodeKey(k, v)
		if err != nil {
			t.Fatal(err)
		}
		journal = append(journal, r)
		return true
	})
	wantJournal := []Record{CQJournalRecord{FirstPhyOffset: 1000, EndPhyOffset: 1610, Queues: []JournalQueue{{"A", 0, 0}, {"B", 1, 0}, {"B", -1, 0}}}}
	if !reflect.DeepEqual(journal, wantJournal) {
		t.Errorf("journal %v, want %v", journal, wantJournal)
	}

	// Retention below 1250 drops A/0@0..2 and all of B/1.
	if err := c.CorrectMin(1250); err != nil {
		t.Fatal(err)
	}
	var mins []Record
	_ = db.Scan([]byte{PrefixCQMin}, func(k, v []byte) bool {
		r, err := DecodeKey(k, v)
		if err != nil {
			t.Fatal(err)
		}
		mins = append(mins, r)
		return true
	})
	wantMins := []Record{CQMinRecord{"A", 0, 3}, CQMinRecord{"B", 1, 2}}
	if !reflect.DeepEqual(mins, wantMins) {
		t.Errorf("mins %v, want %v", mins, wantMins)
	}

	var ranges []QueueRange
	collect := func(r QueueRange) bool { ranges = append(ranges, r); return true }
	if err := db.QueueRanges("", collect); err != nil {
		t.Fatal(err)
	}
	want := []QueueRange{{"A", 0, 3, 5, 3}, {"B", 1, 2, 2, 2}, {"B", -1, 0, 1, -1}}
	if !reflect.DeepEqual(ranges, want) {
		t.Errorf("all ranges %v, want %v", ranges, want)
	}
	ranges = nil
	if err := db.QueueRanges("B", collect); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ranges, want[1:]) {
		t.Errorf("ranges of B %v, want %v", ranges, want[1:])
	}
	ranges = nil
	if err := db.QueueRanges("C", collect); err != nil || ranges != nil {
		t.Errorf("ranges of absent topic: %v %v", ranges, err)
	}

	var scanned []int64
	if err := db.ScanQueue("A", 0, 4, func(e CQEntryRecord, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		if e.PhyOffset != 1000+100*e.QueueOffset || e.TagsCode != e.QueueOffset || e.Size != 100 {
			t.Errorf("entry %v", e)
		}
		scanned = append(scanned, e.QueueOffset)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(scanned, []int64{4}) {
		t.Errorf("scan from 4: %v", scanned)
	}

	// A malformed value is reported and the scan goes on.
	if err := db.pdb.Set(cqKey("A", 0, 5), []byte{1, 2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set(cqKey("A", 0, 6), appendCQValue(nil, 1700, 100, 6, 7), nil); err != nil {
		t.Fatal(err)
	}
	var bad, good []int64
	if err := db.ScanQueue("A", 0, 0, func(e CQEntryRecord, err error) bool {
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Errorf("error %v does not wrap ErrBadKey", err)
			}
			bad = append(bad, e.QueueOffset)
		} else {
			good = append(good, e.QueueOffset)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bad, []int64{5}) || !reflect.DeepEqual(good, []int64{3, 4, 6}) {
		t.Errorf("bad %v good %v", bad, good)
	}
}

func TestDecodeKeyRejectsMalformed(t *testing.T) {
	cqk := cqKey("T", 1, 2)
	cases := []struct {
		name       string
		key, value []byte
		want       error
	}{
		{"empty key", nil, nil, ErrBadKey},
		{"unknown prefix", []byte{0xf0, 1}, nil, ErrUnknownKeyspace},
		{"cq short value", cqk, make([]byte, 27), ErrBadKey},
		{"cq key truncated", cqk[:len(cqk)-1], make([]byte, 28), ErrBadKey},
		{"cq topic length past key", []byte{PrefixCQ, 0xff, 0xff, 'a'}, make([]byte, 28), ErrBadKey},
		{"cq min long value", cqMinKey("T", 1), make([]byte, 9), ErrBadKey},
		{"journal key length", []byte{PrefixCQJournal, 0}, make([]byte, 8), ErrBadKey},
		{"journal queue truncated", journalKey(5), append(make([]byte, 8), 0, 1, 'x', 0), ErrBadKey},
		{"key index short value", appendKeyIndexKey(nil, "T", KindKey, "k", 9), make([]byte, 7), ErrBadKey},
		{"key bucket short value", keyBucketKey(1), make([]byte, 15), ErrBadKey},
		{"offset value", consumerOffsetKey("G", "T", 0), make([]byte, 4), ErrBadKey},
		{"offset key", []byte{PrefixConsumerOffset, 0, 1, 'G'}, make([]byte, 8), ErrBadKey},
		{"topic json", nameKey(PrefixTopicConfig, "T"), []byte("{"), ErrBadKey},
		{"group json", nameKey(PrefixGroupConfig, "G"), []byte("[]"), ErrBadKey},
		{"user json", nameKey(PrefixAuthUser, "u"), []byte(`{"username":1}`), ErrBadKey},
		{"acl json", nameKey(PrefixAuthACL, "User:u"), []byte(`{"policies":{}}`), ErrBadKey},
		{"group forbidden json", nameKey(PrefixGroupForbidden, "G"), []byte(`{"topics":{"T":"4"}}`), ErrBadKey},
		{"group forbidden version length", metaKey(metaForbidVer), make([]byte, 17), ErrBadKey},
		{"queue mapping json", nameKey(PrefixQueueMapping, "S"), []byte(`{"hostedQueues":[]}`), ErrBadKey},
		{"queue mapping version length", metaKey(metaMappingVer), make([]byte, 3), ErrBadKey},
		{"users version length", metaKey(metaUsersVer), make([]byte, 15), ErrBadKey},
		{"schema length", metaKey(metaSchema), []byte{1}, ErrBadKey},
		{"dispatched length", metaKey(metaDispatched), []byte{1}, ErrBadKey},
		{"version length", metaKey(metaTopicsVer), make([]byte, 8), ErrBadKey},
		{"txn half short value", txnKey(PrefixTxnHalf, 1), make([]byte, 27), ErrBadKey},
		{"txn half long value", txnKey(PrefixTxnHalf, 1), make([]byte, 29), ErrBadKey},
		{"txn half short key", txnKey(PrefixTxnHalf, 1)[:8], make([]byte, 28), ErrBadKey},
		{"txn half long key", append(txnKey(PrefixTxnHalf, 1), 0), make([]byte, 28), ErrBadKey},
		{"txn half bare prefix", []byte{PrefixTxnHalf}, make([]byte, 28), ErrBadKey},
		{"txn end short value", txnKey(PrefixTxnEnd, 1), make([]byte, 8), ErrBadKey},
		{"txn end long value", txnKey(PrefixTxnEnd, 1), make([]byte, 10), ErrBadKey},
		{"txn end short key", txnKey(PrefixTxnEnd, 1)[:8], make([]byte, 9), ErrBadKey},
		{"txn end long key", append(txnKey(PrefixTxnEnd, 1), 0), make([]byte, 9), ErrBadKey},
		{"txn end empty value", txnKey(PrefixTxnEnd, 1), nil, ErrBadKey},
		{"txn op empty value", txnKey(PrefixTxnOp, 1), nil, ErrBadKey},
		{"txn op long value", txnKey(PrefixTxnOp, 1), []byte{1, 1}, ErrBadKey},
		{"txn op value between the forms", txnKey(PrefixTxnOp, 1), make([]byte, 9), ErrBadKey},
		{"txn end value between the forms", txnKey(PrefixTxnEnd, 1), make([]byte, 16), ErrBadKey},
		{"txn end value past the forms", txnKey(PrefixTxnEnd, 1), make([]byte, 18), ErrBadKey},
		{"txn end naming no record", txnKey(PrefixTxnEnd, 1), make([]byte, 17), ErrBadKey},
		{"txn op naming no record", txnKey(PrefixTxnOp, 1), putInt64(-1), ErrBadKey},
		{"txn op short key", txnKey(PrefixTxnOp, 1)[:8], []byte{1}, ErrBadKey},
		{"txn op long key", append(txnKey(PrefixTxnOp, 1), 0), []byte{1}, ErrBadKey},
		{"txn op bare prefix", []byte{PrefixTxnOp}, []byte{1}, ErrBadKey},
		{"timer short value", timerKey(5, 1), make([]byte, 3), ErrBadKey},
		{"timer long value", timerKey(5, 1), make([]byte, 5), ErrBadKey},
		{"timer empty value", timerKey(5, 1), nil, ErrBadKey},
		{"timer short key", timerKey(5, 1)[:16], make([]byte, 4), ErrBadKey},
		{"timer long key", append(timerKey(5, 1), 0), make([]byte, 4), ErrBadKey},
		{"timer key without offset", timerKey(5, 1)[:9], make([]byte, 4), ErrBadKey},
		{"timer bare prefix", []byte{PrefixTimer}, make([]byte, 4), ErrBadKey},
	}
	for _, c := range cases {
		r, err := DecodeKey(c.key, c.value)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: record %v, error %v, want %v", c.name, r, err, c.want)
		}
	}
	r, err := DecodeKey(metaKey("future"), []byte{7})
	if err != nil || !reflect.DeepEqual(r, MetaRecord{Name: "future", Value: []byte{7}}) {
		t.Errorf("unknown meta name: %v %v", r, err)
	}
	if ks, ok := KeyspaceOf(0xf0); ok || ks.Name != "unknown-f0" {
		t.Errorf("KeyspaceOf(0xf0) = %v %v", ks, ok)
	}
}

// TagsCodeOf gives the delivery time of delay-level messages and the tag
// hash of the others, as the dispatcher stores them.
func TestTagsCodeOf(t *testing.T) {
	levels, err := meta.ParseDelayLevels(meta.DefaultMessageDelayLevel)
	if err != nil {
		t.Fatal(err)
	}
	m := commitlog.Message{Topic: meta.ScheduleTopic, StoreTimestamp: 1000, Properties: "DELAY\x013\x02TAGS\x01x\x02"}
	if got := TagsCodeOf(&m, levels); got != 1000+10_000 {
		t.Errorf("delay level 3: %d, want 11000", got)
	}
	m = commitlog.Message{Topic: "T", StoreTimestamp: 1000, Properties: "DELAY\x013\x02TAGS\x01TagA\x02"}
	if got := TagsCodeOf(&m, levels); got != commitlog.TagsCode("TagA") {
		t.Errorf("plain topic: %d", got)
	}
}

func TestKeyspaceStats(t *testing.T) {
	db := openTestDB(t) // writes meta "schema": key 7 bytes, value 4
	if err := db.ConsumerOffsets().Set("G", "T", 1, 5); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set([]byte{0xf9, 1, 2}, []byte("xy"), nil); err != nil {
		t.Fatal(err)
	}
	stats, err := db.KeyspaceStats()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]KeyspaceStat{}
	var names []string
	for _, s := range stats {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	var wantNames []string
	for _, k := range Keyspaces() {
		wantNames = append(wantNames, k.Name)
	}
	wantNames = append(wantNames, "unknown-f9")
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("keyspaces %v, want %v", names, wantNames)
	}
	// offset key: 1 + (2+1) + (2+1) + 4 = 11 bytes, value 8.
	for name, want := range map[string][3]int64{"meta": {1, 7, 4}, "consumer-offset": {1, 11, 8}, "unknown-f9": {1, 3, 2}, "cq": {0, 0, 0}} {
		s := byName[name]
		if got := [3]int64{s.Keys, s.KeyBytes, s.ValueBytes}; got != want {
			t.Errorf("%s: keys, key bytes, value bytes %v, want %v", name, got, want)
		}
	}
	if byName["unknown-f9"].Known || !byName["cq"].Known || !byName["cq"].Derivable || byName["meta"].Derivable {
		t.Errorf("known/derivable flags wrong: %+v", stats)
	}
}

// A read-only open fails with ErrLocked while a writer holds the database,
// keeps a writer out while it is open, and never creates or changes a file
// (nor does it in a checkpoint, which has no LOCK file).
func TestReadOnlyOpenLockingAndNoWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kvindex")
	w, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ConsumerOffsets().Set("G", "T", 0, 42); err != nil {
		t.Fatal(err)
	}
	before := testutil.TreeState(t, dir)
	_, err = Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open of a held database: %v, want ErrLocked", err)
	}
	// The refused open must not have released the writer's lock (POSIX
	// locks belong to the process): a second reader is refused too.
	if _, err = Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second read-only open of a held database: %v, want ErrLocked", err)
	}
	if after := testutil.TreeState(t, dir); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused open changed the directory:\n%v\n%v", before, after)
	}
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	if err := w.Checkpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, d := range []string{dir, ckpt} {
		before = testutil.TreeState(t, d)
		time.Sleep(10 * time.Millisecond) // let a changed mtime differ
		r, err := Open(Options{Dir: d, ReadOnly: true, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatalf("read-only open of %s: %v", d, err)
		}
		off, ok, err := r.ConsumerOffsets().Get("G", "T", 0)
		if err != nil || !ok || off != 42 {
			t.Errorf("%s: offset %d %v %v, want 42", d, off, ok, err)
		}
		r2, err := Open(Options{Dir: d, ReadOnly: true, Logger: zerolog.Nop()})
		if err != nil {
			t.Errorf("second reader: %v", err)
		} else {
			_ = r2.Close()
		}
		if after := testutil.TreeState(t, d); !reflect.DeepEqual(before, after) {
			t.Errorf("read-only open changed %s:\n%v\n%v", d, before, after)
		}
		if d == dir {
			// A broker cannot open the database while a reader holds it
			// (its failed attempt touches its own LOCK file, so this comes
			// after the comparison).
			if _, err := Open(Options{Dir: d, Logger: zerolog.Nop()}); !errors.Is(err, ErrLocked) {
				t.Errorf("writer open while a reader holds the database: %v, want ErrLocked", err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(ckpt, "LOCK")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open created a LOCK file in the checkpoint: %v", err)
	}
	// The database is writable again once the readers are gone.
	w, err = Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(cqKey("TopicA", 3, 9), appendCQValue(nil, 100, 200, -5, 1700000000000))
	f.Add(cqMinKey("T", 0), putInt64(4))
	f.Add(journalKey(0), append(binary.BigEndian.AppendUint64(nil, 99), 0, 1, 'T', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2))
	f.Add(appendKeyIndexKey(nil, "T", KindUniqKey, "U", 77), putInt64(5))
	f.Add(appendKeyIndexKey(nil, "T", KindKey, "k", 77), []byte{})
	f.Add(keyBucketKey(2), make([]byte, 16))
	f.Add(consumerOffsetKey("G", "T", 2), putInt64(6))
	f.Add(nameKey(PrefixTopicConfig, "T"), []byte(`{"topicName":"T","readQueueNums":4}`))
	f.Add(nameKey(PrefixGroupConfig, "G"), []byte(`{"groupName":"G"}`))
	f.Add(nameKey(PrefixGroupConfig, "G"), []byte(`{"groupName":"G","groupRetryPolicy":{"type":"EXPONENTIAL",`+
		`"exponentialRetryPolicy":{"initial":1000},"customizedRetryPolicy":{"next":[1,2]}},`+
		`"subscriptionDataSet":[{"topic":"T","expressionType":"TAG","expression":"*","version":1}]}`))
	f.Add(nameKey(PrefixAuthUser, "alice"), []byte(`{"username":"alice","password":"pw","userType":"Normal","userStatus":"enable"}`))
	f.Add(nameKey(PrefixGroupForbidden, "G"), []byte(`{"group":"G","topics":{"T":4}}`))
	f.Add(nameKey(PrefixQueueMapping, "S"), []byte(`{"bname":"a","epoch":1,"hostedQueues":{"0":[{"bname":"a","gen":0,"queueId":0}]},"topic":"S","totalQueues":1}`))
	f.Add(nameKey(PrefixAuthACL, "User:alice"), []byte(`{"subject":"User:alice","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:t*","actions":["Pub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}`))
	f.Add(metaKey(metaACLsVer), make([]byte, 16))
	f.Add(metaKey(metaDispatched), putInt64(8))
	f.Add(metaKey(metaGroupsVer), make([]byte, 16))
	f.Add(metaKey(metaCQWritten+LayoutKV), putInt64(8))
	f.Add(metaKey(metaCQWritten+LayoutFile), []byte{1, 2, 3})
	f.Add(metaKey(metaTopicDeleted+"T"), putInt64(9))
	f.Add(metaKey(metaDeletingTopic+"T"), []byte{})
	f.Add(metaKey(rebuildStartName(LayoutFile, QueueStart{Topic: "T.x", QueueID: 3})), putInt64(30))
	f.Add(metaKey(metaRebuildStart+"kv.-1.T"), putInt64(30))
	f.Add(txnKey(PrefixTxnHalf, 4096), encodeTxnHalf(TxnHalf{PhyOffset: 4096, QueueOffset: 7, StoreTimestamp: 1700000000000, NextCheckAt: 1700000060000, Checks: 2}))
	f.Add(txnKey(PrefixTxnEnd, 4096), encodeTxnEnd(TxnEnd{State: TxnRollback, At: 1700000000000}))
	f.Add(txnKey(PrefixTxnEnd, 0), encodeTxnEnd(TxnEnd{State: TxnCommit}))
	f.Add(txnKey(PrefixTxnOp, 1203), []byte{1})
	f.Add(txnKey(PrefixTxnEnd, 4096), encodeTxnEnd(TxnEnd{State: TxnCommit, At: 1700000000000, By: 8192}))
	f.Add(txnKey(PrefixTxnOp, 1203), putInt64(8192))
	f.Add(timerKey(1700000000000, 4096), []byte{0, 0, 1, 0})
	f.Add(timerKey(0, 1<<40), []byte{0xff, 0xff, 0xff, 0xff})
	rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: "C", QueueOffset: 5, Body: []byte("v"),
		Properties: "KEYS\x01k\x02", BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(compactedKey("C", 0, 5), rec)
	f.Add(compactKeyKey("C", 0, "k"), putInt64(5))
	f.Add(compactKeyKey("C", 0, "k"), restorePending)
	f.Add(compactExpiryKey(4096, "C", 0, 5), []byte("k"))
	f.Add(compactExpiryKey(4096, "C", 0, 6), []byte{})
	f.Add([]byte{0x7f}, []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := DecodeKey(key, value)
		if err != nil {
			if !errors.Is(err, ErrBadKey) && !errors.Is(err, ErrUnknownKeyspace) {
				t.Fatalf("error %v wraps neither ErrBadKey nor ErrUnknownKeyspace", err)
			}
			return
		}
		if r.Keyspace().Prefix != key[0] {
			t.Fatalf("key %x decoded into keyspace %v", key, r.Keyspace())
		}
		// The fixed-width transaction and timer records hold every byte
		// of their key and value: what decodes re-encodes to the same bytes.
		switch r := r.(type) {
		case TxnHalfRecord:
			if k, v := txnKey(PrefixTxnHalf, r.PhyOffset), encodeTxnHalf(r.TxnHalf); string(k) != string(key) || string(v) != string(value) {
				t.Fatalf("txn half %x=%x decoded as %+v, which encodes as %x=%x", key, value, r, k, v)
			}
		case TimerRecord:
			if k, v := timerKey(r.DeliverMs, r.PhyOffset), binary.BigEndian.AppendUint32(nil, uint32(r.Size)); string(k) != string(key) || string(v) != string(value) {
				t.Fatalf("timer %x=%x decoded as %+v, which encodes as %x=%x", key, value, r, k, v)
			}
		case CompactKeyRecord:
			v := putInt64(r.QueueOffset)
			if r.RestorePending {
				v = restorePending
			}
			if k := compactKeyKey(r.Topic, r.QueueID, r.Key); string(k) != string(key) || string(v) != string(value) {
				t.Fatalf("compaction key %x=%x decoded as %+v, which encodes as %x=%x", key, value, r, k, v)
			}
		case CompactExpiryRecord:
			if k := compactExpiryKey(r.PhyOffset, r.Topic, r.QueueID, r.QueueOffset); string(k) != string(key) || r.Key != string(value) {
				t.Fatalf("compaction expiry %x=%x decoded as %+v, which encodes as %x", key, value, r, k)
			}
		case CompactedRecord:
			if k := compactedKey(r.Topic, r.QueueID, r.QueueOffset); string(k) != string(key) || r.Size != len(value) {
				t.Fatalf("compacted %x decoded as %+v, which encodes as %x", key, r, k)
			}
		case TxnOpRecord:
			v := value[:min(len(value), 1)] // an index from before ops named their message: one byte, any
			if r.OpPhyOffset >= 0 {
				v = putInt64(r.OpPhyOffset)
			}
			if k := txnKey(PrefixTxnOp, r.HalfQueueOffset); string(k) != string(key) || string(v) != string(value) {
				t.Fatalf("txn op %x=%x decoded as %+v, which encodes as %x=%x", key, value, r, k, v)
			}
		case TxnEndRecord:
			_, e, err := decodeTxnEnd(key, value)
			if err != nil || r.State != e.State.String() || r.At != e.At || r.By != e.By {
				t.Fatalf("txn end %x=%x decoded as %+v, and as %+v %v by decodeTxnEnd", key, value, r, e, err)
			}
			if k, v := txnKey(PrefixTxnEnd, r.HalfPhyOffset), encodeTxnEnd(e); string(k) != string(key) || string(v) != string(value) {
				t.Fatalf("txn end %x=%x decoded as %+v, which encodes as %x=%x", key, value, r, k, v)
			}
		}
		_ = r.String()
	})
}
