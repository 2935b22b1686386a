package broker

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/metrics"
)

// sharedMetrics are the Prometheus metrics of a controller-mode broker
// process and their exporter, owned with its servers (processServers)
// from the first Broker's start to the Supervisor's Shutdown. RocketMQ
// keeps one BrokerMetricsManager across a role change; a Supervisor
// replaces its Broker at a switch, and with metrics of their own each
// switch closed the exporter's port while it ran and started every
// counter and histogram from zero. Here each Broker rebinds the metrics'
// gauges to its own sources (metrics.Broker.Rebind) and detaches them at
// its stop, before its stores close (unbind); between two Brokers a
// scrape shows the counters and histograms and no gauge.
type sharedMetrics struct {
	mu sync.Mutex
	// m is the metrics served, nil before the first Broker's start.
	m *metrics.Broker
	// owner is the Broker whose sources m's gauges read, nil between two.
	owner *Broker
	// exp serves handler from the first Broker's start to close.
	exp     *metrics.Exporter
	handler atomic.Pointer[http.Handler]
}

// Handler implements metrics.Served: it serves the metrics m holds at
// each scrape.
func (s *sharedMetrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.handler.Load()
		if h == nil {
			http.Error(w, "no metrics yet", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	})
}

// current is the metrics served, nil before the first Broker's.
func (s *sharedMetrics) current() *metrics.Broker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

// bind makes b the Broker whose sources the metrics' gauges read and
// returns the metrics b feeds: the last Broker's, with their counters
// and histograms, unless b's would be other metrics (another layout:
// its configuration changed), then new ones. The first bind starts the
// exporter on addr.
func (s *sharedMetrics) bind(b *Broker, labels map[string]string, src metrics.Sources, names metrics.Naming, addr string, log zerolog.Logger) (*metrics.Broker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || !s.m.Rebind(labels, src, names) {
		if s.m != nil {
			log.Warn().Msg("the metrics' labels, names or families changed since the last role: counters and histograms start from zero")
		}
		s.m = metrics.New(labels, src, names)
		h := s.m.Handler()
		s.handler.Store(&h)
	}
	s.owner = b
	if s.exp == nil {
		exp, err := metrics.Serve(addr, s, log)
		if err != nil {
			s.m.Detach()
			s.owner = nil
			return nil, err
		}
		s.exp = exp
	}
	return s.m, nil
}

// unbind detaches b's sources from the metrics' gauges, once the reads
// in progress returned, when b is the Broker bound (a late stop of a
// Broker replaced since leaves its successor's). A scrape computing the
// consumer gauges is cancelled at its next queue (metrics.Broker.Detach):
// the switch does not wait for the whole computation.
func (s *sharedMetrics) unbind(b *Broker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == b && s.m != nil {
		s.m.Detach()
		s.owner = nil
	}
}

// addr is the exporter's address, nil before it starts.
func (s *sharedMetrics) addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exp == nil {
		return nil
	}
	return s.exp.Addr()
}

// close stops the exporter, waiting for scrapes in progress until ctx
// ends.
func (s *sharedMetrics) close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exp == nil {
		return nil
	}
	err := s.exp.Close(ctx)
	s.exp = nil
	return err
}
