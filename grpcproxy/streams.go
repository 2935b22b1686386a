package grpcproxy

import (
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
)

// telemetryStream is one client's open telemetry stream. A gRPC stream
// must not be sent on from two goroutines at once: every send holds turn.
type telemetryStream struct {
	// turn, of capacity one, is full while a send is under way.
	turn   chan struct{}
	stream rmqpb.MessagingService_TelemetryServer
	// topics are the wrapped topics the client publishes to, from its
	// settings; empty for consumers.
	topics map[string]bool
}

// newTelemetryStream returns the telemetry stream of a client.
func newTelemetryStream(stream rmqpb.MessagingService_TelemetryServer) *telemetryStream {
	return &telemetryStream{turn: make(chan struct{}, 1), stream: stream}
}

// send sends one command on the stream.
func (t *telemetryStream) send(cmd *rmqpb.TelemetryCommand) error {
	t.turn <- struct{}{}
	defer func() { <-t.turn }()
	return t.stream.Send(cmd)
}

// trySend sends one command unless another send on the stream is still
// under way after wait (none: at once). A send blocks while the client
// reads nothing (gRPC's flow control), so a broker's check goes to
// another producer rather than wait behind a stuck one.
func (t *telemetryStream) trySend(cmd *rmqpb.TelemetryCommand, wait time.Duration) bool {
	if wait <= 0 {
		select {
		case t.turn <- struct{}{}:
		default:
			return false
		}
	} else {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case t.turn <- struct{}{}:
		case <-timer.C:
			return false
		}
	}
	defer func() { <-t.turn }()
	return t.stream.Send(cmd) == nil
}

// busySendWait is how long a broker's check waits for a producer's
// stream busy with another send, once every producer of the topic was
// found busy: the checks of two transactions come in the same pass, and
// the second found the stream of a lone producer busy with the first.
const busySendWait = 500 * time.Millisecond

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
// in turn, trying the others when a send fails or its stream is busy,
// then, when every one was busy, each again waiting busySendWait for it;
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
	for _, wait := range []time.Duration{0, busySendWait} {
		for i := range cands {
			if cands[(start+uint64(i))%uint64(len(cands))].trySend(cmd, wait) {
				return true
			}
		}
	}
	return false
}
