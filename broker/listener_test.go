package broker

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// serverChannelMaxIdleTimeSeconds closes idle connections on both client
// ports, as RocketMQ's idle handler does.
func TestServerChannelMaxIdleTime(t *testing.T) {
	b := startTestBroker(t, map[string]string{"serverChannelMaxIdleTimeSeconds": "1", "fastListenPort": "0"})
	fast := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.FastAddr().(*net.TCPAddr).Port))
	for _, addr := range []string{b.Addr(), fast} {
		// Timed from before the dial: the broker's clock for the
		// connection starts when it accepts it, which may come before
		// Dial returns here on a loaded machine (a CI run measured
		// 982 ms from after the dial).
		start := time.Now()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(start.Add(20 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
		if err != io.EOF {
			t.Fatalf("%s: read of an idle connection: %v, want EOF (closed by the broker)", addr, err)
		}
		if idle := time.Since(start); idle < time.Second {
			t.Fatalf("%s: closed after %v, before the 1 s idle timeout", addr, idle)
		}
	}
}
