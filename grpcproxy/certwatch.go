package grpcproxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/periodic"
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

// certReloader serves the gRPC port's certificate and replaces it when
// its files change, as RocketMQ 5.3.4's proxy does (TlsCertificateManager
// over FileWatchService): every interval it hashes the certificate and
// the key files; a file that cannot be read (missing while it is being
// replaced) counts as unchanged; once both files have changed since the
// last reload, the pair is loaded again and served to the handshakes that
// follow. A pair that does not load (a key not of the certificate) is
// logged and the old one kept; either way the next reload waits for both
// files to change again. Connections already open keep their certificate.
//
// current is read by every handshake, the rest only by the goroutine of
// run.
type certReloader struct {
	watch   CertWatch
	log     zerolog.Logger
	current atomic.Pointer[tls.Certificate]
	// sums are the last hashes seen of the certificate and key files;
	// changed says which changed since the last reload.
	sums    [2][sha256.Size]byte
	changed [2]bool
	// passes counts the checks made (tests wait on it).
	passes atomic.Int64
}

// newCertReloader starts serving cert, hashing the files as they are now.
func newCertReloader(w CertWatch, cert tls.Certificate, log zerolog.Logger) *certReloader {
	r := &certReloader{watch: w, log: log}
	r.current.Store(&cert)
	for i, p := range r.paths() {
		if sum, ok := fileSum(p); ok {
			r.sums[i] = sum
		}
	}
	return r
}

func (r *certReloader) paths() [2]string { return [2]string{r.watch.CertPath, r.watch.KeyPath} }

// getCertificate is tls.Config.GetCertificate: the pair in force.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current.Load(), nil
}

// run checks the files every interval until ctx ends.
func (r *certReloader) run(ctx context.Context) {
	periodic.Run(ctx, r.watch.Interval, func(context.Context) { r.check() })
}

// check hashes the files once and reloads the pair when both changed.
func (r *certReloader) check() {
	defer r.passes.Add(1)
	for i, p := range r.paths() {
		sum, ok := fileSum(p)
		if !ok || sum == r.sums[i] {
			continue
		}
		r.sums[i] = sum
		r.changed[i] = true
		r.log.Info().Str("file", p).Msg("TLS certificate file changed")
	}
	if !r.changed[0] || !r.changed[1] {
		return
	}
	r.changed = [2]bool{}
	cert, err := remoting.LoadKeyPair(r.watch.CertPath, r.watch.KeyPath, r.watch.KeyPassword)
	if err != nil {
		r.log.Error().Err(err).Msg("TLS certificate and key changed but do not load; the old pair is still served")
		return
	}
	r.current.Store(&cert)
	ev := r.log.Info().Str("cert", r.watch.CertPath)
	if cert.Leaf != nil {
		ev = ev.Str("subject", cert.Leaf.Subject.String()).Time("notAfter", cert.Leaf.NotAfter)
	}
	ev.Msg("TLS certificate reloaded: new connections get it")
}

// fileSum hashes a file's content; false when it cannot be read.
func fileSum(path string) ([sha256.Size]byte, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(raw), true
}
