package kvindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/meta"
)

func TestTopicsPersistAndVersion(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	topics, err := db.Topics(2)
	if err != nil {
		t.Fatal(err)
	}
	v0 := topics.Version()
	a, b, c := meta.NewTopicConfig("A", 4), meta.NewTopicConfig("B", 8), meta.NewTopicConfig("C", 1)
	if err := topics.Put(a, b, c); err != nil {
		t.Fatal(err)
	}
	if v := topics.Version(); v.Counter != v0.Counter+1 {
		t.Fatalf("version %d after one put, want %d", v.Counter, v0.Counter+1)
	}
	got, ok, err := topics.Get("B")
	if err != nil || !ok || got.WriteQueueNums != 8 || got.Perm != 6 {
		t.Fatalf("get B: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := topics.Get("Z"); ok {
		t.Fatal("unknown topic found")
	}
	if err := topics.Delete("A"); err != nil {
		t.Fatal(err)
	}
	if n, _ := topics.Count(); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	before := topics.Version()
	if err := topics.Touch(); err != nil {
		t.Fatal(err)
	}
	ver := topics.Version()
	if ver.Counter != before.Counter+1 {
		t.Fatalf("version %d after Touch, want %d", ver.Counter, before.Counter+1)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2 := openDBAt(t, dir)
	topics2, err := db2.Topics(0)
	if err != nil {
		t.Fatal(err)
	}
	if v := topics2.Version(); v.Counter != ver.Counter {
		t.Fatalf("version after reopen %d, want %d", v.Counter, ver.Counter)
	}
	var names []string
	if err := topics2.Each(func(tc meta.TopicConfig) bool { names = append(names, tc.TopicName); return true }); err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "B" || names[1] != "C" {
		t.Fatalf("topics after reopen %v", names)
	}
	groups, err := db2.Groups(0)
	if err != nil {
		t.Fatal(err)
	}
	g := meta.NewSubscriptionGroupConfig("G")
	if err := groups.Put(g); err != nil {
		t.Fatal(err)
	}
	gg, ok, err := groups.Get("G")
	if err != nil || !ok || gg.RetryMaxTimes != 16 || gg.GroupRetryPolicy == nil {
		t.Fatalf("group %+v %v %v", gg, ok, err)
	}
}

func TestConsumerOffsets(t *testing.T) {
	db := openTestDB(t)
	o := db.ConsumerOffsets()
	if _, ok, err := o.Get("G", "T", 0); ok || err != nil {
		t.Fatalf("offset of a new group: %v %v", ok, err)
	}
	if err := o.SetMany([]OffsetUpdate{{"G", "T", 0, 10}, {"G", "T", 1, 20}, {"G", "U", 0, 5}, {"H", "T", 0, 7}}, true); err != nil {
		t.Fatal(err)
	}
	if off, ok, _ := o.Get("G", "T", 1); !ok || off != 20 {
		t.Fatalf("G/T/1 = %d %v", off, ok)
	}
	// Reads are cached: these make the deletions below replace what the
	// cache holds.
	if off, ok, _ := o.Get("G", "T", 0); !ok || off != 10 {
		t.Fatalf("G/T/0 = %d %v", off, ok)
	}
	if off, ok, _ := o.Get("G", "U", 0); !ok || off != 5 {
		t.Fatalf("G/U/0 = %d %v", off, ok)
	}
	var all []OffsetUpdate
	_ = o.Each("G", func(u OffsetUpdate) bool { all = append(all, u); return true })
	if len(all) != 3 {
		t.Fatalf("G has %d offsets, want 3: %v", len(all), all)
	}
	if err := o.DeleteGroupTopic("G", "T"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := o.Get("G", "T", 0); ok {
		t.Fatal("deleted offset still there")
	}
	if off, ok, _ := o.Get("G", "U", 0); !ok || off != 5 {
		t.Fatal("offset of another topic deleted")
	}
	if err := o.DeleteGroup("G"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := o.Get("G", "U", 0); ok {
		t.Fatal("offset of a deleted group still there")
	}
	if off, ok, _ := o.Get("H", "T", 0); !ok || off != 7 {
		t.Fatal("offset of another group deleted")
	}
	all = nil
	_ = o.Each("", func(u OffsetUpdate) bool { all = append(all, u); return true })
	if len(all) != 1 {
		t.Fatalf("%d offsets left, want 1", len(all))
	}
}

// TestConfigCacheRemembersAbsence checks that a name found absent is
// answered from the cache (a database write behind the table's back is not
// seen), and that Put and Delete through the table replace what the cache
// remembers, present or absent.
func TestConfigCacheRemembersAbsence(t *testing.T) {
	db := openDBAt(t, t.TempDir())
	topics, err := db.Topics(16)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := topics.Get("Late"); err != nil || ok {
		t.Fatalf("get absent: ok %v err %v", ok, err)
	}
	// Written around the table: the remembered absence answers.
	raw := []byte(`{"topicName":"Late","readQueueNums":2,"writeQueueNums":2,"perm":6}`)
	if err := db.pdb.Set(nameKey(prefixTopic, "Late"), raw, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := topics.Get("Late"); ok {
		t.Fatal("absence not cached: the second get read the database")
	}
	if err := topics.Put(meta.NewTopicConfig("Late", 4)); err != nil {
		t.Fatal(err)
	}
	if tc, ok, err := topics.Get("Late"); err != nil || !ok || tc.ReadQueueNums != 4 {
		t.Fatalf("after put: %+v %v %v", tc, ok, err)
	}
	if err := topics.Delete("Late"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := topics.Get("Late"); err != nil || ok {
		t.Fatalf("after delete: ok %v err %v", ok, err)
	}
}

// GetMany answers, for names in any order and with repeats, the stored
// configs among them, neighbours of other tables and prefixes left out,
// without touching the cache.
func TestGetMany(t *testing.T) {
	db := openDBAt(t, t.TempDir())
	topics, err := db.Topics(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(meta.NewTopicConfig("A", 1), meta.NewTopicConfig("AB", 2), meta.NewTopicConfig("C", 3), meta.NewTopicConfig("E", 5)); err != nil {
		t.Fatal(err)
	}
	groups, err := db.Groups(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := groups.Put(meta.NewSubscriptionGroupConfig("B")); err != nil {
		t.Fatal(err)
	}
	got, err := topics.GetMany([]string{"E", "B", "A", "A", "Z", "D", ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["A"].ReadQueueNums != 1 || got["E"].ReadQueueNums != 5 {
		t.Fatalf("GetMany: %+v, want A and E", got)
	}
	if got, err := topics.GetMany(nil); err != nil || len(got) != 0 {
		t.Fatalf("GetMany of nothing: %v %v", got, err)
	}
	if topics.cache.Contains("Z") || topics.cache.Contains("D") {
		t.Fatal("GetMany filled the cache")
	}
	// A stored config that does not decode is an error naming it.
	if err := db.pdb.Set(nameKey(prefixTopic, "Bad"), []byte("{"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := topics.GetMany([]string{"A", "Bad"}); err == nil || !strings.Contains(err.Error(), "Bad") {
		t.Fatalf("GetMany over an undecodable config: %v", err)
	}
}

// Replace leaves exactly the given configs, forgets the removed ones in
// its cache too, and keeps the version it is given across a reopen.
func TestReplaceTakesTheTableAndItsVersion(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	topics, err := db.Topics(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(meta.NewTopicConfig("A", 1), meta.NewTopicConfig("B", 2)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := topics.Get("A"); !ok { // cached
		t.Fatal("A missing")
	}
	theirs := meta.DataVersion{Counter: 41, Timestamp: 1733000000123}
	removed, err := topics.Replace([]meta.TopicConfig{meta.NewTopicConfig("B", 8), meta.NewTopicConfig("C", 1)}, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "A" {
		t.Fatalf("removed %v, want [A]", removed)
	}
	if _, ok, _ := topics.Get("A"); ok {
		t.Fatal("A still found after the replace")
	}
	if b, _, _ := topics.Get("B"); b.ReadQueueNums != 8 {
		t.Fatalf("B %+v", b)
	}
	if v := topics.Version(); v != theirs {
		t.Fatalf("version %+v, want %+v", v, theirs)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	topics2, err := openDBAt(t, dir).Topics(0)
	if err != nil {
		t.Fatal(err)
	}
	if v := topics2.Version(); v != theirs {
		t.Fatalf("version after reopen %+v, want %+v", v, theirs)
	}
	if n, _ := topics2.Count(); n != 2 {
		t.Fatalf("%d topics after reopen, want 2", n)
	}
}

// Replace commits the writes it is given with the table, in the same
// batch: a write that fails leaves the table and the record as they were.
func TestReplaceRecordsHowFarASlavesTopicsGo(t *testing.T) {
	db := openTestDB(t)
	topics, err := db.Topics(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(meta.NewTopicConfig("A", 1)); err != nil {
		t.Fatal(err)
	}
	failing := func(*pebble.Batch) error { return errors.New("no room") }
	theirs := meta.DataVersion{Counter: 7, Timestamp: 1733000000123}
	if _, err := topics.Replace([]meta.TopicConfig{meta.NewTopicConfig("B", 1)}, theirs, RecordSlaveTopicsAt(4096), failing); err == nil {
		t.Fatal("Replace with a failing write succeeded")
	}
	if _, ok, err := topics.Get("A"); err != nil || !ok {
		t.Fatalf("A gone after a failed Replace (%v)", err)
	}
	if at, ok, err := db.SlaveTopicsAt(); err != nil || ok {
		t.Fatalf("a failed Replace recorded the slave's topics at %d (%v)", at, err)
	}
	if _, err := topics.Replace([]meta.TopicConfig{meta.NewTopicConfig("B", 1)}, theirs, RecordSlaveTopicsAt(4096)); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := db.SlaveTopicsAt(); err != nil || !ok || at != 4096 {
		t.Fatalf("the slave's topics recorded at %d (%v, %v), want 4096", at, ok, err)
	}
	if err := db.ClearSlaveTopicsAt(); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := db.SlaveTopicsAt(); err != nil || ok {
		t.Fatalf("the slave's topics still recorded at %d after the clear (%v)", at, err)
	}
}

// ACL 2.0 users and access lists live in their own keyspaces, survive a
// reopen, and keep apart from each other and from the topics.
func TestAuthTablesPersist(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	users, err := db.Users(0)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := db.ACLs(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Put(meta.UserInfo{Username: "alice", Password: "pw", UserType: "Normal", UserStatus: "enable"}); err != nil {
		t.Fatal(err)
	}
	acl := meta.AclInfo{Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
		Entries: []meta.PolicyEntryInfo{{Resource: "Topic:t*", Actions: []string{"Pub"}, Decision: "Allow"}}}}}
	if err := acls.Put(acl); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDBAt(t, dir)
	users2, _ := db2.Users(0)
	acls2, _ := db2.ACLs(0)
	u, ok, err := users2.Get("alice")
	if err != nil || !ok || u.Password != "pw" || u.UserType != "Normal" {
		t.Fatalf("user after reopen %+v %v %v", u, ok, err)
	}
	a, ok, err := acls2.Get("User:alice")
	if err != nil || !ok || a.Policies[0].Entries[0].Resource != "Topic:t*" {
		t.Fatalf("acl after reopen %+v %v %v", a, ok, err)
	}
	if _, ok, _ := acls2.Get("alice"); ok {
		t.Fatal("a username found among the subjects")
	}
	if n, _ := users2.Count(); n != 1 {
		t.Fatalf("%d users, want 1", n)
	}
	topics, _ := db2.Topics(0)
	if n, _ := topics.Count(); n != 0 {
		t.Fatalf("%d topics, want none: the user keyspace leaked into the topics'", n)
	}
}

// All lists a table's configs in name order, and stops with the context.
func TestConfigTableAll(t *testing.T) {
	db := openDBAt(t, t.TempDir())
	topics, err := db.Topics(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(meta.NewTopicConfig("B", 1), meta.NewTopicConfig("A", 2)); err != nil {
		t.Fatal(err)
	}
	all, err := topics.All(context.Background())
	if err != nil || len(all) != 2 || all[0].TopicName != "A" || all[1].TopicName != "B" {
		t.Fatalf("All = %+v, %v", all, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := topics.All(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("All with a cancelled context: %v", err)
	}
}

// EachExcept hands, in name order, the configs whose names are not kept
// (a name that only starts like a kept one included).
func TestConfigTableEachExcept(t *testing.T) {
	db := openDBAt(t, t.TempDir())
	topics, err := db.Topics(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(meta.NewTopicConfig("B", 1), meta.NewTopicConfig("A", 2), meta.NewTopicConfig("AA", 3), meta.NewTopicConfig("C", 4)); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := topics.EachExcept(map[string]bool{"A": true, "C": true, "Z": true}, func(tc meta.TopicConfig) bool {
		got = append(got, fmt.Sprint(tc.TopicName, "/", tc.WriteQueueNums))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"AA/3", "B/1"}; !slices.Equal(got, want) {
		t.Errorf("EachExcept handed %v, want %v", got, want)
	}
}

// Page hands the configs at the asked positions in name order, and the
// whole table's count with them.
func TestConfigTablePage(t *testing.T) {
	db := openDBAt(t, t.TempDir())
	topics, err := db.Topics(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(meta.NewTopicConfig("D", 1), meta.NewTopicConfig("B", 1), meta.NewTopicConfig("A", 1), meta.NewTopicConfig("C", 1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, n int
		want    string
	}{{0, 2, "AB"}, {1, 2, "BC"}, {3, 5, "D"}, {4, 1, ""}, {9, 1, ""}, {0, 0, ""}, {2, -1, ""}} {
		var got string
		total, err := topics.Page(c.from, c.n, func(tc meta.TopicConfig) { got += tc.TopicName })
		if err != nil || total != 4 || got != c.want {
			t.Errorf("Page(%d, %d) = %q, total %d, %v; want %q, total 4", c.from, c.n, got, total, err, c.want)
		}
	}
}
