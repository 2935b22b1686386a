package remoting

import (
	"syscall"
	"testing"
)

// The socket buffer sizes reach accepted connections (set on the
// listener, whose sockets inherit them; Linux reports twice the size
// asked for, its bookkeeping included).
func TestSocketBuffers(t *testing.T) {
	const want = 96 << 10
	for _, tc := range []struct {
		name string
		cfg  ServerConfig
		opt  int
	}{
		{"SO_SNDBUF", ServerConfig{SocketSendBuffer: want}, syscall.SO_SNDBUF},
		{"SO_RCVBUF", ServerConfig{SocketRecvBuffer: want}, syscall.SO_RCVBUF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := startServer(t, tc.cfg, addrEcho)
			c := dialServer(t, s, ClientOptions{})
			if _, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil {
				t.Fatal(err)
			}
			conns := s.Conns()
			if len(conns) != 1 {
				t.Fatalf("%d connections", len(conns))
			}
			got, err := syscall.GetsockoptInt(conns[0].gc.Fd(), syscall.SOL_SOCKET, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != 2*want {
				t.Fatalf("%s of the accepted socket = %d, want %d (twice %d)", tc.name, got, 2*want, want)
			}
		})
	}
}
