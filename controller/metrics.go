package controller

import (
	"cmp"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// MetricsOptions turns on the controller's metrics, served in Prometheus'
// format (RocketMQ's ControllerMetricsManager with
// metricsExporterType=PROM).
type MetricsOptions struct {
	// Addr is where /metrics is served: metricsPromExporterHost (every
	// interface when empty, as RocketMQ's controller) and
	// metricsPromExporterPort.
	Addr string
	// Labels are added to every series beside address, group and
	// peer_id (metricsLabel's pairs, aggregation=delta with
	// metricsInDelta); a pair naming one of those three replaces its
	// value, as in RocketMQ.
	Labels map[string]string
	// Naming is how the names are spelled (metricsNameUnitSuffix).
	Naming metrics.Naming
}

// MetricsFrom returns the metrics options the loaded keys ask for: nil
// unless metricsExporterType is PROM. A metricsLabel pair that is not
// key:value, or whose key is not a label name of its own, is logged and
// left out, as RocketMQ logs and skips it.
func MetricsFrom(c configs.Controller, log zerolog.Logger) *MetricsOptions {
	if c.MetricsExporterType != configs.MetricsPROM {
		return nil
	}
	labels := map[string]string{}
	for _, pair := range strings.Split(c.MetricsLabel, ",") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, ":")
		if !ok || strings.Contains(v, ":") || !metrics.ValidControllerConstLabel(k) {
			log.Warn().Str("metricsLabel", c.MetricsLabel).Str("pair", pair).
				Msg("metricsLabel pair is not key:value with a label name of its own; ignored")
			continue
		}
		labels[k] = v
	}
	if c.MetricsInDelta {
		labels["aggregation"] = "delta"
	}
	names := metrics.Bare
	if c.MetricsNameUnitSuffix {
		names = metrics.UnitSuffixed
	}
	return &MetricsOptions{
		Addr:   net.JoinHostPort(c.MetricsPromExporterHost, strconv.Itoa(c.MetricsPromExporterPort)),
		Labels: labels,
		Naming: names,
	}
}

// MetricsSettings are the metrics keys as GET_CONTROLLER_CONFIG reports
// them (Options.ExtraSettings): RocketMQ lists them among its
// ControllerConfig; UPDATE_CONTROLLER_CONFIG does not change them (the
// exporter is set up at start, in RocketMQ too).
func MetricsSettings(c configs.Controller) map[string]string {
	return map[string]string{
		"metricsExporterType":     c.MetricsExporterType,
		"metricsPromExporterHost": c.MetricsPromExporterHost,
		"metricsPromExporterPort": strconv.Itoa(c.MetricsPromExporterPort),
		"metricsLabel":            c.MetricsLabel,
		"metricsInDelta":          strconv.FormatBool(c.MetricsInDelta),
		"metricsNameUnitSuffix":   strconv.FormatBool(c.MetricsNameUnitSuffix),
	}
}

// newMetrics builds the controller's metrics: its constant labels are its
// own peer address, controllerDLegerGroup and controllerDLegerSelfId
// (RocketMQ's getDLedgerAddress, group, selfId), then opts.Labels.
func (c *Controller) newMetrics(opts *MetricsOptions) *metrics.Controller {
	labels := map[string]string{
		metrics.ControllerLabelAddress: c.self.Addr,
		metrics.ControllerLabelGroup:   c.cfg.Group,
		metrics.ControllerLabelPeerID:  c.self.ID,
	}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	return metrics.NewController(labels, metrics.ControllerSources{
		Role:          c.role,
		ActiveBrokers: c.hb.active,
		StorePath:     c.cfg.StorePath,
		Log:           c.log,
	}, opts.Naming)
}

// role is the controller's role as RocketMQ's controller would last have
// recorded it: RocketMQ records LEADER only once its first entry as
// leader committed, as ready says here; until then a new leader is still
// the candidate it was. Before Start and after Close it is unknown.
func (c *Controller) role() metrics.RaftRole {
	if c.node == nil || c.closed.Load() {
		return metrics.RoleUnknown
	}
	switch c.node.raft.State() {
	case raft.Leader:
		if c.readyNow() {
			return metrics.RoleLeader
		}
		return metrics.RoleCandidate
	case raft.Candidate:
		return metrics.RoleCandidate
	case raft.Follower:
		return metrics.RoleFollower
	}
	return metrics.RoleUnknown
}

// active counts the brokers whose heartbeats are current, by cluster and
// group (RocketMQ's getActiveBrokersNum).
func (h *heartbeats) active() []metrics.ActiveBrokers {
	now := h.now()
	counts := map[[2]string]int{}
	h.mu.Lock()
	for id, l := range h.live {
		if l.alive(now) {
			counts[[2]string{id.Cluster, id.BrokerName}]++
		}
	}
	h.mu.Unlock()
	out := make([]metrics.ActiveBrokers, 0, len(counts))
	for k, n := range counts {
		out = append(out, metrics.ActiveBrokers{Cluster: k[0], BrokerSet: k[1], Count: n})
	}
	slices.SortFunc(out, func(a, b metrics.ActiveBrokers) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.BrokerSet, b.BrokerSet))
	})
	return out
}

// raftWait waits for a raft operation that appends to the log (an event,
// the barrier of a new leader) or, with isProcessReadEvent, confirms
// leadership for a read, and records it in dledger_op_total and
// dledger_op_latency: RocketMQ appends an entry to DLedger at each of
// these places (an empty one for a read) and records every append.
//
// It returns raft.ErrRaftShutdown once the controller closes, without
// waiting for the future: raft does not always answer a future it took
// just before it shut down, and Close waits for the scan that proposes
// (a Close under load hung on it for good). The goroutine reading the
// future then ends when raft answers it, if ever.
func (c *Controller) raftWait(start time.Time, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-c.stop:
		err = raft.ErrRaftShutdown
	}
	if c.metrics != nil {
		c.metrics.RaftAppend(raftStatus(err), time.Since(start))
	}
	return err
}

// raftStatus is the dLedger_operation_status (and request_handle_status)
// of a raft operation's outcome: timeout when the entry could not be
// queued in time, failed for any other error.
func raftStatus(err error) metrics.OpStatus {
	switch {
	case err == nil:
		return metrics.OpSuccess
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return metrics.OpTimeout
	}
	return metrics.OpFailed
}

// electionResult is the election_result RocketMQ records for an election's
// response code; false for the codes it does not count (a group not
// registered, say).
func electionResult(code int32) (string, bool) {
	switch code {
	case remoting.Success:
		return metrics.ElectionNewMaster, true
	case remoting.ControllerMasterStillExist:
		return metrics.ElectionKeepMaster, true
	case remoting.ControllerMasterNotAvailable, remoting.ControllerElectMasterFailed:
		return metrics.ElectionNoMaster, true
	}
	return "", false
}

// elect is the check of an election, recording its outcome in
// election_total as RocketMQ does: once the leader ran the election,
// before its event is replicated.
func (c *Controller) elect(h ElectMasterHeader, byController bool) func(*State, checks) result {
	return func(st *State, ch checks) result {
		res := ch.electMaster(st, h, byController)
		if r, ok := electionResult(res.code); ok && c.metrics != nil {
			c.metrics.Election(h.ClusterName, h.BrokerName, r)
		}
		return res
	}
}
