package filter

import (
	"errors"
	"strings"
)

// ErrTagSplit is returned by ParseTags for a TAG expression of "||"
// separators alone ("||", "||||"), which RocketMQ's
// FilterAPI.buildSubscriptionData refuses ("subString split error").
var ErrTagSplit = errors.New("subString split error (nothing but || separators)")

// ParseTags reads a TAG subscription expression ("TagA || TagB") the way
// RocketMQ's FilterAPI.buildSubscriptionData does, for the broker's
// filter and the clients' (PullAPIWrapper's) alike: all is true for
// exactly "" or "*" (" *" is the tag "*"); otherwise tags are the parts
// between "||", each trimmed as Java's String.trim trims (JavaTrim), the
// empty ones dropped. An expression whose tags are all empty (" || ")
// gives no tags; one of separators alone is ErrTagSplit.
func ParseTags(expr string) (tags []string, all bool, err error) {
	if expr == "" || expr == "*" {
		return nil, true, nil
	}
	parts := javaSplit(expr, "||")
	if len(parts) == 0 {
		return nil, false, ErrTagSplit
	}
	for _, t := range parts {
		if t = JavaTrim(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags, false, nil
}

// javaSplit is Java's String.split with a literal separator and no limit:
// s itself without a separator, else strings.Split without the empty
// strings at the end ("a||" is [a], "||a" is ["" a], "||" is none at all).
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	if len(parts) == 1 {
		return parts
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// JavaTrim is Java's String.trim: it strips the characters up to ' '
// (ASCII control characters and the space) from both ends, not the other
// Unicode spaces, such as U+3000 or U+00A0, that strings.TrimSpace strips.
func JavaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}
