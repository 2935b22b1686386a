// Package tlsconf builds a process's TLS from RocketMQ's tls.* keys, for
// the broker, the name server, the controller and the tools alike: its
// listener's (tls.server.*) and its client connections' (tls.client.*).
package tlsconf

import (
	"crypto/tls"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/remoting"
)

// Listener builds the listener's TLS from set, with the keys of
// tls.config.file applied over them as RocketMQ applies them, and logs
// the result. A certificate or key that cannot be loaded is an error
// naming the key; who ("broker", "name server") starts its message.
func Listener(who string, set configs.TLS, log zerolog.Logger) (remoting.TLSMode, *tls.Config, error) {
	mode, cfg, _, err := listener(who, set, log)
	return mode, cfg, err
}

// WatchedListener is Listener whose configuration follows its files
// while the server runs (package certwatch, as RocketMQ's broker and
// name server reload their TLS): the Watcher is nil when there is
// nothing to watch (TLS disabled, or test mode's self-signed
// certificate), else the caller runs it (Watcher.Run) for as long as
// the server serves the returned configuration.
func WatchedListener(who string, set configs.TLS, log zerolog.Logger) (remoting.TLSMode, *tls.Config, *certwatch.Watcher, error) {
	mode, cfg, t, err := listener(who, set, log)
	if err != nil || cfg == nil || (t.CertPath == "" && t.TrustCertPath == "") {
		return mode, cfg, nil, err
	}
	build := func() (*tls.Config, error) {
		_, c, err := remoting.ServerTLS(t.Mode, serverOptions(t))
		if err != nil {
			return nil, fmt.Errorf("%s TLS: %w", who, err)
		}
		return c, nil
	}
	w := certwatch.New(certwatch.Files{Cert: t.CertPath, Key: t.KeyPath, Trust: t.TrustCertPath}, cfg, build,
		log.With().Str("tlsOf", who).Logger())
	return mode, w.Config(), w, nil
}

// listener is Listener, also returning the settings with
// tls.config.file applied.
func listener(who string, set configs.TLS, log zerolog.Logger) (remoting.TLSMode, *tls.Config, configs.TLS, error) {
	t, fromFile, err := set.WithConfigFile()
	if err != nil {
		return 0, nil, t, fmt.Errorf("%s TLS: %w", who, err)
	}
	if len(fromFile) > 0 {
		log.Info().Str("file", t.ConfigFile).Strs("keys", fromFile).Msg("TLS settings read from tls.config.file")
	}
	mode, cfg, err := remoting.ServerTLS(t.Mode, serverOptions(t))
	if err != nil {
		return 0, nil, t, fmt.Errorf("%s TLS: %w", who, err)
	}
	ev := log.Info().Stringer("mode", mode)
	if cfg != nil {
		ev = ev.Str("tls", remoting.DescribeTLS(cfg)).Bool("selfSigned", t.CertPath == "")
	}
	ev.Msg("TLS")
	return mode, cfg, t, nil
}

// serverOptions are the listener's options in t.
func serverOptions(t configs.TLS) remoting.TLSOptions {
	return remoting.TLSOptions{
		TestMode:       t.TestModeEnable,
		CertPath:       t.CertPath,
		KeyPath:        t.KeyPath,
		KeyPassword:    t.KeyPassword,
		NeedClientAuth: t.NeedClientAuth,
		AuthClient:     t.AuthClient,
		TrustCertPath:  t.TrustCertPath,
	}
}

// Client is the TLS of a process's client connections (to name servers,
// controllers, brokers) as RocketMQ's NettyClientConfig and TlsHelper
// decide it: nil (plaintext) unless dial, which callers take from
// tls.enable (configs.DialTLS); otherwise set's tls.client.* keys, with
// the keys of tls.config.file applied over them as Listener applies them:
// the certificate presented when a server asks for one
// (tls.client.certPath, keyPath, keyPassword) and whether the server's
// certificate is verified (tls.client.authServer, against
// tls.client.trustCertPath or the system's roots). A file that cannot be
// loaded is an error naming its key; who ("broker", "name server")
// starts its message, and the configuration in force is logged.
//
// RocketMQ ignores the client keys under tls.test.mode.enable (its
// default); rocketkv uses them whenever they are set, as it uses
// tls.server.certPath in test mode.
func Client(who string, dial bool, set configs.TLS, log zerolog.Logger) (*tls.Config, error) {
	if !dial {
		return nil, nil
	}
	t, fromFile, err := set.WithConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s client TLS: %w", who, err)
	}
	cfg, err := remoting.NewClientTLSConfig(remoting.ClientTLSOptions{
		CertPath:      t.ClientCertPath,
		KeyPath:       t.ClientKeyPath,
		KeyPassword:   t.ClientKeyPassword,
		AuthServer:    t.ClientAuthServer,
		TrustCertPath: t.ClientTrustCertPath,
	})
	if err != nil {
		return nil, fmt.Errorf("%s client TLS: %w", who, err)
	}
	ev := log.Info().Str("tls", remoting.DescribeClientTLS(cfg))
	if len(fromFile) > 0 {
		ev = ev.Str("file", t.ConfigFile)
	}
	ev.Msg("client connections over TLS")
	return cfg, nil
}
