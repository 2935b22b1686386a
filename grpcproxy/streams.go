package grpcproxy

import (
	"sync"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
)

// telemetryStream is one client's open telemetry stream. A gRPC stream
// must not be sent on from two goroutines at once: every send takes mu.
type telemetryStream struct {
	mu     sync.Mutex
	stream rmqpb.MessagingService_TelemetryServer
	// topics are the wrapped topics the client publishes to, from its
	// settings; empty for consumers.
	topics map[string]bool
}

// send sends one command on the stream.
func (t *telemetryStream) send(cmd *rmqpb.TelemetryCommand) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stream.Send(cmd)
}

// trySend sends one command unless another send is on its way on the
// stream (a client that stopped reading blocks gRPC's Send): a broker's
// check then goes to another producer instead of waiting behind it.
func (t *telemetryStream) trySend(cmd *rmqpb.TelemetryCommand) bool {
	if !t.mu.TryLock() {
		return false
	}
	defer t.mu.Unlock()
	return t.stream.Send(cmd) == nil
}

// streamRegistry holds the open telemetry streams by client id, so that
// the proxy can reach a client outside a call of its own (a broker's
// transaction check).
type streamRegistry struct {
	mu   sync.Mutex
	byID map[string]*telemetryStream
	next uint64
}

func newStreamRegistry() *streamRegistry {
	return &streamRegistry{byID: map[string]*telemetryStream{}}
}

// open registers a client's stream, replacing an older one.
func (r *streamRegistry) open(clientID string, ts *telemetryStream) {
	r.mu.Lock()
	r.byID[clientID] = ts
	r.mu.Unlock()
}

// close forgets a client's stream if it is still ts.
func (r *streamRegistry) close(clientID string, ts *telemetryStream) {
	r.mu.Lock()
	if r.byID[clientID] == ts {
		delete(r.byID, clientID)
	}
	r.mu.Unlock()
}

// setTopics records the topics a client publishes to.
func (r *streamRegistry) setTopics(ts *telemetryStream, topics map[string]bool) {
	r.mu.Lock()
	ts.topics = topics
	r.mu.Unlock()
}

// sendToProducer sends cmd to one connected producer of topic, the next
// in turn, trying the others when a send fails or its stream is busy;
// false when none took it (the broker checks again later).
func (r *streamRegistry) sendToProducer(topic string, cmd *rmqpb.TelemetryCommand) bool {
	r.mu.Lock()
	var cands []*telemetryStream
	for _, ts := range r.byID {
		if ts.topics[topic] {
			cands = append(cands, ts)
		}
	}
	r.next++
	start := r.next
	r.mu.Unlock()
	for i := range cands {
		if cands[(start+uint64(i))%uint64(len(cands))].trySend(cmd) {
			return true
		}
	}
	return false
}
