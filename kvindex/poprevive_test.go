package kvindex

import (
	"errors"
	"testing"
)

// An intent keeps every field of the checkpoint its message was in, and
// DecodeKey shows it.
func TestReviveIntentStored(t *testing.T) {
	db := openTestDB(t)
	ck := Checkpoint{Group: "g", Topic: "%RETRY%g_T", QueueID: 2, CKOffset: 40, PopTime: 1_700_000_000_000,
		InvisibleTime: 60_000, RetryFlag: 1, Attempts: 3, Offsets: []int64{41, 43}}
	b := db.Pop().NewBatch()
	defer b.Close()
	want := []ReviveIntent{IntentOf(&ck, 41), IntentOf(&ck, 43)}
	for i := range want {
		if err := b.PutReviveIntent(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	var got []ReviveIntent
	if err := db.Pop().ReviveIntents(func(r ReviveIntent) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("intents %+v, want %+v", got, want)
	}
	back := got[1].Checkpoint()
	if back.CKOffset != 40 || back.PopTime != ck.PopTime || back.InvisibleTime != 60_000 || back.RetryFlag != 1 ||
		back.Attempts != 3 || len(back.Offsets) != 1 || back.Offsets[0] != 43 {
		t.Fatalf("checkpoint of the intent %+v", back)
	}
	if ok, err := db.Pop().ReviveIntentExists(&want[0]); err != nil || !ok {
		t.Fatalf("intent exists: %v %v", ok, err)
	}
	rec, err := DecodeKey(reviveKey(nil, &want[0]), popInFlightValue(nil, &want[0].InFlight))
	if r, ok := rec.(PopReviveRecord); err != nil || !ok || r.ReviveIntent != want[0] {
		t.Fatalf("DecodeKey: %#v %v", rec, err)
	}
	d := db.Pop().NewBatch()
	defer d.Close()
	if err := d.DeleteReviveIntent(&want[0]); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(true); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.Pop().ReviveIntentExists(&want[0]); err != nil || ok {
		t.Fatalf("deleted intent exists: %v %v", ok, err)
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
