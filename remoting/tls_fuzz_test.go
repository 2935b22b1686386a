package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// tlsHarness runs the server side of a TLS connection over a tlsPipe, as
// the server does, with the event loop's part played by the test: feed
// hands it socket bytes, and its ciphertext goes to sink.
type tlsHarness struct {
	pipe   *tlsPipe
	out    chan struct{} // one token: ciphertext is waiting
	frames [][]byte
	mu     sync.Mutex
	done   chan error // the serving goroutine's result
}

func newTLSHarness(cfg *tls.Config, maxFrame int, handshakeTimeout time.Duration) *tlsHarness {
	h := &tlsHarness{out: make(chan struct{}, 1), done: make(chan error, 1)}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	h.pipe = newTLSPipe(addr, addr, func() error {
		select {
		case h.out <- struct{}{}:
		default:
		}
		return nil
	}, func() {})
	tc := tls.Server(h.pipe, cfg)
	go func() {
		h.done <- serveTLSFrames(context.Background(), tc, handshakeTimeout, maxFrame, func(f []byte) {
			h.mu.Lock()
			h.frames = append(h.frames, f)
			h.mu.Unlock()
		})
	}()
	return h
}

// pumpOut copies the server's ciphertext to w until the pipe shuts down.
func (h *tlsHarness) pumpOut(w io.Writer) {
	for {
		select {
		case <-h.out:
			b, closed := h.pipe.takeOut()
			if closed {
				return
			}
			if _, err := w.Write(b); err != nil {
				return
			}
			h.pipe.recycle(b)
		case <-h.pipe.done:
			return
		}
	}
}

// finish shuts the pipe down (the socket closed) and returns why serving
// stopped; a serving goroutine that does not stop fails the test.
func (h *tlsHarness) finish(t *testing.T) error {
	t.Helper()
	// Let the reader take in everything fed before the socket "closes".
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-h.done:
			h.pipe.shutdown()
			return err
		default:
		}
		h.pipe.mu.Lock()
		unread := len(h.pipe.in) - h.pipe.inOff
		h.pipe.mu.Unlock()
		if unread == 0 {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	h.pipe.shutdown()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the TLS reader did not stop after the connection closed")
		return nil
	}
}

// chunks cuts data into pieces whose sizes come from sizes.
func chunks(data, sizes []byte) [][]byte {
	var out [][]byte
	for i := 0; len(data) > 0; i++ {
		n := 1
		if len(sizes) > 0 {
			n = int(sizes[i%len(sizes)])*8 + 1
		}
		n = min(n, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// FuzzTLSStream: whatever a peer sends on a TLS connection, the server
// side neither panics nor hangs. With raw set, the bytes are the socket's
// from the first one on (a broken or hostile handshake). Otherwise a real
// client completes the handshake and sends the bytes as application data:
// the frames the server cuts from them are then consecutive pieces of the
// stream, each as long as its length word says and within the size limit,
// and a stream ending between frames ends cleanly.
func FuzzTLSStream(f *testing.F) {
	cfg, err := NewServerTLSConfig(TLSOptions{TestMode: true})
	if err != nil {
		f.Fatal(err)
	}
	cfg.SessionTicketsDisabled = true
	hello := clientHello(f)
	frame, err := Encode(NewRequest(SendMessage, map[string]string{"topic": "T"}, []byte("body")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(true, hello, []byte{255})
	f.Add(true, hello[:len(hello)/2], []byte{3})
	f.Add(true, []byte{0x16}, []byte{})
	f.Add(true, append([]byte{0x16, 0x03, 0x03, 0x40, 0x00}, bytes.Repeat([]byte{1}, 300)...), []byte{9, 1})
	f.Add(true, append(append([]byte{}, hello...), frame...), []byte{200})
	f.Add(false, frame, []byte{0})
	f.Add(false, append(append([]byte{}, frame...), frame[:7]...), []byte{1, 5})
	f.Add(false, unhex(f, "7fffffff 00"), []byte{})
	f.Add(false, unhex(f, "00000004 00000000 00000003"), []byte{2})
	f.Fuzz(func(t *testing.T, raw bool, data, sizes []byte) { checkTLSStream(t, cfg, raw, data, sizes) })
}

// checkTLSStream is FuzzTLSStream's check of one input.
func checkTLSStream(t *testing.T, cfg *tls.Config, raw bool, data, sizes []byte) {
	{
		const limit = 1 << 16
		h := newTLSHarness(cfg, limit, 2*time.Second)
		if raw {
			go h.pumpOut(io.Discard)
			for _, c := range chunks(data, sizes) {
				if _, err := h.pipe.feed(c); err != nil {
					break
				}
			}
			_ = h.finish(t)
			if len(h.frames) != 0 {
				t.Fatalf("%d frames without a handshake", len(h.frames))
			}
			return
		}

		clientEnd, serverEnd := net.Pipe()
		defer clientEnd.Close()
		defer serverEnd.Close()
		var pumps sync.WaitGroup
		pumps.Go(func() { h.pumpOut(serverEnd) })
		pumps.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := serverEnd.Read(buf)
				if _, ferr := h.pipe.feed(buf[:n]); n > 0 && ferr != nil {
					return
				}
				if err != nil {
					return
				}
			}
		})
		client := tls.Client(clientEnd, clientTLS())
		_ = clientEnd.SetDeadline(time.Now().Add(10 * time.Second))
		if err := client.Handshake(); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		wrote := 0
		for _, c := range chunks(data, sizes) {
			if _, err := client.Write(c); err != nil {
				break // the server closed on a bad frame
			}
			wrote += len(c)
		}
		_ = client.CloseWrite()
		var served error
		select {
		case served = <-h.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the TLS reader did not stop at the end of the stream")
		}
		h.pipe.shutdown()
		_ = clientEnd.Close()
		pumps.Wait()

		pos := 0
		for _, fr := range h.frames {
			if len(fr) > limit {
				t.Fatalf("frame of %d bytes over the limit", len(fr))
			}
			if pos+len(fr) > len(data) || !bytes.Equal(fr, data[pos:pos+len(fr)]) {
				t.Fatalf("frame at %d is not the stream's bytes", pos)
			}
			if n, err := FrameLength(fr, limit); err != nil || n != len(fr) {
				t.Fatalf("frame of %d bytes, FrameLength says %d, %v", len(fr), n, err)
			}
			pos += len(fr)
		}
		if errors.Is(served, io.EOF) != (pos == len(data) && wrote == len(data)) {
			t.Fatalf("stopped with %v after %d of %d bytes (%d written)", served, pos, len(data), wrote)
		}
	}
}

// FuzzKeyFile feeds arbitrary key files (and the DER inside an encrypted
// PKCS#8 block) to the private key reader: no input panics, and a key it
// returns is one crypto/tls can use.
func FuzzKeyFile(f *testing.F) {
	for _, name := range []string{"server-pkcs8.key", "server-pkcs8-aes256.key", "server-pkcs8-des3.key", "server-legacy-aes128.key"} {
		b, err := os.ReadFile(filepath.Join("testdata", "tls", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "rocketkv")
		if blk, _ := pem.Decode(b); blk != nil {
			f.Add(blk.Bytes, "rocketkv")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, password string) {
		if key, err := parsePrivateKeyPEM(data, password, serverKeys.password); err == nil && key == nil {
			t.Fatal("no error and no key")
		}
		_, _ = decryptPKCS8(data, []byte(password))
	})
}
