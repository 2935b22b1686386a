// Package atomicfile replaces small files so that a crash leaves either the
// old content or the new, never a mix or an empty file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteFile writes data to a temporary file in path's directory, syncs it,
// renames it over path with permissions perm and syncs the directory so
// the rename itself is durable.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file beside %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to sync the rename of %s: %w", dir, filepath.Base(path), err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s after replacing %s: %w", dir, filepath.Base(path), err)
	}
	removeStale(dir, filepath.Base(path), time.Now().Add(-staleAfter))
	return nil
}

// staleAfter is the age past which a temporary file of a path is taken
// for one a crashed write left: no write takes that long, so removing it
// cannot pull the file from under a write in flight.
const staleAfter = 10 * time.Minute

// removeStale removes the temporary files of base in dir that are older
// than before: what writes cut by a crash left behind (each one a whole
// copy of the file). Failures are ignored; the next write tries again.
// It lists dir: the files written this way (configuration, kvConfig, ACL
// files) are rare writes in small directories.
func removeStale(dir, base string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + ".tmp-"
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(before) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
