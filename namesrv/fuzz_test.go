package namesrv

import (
	"bytes"
	"compress/zlib"
	"errors"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// checkBodyStable asserts that a decoded body's plain encoding is stable
// once normalized: encode, decode, encode again gives the same bytes from
// the second round on (the first round may replace invalid UTF-8).
func checkBodyStable(t *testing.T, body *RegisterBrokerBody) {
	t.Helper()
	var prev []byte
	for round := range 3 {
		out, err := body.Encode(false)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if round == 2 && !bytes.Equal(prev, out) {
			t.Fatalf("plain encoding not stable\n%s\n%s", prev, out)
		}
		prev = out
		if body, err = DecodeRegisterBrokerBody(out, false, remoting.CurrentVersion); err != nil {
			t.Fatalf("decoding our own plain body: %v\n%s", err, out)
		}
	}
}

// FuzzRegisterBrokerBody feeds raw bodies in both forms: decoding never
// panics, fails only with ErrBadRegisterBody, and what decodes re-encodes
// stably.
func FuzzRegisterBrokerBody(f *testing.F) {
	plain, _ := topicsBody(3, "T:4:4:6", "TBW102:8:8:7").Encode(false)
	compressed, _ := topicsBody(3, "T:4:4:6", "TBW102:8:8:7").Encode(true)
	f.Add(plain, false, remoting.CurrentVersion)
	f.Add(compressed, true, remoting.CurrentVersion)
	f.Add(compressed, false, int32(100))
	f.Add([]byte(`{"dataVersion":{"counter":1},"topicConfigTable":{"T":{"perm":6}}}`), false, int32(10))
	f.Fuzz(func(t *testing.T, data []byte, compressed bool, version int32) {
		body, err := DecodeRegisterBrokerBody(data, compressed, version)
		if err != nil {
			if !errors.Is(err, ErrBadRegisterBody) {
				t.Fatalf("error not wrapping ErrBadRegisterBody: %v", err)
			}
			return
		}
		checkBodyStable(t, body)
	})
}

// FuzzCompressedRegisterBody fuzzes the inflated content of a compressed
// body (the fuzzer cannot get through zlib's checksums on its own).
func FuzzCompressedRegisterBody(f *testing.F) {
	f.Add(inflate(f, mustEncode(f, topicsBody(3, "T:4:4:6", "TBW102:8:8:7"), true)))
	f.Add(inflate(f, mustEncode(f, &RegisterBrokerBody{TopicConfigTable: manyTopics(3)}, true)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var zb bytes.Buffer
		zw := zlib.NewWriter(&zb)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		for _, version := range []int32{remoting.CurrentVersion, remoting.VersionV5_0_0 - 1} {
			body, err := DecodeRegisterBrokerBody(zb.Bytes(), true, version)
			if err != nil {
				if !errors.Is(err, ErrBadRegisterBody) {
					t.Fatalf("error not wrapping ErrBadRegisterBody: %v", err)
				}
				continue
			}
			checkBodyStable(t, body)
		}
	})
}

func mustEncode(f *testing.F, b *RegisterBrokerBody, compressed bool) []byte {
	f.Helper()
	out, err := b.Encode(compressed)
	if err != nil {
		f.Fatal(err)
	}
	return out
}

func inflate(f *testing.F, data []byte) []byte {
	f.Helper()
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		f.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		f.Fatal(err)
	}
	return out.Bytes()
}

// FuzzQueueDatas feeds REGISTER_TOPIC_IN_NAMESRV bodies to their decoder:
// it must never panic, and what it accepts names a broker in every entry.
func FuzzQueueDatas(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"a","cluster":"C"}],` +
		`"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":3}]}`))
	f.Add([]byte(`{"queueDatas":[]}`))
	f.Add([]byte(`{"queueDatas":[{"perm":6}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		queues, err := decodeQueueDatas(body)
		if err != nil {
			return
		}
		for _, q := range queues {
			if strings.TrimSpace(q.BrokerName) == "" {
				t.Fatalf("accepted an entry without a broker: %+v", q)
			}
		}
	})
}
