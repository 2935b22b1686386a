package controller

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Config is what a Controller runs with, under RocketMQ's ControllerConfig
// key names (the configs package loads them from a controller.properties
// or YAML file, or from the name server's with enableControllerInNamesrv).
type Config struct {
	// Group is controllerDLegerGroup, the name of the controller cluster
	// (GET_METADATA_INFO's group).
	Group string
	// Peers is controllerDLegerPeers: "n0-host:port;n1-host:port". Each
	// peer's host:port is where it serves brokers; its raft traffic goes
	// to the next port (port+1) of the same host.
	Peers string
	// SelfID is controllerDLegerSelfId, this controller's id among Peers.
	SelfID string
	// StorePath is controllerStorePath: the raft log, its stable store
	// and snapshots live here. Empty keeps everything in memory (state
	// is lost at a restart), for tests.
	StorePath string
	// ScanNotActiveBrokerInterval is how often heartbeats are checked for
	// brokers that stopped sending them (5 s).
	ScanNotActiveBrokerInterval time.Duration
	// ScanInactiveMasterInterval is how often the leader looks for broker
	// groups whose master is gone while another member is alive (5 s).
	ScanInactiveMasterInterval time.Duration
	// ElectMasterMaxRetryCount bounds the elections the controller tries
	// for a group whose master went away (3).
	ElectMasterMaxRetryCount int
	// EnableElectUncleanMaster lets an election pick a replica outside the
	// sync state set when none inside is alive (messages may be lost).
	EnableElectUncleanMaster bool
	// NotifyBrokerRoleChanged sends NOTIFY_BROKER_ROLE_CHANGED to a
	// group's alive members after an election (true).
	NotifyBrokerRoleChanged bool
	// ProcessReadEvent makes read requests (next broker id, replica info,
	// sync state data) pass through the raft log too, so a deposed leader
	// cannot answer them from stale state (isProcessReadEvent, false).
	ProcessReadEvent bool
	// ConfigBlackList names the keys (';'-separated) UPDATE_CONTROLLER_CONFIG
	// refuses, on top of configBlackList, configStorePath and rocketmqHome.
	ConfigBlackList string
	// RaftTimeout scales the raft timers (heartbeat and election timeout;
	// 1 s when zero). Tests shorten it.
	RaftTimeout time.Duration
	// SnapshotThreshold is how many raft log entries pile up before the
	// state is snapshotted and the log compacted (raft's 8192 when zero).
	// Not a RocketMQ key: tests lower it so a short run crosses snapshots.
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks SnapshotThreshold (raft's
	// 120 s when zero). Not a RocketMQ key, for tests.
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries a compaction keeps behind the
	// snapshot for slow followers (raft's 10240 when zero). Not a RocketMQ
	// key: tests lower it so a restart has to start from the snapshot.
	TrailingLogs uint64
}

// DefaultConfig returns RocketMQ's ControllerConfig defaults. Peers and
// SelfID have none there; RocketMQ's single controller example
// (controller-standalone.conf) uses group1, n0-127.0.0.1:9878 and n0.
func DefaultConfig() Config {
	return Config{
		ScanNotActiveBrokerInterval: 5 * time.Second,
		ScanInactiveMasterInterval:  5 * time.Second,
		ElectMasterMaxRetryCount:    3,
		NotifyBrokerRoleChanged:     true,
		ConfigBlackList:             "configBlackList;configStorePath",
	}
}

// Peer is one member of the controller cluster.
type Peer struct {
	// ID is the peer's id (n0, n1, ...).
	ID string
	// Addr is the "host:port" the peer serves brokers on.
	Addr string
}

// RaftAddr is the address of the peer's raft transport: its host at the
// port after Addr's.
func (p Peer) RaftAddr() (string, error) {
	host, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return "", fmt.Errorf("peer %s address %q: %w", p.ID, p.Addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n >= 65535 {
		return "", fmt.Errorf("peer %s address %q: port must be 1-65534", p.ID, p.Addr)
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1)), nil
}

// ParsePeers reads controllerDLegerPeers: "id-host:port" entries separated
// by ';' (RocketMQ's DLedger form; the id ends at the first '-').
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "-")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("controllerDLegerPeers: %q is not id-host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controllerDLegerPeers: %q: %w", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("controllerDLegerPeers: peer id %q appears twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("controllerDLegerPeers is empty: name the controllers as n0-host:port;n1-host:port")
	}
	return out, nil
}

// validate checks the settings a Controller cannot start without and
// returns the peers and this controller's own entry.
func (c *Config) validate() ([]Peer, Peer, error) {
	if strings.TrimSpace(c.Peers) == "" {
		return nil, Peer{}, fmt.Errorf("controllerDLegerPeers is null or empty")
	}
	if strings.TrimSpace(c.SelfID) == "" {
		return nil, Peer{}, fmt.Errorf("controllerDLegerSelfId is null or empty")
	}
	peers, err := ParsePeers(c.Peers)
	if err != nil {
		return nil, Peer{}, err
	}
	for _, p := range peers {
		if p.ID == c.SelfID {
			return peers, p, nil
		}
	}
	return nil, Peer{}, fmt.Errorf("controllerDLegerSelfId %q is not among controllerDLegerPeers %q", c.SelfID, c.Peers)
}

// ListenAddr is the address the controller serves brokers on: every
// interface at the port of its own entry in Peers, as RocketMQ's DLedger
// controller listens.
func (c *Config) ListenAddr() (string, error) {
	_, self, err := c.validate()
	if err != nil {
		return "", err
	}
	_, port, _ := net.SplitHostPort(self.Addr)
	return net.JoinHostPort("", port), nil
}
