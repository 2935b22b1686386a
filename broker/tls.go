package broker

import (
	"crypto/tls"
	"fmt"

	"github.com/rocketkv/rocketkv/remoting"
)

// listenerTLS builds the listener's TLS from RocketMQ's tls.* keys, with
// the keys of tls.config.file applied over them as RocketMQ applies them.
// A certificate or key that cannot be loaded is an error naming the key.
func (b *Broker) listenerTLS() (remoting.TLSMode, *tls.Config, error) {
	t, fromFile, err := b.cfg.TLS.WithConfigFile()
	if err != nil {
		return 0, nil, fmt.Errorf("broker TLS: %w", err)
	}
	if len(fromFile) > 0 {
		b.log.Info().Str("file", t.ConfigFile).Strs("keys", fromFile).Msg("TLS settings read from tls.config.file")
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
		return 0, nil, fmt.Errorf("broker TLS: %w", err)
	}
	ev := b.log.Info().Stringer("mode", mode)
	if cfg != nil {
		ev = ev.Str("tls", remoting.DescribeTLS(cfg)).Bool("selfSigned", t.CertPath == "")
	}
	ev.Bool("namesrvTLS", b.cfg.DialNamesrvTLS()).Msg("TLS")
	return mode, cfg, nil
}

// namesrvClientTLS is the TLS of the connections to the name servers (nil:
// plaintext). As RocketMQ's client without tls.client.authServer, it does
// not verify the name server's certificate.
func (b *Broker) namesrvClientTLS() *tls.Config {
	if !b.cfg.DialNamesrvTLS() {
		return nil
	}
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // RocketMQ's default: tls.client.authServer=false
}
