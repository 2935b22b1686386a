package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOSAllocateMapZeroRange(t *testing.T) {
	dir := t.TempDir()
	var fs OS
	f, err := fs.OpenFile(filepath.Join(dir, "seg"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fs.Allocate(f, 0, 64<<10); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 64<<10 {
		t.Fatalf("size after Allocate = %d, want %d", st.Size(), 64<<10)
	}
	m, err := fs.Map(f, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	for i := range m {
		m[i] = 0xAB
	}
	if err := fs.SyncMapped(m[4096:8192]); err != nil {
		t.Fatalf("SyncMapped: %v", err)
	}
	if err := fs.ZeroRange(f, 100, 10000); err != nil {
		t.Fatal(err)
	}
	for i := range m {
		want := byte(0xAB)
		if i >= 100 && i < 10100 {
			want = 0
		}
		if m[i] != want {
			t.Fatalf("byte %d = %#x after ZeroRange, want %#x", i, m[i], want)
		}
	}
}

func TestOSLockExclusive(t *testing.T) {
	name := filepath.Join(t.TempDir(), "lock")
	var fs OS
	l, err := fs.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Lock(name); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: err = %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := fs.Lock(name)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	l2.Close()
}

func TestOSStatfs(t *testing.T) {
	u, err := OS{}.Statfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u.Total == 0 || u.Free > u.Total {
		t.Fatalf("implausible usage %+v", u)
	}
	if r := u.UsedRatio(); r < 0 || r > 100 {
		t.Fatalf("UsedRatio = %v", r)
	}
}

func TestFaulty(t *testing.T) {
	dir := t.TempDir()
	fs := NewFaulty(OS{})
	f, err := fs.OpenFile(filepath.Join(dir, "x"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs.FailAllocation(2)
	if err := fs.Allocate(f, 0, 4096); err != nil {
		t.Fatalf("first allocation: %v", err)
	}
	if err := fs.Allocate(f, 0, 8192); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second allocation: err = %v, want ENOSPC", err)
	}
	if err := fs.Allocate(f, 0, 8192); err != nil {
		t.Fatalf("third allocation: %v", err)
	}
	fs.SetDiskFull(true)
	if err := fs.Allocate(f, 0, 8192); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("disk full: err = %v, want ENOSPC", err)
	}
	fs.SetDiskFull(false)
	if n := fs.Allocations(); n != 4 {
		t.Fatalf("Allocations = %d, want 4", n)
	}
	fs.FailMaps(1)
	if _, err := fs.Map(f, 4096); !errors.Is(err, ErrInjected) {
		t.Fatalf("Map: err = %v, want ErrInjected", err)
	}
	m, err := fs.Map(f, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m[0] = 1
	fs.FailSyncs(1)
	if err := fs.SyncMapped(m); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
		t.Fatalf("SyncMapped: err = %v, want an injected EIO", err)
	}
	if err := fs.SyncMapped(m); err != nil {
		t.Fatalf("SyncMapped after the failure: %v", err)
	}
	m.Unmap()
	fs.SetUsage(&DiskUsage{Total: 100, Free: 10, Avail: 5})
	u, err := fs.Statfs(dir)
	if err != nil || u.UsedRatio() != 90 {
		t.Fatalf("Statfs = %+v, %v; want 90%% used", u, err)
	}
}
