package metrics

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// The controller's metric names, as RocketMQ's ControllerMetricsConstant
// spells them: bare words, without the rocketmq_ prefix of the broker's
// (RocketMQ's controller registers them so, under its meter "controller").
// Naming.Name gives the name a scrape shows: request_latency and
// dledger_op_latency declare the unit "us", dledger_disk_usage "bytes".
const (
	ControllerRole           = "role"
	ControllerDiskUsage      = "dledger_disk_usage"
	ControllerActiveBrokers  = "active_broker_num"
	ControllerRequestTotal   = "request_total"
	ControllerRaftOpTotal    = "dledger_op_total"
	ControllerElectionTotal  = "election_total"
	ControllerRequestLatency = "request_latency"
	ControllerRaftOpLatency  = "dledger_op_latency"
)

// The controller's constant labels (ControllerMetricsManager's LABEL_MAP):
// the controller's own address in controllerDLegerPeers, its
// controllerDLegerGroup and its controllerDLegerSelfId.
const (
	ControllerLabelAddress = "address"
	ControllerLabelGroup   = "group"
	ControllerLabelPeerID  = "peer_id"
)

// controllerVariableLabels are the label names the controller's metrics
// set per series; metricsLabel cannot name them.
var controllerVariableLabels = map[string]bool{
	"request_type": true, "request_handle_status": true, "cluster": true, "broker_set": true,
	"election_result": true, "dledger_operation": true, "dLedger_operation_status": true,
}

// ValidControllerConstLabel reports whether name may be a constant label
// of the controller's metrics (from metricsLabel): a Prometheus label name
// that no controller metric sets per series. address, group and peer_id
// may be given: as in RocketMQ, a metricsLabel pair replaces the value the
// controller sets.
func ValidControllerConstLabel(name string) bool {
	return validLabelName(name) && !controllerVariableLabels[name]
}

// OpStatus is the outcome of a controller request (request_handle_status)
// or of a replicated-log operation (dLedger_operation_status).
type OpStatus uint8

const (
	// OpSuccess: the request was answered (whatever its response code),
	// or the entry committed.
	OpSuccess OpStatus = iota
	// OpFailed: RocketMQ's handler threw (a header it could not decode,
	// an event its log did not take), or the log refused the entry.
	OpFailed
	// OpTimeout: the wait for the log timed out.
	OpTimeout
	numOpStatus
)

// String is the label value RocketMQ gives the status.
func (s OpStatus) String() string {
	switch s {
	case OpFailed:
		return "failed"
	case OpTimeout:
		return "timeout"
	}
	return "success"
}

// The election_result values (ControllerMetricsConstant.ElectionResult).
const (
	ElectionNewMaster  = "new_master_elected"
	ElectionKeepMaster = "keep_current_master"
	ElectionNoMaster   = "no_master_elected"
)

// RaftRole is a controller's role in its raft group, numbered as
// RocketMQ's getRoleValue numbers DLedger's roles.
type RaftRole int

// The roles.
const (
	RoleUnknown   RaftRole = 0
	RoleCandidate RaftRole = 1
	RoleFollower  RaftRole = 2
	RoleLeader    RaftRole = 3
)

// controllerRequestTypes are the request_type values
// (ControllerMetricsConstant.RequestType): the enum's names, upper case,
// though RocketMQ's method is called getLowerCaseNameByCode. 1007 and
// 1008 are in the enum though the controller does not serve them.
var controllerRequestTypes = []struct {
	code int32
	name string
}{
	{remoting.ControllerAlterSyncStateSet, "CONTROLLER_ALTER_SYNC_STATE_SET"},
	{remoting.ControllerElectMaster, "CONTROLLER_ELECT_MASTER"},
	{remoting.ControllerRegisterBroker, "CONTROLLER_REGISTER_BROKER"},
	{remoting.ControllerGetReplicaInfo, "CONTROLLER_GET_REPLICA_INFO"},
	{remoting.ControllerGetMetadataInfo, "CONTROLLER_GET_METADATA_INFO"},
	{remoting.ControllerGetSyncStateData, "CONTROLLER_GET_SYNC_STATE_DATA"},
	{remoting.GetBrokerEpochCache, "CONTROLLER_GET_BROKER_EPOCH_CACHE"},
	{remoting.NotifyBrokerRoleChanged, "CONTROLLER_NOTIFY_BROKER_ROLE_CHANGED"},
	{remoting.BrokerHeartbeat, "CONTROLLER_BROKER_HEARTBEAT"},
	{remoting.UpdateControllerConfig, "CONTROLLER_UPDATE_CONTROLLER_CONFIG"},
	{remoting.GetControllerConfig, "CONTROLLER_GET_CONTROLLER_CONFIG"},
	{remoting.CleanBrokerData, "CONTROLLER_CLEAN_BROKER_DATA"},
	{remoting.ControllerGetNextBrokerID, "CONTROLLER_GET_NEXT_BROKER_ID"},
	{remoting.ControllerApplyBrokerID, "CONTROLLER_APPLY_BROKER_ID"},
}

