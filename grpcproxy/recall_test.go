package grpcproxy

import (
	"encoding/base64"
	"errors"
	"testing"
)

// A recall handle names its broker group in its third field; anything
// else is refused with errBadRecallHandle.
func TestRecallBroker(t *testing.T) {
	enc := func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name, handle, want string
	}{
		{"padded", enc("v1 Orders broker-a 1700000000000 0A0B0C"), "broker-a"},
		{"unpadded", base64.RawURLEncoding.EncodeToString([]byte("v1 Orders broker-b 1700000000000 0A0B0C")), "broker-b"},
		{"not base64", "%%%", ""},
		{"too few fields", enc("v1 Orders broker-a"), ""},
		{"other version", enc("v2 Orders broker-a 1700000000000 0A0B0C"), ""},
		{"empty broker", enc("v1 Orders  1700000000000 0A0B0C"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := recallBroker(tc.handle)
			if tc.want == "" {
				if !errors.Is(err, errBadRecallHandle) {
					t.Fatalf("recallBroker(%q) = %q, %v; want errBadRecallHandle", tc.handle, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("recallBroker(%q) = %q, %v; want %q", tc.handle, got, err, tc.want)
			}
		})
	}
}

// FuzzRecallBroker: any text a client sends as a recall handle is either
// refused or names a non-empty broker group; it never panics.
func FuzzRecallBroker(f *testing.F) {
	f.Add(base64.URLEncoding.EncodeToString([]byte("v1 Orders broker-a 1700000000000 0A0B0C")))
	f.Add("")
	f.Add("djEgICAg")
	f.Fuzz(func(t *testing.T, handle string) {
		b, err := recallBroker(handle)
		if err == nil && b == "" {
			t.Fatalf("recallBroker(%q) accepted a handle without a broker", handle)
		}
	})
}
