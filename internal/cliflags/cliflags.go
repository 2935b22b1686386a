// Package cliflags turns the command-line flags the binaries share into
// configuration overrides: --set key=value and a --listen address.
package cliflags

import (
	"fmt"
	"net"
	"strings"
)

// AddSets adds each "key=value" of sets to overrides: a key already there
// is left alone (a dedicated flag wins over --set), and of two sets of one
// key the later wins. A set without '=' or with an empty key is an error
// quoting it.
func AddSets(sets []string, overrides map[string]string) error {
	fromSets := map[string]bool{}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
		if _, flag := overrides[k]; flag && !fromSets[k] {
			continue
		}
		overrides[k], fromSets[k] = v, true
	}
	return nil
}

// AddListen splits a --listen address into the bind address key (0.0.0.0
// when the host is empty, as in ":9876") and the port key.
func AddListen(listen, bindKey, portKey string, overrides map[string]string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	overrides[bindKey], overrides[portKey] = host, port
	return nil
}
