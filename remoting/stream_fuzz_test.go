package remoting

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// FuzzServerStream writes arbitrary bytes, in arbitrary pieces, to a
// running server's plaintext connections (with and without PROXY protocol
// headers allowed): the event loop's framing (readFrames, the PROXY header
// reader) and the workers' decoding take them without a panic, what the
// server writes back before it sees the stream's end decodes as responses,
// and after each stream the server still answers a well-formed request on
// a fresh connection. (The stream is half-closed after it is written, so
// that an input costs milliseconds; a server closes a connection at its
// end, so answers still under way are not all read.)
func FuzzServerStream(f *testing.F) {
	good := func(code int32) []byte {
		frame, err := Encode(NewRequest(code, map[string]string{"k": "v"}, []byte("body")))
		if err != nil {
			f.Fatal(err)
		}
		return frame
	}
	f.Add(good(GetRouteInfoByTopic), []byte{}, false)
	f.Add(append(good(1), good(2)...), []byte{3, 9, 1}, true)
	f.Add(append([]byte("PROXY TCP4 192.0.2.1 198.51.100.1 1234 10911\r\n"), good(7)...), []byte{10, 40}, true)
	f.Add(append([]byte("PROXY TCP4 192.0.2.1 198.51.100.1 1234 10911\r\n"), good(7)...), []byte{}, false)
	f.Add([]byte("\x0d\x0a\x0d\x0a\x00\x0d\x0a\x51\x55\x49\x54\x0a\x21\x11\x00\x0c\xc0\x00\x02\x01\xc6\x33\x64\x01\x04\xd2\x2a\x9f"), []byte{5}, true)
	f.Add([]byte("\x00\x00\x00\x04\x01\x00\x00\x00"), []byte{2}, false)
	f.Add([]byte("\x16\x03\x01\x00\x05hello"), []byte{}, false)

	echo := HandlerFunc(func(_ context.Context, conn *Conn, req *Command) {
		if req.IsOneway() {
			return
		}
		_ = conn.Reply(req, NewResponse(req, Success, "echo"))
	})
	start := func(proxy bool) *Server {
		cfg := ServerConfig{Addr: "127.0.0.1:0", EventLoops: 1, MaxFrameSize: 1 << 16, ProxyProtocol: ProxyProtocol{Disabled: !proxy}}
		s := NewServer(cfg, echo, zerolog.Nop())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Start(ctx); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
		return s
	}
	servers := map[bool]*Server{false: start(false), true: start(true)}

	f.Fuzz(func(t *testing.T, data, sizes []byte, proxy bool) {
		s := servers[proxy]
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		for _, piece := range chunks(data, sizes) {
			if _, err := c.Write(piece); err != nil {
				break // the server closed it: a bad frame
			}
		}
		_ = c.(*net.TCPConn).CloseWrite()
		// Whatever comes back must be frames that decode: answers to
		// requests cut from the stream.
		fr := NewFrameReader(c, 1<<20)
		for {
			frame, err := fr.ReadFrame()
			if err != nil {
				break // EOF, a reset or the deadline: the stream is done
			}
			resp, err := Decode(frame)
			if err != nil {
				t.Fatalf("the server wrote a frame that does not decode: %v", err)
			}
			if !resp.IsResponse() {
				t.Fatalf("the server wrote a request (code %d) on a client's connection", resp.Code)
			}
		}
		// And the server goes on serving.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := Dial(ctx, s.Addr().String(), ClientOptions{})
		if err != nil {
			t.Fatalf("dial after the stream: %v", err)
		}
		defer cl.Close()
		resp, err := cl.Invoke(ctx, NewRequest(GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
		if err != nil || resp.Remark != "echo" {
			t.Fatalf("request after the stream: %v %+v", err, resp)
		}
	})
}
