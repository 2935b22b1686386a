package configs

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// The trusted networks take prefixes and single addresses of both
// families, normalized, and report them back in a form they accept.
func TestProxyProtocolKeys(t *testing.T) {
	got, err := LoadBroker(testutil.WriteFile(t, "b.conf",
		"proxyProtocolEnable=false\nproxyProtocolTrustedNetworks= 10.1.2.3/8, 192.0.2.7 ,2001:db8::/32,::ffff:198.51.100.4\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("198.51.100.4/32")}
	pp := got.Broker.ProxyProtocol
	if pp.Enable || !slices.Equal(pp.TrustedNetworks, want) {
		t.Fatalf("loaded %+v, want disabled with %v", pp, want)
	}
	report := got.Broker.Settings()["proxyProtocolTrustedNetworks"]
	if report != "10.0.0.0/8,192.0.2.7/32,2001:db8::/32,198.51.100.4/32" {
		t.Fatalf("reported as %q", report)
	}
	again, err := LoadBroker("", map[string]string{"proxyProtocolTrustedNetworks": report})
	if err != nil || !slices.Equal(again.Broker.ProxyProtocol.TrustedNetworks, want) {
		t.Fatalf("the report read back: %v %v", again.Broker.ProxyProtocol, err)
	}

	def := DefaultBroker()
	if !def.ProxyProtocol.Enable || def.ProxyProtocol.TrustedNetworks != nil || def.BindAddress != "0.0.0.0" {
		t.Fatalf("defaults: %+v, bindAddress %q", def.ProxyProtocol, def.BindAddress)
	}
	n := DefaultNamesrv()
	if !n.ProxyProtocol.Enable || n.ProxyProtocol.TrustedNetworks != nil {
		t.Fatalf("name server defaults: %+v", n.ProxyProtocol)
	}
}
