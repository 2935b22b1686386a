package remoting

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// A Go-client SEND_MESSAGE request header with the fields it really sends
// (spec 3.1), the hottest header a broker decodes.
var sendHeader = &Command{Code: SendMessage, Language: "GO", Version: 317, Opaque: 12345, ExtFields: map[string]string{
	"producerGroup": "PG", "topic": "BenchmarkTopic", "queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000000",
	"flag": "0", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "defaultTopic": "TBW102",
	"defaultTopicQueueNums": "4", "batch": "false", "properties": "KEYS\x01k1\x02UNIQ_KEY\x010A0000010000\x02WAIT\x01true\x02",
	"bname": "broker-a",
}}

// stdHeader is what encoding/json needs to decode the same header while
// keeping non-string ext values: the baseline for the hand-written reader.
type stdHeader struct {
	Code      int32                      `json:"code"`
	Language  string                     `json:"language"`
	Version   int32                      `json:"version"`
	Opaque    int32                      `json:"opaque"`
	Flag      int32                      `json:"flag"`
	Remark    string                     `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

func BenchmarkJSONHeaderDecode(b *testing.B) {
	header := appendJSONHeader(nil, sendHeader)
	b.Run("remoting", func(b *testing.B) {
		b.SetBytes(int64(len(header)))
		b.ReportAllocs()
		for b.Loop() {
			var c Command
			if err := decodeJSONHeader(header, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(header)))
		b.ReportAllocs()
		for b.Loop() {
			var h stdHeader
			if err := json.Unmarshal(header, &h); err != nil {
				b.Fatal(err)
			}
			ext := make(map[string]string, len(h.ExtFields))
			for k, v := range h.ExtFields {
				var s string
				if json.Unmarshal(v, &s) != nil {
					s = string(v)
				}
				ext[k] = s
			}
		}
	})
}

func BenchmarkJSONHeaderEncode(b *testing.B) {
	b.Run("remoting", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = appendJSONHeader(buf[:0], sendHeader)
		}
	})
	b.Run("encoding-json-baseline", func(b *testing.B) {
		b.ReportAllocs()
		h := struct {
			Code      int32             `json:"code"`
			Language  string            `json:"language"`
			Version   int32             `json:"version"`
			Opaque    int32             `json:"opaque"`
			Flag      int32             `json:"flag"`
			Remark    string            `json:"remark"`
			ExtFields map[string]string `json:"extFields"`
		}{sendHeader.Code, sendHeader.Language, sendHeader.Version, sendHeader.Opaque, 0, "", sendHeader.ExtFields}
		for b.Loop() {
			if _, err := json.Marshal(&h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBinaryHeaderDecode(b *testing.B) {
	cmd := *sendHeader
	cmd.SerializeType = SerializeRocketMQ
	header, err := appendBinaryHeader(nil, &cmd)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(header)))
	b.ReportAllocs()
	for b.Loop() {
		var c Command
		if err := decodeBinaryHeader(header, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// echoServer is the baseline for BenchmarkRoundTrip: one goroutine per
// connection reading frames with FrameReader, a goroutine per request,
// writes under a mutex — the plain net.Conn design the gnet server replaces.
type echoServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startEchoServer(b *testing.B) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &echoServer{ln: ln}
	s.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(conn) })
		}
	})
	return s
}

func (s *echoServer) serve(conn net.Conn) {
	defer conn.Close()
	var mu sync.Mutex
	var reqs sync.WaitGroup
	defer reqs.Wait()
	fr := NewFrameReader(conn, 0)
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			return
		}
		reqs.Go(func() {
			req, err := Decode(frame)
			if err != nil {
				return
			}
			resp := NewResponse(req, Success, "")
			resp.ExtFields = req.ExtFields
			out, _ := Encode(resp)
			mu.Lock()
			_, _ = conn.Write(out)
			mu.Unlock()
		})
	}
}

func (s *echoServer) close() {
	_ = s.ln.Close()
	s.wg.Wait()
}

// BenchmarkRoundTrip measures pipelined request/response throughput over
// loopback with one client connection and 256 requests in flight, against
// the gnet server (TLS disabled; permissive, where the plaintext path must
// cost the same; a TLS connection) and against the
// goroutine-per-connection baseline.
func BenchmarkRoundTrip(b *testing.B) {
	run := func(b *testing.B, addr string, tc *tls.Config) {
		c, err := Dial(context.Background(), addr, ClientOptions{TLS: tc})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		sem := make(chan struct{}, 256)
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sem <- struct{}{}
			wg.Add(1)
			err := c.InvokeAsync(sendHeader, func(resp *Command, err error) {
				if err != nil || resp.Code != Success {
					b.Error(err)
				}
				<-sem
				wg.Done()
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	}
	gnetServer := func(b *testing.B, mode TLSMode, clientTLS *tls.Config) {
		mux := NewMux()
		mux.HandleFunc(SendMessage, func(_ context.Context, conn *Conn, req *Command) {
			resp := NewResponse(req, Success, "")
			resp.ExtFields = req.ExtFields
			_ = conn.Reply(req, resp)
		})
		cfg := ServerConfig{Addr: "127.0.0.1:0", TLSMode: mode}
		if mode != TLSDisabled {
			cfg.TLS = testTLSConfig(b)
		}
		s := NewServer(cfg, mux, zerolog.Nop())
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer s.Shutdown(context.Background())
		run(b, s.Addr().String(), clientTLS)
	}
	b.Run("gnet-server", func(b *testing.B) { gnetServer(b, TLSDisabled, nil) })
	b.Run("gnet-server-permissive-plaintext", func(b *testing.B) { gnetServer(b, TLSPermissive, nil) })
	b.Run("gnet-server-tls", func(b *testing.B) { gnetServer(b, TLSPermissive, clientTLS()) })
	b.Run("netconn-baseline", func(b *testing.B) {
		s := startEchoServer(b)
		defer s.close()
		run(b, s.ln.Addr().String(), nil)
	})
}
