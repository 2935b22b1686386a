package adminbody

import (
	"maps"
	"testing"
)

func TestDecodeKVTable(t *testing.T) {
	for _, tc := range []struct {
		body string
		want map[string]string
		bad  bool
	}{
		{`{"table":{"commitLogMaxOffset":"4096","brokerVersion":"481"}}`, map[string]string{"commitLogMaxOffset": "4096", "brokerVersion": "481"}, false},
		{`{"table":null}`, nil, false},
		{`{}`, nil, false},
		{`{"table":{"a":1}}`, nil, true},
		{`[`, nil, true},
	} {
		got, err := DecodeKVTable([]byte(tc.body))
		if (err != nil) != tc.bad || !maps.Equal(got, tc.want) {
			t.Errorf("DecodeKVTable(%s) = %v, %v; want %v (error %v)", tc.body, got, err, tc.want, tc.bad)
		}
	}
}

// FuzzDecodeKVTable: arbitrary bytes from a broker or a name server never
// panic the decoder, and an error comes without a table.
func FuzzDecodeKVTable(f *testing.F) {
	f.Add([]byte(`{"table":{"commitLogMaxOffset":"4096"}}`))
	f.Add([]byte(`{"table":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		table, err := DecodeKVTable(body)
		if err != nil && table != nil {
			t.Fatalf("an error (%v) with a table %v", err, table)
		}
	})
}
