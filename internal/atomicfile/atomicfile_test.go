package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteFileReplacesWholeFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kv.json")
	for i, content := range []string{"first", "second, longer than the first", "3"} {
		perm := os.FileMode(0o600)
		if i == 1 {
			perm = 0o640
		}
		if err := WriteFile(p, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("write %d: read %q %v, want %q", i, got, err, content)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != perm {
			t.Fatalf("write %d: mode %v, want %v", i, fi.Mode().Perm(), perm)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want the one written (no temporary left)", len(entries))
	}
}

// A write that cannot happen says where and leaves the old file alone.
func TestWriteFileFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "missing", "kv.json"), []byte("x"), 0o644); err == nil ||
		!strings.Contains(err.Error(), "temporary file beside") {
		t.Fatalf("write into a missing directory: %v", err)
	}
	p := filepath.Join(dir, "kv.json")
	if err := WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The path is now a directory's name: the rename fails.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "inside"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o644); err == nil || !strings.Contains(err.Error(), "replace") {
		t.Fatalf("replace a non-empty directory: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(p, "inside")); string(got) != "keep" {
		t.Fatal("a failed write changed what was there")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries after a failed write, want no temporary left", len(entries))
	}
}

// A write removes the temporaries of its file that crashed writes left
// (old ones), not one a write in flight may own (young), nor another
// file's.
func TestWriteFileRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{".kv.json.tmp-111", ".kv.json.tmp-222", ".other.json.tmp-333"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if name != ".kv.json.tmp-222" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := WriteFile(filepath.Join(dir, "kv.json"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != ".kv.json.tmp-222,.other.json.tmp-333,kv.json" {
		t.Fatalf("files left: %v", names)
	}
}

// ReplaceKeepingBackup keeps the content it replaces in path.bak, and
// writes no backup for a file that did not exist.
func TestReplaceKeepingBackup(t *testing.T) {
	p := filepath.Join(t.TempDir(), "brokerIdentity")
	if err := ReplaceKeepingBackup(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p + ".bak"); !os.IsNotExist(err) {
		t.Fatalf("a first write left a backup: %v", err)
	}
	if err := ReplaceKeepingBackup(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{p: "two", p + ".bak": "one"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
}
