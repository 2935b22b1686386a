// Package clustertest starts an in-process name server and broker for
// the tests of the packages that talk to them (tools, the gRPC proxy):
// loopback ports chosen by the system, a temporary store, small CommitLog
// segments, everything stopped when the test ends.
package clustertest

import (
	"context"
	"maps"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/namesrv"
)

// StartNamesrv starts a name server on a loopback port and returns its
// address.
func StartNamesrv(t testing.TB) string {
	t.Helper()
	return StartNamesrvWith(t, nil)
}

// StartNamesrvWith is StartNamesrv with the name server's configuration
// changed by mutate (nil: none), its TLS for example.
func StartNamesrvWith(t testing.TB, mutate func(*namesrv.Config)) string {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	if mutate != nil {
		mutate(&cfg)
	}
	ns, err := namesrv.NewServer(cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("name server: %v", err)
	}
	if err := ns.Start(context.Background()); err != nil {
		t.Fatalf("start name server: %v", err)
	}
	t.Cleanup(func() { _ = ns.Shutdown(context.Background()) })
	return ns.Addr().String()
}

// StartBroker starts a broker on a loopback port with a temporary store
// and 4 MiB CommitLog segments, registered with the name servers of
// namesrvAddr (none when empty); settings (broker.conf keys) override
// those defaults. It returns the broker and the configuration it runs.
func StartBroker(t testing.TB, namesrvAddr string, settings map[string]string) (*broker.Broker, configs.Broker) {
	t.Helper()
	o := map[string]string{
		"storePathRootDir": t.TempDir(), "listenPort": "0", "brokerIP1": "127.0.0.1",
		"namesrvAddr": namesrvAddr, "mappedFileSizeCommitLog": "4194304",
	}
	maps.Copy(o, settings)
	loaded, err := configs.LoadBroker("", o)
	if err != nil {
		t.Fatalf("broker configuration: %v", err)
	}
	b, err := broker.New(loaded.Broker, zerolog.Nop())
	if err != nil {
		t.Fatalf("broker: %v", err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	return b, loaded.Broker
}

// Start starts a name server and a broker registered with it; settings
// are as for StartBroker.
func Start(t testing.TB, settings map[string]string) (namesrvAddr string, b *broker.Broker) {
	t.Helper()
	namesrvAddr = StartNamesrv(t)
	b, _ = StartBroker(t, namesrvAddr, settings)
	return namesrvAddr, b
}
