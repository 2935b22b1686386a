package grpcproxy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"google.golang.org/grpc/metadata"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
)

// FuzzParseHandle checks that ParseHandle never panics, that what it
// refuses wraps ErrBadHandle, that what it accepts names a broker, a
// queue and non-negative offsets, and that String of an accepted handle
// parses back to the same handle.
func FuzzParseHandle(f *testing.F) {
	for _, s := range []string{
		"5 1700000000000 60000 0 0 broker-a 3 7 4096",
		"0 1 1000 999 1 b 0 0 0",
		"12 1712345678901 30000 2 2 broker_b-1 1 14 987654",
		"9223372036854775807 9223372036854775807 9223372036854775807 2147483647 0 x 2147483647 9223372036854775807 9223372036854775807",
		"5 1700000000000 60000 0 0 broker-a 3 7",
		"5 1700000000000 60000 0 0  3 7 4096",
		"5 1700000000000 60000 0 0 broker-a -1 7 4096",
		"+5 -1 0x10 0 0 b 3 7 4096",
		"",
		"        ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHandle(s)
		if err != nil {
			if !errors.Is(err, ErrBadHandle) {
				t.Fatalf("ParseHandle(%q) error %v does not wrap ErrBadHandle", s, err)
			}
			return
		}
		if h.BrokerName == "" || h.QueueID < 0 || h.QueueOffset < 0 || h.CommitLogOffset < 0 {
			t.Fatalf("ParseHandle(%q) accepted %+v: no broker or a negative position", s, h)
		}
		again, err := ParseHandle(h.String())
		if err != nil {
			t.Fatalf("ParseHandle(%q) = %+v, whose String %q does not parse: %v", s, h, h.String(), err)
		}
		if again != h {
			t.Fatalf("ParseHandle(%q) = %+v, but its String %q parses to %+v", s, h, h.String(), again)
		}
	})
}

// fuzzMaxMessageSize is the maximum message size of FuzzBuildOutgoingGzipBody.
const fuzzMaxMessageSize = 1024

// FuzzBuildOutgoingGzipBody checks a GZIP-encoded body of arbitrary bytes:
// buildOutgoing never panics, refuses it only as corrupt, empty or too
// large, and never stores a body that is empty or over the maximum
// message size; and the same bytes gzipped by a client are stored exactly
// when they fit.
func FuzzBuildOutgoingGzipBody(f *testing.F) {
	f.Add(gzipped(f, []byte("hello")))
	f.Add(gzipped(f, bytes.Repeat([]byte{0}, fuzzMaxMessageSize)))
	f.Add(gzipped(f, bytes.Repeat([]byte{0}, fuzzMaxMessageSize+1)))
	f.Add(gzipped(f, nil))
	f.Add([]byte("not gzip"))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add([]byte{})
	s := configOnlyServer(func(c *Config) { c.MaxMessageSize = fuzzMaxMessageSize })
	now := time.UnixMilli(1_700_000_000_000)
	build := func(body []byte) (outgoing, error) {
		m := validMessage()
		m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
		m.Body = body
		return s.buildOutgoing(m, "TopicA", "", now)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := build(data)
		if err != nil {
			switch c := codeOf(err); c {
			case rmqpb.Code_MESSAGE_CORRUPTED, rmqpb.Code_MESSAGE_BODY_EMPTY, rmqpb.Code_MESSAGE_BODY_TOO_LARGE:
			default:
				t.Fatalf("a GZIP body of %d bytes was refused with %v (%v), want a body status", len(data), c, err)
			}
		} else if len(o.body) == 0 || len(o.body) > fuzzMaxMessageSize {
			t.Fatalf("a GZIP body of %d bytes was stored as %d bytes, outside 1..%d", len(data), len(o.body), fuzzMaxMessageSize)
		}

		o, err = build(gzipped(t, data))
		switch {
		case len(data) == 0 || len(data) > fuzzMaxMessageSize:
			if err == nil {
				t.Fatalf("%d bytes gzipped were accepted, outside 1..%d", len(data), fuzzMaxMessageSize)
			}
		case err != nil:
			t.Fatalf("%d bytes gzipped were refused: %v", len(data), err)
		case !bytes.Equal(o.body, data):
			t.Fatalf("%d bytes gzipped were stored as %d other bytes", len(data), len(o.body))
		}
	})
}

