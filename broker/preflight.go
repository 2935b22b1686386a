package broker

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
)

// Preflight returns cfg as New and Start would run it, or the error they
// would refuse it with before the store is opened: CheckConfig's, a
// brokerIP1 host name that does not resolve, a plain ACL file that
// aclEnable (or migrateAuthFromV1Enabled) needs and that does not load,
// a TLS certificate or key that does not load, a Prometheus exporter
// with metricsOtelCardinalityLimit <= 0. It opens nothing and starts
// nothing. bin/broker -p runs it, so that what it prints as the
// configuration that would run does start, with the values the broker
// derives filled in as RocketMQ's mqbroker -p prints them: brokerIP1
// the host's address when empty (a host name stays as given: it is what
// the broker registers), brokerIP2 brokerIP1 when empty, brokerId 0 on a
// master, haListenPort listenPort+1 and fastListenPort listenPort-2 when
// 0 (when listenPort is 0 too, the ports are picked at start and stay 0
// here), accessMessageInMemoryMaxRatio 10 less on a slave (memoryRatio).
func Preflight(cfg configs.Broker) (configs.Broker, error) {
	if err := CheckConfig(cfg); err != nil {
		return configs.Broker{}, err
	}
	if err := checkMetricsConfig(cfg); err != nil {
		return configs.Broker{}, err
	}
	ip, hostName, err := brokerIP(cfg.BrokerIP1)
	if err != nil {
		return configs.Broker{}, err
	}
	if cfg.AclEnable {
		path, err := plainACLPath(cfg)
		if err != nil {
			return configs.Broker{}, fmt.Errorf("aclEnable: %w", err)
		}
		if _, err := acl.Open(path, zerolog.Nop()); err != nil {
			return configs.Broker{}, fmt.Errorf("aclEnable: %w", err)
		}
	}
	if cfg.Auth.MigrateAuthFromV1Enabled {
		if err := checkPlainACLForMigration(cfg); err != nil {
			return configs.Broker{}, err
		}
	}
	if _, _, err := tlsconf.Listener("broker", cfg.TLS, zerolog.Nop()); err != nil {
		return configs.Broker{}, err
	}
	if _, err := tlsconf.Client("broker", cfg.DialNamesrvTLS(), cfg.TLS, zerolog.Nop()); err != nil {
		return configs.Broker{}, err
	}

	if !cfg.EnableControllerMode {
		// In controller mode the controller gives both: the file's
		// are left as written.
		if cfg.BrokerID, err = checkRole(cfg.BrokerRole, cfg.BrokerID); err != nil {
			return configs.Broker{}, err
		}
	}
	if hostName == "" {
		cfg.BrokerIP1 = ip.String()
	}
	if cfg.BrokerIP2 == "" {
		cfg.BrokerIP2 = cfg.BrokerIP1
	}
	if cfg.HAListenPort == 0 {
		cfg.HAListenPort = haListenPortOf(cfg)
	}
	if cfg.FastListenPort == 0 {
		cfg.FastListenPort = fastListenPortOf(cfg)
	}
	cfg.AccessMessageInMemoryMaxRatio = memoryRatio(cfg)
	return cfg, nil
}

// checkPlainACLForMigration returns the error the start's import of the
// plain ACL accounts into ACL 2.0 (migrateAuthFromV1Enabled) would stop
// with for the file alone: none to read, or one that does not parse.
func checkPlainACLForMigration(cfg configs.Broker) error {
	path, err := plainACLPath(cfg)
	if err != nil {
		return fmt.Errorf("migrateAuthFromV1Enabled: %w", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("migrateAuthFromV1Enabled: read the plain ACL file: %w", err)
	}
	if _, err := acl.Parse(raw); err != nil {
		return fmt.Errorf("migrateAuthFromV1Enabled: %s: %w", path, err)
	}
	return nil
}
