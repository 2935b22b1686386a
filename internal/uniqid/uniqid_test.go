package uniqid

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
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

// Parse reads back the address and time an id was made with, the month
// taken from now (the one before when the time would be at or after now),
// and refuses what is not an id.
func TestParse(t *testing.T) {
	made := time.Date(2026, 12, 5, 3, 4, 5, 678e6, time.Local)
	var raw [16]byte
	copy(raw[:], []byte{10, 1, 2, 3})
	binary.BigEndian.PutUint32(raw[10:], uint32(made.Sub(time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local)).Milliseconds()))
	id := hexUpper(raw[:])
	ip, at, err := Parse(id, made.Add(time.Hour))
	if err != nil || ip.String() != "10.1.2.3" || !at.Equal(made) {
		t.Fatalf("Parse(%s) = %v %v %v, want 10.1.2.3 %v", id, ip, at, err, made)
	}
	// The id holds no month: read on 10 January it is of January, on
	// 1 January (before the 5th came round) of December, and read at its
	// own time (not before now) of the month before.
	span := made.Sub(time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local))
	for _, c := range []struct{ now, want time.Time }{
		{time.Date(2027, 1, 10, 0, 0, 0, 0, time.Local), time.Date(2027, 1, 1, 0, 0, 0, 0, time.Local).Add(span)},
		{time.Date(2027, 1, 1, 1, 0, 0, 0, time.Local), made},
		{made, time.Date(2026, 11, 1, 0, 0, 0, 0, time.Local).Add(span)},
	} {
		if _, at, _ := Parse(id, c.now); !at.Equal(c.want) {
			t.Errorf("Parse(%s) at %v: made at %v, want %v", id, c.now, at, c.want)
		}
	}
	// An IPv6 host's id: 16 address bytes.
	var raw6 [28]byte
	raw6[0], raw6[1], raw6[15] = 0x20, 0x01, 1
	if ip, _, err := Parse(hexUpper(raw6[:]), made); err != nil || ip.String() != "2001::1" {
		t.Fatalf("IPv6 id: %v %v", ip, err)
	}
	for _, bad := range []string{"", "XYZ", id[:30], id + "00"} {
		if _, _, err := Parse(bad, made); !errors.Is(err, ErrBadID) {
			t.Errorf("Parse(%q): %v, want ErrBadID", bad, err)
		}
	}
}

// FuzzParse feeds arbitrary text to Parse, which reads ids carried in
// messages' UNIQ_KEY property: it never panics, what it accepts is 32 or
// 56 hex digits whose leading bytes are the address it returns, and an
// id whose span fits in a month was made before now.
func FuzzParse(f *testing.F) {
	f.Add("0A01020300002A9F3B1C000000000001")
	f.Add("20010DB8000000000000000000000001000000000000000000000000")
	f.Add("")
	f.Add("zz")
	now := time.Date(2026, 12, 5, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, id string) {
		ip, at, err := Parse(id, now)
		if err != nil {
			if !errors.Is(err, ErrBadID) {
				t.Fatalf("Parse(%q): %v, not ErrBadID", id, err)
			}
			return
		}
		raw, herr := hex.DecodeString(id)
		if herr != nil || (len(raw) != 16 && len(raw) != 28) {
			t.Fatalf("Parse accepted %q", id)
		}
		if got := ip.AsSlice(); string(got) != string(raw[:len(got)]) || (len(raw) == 28) != (len(got) == 16) {
			t.Fatalf("Parse(%q) address %v", id, ip)
		}
		// An id's time is within a month of now's month start, unless
		// its span is longer than a month (garbage, as RocketMQ reads it).
		if span := binary.BigEndian.Uint32(raw[len(raw)-6:]); time.Duration(span)*time.Millisecond < 28*24*time.Hour && !at.Before(now) {
			t.Fatalf("Parse(%q) made at %v, not before now %v", id, at, now)
		}
	})
}
