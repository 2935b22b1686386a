package adminbody

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestQuoteBareKeys(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"currIdMap":{0:0,1:1},"list":[0,1]}`, `{"currIdMap":{"0":0,"1":1},"list":[0,1]}`},
		{`{ -3 : {7:[1,{2:"x"}]} }`, `{ "-3" : {"7":[1,{"2":"x"}]} }`},
		// Strings are not read as keys, escaped quotes included.
		{`{"a\"{1:2}":"{3:4}","b":5}`, `{"a\"{1:2}":"{3:4}","b":5}`},
		{`[1,2,{"k":3}]`, `[1,2,{"k":3}]`},
		{``, ``},
		{`{1`, `{"1"`},
	} {
		got := QuoteBareKeys([]byte(tc.in))
		if string(got) != tc.want {
			t.Errorf("QuoteBareKeys(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// A body without bare keys is returned as it is, not copied.
	in := []byte(`{"a":{"0":1}}`)
	if got := QuoteBareKeys(in); &got[0] != &in[0] {
		t.Error("a body without bare keys was copied")
	}
}

// FuzzQuoteBareKeys: arbitrary bytes never panic; JSON comes back as it
// was (it has no bare key), and the output only ever adds quotes.
func FuzzQuoteBareKeys(f *testing.F) {
	f.Add([]byte(`{"currIdMap":{0:0,1:1},"list":[0,1]}`))
	f.Add([]byte(`{"a\"{1:2}":"{3:4}"}`))
	f.Add([]byte(`[{1:[{2:3}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := QuoteBareKeys(data)
		if json.Valid(data) && !bytes.Equal(got, data) {
			t.Fatalf("valid JSON changed: %q -> %q", data, got)
		}
		if !bytes.Equal(bytes.ReplaceAll(got, []byte(`"`), nil), bytes.ReplaceAll(data, []byte(`"`), nil)) {
			t.Fatalf("more than quotes changed: %q -> %q", data, got)
		}
	})
}

// UnmarshalFastjson reads a body with bare integer keys, reads a plain
// one as json.Unmarshal does, and reports what is not JSON either way.
func TestUnmarshalFastjson(t *testing.T) {
	var m map[string]map[string]string
	if err := UnmarshalFastjson([]byte(`{"addrs":{0:"a",1:"b"}}`), &m); err != nil || m["addrs"]["0"] != "a" || m["addrs"]["1"] != "b" {
		t.Errorf("bare keys: %v, %v", m, err)
	}
	m = nil
	if err := UnmarshalFastjson([]byte(`{"addrs":{"0":"a"}}`), &m); err != nil || m["addrs"]["0"] != "a" {
		t.Errorf("quoted keys: %v, %v", m, err)
	}
	for _, bad := range []string{`{"addrs":{0:}}`, `{0`, `not json`} {
		if err := UnmarshalFastjson([]byte(bad), &m); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
