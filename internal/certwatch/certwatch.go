// Package certwatch keeps a TLS server's configuration in step with its
// certificate, private key and trusted-CA files while it runs, as
// RocketMQ's broker and name server do (FileWatchService over
// tls.server.certPath, tls.server.keyPath and tls.server.trustCertPath,
// read every 500 ms): certificates renewed on disk reach the handshakes
// that follow without a restart. Connections already open keep the
// certificate they were made with.
//
// A pass hashes the three files; a file that cannot be read (being
// replaced, deleted) counts as unchanged, so the configuration in force
// stays until a new file appears. Then:
//
//	trusted CAs changed           -> build the configuration again
//	certificate or key changed    -> build it again; a pair that does
//	                                 not load yet (the other half not
//	                                 written) is waited for
//	both changed, still no load   -> logged as an error, the old
//	                                 configuration kept
//
// RocketMQ builds a new context only once both the certificate and the
// key have changed; certwatch also takes a renewed certificate whose key
// file stayed the same (a renewal that keeps the key), since such a pair
// loads.
package certwatch

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/periodic"
)

// DefaultInterval is how often Run reads the files: RocketMQ's
// FileWatchService's 500 ms.
const DefaultInterval = 500 * time.Millisecond

// Files are the files a server's TLS configuration is built from; an
// empty path is not watched.
type Files struct {
	Cert, Key, Trust string
}

// file indexes of Watcher's arrays.
const (
	certFile = iota
	keyFile
	trustFile
	fileCount
)

// Watcher serves a TLS configuration (Config) that follows its files.
// current is read by every handshake; the rest belongs to the goroutine
// running the passes (Run, or a test calling Check).
type Watcher struct {
	paths   [fileCount]string
	build   func() (*tls.Config, error)
	log     zerolog.Logger
	base    *tls.Config
	current atomic.Pointer[tls.Config]
	sums    [fileCount][sha256.Size]byte
	// pending says which of the certificate and the key changed since
	// the configuration in force was built.
	pending [2]bool
	passes  atomic.Int64
}

// New returns a Watcher serving initial, which build made from files as
// they are now; build makes the configuration again from the files.
func New(files Files, initial *tls.Config, build func() (*tls.Config, error), log zerolog.Logger) *Watcher {
	w := &Watcher{paths: [fileCount]string{files.Cert, files.Key, files.Trust}, build: build, log: log, base: initial}
	w.current.Store(initial)
	for i, p := range w.paths {
		if sum, ok := fileSum(p); ok {
			w.sums[i] = sum
		}
	}
	return w
}

// Config returns the configuration to give the server: the initial one,
// whose handshakes take the configuration in force
// (tls.Config.GetConfigForClient). Session tickets issued under an
// earlier configuration stay valid (crypto/tls keeps the ticket keys of
// the configuration the server was given).
func (w *Watcher) Config() *tls.Config {
	c := w.base.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return w.current.Load(), nil }
	return c
}

// Run checks the files every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	periodic.Run(ctx, interval, func(context.Context) { w.Check() })
}

// Passes is how many checks have been made (tests wait on it).
func (w *Watcher) Passes() int64 { return w.passes.Load() }

// Check reads the files once and builds the configuration again when
// they changed (see the package documentation).
func (w *Watcher) Check() {
	defer w.passes.Add(1)
	trustChanged := false
	for i, p := range w.paths {
		sum, ok := fileSum(p)
		if !ok || sum == w.sums[i] {
			continue
		}
		w.sums[i] = sum
		w.log.Info().Str("file", p).Msg("TLS file changed")
		if i == trustFile {
			trustChanged = true
		} else {
			w.pending[i] = true
		}
	}
	pairChanged := w.pending[certFile] || w.pending[keyFile]
	if !trustChanged && !pairChanged {
		return
	}
	cfg, err := w.build()
	if err != nil {
		if pairChanged && !(w.pending[certFile] && w.pending[keyFile]) && !trustChanged {
			w.log.Info().Err(err).Msg("TLS certificate or key changed but the pair does not load yet; waiting for the other file, the old pair is still served")
			return
		}
		w.pending = [2]bool{}
		w.log.Error().Err(err).Msg("TLS files changed but do not load; the configuration in force is still served")
		return
	}
	w.pending = [2]bool{}
	w.current.Store(cfg)
	ev := w.log.Info()
	if len(cfg.Certificates) > 0 && cfg.Certificates[0].Leaf != nil {
		leaf := cfg.Certificates[0].Leaf
		ev = ev.Str("subject", leaf.Subject.String()).Time("notAfter", leaf.NotAfter)
	}
	ev.Msg("TLS configuration reloaded: new connections get it")
}

// fileSum hashes a file's content; false when there is no path or the
// file cannot be read.
func fileSum(path string) ([sha256.Size]byte, bool) {
	if path == "" {
		return [sha256.Size]byte{}, false
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(raw), true
}
