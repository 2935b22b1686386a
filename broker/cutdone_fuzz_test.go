package broker

import (
	"strings"
	"testing"
)

// isDecimal reports whether s is an optional sign and one or more ASCII
// digits.
func isDecimal(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// FuzzCutDone feeds arbitrary contents of the commitlog-cut file to the
// reader a slave's start consults before cutting its CommitLog: it never
// panics; it accepts only a decimal number with white space around it
// (a file holding anything more is refused, not taken for a cut, which
// would make a start skip the cut it was asked for); and every offset the
// broker writes there reads back as written.
func FuzzCutDone(f *testing.F) {
	f.Add(formatCutDone(53272), int64(53272))
	f.Add([]byte("12ab\n"), int64(0))
	f.Add([]byte(" +0042 \r\n"), int64(-1))
	f.Add([]byte("9223372036854775808"), int64(-9223372036854775808))
	f.Add([]byte("0x10"), int64(1<<62))
	f.Add([]byte("1_000"), int64(1))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, raw []byte, offset int64) {
		if got, err := parseCutDone(formatCutDone(offset)); err != nil || got != offset {
			t.Fatalf("cut at %d written as %q, read back as %d, %v", offset, formatCutDone(offset), got, err)
		}
		got, err := parseCutDone(raw)
		if err != nil {
			return
		}
		if s := strings.TrimSpace(string(raw)); !isDecimal(s) {
			t.Fatalf("%q read as the cut %d: not a decimal number", raw, got)
		}
		if again, err := parseCutDone(formatCutDone(got)); err != nil || again != got {
			t.Fatalf("%q read as %d, written back and read as %d, %v", raw, got, again, err)
		}
	})
}
