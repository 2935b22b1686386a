package uniqid

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"testing"
	"time"
)

// An id is 32 upper-case hex digits that carry the host's address, the
// pid, the milliseconds since the start of the month and a counter; ids of
// one generator differ.
func TestLayout(t *testing.T) {
	g := New([4]byte{10, 1, 2, 3})
	seen := map[string]bool{}
	for range 1000 {
		id := g.Next()
		if seen[id] {
			t.Fatalf("id %s repeated", id)
		}
		seen[id] = true
	}
	before := time.Now()
	id := g.Next()
	raw, err := hex.DecodeString(id)
	if err != nil || len(id) != 32 || id != hexUpper(raw) {
		t.Fatalf("id %q is not 32 upper-case hex digits (%v)", id, err)
	}
	if raw[0] != 10 || raw[1] != 1 || raw[2] != 2 || raw[3] != 3 {
		t.Fatalf("id %s: address %v", id, raw[:4])
	}
	if pid := binary.BigEndian.Uint16(raw[4:]); pid != uint16(os.Getpid()) {
		t.Fatalf("id %s: pid %d, want %d", id, pid, uint16(os.Getpid()))
	}
	monthStart := time.Date(before.Year(), before.Month(), 1, 0, 0, 0, 0, before.Location())
	at := monthStart.Add(time.Duration(binary.BigEndian.Uint32(raw[10:])) * time.Millisecond)
	if d := at.Sub(before); d < -time.Second || d > time.Minute {
		t.Fatalf("id %s: time part says %v, made at %v", id, at, before)
	}
	if c := binary.BigEndian.Uint16(raw[14:]); c != 1001 {
		t.Fatalf("id %s: counter %d, want 1001", id, c)
	}
}

func hexUpper(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
