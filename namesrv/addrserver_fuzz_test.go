package namesrv

import (
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/configs"
)

// FuzzAddressServerAnswer reads arbitrary address-server answers as
// Fetch and FetchList do (firstLine, then ParseAddressList): no panic, a
// first line without '\r' (Java's clearNewLine cuts at the first '\r' if
// there is one, else at the first '\n', so "a\n\r" keeps its '\n'), and a
// list that is either refused or addresses namesrvAddr would take, each
// once.
func FuzzAddressServerAnswer(f *testing.F) {
	for _, s := range []string{"10.0.0.1:9876;10.0.0.2:9876\n", " \t a:1 ; a:1 ;\r\nb:2", "<html>", "", ";;", "[::1]:9876", "h:0", "\x00\xff:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		line := firstLine(body)
		if strings.Contains(line, "\r") {
			t.Fatalf("first line %q of %q holds a carriage return", line, body)
		}
		addrs, err := ParseAddressList(line)
		if err != nil {
			return
		}
		if len(addrs) == 0 {
			t.Fatalf("%q parsed to no address and no error", line)
		}
		if err := configs.CheckNameServerAddrs(addrs); err != nil {
			t.Fatalf("%q parsed to %q, which namesrvAddr refuses: %v", line, addrs, err)
		}
		for i, a := range addrs {
			if slices.Contains(addrs[i+1:], a) {
				t.Fatalf("%q parsed to %q, %q twice", line, addrs, a)
			}
		}
	})
}
