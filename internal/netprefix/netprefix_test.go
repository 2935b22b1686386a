package netprefix

import (
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":           "192.0.2.7/32",
		"10.1.2.3/8":          "10.0.0.0/8",
		"2001:db8::1":         "2001:db8::1/128",
		"2001:db8::1/32":      "2001:db8::/32",
		"::ffff:198.51.100.4": "198.51.100.4/32",
		"::ffff:10.0.0.0/104": "10.0.0.0/8",
		"::ffff:10.0.0.0/64":  "::/64",
	} {
		got, err := Parse(in)
		if err != nil || got != netip.MustParsePrefix(want) {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "lb.example", "10.1/8", "1.2.3.4/"} {
		if p, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, p)
		}
	}
}
