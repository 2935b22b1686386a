package namesrv

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// benchRegistry has 10,000 topics on each of 4 broker groups.
func benchRegistry(b *testing.B) (*Registry, map[string]TopicConfig) {
	r := NewRegistry(RegistryOptions{})
	table := manyTopics(10_000)
	for i := range 4 {
		_, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "broker-" + strconv.Itoa(i),
			BrokerAddr: "10.0.0." + strconv.Itoa(i) + ":10911", Body: &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1}, TopicConfigTable: table}})
		if err != nil {
			b.Fatal(err)
		}
	}
	return r, table
}

// BenchmarkRoute answers GET_ROUTEINFO_BY_TOPIC's work (lookup and body)
// for one topic of 10,000 on 4 broker groups; the baseline encodes the
// same route with encoding/json.
func BenchmarkRoute(b *testing.B) {
	r, _ := benchRegistry(b)
	b.Run("registry", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			route, ok := r.Route("topic-04242")
			if !ok {
				b.Fatal("no route")
			}
			buf = route.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding-json-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			route, ok := r.Route("topic-04242")
			if !ok {
				b.Fatal("no route")
			}
			if _, err := json.Marshal(route); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRegister measures the periodic re-registration of a broker with
// 10,000 topics: decoding the body (plain, compressed) and applying it with
// an unchanged data version. The baseline is json.Valid over the plain
// body, the least any JSON reader must do.
func BenchmarkRegister(b *testing.B) {
	r, table := benchRegistry(b)
	body := &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1}, TopicConfigTable: table}
	for _, compressed := range []bool{false, true} {
		data, err := body.Encode(compressed)
		if err != nil {
			b.Fatal(err)
		}
		name := "plain"
		if compressed {
			name = "compressed"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				decoded, err := DecodeRegisterBrokerBody(data, compressed, remoting.CurrentVersion)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "broker-0", BrokerAddr: "10.0.0.0:10911", Body: decoded}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	plain, _ := body.Encode(false)
	b.Run("json-valid-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if !json.Valid(plain) {
				b.Fatal("invalid")
			}
		}
	})
}
