package configs

import (
	"strings"
	"testing"
)

// Every key is declared once per schema: as a field (its aliases
// included) or as an inert key, never twice. A second declaration would
// silently win over the first (the indexes keep the last), so the key's
// documented reason or default could be the wrong one.
func TestEveryKeyIsDeclaredOnce(t *testing.T) {
	checkDeclaredOnce(t, "broker", brokerSchema)
	checkDeclaredOnce(t, "namesrv", namesrvSchema)
	checkDeclaredOnce(t, "proxy", proxySchema)
}

func checkDeclaredOnce[T any](t *testing.T, name string, s *schema[T]) {
	t.Helper()
	seen := map[string]string{}
	declare := func(key, as string) {
		k := strings.ToLower(key)
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key %q declared as %s and again as %s", name, key, prev, as)
			return
		}
		seen[k] = as
	}
	for _, f := range s.fields {
		declare(f.key, "a field")
		for _, a := range f.aliases {
			declare(a, "an alias of "+f.key)
		}
	}
	for _, in := range s.inert {
		declare(in.key, "an inert key")
	}
}
