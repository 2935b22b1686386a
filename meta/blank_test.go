package meta

import "testing"

// IsBlank is Java's StringUtils.isBlank: empty, or only characters
// Character.isWhitespace takes.
func TestIsBlank(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, " ": true, " \t\r\n\v\f": true, "\x1c\x1f": true, "\u3000\u2028\u2029\u2003": true,
		"x": false, " x ": false, "\u00a0": false, "\u2007": false, "\u202f": false, "\u0085": false, "\x00": false,
	} {
		if got := IsBlank(s); got != want {
			t.Errorf("IsBlank(%q) = %v, want %v", s, got, want)
		}
	}
}
