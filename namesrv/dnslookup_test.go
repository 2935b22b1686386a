package namesrv

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// fakeDNS is a Resolver answering from a table; a name it does not hold
// fails as an unknown name does.
func fakeDNS(table map[string][]string) Resolver {
	return func(_ context.Context, host string) ([]string, error) {
		if ips, ok := table[host]; ok {
			return ips, nil
		}
		return nil, errors.New("no such host " + host)
	}
}

// Each host of namesrvAddr stands for every address it resolves to, with
// its port; IP literals stand for themselves; one failure fails all.
func TestLookupNameServers(t *testing.T) {
	dns := fakeDNS(map[string][]string{
		"ns.example":    {"10.0.0.1", "10.0.0.2", "fd00::3"},
		"ns-b.example":  {"10.0.0.2", "10.0.0.4"},
		"empty.example": {},
	})
	for _, c := range []struct {
		addr string
		want []string
	}{
		{"ns.example:9876", []string{"10.0.0.1:9876", "10.0.0.2:9876", "[fd00::3]:9876"}},
		{"ns.example:9876;ns-b.example:9876", []string{"10.0.0.1:9876", "10.0.0.2:9876", "[fd00::3]:9876", "10.0.0.4:9876"}},
		{"ns-b.example:9877;10.0.0.9:9876;[::1]:9876", []string{"10.0.0.2:9877", "10.0.0.4:9877", "10.0.0.9:9876", "[::1]:9876"}},
	} {
		got, err := LookupNameServers(context.Background(), dns, c.addr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("LookupNameServers(%q) = %v, %v; want %v", c.addr, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "unknown.example:9876", "ns.example:9876;unknown.example:9876", "empty.example:9876", ":9876", "ns.example"} {
		if got, err := LookupNameServers(context.Background(), dns, bad); err == nil {
			t.Errorf("LookupNameServers(%q) = %v, want an error", bad, got)
		}
	}
}
