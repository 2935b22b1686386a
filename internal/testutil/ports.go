package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FreePort returns a loopback port nothing listens on now, reserved for
// the test as FreePortPair's are (a test that must not flake binds port
// 0 instead when it can).
func FreePort(t testing.TB) int {
	t.Helper()
	return freePorts(t, 1)
}

// FreePortPair returns a port that is free with the next one free too:
// a controller peer's raft port and a broker's HA port are the next
// after its own.
//
// The ports are checked now and bound later by the code under test, and
// something else may take them in between. To make that unlikely they
// are picked below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), where neither a bind of
// port 0 nor the local end of an outgoing connection lands (a port
// picked by binding port 0 was soon the local port of some dial, as an
// HA port once was), and each is reserved for the rest of the test with
// a lock file that other callers, in this process or another test
// binary, skip. Only a process that binds the port by number without
// asking these helpers can still take it.
func FreePortPair(t testing.TB) int {
	t.Helper()
	return freePorts(t, 2)
}

// portFloor is the lowest port freePorts picks: above the defaults of
// RocketMQ's and rocketkv's servers (9876, 10909-10912, 8080-8081) a
// broker started beside the tests may bind.
const portFloor = 20000

// freePorts reserves n consecutive free ports for t and returns the
// first.
func freePorts(t testing.TB, n int) int {
	t.Helper()
	top := ephemeralLow() - n // the highest first port of a run below the ephemeral range
	if top < portFloor {
		return freePortsEphemeral(t, n)
	}
	dir := reservationDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Logf("no port reservations (%v): picking ports without them", err)
		dir = ""
	}
	for range 500 {
		first := portFloor + rand.IntN(top-portFloor+1)
		release, ok := reservePorts(dir, first, n)
		if !ok {
			continue
		}
		if bindable(first, n) {
			t.Cleanup(release)
			return first
		}
		release()
	}
	t.Fatalf("find %d free consecutive ports in [%d, %d]: none in 500 tries", n, portFloor, top+n-1)
	return 0
}

// reservationDir is where freePorts keeps its lock files: one directory
// per user, since another user's directory and files (created under
// their umask) would refuse this user's opens, which reservePorts takes
// for ports held, failing every pick.
func reservationDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("rocketkv-test-ports-%d", os.Getuid()))
}

// ephemeralLow is the first port of the kernel's ephemeral range, or
// 32768 (Linux's default; macOS and the BSDs start at 49152) when it
// cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 0 {
				return lo
			}
		}
	}
	return 32768
}

// reservePorts locks one file per port in dir (no locks when dir is
// ""), reporting false when another caller holds one of them. The locks
// are flock(2)s, dropped by release or when the process ends, however it
// ends.
func reservePorts(dir string, first, n int) (release func(), ok bool) {
	var held []*os.File
	release = func() {
		for _, f := range held {
			_ = f.Close() // drops the lock
		}
	}
	if dir == "" {
		return release, true
	}
	for p := first; p < first+n; p++ {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			release()
			return nil, false
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			release()
			return nil, false
		}
		held = append(held, f)
	}
	return release, true
}

// bindable reports whether ports first to first+n-1 can all be listened
// on now, on every address (as a server binding ":port" does) and on
// loopback.
func bindable(first, n int) bool {
	for p := first; p < first+n; p++ {
		for _, addr := range []string{fmt.Sprintf(":%d", p), fmt.Sprintf("127.0.0.1:%d", p)} {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return false
			}
			_ = l.Close()
		}
	}
	return true
}

// freePortsEphemeral is freePorts where no range below the ephemeral one
// is left: the first port from a bind of port 0, the others checked
// free, and nothing reserved.
func freePortsEphemeral(t testing.TB, n int) int {
	t.Helper()
	var err error
	for range 50 {
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			continue
		}
		first := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if bindable(first, n) {
			return first
		}
		err = errors.New("the next ports were taken")
	}
	t.Fatalf("find %d free consecutive loopback ports: %v", n, err)
	return 0
}