// lz4Reader opens an LZ4 frame, as decompress does.
func lz4Reader(r io.Reader) (io.Reader, error) { return lz4.NewReader(r), nil }

// FuzzInflate checks that inflate never panics on arbitrary bytes taken
// as a gzip, zlib or LZ4 stream and never returns more than its limit,
// and that the same bytes compressed by each format come back exactly
// when they fit the limit and are refused as too large when they do not.
func FuzzInflate(f *testing.F) {
	plain := []byte(strings.Repeat("inflate me ", 50))
	f.Add(gzipped(f, plain), uint16(100))
	f.Add(zlibbed(f, plain), uint16(len(plain)))
	f.Add(lz4Framed(f, plain), uint16(len(plain)-1))
	f.Add(zlibbed(f, bytes.Repeat([]byte{'a'}, 1<<16)), uint16(1000))
	f.Add([]byte("garbage"), uint16(0))
	readers := []struct {
		name     string
		open     func(io.Reader) (io.Reader, error)
		compress func(testing.TB, []byte) []byte
	}{{"gzip", gzipReader, gzipped}, {"zlib", zlibReader, zlibbed}, {"lz4", lz4Reader, lz4Framed}}
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		for _, r := range readers {
			out, err := inflate(r.open, data, int(limit))
			if err == nil && len(out) > int(limit) {
				t.Fatalf("inflate as %s returned %d bytes, over its limit %d", r.name, len(out), limit)
			}
			out, err = inflate(r.open, r.compress(t, data), int(limit))
			switch {
			case len(data) <= int(limit) && (err != nil || !bytes.Equal(out, data)):
				t.Fatalf("%d bytes compressed with %s came back as %d bytes, %v (limit %d)", len(data), r.name, len(out), err, limit)
			case len(data) > int(limit) && !errors.Is(err, errInflatedTooLarge):
				t.Fatalf("%d bytes compressed with %s, over the limit %d: %d bytes, %v", len(data), r.name, limit, len(out), err)
			}
		}
	})
}

// FuzzDecompress checks decompress with every compression type a stored
// body's sysFlag can name: arbitrary bytes never make it panic or return
// more than maxInflated, and bytes a Remoting producer compressed come
// back exactly.
func FuzzDecompress(f *testing.F) {
	plain := []byte(strings.Repeat("decompress me ", 50))
	f.Add(plain)
	f.Add(zlibbed(f, plain))
	f.Add(lz4Framed(f, plain))
	f.Add(zstded(f, plain))
	f.Add([]byte{})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})       // a zstd magic and nothing more
	f.Add([]byte{0x04, 0x22, 0x4d, 0x18, 0x64}) // an LZ4 frame magic and a cut header
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range compressors() {
			ct := commitlog.CompressionType(c.sysFlag)
			out, err := decompress(ct, data)
			if err == nil && len(out) > maxInflated {
				t.Fatalf("decompress as %s returned %d bytes, over %d", c.name, len(out), maxInflated)
			}
			out, err = decompress(ct, c.compress(t, data))
			if err != nil {
				t.Fatalf("decompress of %d bytes compressed with %s: %v", len(data), c.name, err)
			}
			if !bytes.Equal(out, data) {
				t.Fatalf("%d bytes compressed with %s came back as %d other bytes", len(data), c.name, len(out))
			}
		}
	})
}

// FuzzCredentials: any authorization header a client sends either names
// a user and a signature or is refused; the user never carries the C++
// client's /region/service suffix. It never panics.
func FuzzCredentials(f *testing.F) {
	f.Add("MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, Signature=ABCDEF", "20261202T081500Z")
	f.Add("MQv2-HMAC-SHA1 Credential=ak/region/svc, SignedHeaders=x-mq-date-time, Signature=00", "")
	f.Add("Basic x", "")
	f.Fuzz(func(t *testing.T, authorization, dateTime string) {
		md := metadata.Pairs(mdAuthorization, authorization, mdDateTime, dateTime)
		user, sig, _, ok := credentialsOf(md)
		if ok && (user == "" || sig == "" || strings.Contains(user, "/")) {
			t.Fatalf("credentialsOf(%q) = user %q, signature %q", authorization, user, sig)
		}
		_ = signatureMatches(sig, dateTime, "password")
	})
}
