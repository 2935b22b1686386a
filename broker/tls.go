package broker

import (
	"crypto/tls"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
)

// listenerTLS builds the listener's TLS from RocketMQ's tls.* keys, and
// the client connections' (b.clientTLS): both stop the start when a
// certificate or key cannot be loaded.
func (b *Broker) listenerTLS() (remoting.TLSMode, *tls.Config, error) {
	var mode remoting.TLSMode
	var cfg *tls.Config
	var err error
	if b.shared != nil {
		// The Supervisor's servers serve and reload their own.
		mode, cfg, err = tlsconf.Listener("broker", b.cfg.TLS, zerolog.Nop())
	} else {
		mode, cfg, b.tlsWatch, err = tlsconf.WatchedListener("broker", b.cfg.TLS, b.log)
	}
	if err != nil {
		return 0, nil, err
	}
	if b.clientTLS, err = tlsconf.Client("broker", b.cfg.DialNamesrvTLS(), b.cfg.TLS, b.log); err != nil {
		return 0, nil, err
	}
	if b.clientTLS != nil {
		b.log.Info().Msg("registering with the name servers over TLS")
	}
	return mode, cfg, nil
}

// namesrvClientTLS is the TLS of the connections to the name servers, the
// master and the escape bridge's brokers (nil: plaintext), built at the
// start from tls.enable and tls.client.* as RocketMQ's BrokerOuterAPI
// client.
func (b *Broker) namesrvClientTLS() *tls.Config { return b.clientTLS }
