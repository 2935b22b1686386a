package grpcproxy

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/insecure"
)

// FuzzGRPCPreamble writes arbitrary bytes as the first bytes of a
// connection to the gRPC port (permissive TLS, PROXY protocol headers
// trusted from every peer, the defaults): the PROXY v1/v2 header, the TLS
// sniff and the HTTP/2 preface all read socket bytes before any handler.
// The connection is answered or closed, never hangs past the handshake
// timeout, and the port keeps serving: a plaintext QueryRoute over a new
// connection is answered after every input.
func FuzzGRPCPreamble(f *testing.F) {
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	v2 := append([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11"), binary.BigEndian.AppendUint16(nil, 12)...)
	v2 = append(v2, 10, 0, 0, 1, 127, 0, 0, 1, 0x30, 0x39, 0x23, 0x82)
	f.Add([]byte("PROXY TCP4 10.0.0.1 127.0.0.1 12345 8081\r\n"), preface)
	f.Add([]byte("PROXY UNKNOWN\r\n"), preface)
	f.Add([]byte("PROXY TCP6 ::1 ::1 1 2\r\n"), []byte("junk"))
	f.Add(v2, preface)
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00}, []byte(nil))
	f.Add(preface, []byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
	f.Add([]byte{}, []byte{})
	addr := startBareProxy(f, "permissive")
	f.Fuzz(func(t *testing.T, first, rest []byte) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		// A write fails once the proxy closed the connection; that is an answer.
		if _, err := c.Write(first); err == nil {
			_, _ = c.Write(rest)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c) // whatever the proxy answers, until it closes or 2 s pass
		if err := queryOnce(t, addr, insecure.NewCredentials()); err != nil {
			t.Fatalf("after %q %q the port does not answer: %v", first, rest, err)
		}
	})
}