// requestTypeIndex is the index of code in controllerRequestTypes, -1
// for a code RocketMQ's enum does not have.
func requestTypeIndex(code int32) int {
	for i, t := range controllerRequestTypes {
		if t.code == code {
			return i
		}
	}
	return -1
}

// controllerLatencyBuckets are ControllerMetricsManager's latency view, in
// microseconds: 1, 3, 5, 10, 30, 50, 100, 300, 500 µs, the same in ms,
// then 1, 3, 5 and 10 s.
var controllerLatencyBuckets = []float64{
	1, 3, 5, 10, 30, 50, 100, 300, 500,
	1e3, 3e3, 5e3, 10e3, 30e3, 50e3, 100e3, 300e3, 500e3,
	1e6, 3e6, 5e6, 10e6,
}

// ActiveBrokers is the number of brokers of one group whose heartbeats
// are current.
type ActiveBrokers struct {
	Cluster   string
	BrokerSet string
	Count     int
}

// ControllerSources are what the controller's gauges read at a scrape.
type ControllerSources struct {
	// Role is the controller's role as RocketMQ would last have recorded
	// it; RoleUnknown leaves role out of the scrape.
	Role func() RaftRole
	// ActiveBrokers lists the groups with brokers alive.
	ActiveBrokers func() []ActiveBrokers
	// StorePath is controllerStorePath: dledger_disk_usage is the size of
	// the files under it, and is left out while it does not exist.
	StorePath string
	// Log receives what a scrape could not read.
	Log zerolog.Logger
}

// Controller holds one controller's metrics (RocketMQ's
// ControllerMetricsManager). A nil *Controller ignores every call.
//
// Series appear as RocketMQ's do, on their first measurement; a request's
// counter and histogram are found without a lock once their series exists
// (a sync.Once per request type and status), election and log-operation
// series through their vectors, which take a read lock.
type Controller struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latencies *prometheus.HistogramVec
	elections *prometheus.CounterVec
	opTotal   *prometheus.CounterVec
	opLatency *prometheus.HistogramVec
	// reqCount and reqLatency cache the series of each request type
	// (index into controllerRequestTypes).
	reqCount   [][numOpStatus]lazy[prometheus.Counter]
	reqLatency []lazy[prometheus.Observer]
	opCount    [numOpStatus]lazy[prometheus.Counter]
	opObserve  lazy[prometheus.Observer]
}

// lazy is a series created on its first use and found without a lock
// afterwards.
type lazy[T any] struct {
	once sync.Once
	v    T
}

func (l *lazy[T]) get(create func() T) T {
	l.once.Do(func() { l.v = create() })
	return l.v
}

