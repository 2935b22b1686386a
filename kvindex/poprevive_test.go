package kvindex

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
)

// A revive batch keeps every field of the checkpoint its messages were
// in and its floors; ReviveIntents and CountReviveIntents see its messages
// one by one beside an earlier version's intents, and DecodeKey shows it.
func TestReviveBatchStored(t *testing.T) {
	db := openTestDB(t)
	ck := Checkpoint{Group: "g", Topic: "%RETRY%g_T", QueueID: 2, CKOffset: 40, PopTime: 1_700_000_000_000,
		VisibleAt: 1_700_000_060_000, InvisibleTime: 60_000, RetryFlag: 1, Attempts: 3, Offsets: []int64{41, 43}}
	want := ReviveBatch{Checkpoint: ck, Floors: ReviveFloors{RetryV1: 5, RetryV2: 0, DLQ: 1 << 40}}
	// Another part of the same checkpoint, given back and revived again.
	again := want
	again.Offsets = []int64{44}
	legacy := IntentOf(&Checkpoint{Group: "a", Topic: "T", CKOffset: 1, PopTime: 2, Offsets: []int64{1}}, 1)
	if db.legacyIntents.Load() {
		t.Fatal("a new store expects intents of an earlier version")
	}
	b := db.Pop().NewBatch()
	defer b.Close()
	for _, r := range []*ReviveBatch{&want, &again} {
		if err := b.PutReviveBatch(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutReviveIntent(&legacy); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	var got []ReviveBatch
	if err := db.Pop().ReviveBatches(func(r ReviveBatch) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], want) || !reflect.DeepEqual(got[1], again) {
		t.Fatalf("batches %+v, want %+v and %+v", got, want, again)
	}
	var intents []ReviveIntent
	if err := db.Pop().ReviveIntents(func(r ReviveIntent) bool { intents = append(intents, r); return true }); err != nil {
		t.Fatal(err)
	}
	in43 := IntentOf(&ck, 43)
	if len(intents) != 4 || intents[0] != legacy || intents[2] != in43 || intents[3].QueueOffset != 44 {
		t.Fatalf("intents %+v", intents)
	}
	if back := in43.Checkpoint(); back.CKOffset != 40 || back.PopTime != ck.PopTime || back.InvisibleTime != 60_000 ||
		back.RetryFlag != 1 || back.Attempts != 3 || !reflect.DeepEqual(back.Offsets, []int64{43}) {
		t.Fatalf("checkpoint of an intent %+v", back)
	}
	rec, err := DecodeKey(reviveBatchKey(nil, &want), reviveBatchValue(nil, &want))
	if r, ok := rec.(PopReviveBatchRecord); err != nil || !ok || !reflect.DeepEqual(r.ReviveBatch, want) {
		t.Fatalf("DecodeKey: %#v %v", rec, err)
	}
	d := db.Pop().NewBatch()
	defer d.Close()
	if err := d.DeleteReviveBatch(&want); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteReviveIntent(&legacy); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(true); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Pop().CountReviveIntents(); err != nil || n != 1 {
		t.Fatalf("%d messages reviving after deleting a batch and the intent, want 1 (%v)", n, err)
	}
}

// A store opened with intents of an earlier version in keyspace 0x57 has
// the dispatcher delete those its put messages name, until the POP service
// says they are gone.
func TestLegacyIntentsDeletedByTheDispatcher(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	in := IntentOf(&Checkpoint{Group: "g", Topic: "T", CKOffset: 1, PopTime: 2, Offsets: []int64{1}}, 1)
	b := db.Pop().NewBatch()
	if err := b.PutReviveIntent(&in); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDBAt(t, dir)
	if !db.legacyIntents.Load() {
		t.Fatal("a store with 0x57 intents does not expect them")
	}
	put := &commitlog.Message{Topic: "%RETRY%g_T", Properties: PropertyRevivedFrom + "\x01" + in.PropertyValue() + "\x02"}
	w := db.pdb.NewBatch()
	if err := dispatchRevived(db, w, put); err != nil {
		t.Fatal(err)
	}
	if w.Count() != 1 {
		t.Fatalf("the dispatch batch holds %d writes, want the intent's deletion", w.Count())
	}
	db.Pop().LegacyReviveIntentsDone()
	w = db.pdb.NewBatch()
	if err := dispatchRevived(db, w, put); err != nil || w.Count() != 0 {
		t.Fatalf("after LegacyReviveIntentsDone the dispatch batch holds %d writes (%v), want none", w.Count(), err)
	}
}

// The property value names an intent's key fields and parses back; what
// is not of its form is refused.
func TestParseRevivedFrom(t *testing.T) {
	in := ReviveIntent{InFlight{Group: "g/1", Topic: "%RETRY%g/1_T", QueueID: 3, QueueOffset: 1 << 40}}
	v := in.PropertyValue()
	if v != "3/1099511627776/3/g/1%RETRY%g/1_T" {
		t.Fatalf("property value %q", v)
	}
	got, err := ParseRevivedFrom(v)
	if err != nil || got != in {
		t.Fatalf("parsed %+v %v, want %+v", got, err, in)
	}
	for _, bad := range []string{"", "3/4/1", "x/4/1/gT", "3/x/1/gT", "3/4/x/gT", "3/4/0/gT", "3/4/2/gT", "3/4/9/gT", "3/-4/1/gT",
		"99999999999/4/1/gT"} {
		if _, err := ParseRevivedFrom(bad); !errors.Is(err, errBadRevivedFrom) {
			t.Errorf("ParseRevivedFrom(%q) = %v, want errBadRevivedFrom", bad, err)
		}
	}
}

// ParseRevivedFrom reads the property of any record a dispatcher meets:
// it never panics, and what it accepts is an intent's value.
func FuzzParseRevivedFrom(f *testing.F) {
	f.Add("3/1099511627776/3/g/1%RETRY%g/1_T")
	f.Add("0/0/1/gT")
	f.Add("1/2/3")
	f.Fuzz(func(t *testing.T, v string) {
		in, err := ParseRevivedFrom(v)
		if err != nil {
			return
		}
		if again, err := ParseRevivedFrom(in.PropertyValue()); err != nil || again != in {
			t.Fatalf("%q parsed to %+v, whose value %q parses to %+v %v", v, in, in.PropertyValue(), again, err)
		}
	})
}

// AppendShown leaves PropertyRevivedFrom out of a record of a retry topic
// or a dead-letter queue, every other byte as stored, and appends any
// other record as stored.
func TestAppendShown(t *testing.T) {
	const from = PropertyRevivedFrom + "\x010/0/1/gT\x02"
	encode := func(topic, props string) []byte {
		rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: topic, PhyOffset: 99, QueueOffset: 3, Body: []byte("b"), Properties: props})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	for _, topic := range []string{"%DLQ%g", "%RETRY%g_T", "%RETRY%g"} {
		got := AppendShown([]byte("x"), encode(topic, "UNIQ_KEY\x01U\x02"+from+"TAGS\x01t\x02"))
		if string(got[:1]) != "x" {
			t.Fatalf("%s: dst's bytes overwritten", topic)
		}
		if want := encode(topic, "UNIQ_KEY\x01U\x02TAGS\x01t\x02"); string(got[1:]) != string(want) {
			t.Errorf("%s: shown %q, want %q", topic, got[1:], want)
		}
	}
	for _, rec := range [][]byte{
		encode("Orders", from),                                   // no revive puts there: a client's own property
		encode("%DLQ%g", "UNIQ_KEY\x01U\x02"),                    // nothing to leave out
		encode("%DLQ%g", "X\x01"+PropertyRevivedFrom+"\x01\x02"), // in a value only
		[]byte("not a record"),
	} {
		if got := AppendShown(nil, rec); string(got) != string(rec) {
			t.Errorf("shown %q, want the record as stored %q", got, rec)
		}
	}
}
