package controller

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// fsm is the raft state machine: it applies the replicated events to the
// State. Handlers read the state under mu (read lock).
type fsm struct {
	log zerolog.Logger
	mu  sync.RWMutex
	// st is guarded by mu.
	st *State
}

var _ raft.FSM = (*fsm)(nil)

// Apply applies one committed log entry. Its response is nil, the
// *Rejection of an event the state refused, or the error of an unreadable
// entry.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	e, err := decodeEvent(l.Data)
	if err != nil {
		// Only this code writes the log, so this is corruption: skip the
		// entry rather than stop the controller, and say so.
		f.log.Error().Err(err).Uint64("index", l.Index).Msg("controller: skipping an unreadable log entry")
		return err
	}
	f.mu.Lock()
	rej := f.st.Apply(e)
	f.mu.Unlock()
	if rej != nil {
		// Every controller refuses it alike (the same state, the same
		// event); the leader answers the request with it.
		f.log.Warn().Str("event", string(e.Type)).Str("brokerName", e.BrokerName).Int64("brokerId", e.BrokerID).
			Int32("code", rej.Code).Str("remark", rej.Remark).Uint64("index", l.Index).
			Msg("controller: an event the state no longer admits changed nothing")
		return rej
	}
	return nil
}

// Snapshot captures the state as JSON.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	data, err := json.Marshal(f.st)
	f.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("snapshot controller state: %w", err)
	}
	return snapshot(data), nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read controller snapshot: %w", err)
	}
	st := NewState()
	if err := json.Unmarshal(data, st); err != nil {
		return fmt.Errorf("decode controller snapshot: %w", err)
	}
	if st.Replicas == nil {
		st.Replicas = map[string]*Replicas{}
	}
	if st.SyncStates == nil {
		st.SyncStates = map[string]*SyncState{}
	}
	for name, r := range st.Replicas {
		if r == nil {
			delete(st.Replicas, name)
			continue
		}
		if r.Brokers == nil {
			r.Brokers = map[int64]Replica{}
		}
	}
	for name, ss := range st.SyncStates {
		if ss == nil {
			delete(st.SyncStates, name)
		}
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

// snapshot is a captured state.
type snapshot []byte

// Persist writes the snapshot.
func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write controller snapshot: %w", err)
	}
	return sink.Close()
}

// Release frees nothing.
func (s snapshot) Release() {}

// node is the raft member with its stores and transport.
type node struct {
	raft      *raft.Raft
	transport raft.Transport
	closers   []io.Closer
}

// zerologWriter sends raft's and hclog's lines to zerolog at debug level
// (raft's own warnings and errors are passed on at theirs).
type zerologWriter struct{ log zerolog.Logger }

// Write logs one line of raft's at the level its text names.
func (w zerologWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	ev := w.log.Debug()
	switch {
	case strings.Contains(line, "[ERROR]"):
		ev = w.log.Error()
	case strings.Contains(line, "[WARN]"):
		ev = w.log.Warn()
	case strings.Contains(line, "[INFO]"):
		ev = w.log.Info()
	}
	ev.Msg(line)
	return len(p), nil
}

// raftTLS is the TLS of the raft transport: the listener's mode and
// certificate, and the client TLS this controller dials its peers with
// (nil: plaintext).
type raftTLS struct {
	mode   remoting.TLSMode
	server *tls.Config
	client *tls.Config
}

