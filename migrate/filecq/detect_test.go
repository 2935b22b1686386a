package filecq

import (
	"os"
	"path/filepath"
	"testing"
)

// DetectUnitsPerFile reads the file size of a store's queues, skipping
// what is not a queue file, and reports false for a store without one.
func TestDetectUnitsPerFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok := DetectUnitsPerFile(nil, dir); ok {
		t.Fatal("detected units in a store without a consumequeue directory")
	}
	qdir := filepath.Join(dir, "consumequeue", "T", "0")
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(qdir, "notes.txt"), make([]byte, 40), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := DetectUnitsPerFile(nil, dir); ok {
		t.Fatal("detected units from a file that is not a queue file")
	}
	if err := os.WriteFile(filepath.Join(qdir, "00000000000000000000"), make([]byte, 10*UnitSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if units, ok := DetectUnitsPerFile(nil, dir); !ok || units != 10 {
		t.Fatalf("DetectUnitsPerFile = %d, %v; want 10", units, ok)
	}
}
