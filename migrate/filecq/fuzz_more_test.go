package filecq

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseNames feeds arbitrary directory entry names of a consumequeue
// tree to the parsers of file and queue directory names: they never
// panic, a file name is accepted exactly when it is 1-20 decimal digits
// of a non-negative int64 (as RocketMQ reads it), and a queue name
// exactly when it is the canonical decimal form of a non-negative int32.
func FuzzParseNames(f *testing.F) {
	f.Add(FileName(0))
	f.Add(FileName(6_000_000))
	f.Add("9223372036854775807")
	f.Add("9223372036854775808")
	f.Add("00000000000000000000x")
	f.Add("2147483647")
	f.Add("-1")
	f.Add("+1")
	f.Add("007")
	f.Fuzz(func(t *testing.T, name string) {
		off, ok := parseFileName(name)
		digits := name != "" && len(name) <= 20 && strings.Trim(name, "0123456789") == ""
		v, err := strconv.ParseInt(name, 10, 64)
		if want := digits && err == nil; ok != want || (ok && off != v) {
			t.Fatalf("parseFileName(%q) = %d, %v; want %d, %v", name, off, ok, v, want)
		}
		q, ok := parseQueueID(name)
		if ok && (q < 0 || strconv.Itoa(int(q)) != name) {
			t.Fatalf("parseQueueID(%q) = %d", name, q)
		}
		if !ok {
			if n, err := strconv.ParseInt(name, 10, 32); err == nil && n >= 0 && strconv.FormatInt(n, 10) == name {
				t.Fatalf("parseQueueID(%q) refused a queue id", name)
			}
		}
	})
}
