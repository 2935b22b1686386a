package auth

import "testing"

// A policy resource with a leading '*' that does not end in '*'
// ("Topic:*-prod") is RocketMQ's LITERAL "*-prod" (Resource.of: ANY only
// for exactly "*", PREFIXED only when it ends with '*'); it was read as
// "Topic:*", an Allow entry for it allowing every topic.
func TestALeadingStarIsALiteralCharacter(t *testing.T) {
	r, err := ParseResource("Topic:*-prod")
	if err != nil {
		t.Fatal(err)
	}
	if r.Matches(Topic("payments")) || !r.Matches(Topic("*-prod")) {
		t.Fatalf("Topic:*-prod parsed as %s (pattern %d): matches Topic:payments %v, Topic:*-prod %v",
			r.Key(), r.Pattern, r.Matches(Topic("payments")), r.Matches(Topic("*-prod")))
	}
	// One that ends in '*' is the prefix before its first '*'
	// (Resource.of: substringBefore), not before its last.
	if p, err := ParseResource("Topic:a*b*"); err != nil || p.Pattern != PatternPrefixed || p.Name != "a" {
		t.Fatalf("Topic:a*b* parsed as %+v, %v; want the prefix a", p, err)
	}
}