// NewController builds a controller's metrics with the given constant
// labels (address, group, peer_id and metricsLabel's pairs), named as
// names says.
func NewController(labels map[string]string, src ControllerSources, names Naming) *Controller {
	c := prometheus.Labels(labels)
	m := &Controller{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(ControllerRequestTotal),
			Help: "total request num", ConstLabels: c}, []string{"request_type", "request_handle_status"}),
		latencies: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(ControllerRequestLatency),
			Help: "request latency", ConstLabels: c, Buckets: controllerLatencyBuckets}, []string{"request_type"}),
		elections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(ControllerElectionTotal),
			Help: "total elect num", ConstLabels: c}, []string{"cluster", "broker_set", "election_result"}),
		opTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: names.Name(ControllerRaftOpTotal),
			Help: "total dledger operation num", ConstLabels: c}, []string{"dledger_operation", "dLedger_operation_status"}),
		opLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: names.Name(ControllerRaftOpLatency),
			Help: "dledger operation latency", ConstLabels: c, Buckets: controllerLatencyBuckets},
			[]string{"dledger_operation", "dLedger_operation_status"}),
		reqCount:   make([][numOpStatus]lazy[prometheus.Counter], len(controllerRequestTypes)),
		reqLatency: make([]lazy[prometheus.Observer], len(controllerRequestTypes)),
	}
	m.reg.MustRegister(m.requests, m.latencies, m.elections, m.opTotal, m.opLatency)
	if src.Role != nil {
		m.reg.MustRegister(&maybeGauge{desc: prometheus.NewDesc(names.Name(ControllerRole), "role of current node", nil, c),
			f: func() (int64, bool) {
				r := src.Role()
				// RocketMQ keeps role as an up-down counter that adds
				// the difference of each new role's value from the
				// last, the last starting as FOLLOWER while the counter
				// starts at 0: what it serves is the role's value less
				// FOLLOWER's (leader 1, follower 0, candidate -1).
				return int64(r - RoleFollower), r != RoleUnknown
			}})
	}
	if src.ActiveBrokers != nil {
		m.reg.MustRegister(&activeBrokers{f: src.ActiveBrokers,
			desc: prometheus.NewDesc(names.Name(ControllerActiveBrokers), "now active brokers num", []string{"cluster", "broker_set"}, c)})
	}
	if src.StorePath != "" {
		path, log := src.StorePath, src.Log
		m.reg.MustRegister(&maybeGauge{desc: prometheus.NewDesc(names.Name(ControllerDiskUsage), "disk usage of dledger", nil, c),
			f: func() (int64, bool) { return diskUsage(path, log) }})
	}
	return m
}

// Handler serves the controller's metrics in Prometheus' text format.
func (m *Controller) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Request records one controller request handled: request_total by type
// and status, and, for a request answered (OpSuccess), its time in
// request_latency, in whole microseconds. A code RocketMQ's enum does not
// name is not recorded (the controller serves none).
func (m *Controller) Request(code int32, status OpStatus, elapsed time.Duration) {
	if m == nil || status >= numOpStatus {
		return
	}
	i := requestTypeIndex(code)
	if i < 0 {
		return
	}
	name := controllerRequestTypes[i].name
	m.reqCount[i][status].get(func() prometheus.Counter { return m.requests.WithLabelValues(name, status.String()) }).Inc()
	if status == OpSuccess {
		m.reqLatency[i].get(func() prometheus.Observer { return m.latencies.WithLabelValues(name) }).Observe(float64(elapsed.Microseconds()))
	}
}

// RaftAppend records one append to the replicated log and the wait for
// its commit (RocketMQ's appendToDLedgerAndWait): dledger_op_total with
// dledger_operation="append" by status, and, when it committed,
// dledger_op_latency in whole microseconds (RocketMQ's latency series
// carries dLedger_operation_status="success" too).
func (m *Controller) RaftAppend(status OpStatus, elapsed time.Duration) {
	if m == nil || status >= numOpStatus {
		return
	}
	m.opCount[status].get(func() prometheus.Counter { return m.opTotal.WithLabelValues("append", status.String()) }).Inc()
	if status == OpSuccess {
		m.opObserve.get(func() prometheus.Observer {
			return m.opLatency.WithLabelValues("append", OpSuccess.String())
		}).Observe(float64(elapsed.Microseconds()))
	}
}

// Election records one election's outcome for a group: result is one of
// ElectionNewMaster, ElectionKeepMaster and ElectionNoMaster. cluster is
// the requester's clusterName, empty for an election the controller
// started (RocketMQ's such request carries clusterName "" too; an empty
// label value is no label to Prometheus).
func (m *Controller) Election(cluster, brokerSet, result string) {
	if m == nil {
		return
	}
	m.elections.WithLabelValues(cluster, brokerSet, result).Inc()
}

// activeBrokers collects active_broker_num at each scrape.
type activeBrokers struct {
	f    func() []ActiveBrokers
	desc *prometheus.Desc
}

func (g *activeBrokers) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *activeBrokers) Collect(ch chan<- prometheus.Metric) {
	for _, a := range g.f() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(a.Count), a.Cluster, a.BrokerSet)
	}
}

// diskUsage is the size of the regular files under path (RocketMQ's
// calculateFileSizeInPath); false when path does not exist or cannot be
// read, which is logged.
func diskUsage(path string, log zerolog.Logger) (int64, bool) {
	if _, err := os.Stat(path); err != nil {
		return 0, false
	}
	var total int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		log.Error().Err(err).Str("path", path).Msg("dledger_disk_usage: size the controller store")
		return 0, false
	}
	return total, true
}
