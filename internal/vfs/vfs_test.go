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
	if err != nil || u != (DiskUsage{Total: 100, Free: 10, Avail: 5}) {
		t.Fatalf("Statfs = %+v, %v; want the usage set", u, err)
	}
}

// UsedRatio reads a disk as RocketMQ's getDiskPartitionSpaceUsedPercent
// does: used / (used + available to users), rounded up to a whole percent.
func TestUsedRatio(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    DiskUsage
		want float64
	}{
		{"empty", DiskUsage{Total: 100, Free: 100, Avail: 100}, 0},
		{"no reserve", DiskUsage{Total: 100, Free: 10, Avail: 10}, 90},
		// 86 used of 86+9: 90.5 %, rounded up.
		{"root reserve counts as neither", DiskUsage{Total: 100, Free: 14, Avail: 9}, 91},
		{"all that users may write is written", DiskUsage{Total: 100, Free: 5, Avail: 0}, 100},
		{"rounded up", DiskUsage{Total: 300, Free: 200, Avail: 200}, 34},
		{"no size", DiskUsage{}, 0},
		{"inconsistent", DiskUsage{Total: 10, Free: 20, Avail: 20}, 0},
		{"an 8 EiB disk", DiskUsage{Total: 1 << 63, Free: 1 << 62, Avail: 1 << 62}, 50},
	} {
		if got := tc.u.UsedRatio(); got != tc.want {
			t.Errorf("%s: UsedRatio of %+v = %v, want %v", tc.name, tc.u, got, tc.want)
		}
	}
}
