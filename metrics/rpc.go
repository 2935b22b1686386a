package metrics

import (
	"maps"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rocketkv/rocketkv/remoting"
)

// RPCLatency is RocketMQ 5's remoting histogram (RemotingMetricsConstant):
// milliseconds from the decoding of a request to its answer.
const RPCLatency = "rocketmq_rpc_latency"

// rpcLatencyBuckets are RemotingMetricsManager's view: 1, 3, 5, 7, 10 and
// 100 ms, then 1, 2 and 3 s.
var rpcLatencyBuckets = []float64{1, 3, 5, 7, 10, 100, 1000, 2000, 3000}

// The result label of rocketmq_rpc_latency, as RemotingMetricsConstant
// spells its values. RocketMQ's "cancelled" (a write Netty cancelled) and
// "process_request_failed" (a task its executor threw on) have no
// counterpart here.
const (
	ResultSuccess     = "success"
	ResultOneway      = "oneway"
	ResultWriteFailed = "write_channel_failed"
)

// protocolRemoting is the protocol_type of every answer: rocketkv speaks
// Remoting only (RocketMQ's proxy adds "grpc").
const protocolRemoting = "remoting"

// maxRPCSeriesCached bounds the kinds of answer rpcSeries keeps.
const maxRPCSeriesCached = 4096

// rpcKey is what tells one series of rocketmq_rpc_latency from another.
type rpcKey struct {
	request, response int32
	held              bool
	outcome           remoting.AnswerOutcome
}

// rpcSeries finds the series of an answer without building its label
// values: a copy-on-write map read with one atomic load, written under mu
// when an answer of a new kind comes. Request codes no one defines share
// one key (unknownRequest), so the kinds are the known request codes
// times the response codes and outcomes the broker chose; past
// maxRPCSeriesCached kinds the rest are looked up in the vector each
// time, which costs the label hashing the cache saves.
type rpcSeries struct {
	vec  *prometheus.HistogramVec
	mu   sync.Mutex
	seen atomic.Pointer[map[rpcKey]prometheus.Observer]
}

func newRPCSeries(vec *prometheus.HistogramVec) *rpcSeries {
	s := &rpcSeries{vec: vec}
	empty := map[rpcKey]prometheus.Observer{}
	s.seen.Store(&empty)
	return s
}

// unknownRequest stands in an rpcKey for every request code
// remoting.KnownRequestCode does not know; it is not a known code itself.
const unknownRequest int32 = math.MinInt32

// requestCodeUnknown is the request_code label of a request code neither
// RocketMQ nor rocketkv defines. RocketMQ writes such a code's number;
// rocketkv does not, because the code is the client's to choose: a
// client sending made-up codes would make a series of
// rocketmq_rpc_latency per code, kept forever, growing the registry and
// every scrape without bound.
const requestCodeUnknown = "unknown"

// requestCodeLabel is the request_code label of a key's request code.
func requestCodeLabel(code int32) string {
	if code == unknownRequest {
		return requestCodeUnknown
	}
	return remoting.RequestCodeName(code)
}

func (s *rpcSeries) get(k rpcKey) prometheus.Observer {
	if !remoting.KnownRequestCode(k.request) {
		k.request = unknownRequest
	}
	if o, ok := (*s.seen.Load())[k]; ok {
		return o
	}
	o := s.vec.WithLabelValues(protocolRemoting, requestCodeLabel(k.request),
		remoting.ResponseCodeName(k.response), strconv.FormatBool(k.held), resultOf(k.outcome))
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := *s.seen.Load()
	if _, ok := cur[k]; ok || len(cur) >= maxRPCSeriesCached {
		return o
	}
	next := maps.Clone(cur)
	next[k] = o
	s.seen.Store(&next)
	return o
}

// resultOf is the result label of an answer's outcome.
func resultOf(o remoting.AnswerOutcome) string {
	switch o {
	case remoting.AnswerOneway:
		return ResultOneway
	case remoting.AnswerFailed:
		return ResultWriteFailed
	}
	return ResultSuccess
}

// Answered records one answer of the broker in rocketmq_rpc_latency, in
// whole milliseconds as RocketMQ records it; it has the signature of
// remoting.ServerConfig.OnAnswer. The labels are RocketMQ's:
// protocol_type "remoting", request_code and response_code the codes'
// names (remoting.RequestCodeName), is_long_polling whether a long poll
// held the request, result the outcome of the write. A request code
// neither RocketMQ nor rocketkv defines is labelled "unknown", where
// RocketMQ writes its number (requestCodeUnknown): the series stay
// bounded whatever codes clients send.
//
// Cost: one atomic load and a map lookup to find the series, then the
// histogram's atomic adds; no allocation once an answer of the kind was
// seen (BenchmarkAnswered).
func (m *Broker) Answered(a remoting.Answer) {
	if m == nil {
		return
	}
	m.rpc.get(rpcKey{a.RequestCode, a.ResponseCode, a.Held, a.Outcome}).Observe(float64(a.Elapsed.Milliseconds()))
}
