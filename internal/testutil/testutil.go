// Package testutil holds helpers shared by tests of several packages:
// locating the RocketMQ fixtures and copying a store so a test never
// writes into them, writing a file for a test to read.
package testutil

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FixturesDir returns the absolute path of ../shared/fixtures seen from the
// repository root, skipping the test when it is absent (the fixtures live
// beside the repository, not in it).
func FixturesDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Skip("cannot locate the source tree")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "fixtures")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("RocketMQ fixtures not found at %s: %v", dir, err)
	}
	return dir
}

// WriteFile writes content to a file called name in a new temporary
// directory of t, removed when the test ends, and returns its path: a
// configuration or input file for the code under test to read.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}

// CopyStore copies the directory tree src into a fresh temporary directory
// and returns it, so that opening the store (which writes lock, abort and
// checkpoint files and may truncate) never touches the fixture.
func CopyStore(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy store %s: %v", src, err)
	}
	return dst
}

// TreeState maps every path under root to its size, modification time and
// mode, so that a test can prove a reader changed and created nothing.
func TreeState(t testing.TB, root string) map[string][3]any {
	t.Helper()
	out := map[string][3]any{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			var info fs.FileInfo
			if info, err = d.Info(); err == nil {
				out[p] = [3]any{info.Size(), info.ModTime(), info.Mode()}
				return nil
			}
		}
		if p != root && errors.Is(err, fs.ErrNotExist) {
			// Deleted between its directory's listing and this look (a
			// database's background work): absent from the state, as it
			// is from the tree now.
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("state of %s: %v", root, err)
	}
	return out
}

// RunAsMainOr lets a command's test binary act as the command: when the
// environment variable env is "1" it runs main and exits 0 (a test starts
// the binary so, to send the real main a signal in a child process);
// otherwise it runs the tests. Call it from TestMain.
func RunAsMainOr(m *testing.M, env string, main func()) {
	if os.Getenv(env) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
