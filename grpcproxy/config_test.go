package grpcproxy

import (
	"strings"
	"testing"
)

// New refuses name server addresses it could not dial, as the broker and
// the proxy's configuration key (namesrvAddr) do, with an error naming
// the key; it used to accept them, and every route request then failed.
func TestNewRefusesANameServerAddressThatIsNotHostPort(t *testing.T) {
	for _, addrs := range [][]string{
		nil,
		{"10.0.0.1"},
		{"10.0.0.1:9876", "10.0.0.2"},
		{"10.0.0.1:ninety"},
		{"10.0.0.1:0"},
		{"10.0.0.1:98760"},
		{"10.0.0.1:9876,10.0.0.2:9876"},
	} {
		cfg := DefaultConfig()
		cfg.NamesrvAddrs = addrs
		s, err := New(cfg)
		if err == nil {
			_ = s.Shutdown(t.Context())
			t.Errorf("name servers %q accepted", addrs)
			continue
		}
		if !strings.Contains(err.Error(), "namesrvAddr") {
			t.Errorf("name servers %q: error %v does not name namesrvAddr", addrs, err)
		}
	}
	cfg := DefaultConfig()
	cfg.NamesrvAddrs = []string{"127.0.0.1:9876", "[::1]:9876", "ns.example:9876"}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("good name servers refused: %v", err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
