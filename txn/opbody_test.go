package txn

import (
	"slices"
	"strings"
	"testing"
)

func TestOpOffsets(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []int64
	}{
		{"", nil},
		{"12,", []int64{12}},                       // what RocketMQ writes for one half
		{"12,13,40,", []int64{12, 13, 40}},         // several halves in one op message
		{"7", []int64{7}},                          // no comma after the last
		{" 5 ,6,", []int64{6}},                     // Long.parseLong does not trim
		{"x,-3,9223372036854775808,8", []int64{8}}, // foreign, negative, past int64
		{",,,", nil},
	} {
		if got := opOffsets([]byte(tc.body)); !slices.Equal(got, tc.want) {
			t.Errorf("opOffsets(%q) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// FuzzOpOffsets: any body (op messages come from a store on disk) decodes
// without a panic into non-negative offsets, one for each field of 1-18
// ASCII digits at least and one for each field at most.
func FuzzOpOffsets(f *testing.F) {
	for _, s := range []string{"", "12,", "1,2,3,", "x,-1,", "\x00,\xff", "99999999999999999999,", "+4, 007"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fields := strings.Split(string(body), ",")
		digits := 0
		for _, fl := range fields {
			if len(fl) >= 1 && len(fl) <= 18 && strings.Trim(fl, "0123456789") == "" {
				digits++
			}
		}
		offs := opOffsets(body)
		if len(offs) < digits || len(offs) > len(fields) {
			t.Fatalf("%d offsets from %q: %d fields, %d of them plain numbers", len(offs), body, len(fields), digits)
		}
		for _, off := range offs {
			if off < 0 {
				t.Fatalf("negative offset %d from %q", off, body)
			}
		}
	})
}
