package testutil

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a loopback port nothing listens on now (another
// process may take it before the test binds it: a test that must not
// flake binds port 0 instead when it can).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreePortPair returns a loopback port that is free with the next one
// free too: a controller peer's raft port and a broker's HA port are the
// next after its own.
func FreePortPair(t testing.TB) int {
	t.Helper()
	for range 50 {
		port := FreePort(t)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatal("find a free pair of loopback ports: none in 50 tries")
	return 0
}
