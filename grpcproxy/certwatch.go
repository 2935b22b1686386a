package grpcproxy

import (
	"crypto/tls"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/remoting"
)

// CertWatch says which certificate files the gRPC port's certificate came
// from and how often to read them for a change (tlsCertWatchIntervalMs).
// The zero value watches nothing.
type CertWatch struct {
	Interval          time.Duration
	CertPath, KeyPath string
	KeyPassword       string
}

// enabled reports whether there is something to watch.
func (w CertWatch) enabled() bool { return w.Interval > 0 && w.CertPath != "" && w.KeyPath != "" }

// watch returns a watcher serving base (the gRPC port's configuration,
// its one certificate loaded from w's files) that takes the pair again
// when the files change (package certwatch: as RocketMQ 5.3.4's proxy,
// TlsCertificateManager over FileWatchService, once both files changed,
// and also a renewed certificate whose key stayed). Connections already
// open keep their certificate.
func (w CertWatch) watch(base *tls.Config, log zerolog.Logger) *certwatch.Watcher {
	build := func() (*tls.Config, error) {
		cert, err := remoting.LoadKeyPair(w.CertPath, w.KeyPath, w.KeyPassword)
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.Certificates = []tls.Certificate{cert}
		return c, nil
	}
	return certwatch.New(certwatch.Files{Cert: w.CertPath, Key: w.KeyPath}, base, build, log)
}
