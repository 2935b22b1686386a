package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStatus reads the kB fields named in keys (e.g. "VmRSS", "VmHWM")
// from a /proc/<pid>/status file and returns them in bytes.
func procStatus(path string, keys ...string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return parseProcStatus(data, keys...)
}

// parseProcStatus extracts "Key:   1234 kB" lines; a missing key is an
// error.
func parseProcStatus(data []byte, keys ...string) (map[string]int64, error) {
	out := make(map[string]int64, len(keys))
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for _, k := range keys {
			if name != k {
				continue
			}
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return nil, fmt.Errorf("status field %s: unexpected value %q", k, rest)
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("status field %s: %w", k, err)
			}
			out[k] = v * 1024
		}
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("status field %s: missing", k)
		}
	}
	return out, nil
}

// Resources is what a process holds, from /proc/self.
type Resources struct {
	// RSS is the resident set (VmRSS) and PeakRSS its high-water mark
	// (VmHWM), in bytes.
	RSS     int64 `json:"rss"`
	PeakRSS int64 `json:"peak_rss"`
	// FDs counts open file descriptors (/proc/self/fd entries).
	FDs int `json:"fds"`
	// Maps counts memory mappings (/proc/self/maps lines).
	Maps int `json:"maps"`
}

// selfResources measures the calling process.
func selfResources() (Resources, error) {
	p, err := readProcDir("/proc/self")
	if err != nil {
		return Resources{}, err
	}
	return Resources{RSS: p.RSS, PeakRSS: p.HWM, FDs: p.FDs, Maps: p.Maps}, nil
}

// procSample is what a process holds.
type procSample struct {
	RSS  int64 // VmRSS
	HWM  int64 // VmHWM, the peak RSS
	Anon int64 // RssAnon: heap and stacks, without mapped files
	File int64 // RssFile: resident pages of mapped files (the CommitLog)
	FDs  int
	Maps int
}

func (p *procSample) maxWith(o procSample) {
	p.RSS, p.HWM = max(p.RSS, o.RSS), max(p.HWM, o.HWM)
	p.Anon, p.File = max(p.Anon, o.Anon), max(p.File, o.File)
	p.FDs, p.Maps = max(p.FDs, o.FDs), max(p.Maps, o.Maps)
}

// readProc samples /proc/<pid>.
func readProc(pid int) (procSample, error) {
	return readProcDir("/proc/" + strconv.Itoa(pid))
}

// readProcDir samples a process's /proc directory: its status fields,
// open descriptors and mappings.
func readProcDir(dir string) (procSample, error) {
	st, err := procStatus(dir+"/status", "VmRSS", "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		return procSample{}, err
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return procSample{}, fmt.Errorf("count open files of %s: %w", dir, err)
	}
	maps, err := os.ReadFile(dir + "/maps")
	if err != nil {
		return procSample{}, fmt.Errorf("count mappings of %s: %w", dir, err)
	}
	return procSample{RSS: st["VmRSS"], HWM: st["VmHWM"], Anon: st["RssAnon"], File: st["RssFile"], FDs: len(fds), Maps: countLines(maps)}, nil
}

// countLines counts newline-terminated lines (and a last unterminated one).
func countLines(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// DiskUsage is what a directory tree occupies, with du's two views.
type DiskUsage struct {
	// Apparent is the sum of file and directory sizes (du --apparent-size):
	// for sparse files it counts the holes.
	Apparent int64 `json:"apparent"`
	// Allocated is the sum of allocated blocks (du's default, st_blocks x
	// 512).
	Allocated int64 `json:"allocated"`
	// Files and Dirs count the entries.
	Files int64 `json:"files"`
	Dirs  int64 `json:"dirs"`
	// Tables is the allocated size of Pebble's table files (*.sst): the
	// index itself, without the write-ahead log Pebble preallocates.
	Tables int64 `json:"tables"`
	// WAL is the allocated size of Pebble's write-ahead logs (*.log),
	// preallocated and recycled.
	WAL int64 `json:"wal"`
}

// diskUsage walks root like du. Entries that vanish during the walk are
// skipped; a missing root gives zero usage.
func diskUsage(root string) (DiskUsage, error) {
	var u DiskUsage
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			u.Dirs++
		} else {
			u.Files++
		}
		u.Apparent += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.Allocated += st.Blocks * 512
			switch {
			case d.IsDir():
			case strings.HasSuffix(d.Name(), ".sst"):
				u.Tables += st.Blocks * 512
			case strings.HasSuffix(d.Name(), ".log"):
				u.WAL += st.Blocks * 512
			}
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("disk usage of %s: %w", root, err)
	}
	return u, nil
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// procCPU returns the user+system CPU time a process has used so far, from
// /proc/<pid>/stat ("self" for the calling process).
func procCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read cpu time of %s: %w", pid, err)
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseProcStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat line: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line: %d fields after the command name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat line: cpu time %q: %w", s, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
