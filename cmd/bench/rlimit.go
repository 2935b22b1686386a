package main

import "syscall"

// noFileLimit returns the soft limit of open files (RLIMIT_NOFILE), or 0
// when it cannot be read.
func noFileLimit() int64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return int64(r.Cur)
}
