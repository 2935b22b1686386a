package kvindex

import (
	"strings"
	"testing"
	"unsafe"
)

// TestTopicNamesShareOneCopy checks that equal names come back as one
// string, and that the table empties itself at its bound instead of
// growing.
func TestTopicNamesShareOneCopy(t *testing.T) {
	n := newTopicNames(3)
	a := n.intern(strings.Clone("TopicA"))
	b := n.intern(strings.Clone("TopicA"))
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("equal names interned as two copies")
	}
	n.intern("B")
	n.intern("C")
	if len(n.m) != 3 {
		t.Fatalf("%d names, want 3", len(n.m))
	}
	n.intern("D")
	if len(n.m) != 1 {
		t.Fatalf("%d names after passing the bound, want 1 (cleared, then D)", len(n.m))
	}
	if got := n.intern(strings.Clone("TopicA")); unsafe.StringData(got) == unsafe.StringData(a) {
		t.Fatal("a cleared table still returned the old copy")
	}
}
