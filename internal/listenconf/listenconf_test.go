package listenconf

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

func TestApply(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	var cfg remoting.ServerConfig
	Apply(&cfg, configs.Listener{MaxIdle: 30 * time.Second, SendBuffer: 1, RecvBuffer: 2},
		configs.ProxyProtocol{Enable: false, TrustedNetworks: trusted})
	if cfg.IdleTimeout != 30*time.Second || cfg.SocketSendBuffer != 1 || cfg.SocketRecvBuffer != 2 ||
		!cfg.ProxyProtocol.Disabled || !slices.Equal(cfg.ProxyProtocol.Trusted, trusted) || cfg.GoAwayWait != 0 {
		t.Fatalf("applied %+v", cfg)
	}
	// shutdownWaitTimeSeconds counts only with enableShutdownGracefully.
	Apply(&cfg, configs.Listener{ShutdownGracefully: true, ShutdownWait: 7 * time.Second}, configs.ProxyProtocol{})
	if cfg.GoAwayWait != 7*time.Second {
		t.Fatalf("graceful shutdown applied as a wait of %v, want 7s", cfg.GoAwayWait)
	}
	// serverChannelMaxIdleTimeSeconds=0 is never; the server's zero would
	// be its default.
	Apply(&cfg, configs.Listener{}, configs.ProxyProtocol{Enable: true})
	if cfg.IdleTimeout >= 0 || cfg.ProxyProtocol.Disabled {
		t.Fatalf("applied %+v", cfg)
	}
}
