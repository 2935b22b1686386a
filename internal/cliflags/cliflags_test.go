package cliflags

import (
	"maps"
	"strings"
	"testing"
)

// --set adds keys without replacing those a dedicated flag set, the later
// of two sets of a key winning (the e2e harness sets brokerIP1 and a test
// sets it again), and refuses a set that is not key=value.
func TestAddSets(t *testing.T) {
	o := map[string]string{"listenPort": "1"}
	if err := AddSets([]string{"listenPort=2", "a=b=c", "empty=", "brokerIP1=127.0.0.1", "brokerIP1=127.0.0.2"}, o); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"listenPort": "1", "a": "b=c", "empty": "", "brokerIP1": "127.0.0.2"}; !maps.Equal(o, want) {
		t.Fatalf("overrides %v, want %v", o, want)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if err := AddSets([]string{bad}, map[string]string{}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("AddSets(%q) = %v, want an error quoting it", bad, err)
		}
	}
}

// --listen sets the bind address and the port; an empty host is every
// interface; a bad address is an error.
func TestAddListen(t *testing.T) {
	for _, tc := range []struct{ listen, host, port string }{
		{":8081", "0.0.0.0", "8081"},
		{"127.0.0.1:9876", "127.0.0.1", "9876"},
		{"[::1]:10911", "::1", "10911"},
	} {
		o := map[string]string{}
		if err := AddListen(tc.listen, "bind", "port", o); err != nil || o["bind"] != tc.host || o["port"] != tc.port {
			t.Errorf("AddListen(%q) = %v, %v; want %s and %s", tc.listen, o, err, tc.host, tc.port)
		}
	}
	if err := AddListen("8081", "bind", "port", map[string]string{}); err == nil {
		t.Error("AddListen of a port without a colon succeeded")
	}
}
