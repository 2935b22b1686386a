package namesrv

import (
	"maps"
	"testing"
	"unicode/utf8"
)

// FuzzOrderTopicConfig feeds arbitrary REGISTER_BROKER answer bodies to
// the registrar's decoder: it never panics, and a table it accepts holds
// valid UTF-8 (the broker stores it as topic attributes) and comes back
// unchanged through the name server's own writer of the body; a table of
// one valid UTF-8 entry the name server writes decodes to that entry.
func FuzzOrderTopicConfig(f *testing.F) {
	f.Add(appendKVTableJSON(nil, map[string]string{"T": "broker-a:4", "U": "broker-a:4;broker-b:8"}), "T", "broker-a:4")
	f.Add(appendKVTableJSON(nil, nil), "", "")
	f.Add([]byte(`{"table":null}`), "\u2028\"", "<\x7f>")
	f.Add([]byte(`{"table":{"T":"broker-a:4"},"table":{"U":"x"}}`), "%RETRY%g", "a:1;b:2")
	f.Add([]byte(`{"TABLE":{"T":"\ud800"}}`), "\xff", "x")
	f.Add([]byte(`{"table":{"T":1}}`), "T", "")
	f.Add([]byte(`null`), "", "")
	f.Fuzz(func(t *testing.T, body []byte, topic, conf string) {
		if utf8.ValidString(topic) && utf8.ValidString(conf) {
			want := map[string]string{topic: conf}
			if got, err := decodeOrderTopicConfig(appendKVTableJSON(nil, want)); err != nil || !maps.Equal(got, want) {
				t.Fatalf("%q written and read back as %q, %v", want, got, err)
			}
		}
		table, err := decodeOrderTopicConfig(body)
		if err != nil {
			if table != nil {
				t.Fatalf("a table with the error %v", err)
			}
			return
		}
		for k, v := range table {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("decoded %q: invalid UTF-8 in %q: %q", body, k, v)
			}
		}
		again, err := decodeOrderTopicConfig(appendKVTableJSON(nil, table))
		if err != nil {
			t.Fatalf("decoded %q, but not its re-encoding: %v", body, err)
		}
		if !maps.Equal(table, again) {
			t.Fatalf("decoded %q as %q, its re-encoding as %q", body, table, again)
		}
	})
}

// FuzzDataVersion feeds arbitrary QUERY_DATA_VERSION answer bodies to the
// registrar's decoder: it never panics, a version it accepts comes back
// unchanged through the writer the broker and the name server use, and
// the fastjson form of a version decodes to that version.
func FuzzDataVersion(f *testing.F) {
	f.Add([]byte(`{"counter":2,"stateVersion":0,"timestamp":1700000000000}`), int64(2), int64(0), int64(1700000000000))
	f.Add([]byte(`{"counter":3,"timestamp":3}`), int64(-1), int64(1<<62), int64(0))
	f.Add([]byte(`{"counter":1.5}`), int64(0), int64(0), int64(0))
	f.Add([]byte(`{"counter":9223372036854775808}`), int64(-9223372036854775808), int64(0), int64(0))
	f.Add([]byte(`x`), int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, body []byte, counter, state, ts int64) {
		want := DataVersion{Counter: counter, StateVersion: state, Timestamp: ts}
		if got, err := decodeDataVersion(want.appendJSON(nil)); err != nil || got != want {
			t.Fatalf("%+v written and read back as %+v, %v", want, got, err)
		}
		v, err := decodeDataVersion(body)
		if err != nil {
			if v != (DataVersion{}) {
				t.Fatalf("a version %+v with the error %v", v, err)
			}
			return
		}
		if again, err := decodeDataVersion(v.appendJSON(nil)); err != nil || again != v {
			t.Fatalf("decoded %q as %+v, its re-encoding as %+v, %v", body, v, again, err)
		}
	})
}
