// Package tlsconf builds a server's TLS from RocketMQ's tls.* keys, for
// the broker and the name server alike.
package tlsconf

import (
	"crypto/tls"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// Listener builds the listener's TLS from set, with the keys of
// tls.config.file applied over them as RocketMQ applies them, and logs
// the result. A certificate or key that cannot be loaded is an error
// naming the key; who ("broker", "name server") starts its message.
func Listener(who string, set configs.TLS, log zerolog.Logger) (remoting.TLSMode, *tls.Config, error) {
	t, fromFile, err := set.WithConfigFile()
	if err != nil {
		return 0, nil, fmt.Errorf("%s TLS: %w", who, err)
	}
	if len(fromFile) > 0 {
		log.Info().Str("file", t.ConfigFile).Strs("keys", fromFile).Msg("TLS settings read from tls.config.file")
	}
	mode, cfg, err := remoting.ServerTLS(t.Mode, remoting.TLSOptions{
		TestMode:       t.TestModeEnable,
		CertPath:       t.CertPath,
		KeyPath:        t.KeyPath,
		KeyPassword:    t.KeyPassword,
		NeedClientAuth: t.NeedClientAuth,
		AuthClient:     t.AuthClient,
		TrustCertPath:  t.TrustCertPath,
	})
	if err != nil {
		return 0, nil, fmt.Errorf("%s TLS: %w", who, err)
	}
	ev := log.Info().Stringer("mode", mode)
	if cfg != nil {
		ev = ev.Str("tls", remoting.DescribeTLS(cfg)).Bool("selfSigned", t.CertPath == "")
	}
	ev.Msg("TLS")
	return mode, cfg, nil
}

// Client is the TLS of a process's client connections (to name servers,
// controllers, brokers) as RocketMQ's NettyClientConfig decides it: nil
// (plaintext) unless dial, which callers take from tls.enable
// (configs.DialTLS). As RocketMQ's client without tls.client.authServer,
// which rocketkv does not read, the server's certificate is not verified;
// no client certificate is sent (tls.client.certPath and keyPath are not
// read either).
func Client(dial bool) *tls.Config {
	if !dial {
		return nil
	}
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // RocketMQ's default: tls.client.authServer=false
}
