package commitlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A multi-dispatched message is written with its offset in each named
// queue, assigned under the append lock after its own, in the order of
// the names and with an empty slot for a name that is none.
func TestAppendMultiDispatch(t *testing.T) {
	cfg := testConfig(t, 4096)
	l := mustOpen(t, cfg)
	defer l.Close()
	c := newCounter()
	names := []string{"%LMQ%a", "", "%LMQ%b"}
	var got []string
	for i := range 3 {
		m := testMessage("Parent", 1, i, 900)
		m.Properties += PropertyMultiQueueOffset + "\x01stale\x02" // a client's own value is replaced
		r := mustAppend(t, l, AppendRequest{Message: m, Assigner: c, MultiDispatch: names[:1+2*min(i, 1)]})
		if r.QueueOffset != int64(i) {
			t.Fatalf("append %d: own queue offset %d", i, r.QueueOffset)
		}
	}
	for _, m := range scanAll(t, l) {
		v, _ := LookupProperty(m.Properties, PropertyMultiQueueOffset)
		got = append(got, v)
	}
	if want := []string{"0", "1,,0", "2,,1"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("%s values %q, want %q", PropertyMultiQueueOffset, got, want)
	}
	if c.next["%LMQ%a/0"] != 3 || c.next["%LMQ%b/0"] != 2 || c.next["/0"] != 0 {
		t.Fatalf("counters after the appends: %v", c.next)
	}
	for name, req := range map[string]AppendRequest{
		"batch":       {Batch: []*Message{testMessage("P", 0, 0, 10), testMessage("P", 0, 1, 10)}, Assigner: c, MultiDispatch: names},
		"no assigner": {Message: testMessage("P", 0, 0, 10), MultiDispatch: names},
	} {
		if _, err := l.Append(context.Background(), req); !errors.Is(err, ErrInvalidAppend) {
			t.Errorf("%s with multi-dispatch: %v, want ErrInvalidAppend", name, err)
		}
	}
	// A message too large with the offsets' room is refused before any
	// offset is assigned.
	big := testMessage("P", 0, 0, 10)
	big.Properties = "K\x01" + strings.Repeat("v", 32767-40) + "\x02"
	before := c.calls
	if _, err := l.Append(context.Background(), AppendRequest{Message: big, Assigner: c, MultiDispatch: names}); !errors.Is(err, ErrPropertiesTooLarge) {
		t.Fatalf("oversized properties with multi-dispatch: %v", err)
	}
	if c.calls != before {
		t.Fatalf("a refused multi-dispatch assigned %d offsets", c.calls-before)
	}
}

// MultiDispatched pairs each name with the offset at its place, -1 where
// there is none or it is no offset; without both properties it yields
// nothing.
func TestMultiDispatched(t *testing.T) {
	props := func(names, offsets string) string {
		return RewriteProperties("", nil, [2]string{PropertyMultiDispatch, names}, [2]string{PropertyMultiQueueOffset, offsets})
	}
	for _, tc := range []struct {
		props string
		want  string
	}{
		{props("%LMQ%a,x,%LMQ%b,%LMQ%c,%LMQ%d", "3,,-2,zz"), "%LMQ%a=3 x=-1 %LMQ%b=-1 %LMQ%c=-1 %LMQ%d=-1"},
		{props("%LMQ%a", "0,9"), "%LMQ%a=0"},
		{PropertyMultiDispatch + "\x01%LMQ%a\x02", ""},
		{PropertyMultiQueueOffset + "\x010\x02", ""},
	} {
		var got []string
		for name, off := range MultiDispatched(tc.props) {
			got = append(got, fmt.Sprintf("%s=%d", name, off))
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("MultiDispatched(%q) = %q, want %q", tc.props, s, tc.want)
		}
	}
}