// openNode starts this controller's raft member: one voter per peer, the
// cluster bootstrapped with every peer on first start (every peer
// bootstraps the same configuration). With one peer the transport is in
// memory; with several, TCP on each peer's RaftAddr, with the TLS of tr.
func openNode(cfg Config, peers []Peer, self Peer, f *fsm, notify chan bool, tr raftTLS, log zerolog.Logger) (*node, error) {
	out := &node{}
	ok := false
	defer func() {
		if !ok {
			out.close()
		}
	}()
	logw := zerologWriter{log: log.With().Str("component", "raft").Logger()}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(self.ID)
	rc.NotifyCh = notify
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Output: logw, Level: hclog.Info})
	if t := cfg.RaftTimeout; t > 0 {
		rc.HeartbeatTimeout, rc.ElectionTimeout = t, t
		rc.LeaderLeaseTimeout = t / 2
		rc.CommitTimeout = t / 20
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.StorePath == "" {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		if err := os.MkdirAll(cfg.StorePath, 0o755); err != nil {
			return nil, fmt.Errorf("controllerStorePath %s: %w", cfg.StorePath, err)
		}
		bolt, err := raftboltdb.NewBoltStore(filepath.Join(cfg.StorePath, "raft.db"))
		if err != nil {
			return nil, fmt.Errorf("open raft log in %s: %w", cfg.StorePath, err)
		}
		out.closers = append(out.closers, bolt)
		logs, stable = bolt, bolt
		fs, err := raft.NewFileSnapshotStore(cfg.StorePath, 2, logw)
		if err != nil {
			return nil, fmt.Errorf("open raft snapshots in %s: %w", cfg.StorePath, err)
		}
		// The store is this process's now (bbolt's lock on raft.db).
		removeCutSnapshots(filepath.Join(cfg.StorePath, "snapshots"), log)
		snaps = fs
	}

	servers := make([]raft.Server, 0, len(peers))
	for _, p := range peers {
		addr, err := p.RaftAddr()
		if err != nil {
			return nil, err
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(addr)})
	}
	selfRaft, err := self.RaftAddr()
	if err != nil {
		return nil, err
	}
	if len(peers) == 1 {
		_, out.transport = raft.NewInmemTransport(raft.ServerAddress(selfRaft))
	} else {
		adv, err := net.ResolveTCPAddr("tcp", selfRaft)
		if err != nil {
			return nil, fmt.Errorf("controller %s raft address %s: %w", self.ID, selfRaft, err)
		}
		_, port, _ := net.SplitHostPort(selfRaft)
		stream, err := listenRaft(net.JoinHostPort("", port), adv, tr.mode, tr.server, tr.client, log.With().Str("component", "raft").Logger())
		if err != nil {
			return nil, fmt.Errorf("controller %s raft transport on %s: %w", self.ID, selfRaft, err)
		}
		tcp := raft.NewNetworkTransport(stream, 3, 10*time.Second, logw)
		out.transport = tcp
		out.closers = append(out.closers, tcp)
		log.Info().Str("raft", selfRaft).Stringer("tlsMode", tr.mode).Bool("dialTLS", tr.client != nil).Msg("raft transport between controllers")
	}

	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("read raft state in %q: %w", cfg.StorePath, err)
	}
	if has {
		cut, err := cutBootstrap(logs, stable, snaps)
		if err != nil {
			return nil, fmt.Errorf("read raft state in %q: %w", cfg.StorePath, err)
		}
		if cut {
			log.Warn().Str("store", cfg.StorePath).Msg("controller: the store's first start was cut during the raft bootstrap (a term but no membership); bootstrapping it again")
			has = false
		}
	}
	if !has {
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, out.transport, raft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("bootstrap controller cluster: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, f, logs, stable, snaps, out.transport)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	out.raft = r
	if has {
		warnMembership(r, servers, log)
	}
	ok = true
	return out, nil
}

// removeCutSnapshots deletes the snapshot directories a kill left half
// written in dir (raft's FileSnapshotStore writes a snapshot into
// "<id>.tmp" and renames it once complete; it skips a leftover one but
// never removes it, so every kill during a snapshot would leave one
// behind for good). A failure is logged: the leftover only takes space.
func removeCutSnapshots(dir string, log zerolog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Warn().Err(err).Str("dir", dir).Msg("controller: cannot list the raft snapshots to remove cut ones")
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			log.Warn().Err(err).Str("path", p).Msg("controller: cannot remove a raft snapshot a stop cut while it was written")
			continue
		}
		log.Info().Str("path", p).Msg("controller: removed a raft snapshot a stop cut while it was written")
	}
}

// raftCurrentTermKey is the stable-store key raft keeps its current term
// under (hashicorp/raft's keyCurrentTerm, unexported).
var raftCurrentTermKey = []byte("CurrentTerm")

// cutBootstrap reports whether a store holds only what the first half of
// raft.BootstrapCluster writes: the current term (1) without the log
// entry of the membership, which it writes in a second commit. A process
// killed between the two leaves that, and raft, seeing a term, would
// neither bootstrap again nor ever elect (it has no membership). Every
// peer here bootstraps itself before raft runs, so a store with a term
// but no log entry and no snapshot never took part in an election: its
// term is cleared so that the bootstrap runs again.
func cutBootstrap(logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) (bool, error) {
	last, err := logs.LastIndex()
	if err != nil {
		return false, fmt.Errorf("last log index: %w", err)
	}
	if last > 0 {
		return false, nil
	}
	list, err := snaps.List()
	if err != nil {
		return false, fmt.Errorf("list snapshots: %w", err)
	}
	if len(list) > 0 {
		return false, nil
	}
	if err := stable.SetUint64(raftCurrentTermKey, 0); err != nil {
		return false, fmt.Errorf("clear the term of a cut bootstrap: %w", err)
	}
	return true, nil
}

// close stops raft and closes the stores and transport.
func (n *node) close() error {
	var errs []error
	if n.raft != nil {
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("stop raft: %w", err))
		}
	}
	for i := len(n.closers) - 1; i >= 0; i-- {
		if err := n.closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// warnMembership logs when the stored raft membership differs from
// controllerDLegerPeers: the membership is fixed by a store's first start
// (bootstrap), so a changed peer list needs fresh stores on every peer.
func warnMembership(r *raft.Raft, want []raft.Server, log zerolog.Logger) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		log.Warn().Err(err).Msg("controller: cannot read the raft membership")
		return
	}
	have := map[raft.ServerID]raft.ServerAddress{}
	for _, s := range f.Configuration().Servers {
		have[s.ID] = s.Address
	}
	same := len(have) == len(want)
	for _, s := range want {
		if have[s.ID] != s.Address {
			same = false
		}
	}
	if !same {
		log.Warn().Interface("stored", have).Str("hint", "the membership is fixed when a store is first created; start every peer from an empty controllerStorePath to change it").
			Msg("controller: controllerDLegerPeers differs from the raft membership in controllerStorePath; the stored one is used")
	}
}
