package filter

import (
	"errors"
	"slices"
	"testing"
)

// TestParseTags checks ParseTags against RocketMQ's
// FilterAPI.buildSubscriptionData: "" and "*" alone take everything, tags
// split on "||" and trimmed as Java trims, empty ones dropped, separators
// alone refused.
func TestParseTags(t *testing.T) {
	tests := []struct {
		expr    string
		tags    []string
		all     bool
		wantErr bool
	}{
		{"", nil, true, false},
		{"*", nil, true, false},
		{" *", []string{"*"}, false, false},
		{"TagA", []string{"TagA"}, false, false},
		{"TagA || TagB", []string{"TagA", "TagB"}, false, false},
		{"TagA||TagB||", []string{"TagA", "TagB"}, false, false},
		{"||TagA", []string{"TagA"}, false, false},
		{"TagA |||| TagB", []string{"TagA", "TagB"}, false, false},
		{" || ", nil, false, false},
		{"\u00a0TagA || \u3000TagB\t", []string{"\u00a0TagA", "\u3000TagB"}, false, false},
		{"TagA | TagB", []string{"TagA | TagB"}, false, false},
		{"||", nil, false, true},
		{"||||", nil, false, true},
	}
	for _, tc := range tests {
		tags, all, err := ParseTags(tc.expr)
		if tc.wantErr {
			if !errors.Is(err, ErrTagSplit) {
				t.Errorf("ParseTags(%q): error %v, want ErrTagSplit", tc.expr, err)
			}
			continue
		}
		if err != nil || all != tc.all || !slices.Equal(tags, tc.tags) {
			t.Errorf("ParseTags(%q) = %q, %v, %v; want %q, %v", tc.expr, tags, all, err, tc.tags, tc.all)
		}
	}
}
