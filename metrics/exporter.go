package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Exporter serves /metrics over HTTP (RocketMQ's PROM exporter listens on
// metricsPromExporterHost:metricsPromExporterPort, 5557 by default).
//
// Goroutines: one HTTP server, started by Serve and stopped by Close.
type Exporter struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Served is what an Exporter serves: a broker's metrics (*Broker) or a
// controller's (*Controller).
type Served interface {
	// Handler serves the metrics in Prometheus' text format.
	Handler() http.Handler
}

// Serve listens on addr and serves m until Close.
func Serve(addr string, m Served, log zerolog.Logger) (*Exporter, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics exporter: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	e := &Exporter{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("metrics exporter stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving Prometheus metrics on /metrics")
	return e, nil
}

// Addr returns the address the exporter listens on.
func (e *Exporter) Addr() net.Addr { return e.ln.Addr() }

// Close stops the server, waiting for scrapes in progress until ctx ends.
func (e *Exporter) Close(ctx context.Context) error {
	err := e.srv.Shutdown(ctx)
	<-e.done
	if err != nil {
		return fmt.Errorf("metrics exporter: shut down: %w", err)
	}
	return nil
}
