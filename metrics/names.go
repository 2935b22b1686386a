package metrics

import (
	"regexp"
	"strings"
)

// Naming is how the exporter spells the names of the metrics.
//
// RocketMQ declares each metric under a bare name (its metric constants)
// and, for some, a unit (setUnit). Which name a scrape shows depends on
// the OpenTelemetry Prometheus exporter RocketMQ ships: up to 1.26
// (RocketMQ 5.0 to 5.1.3) it shows the bare name; from 1.27 on (RocketMQ
// 5.1.4 and later, 1.29.0-alpha in 5.1.4 to 5.3.3) it appends the unit to
// the name, by the rules of unitSuffixed.
type Naming uint8

const (
	// UnitSuffixed are the names a RocketMQ 5.1.4 to 5.3.x broker serves:
	// rocketmq_rpc_latency_milliseconds, rocketmq_storage_size_bytes.
	UnitSuffixed Naming = iota
	// Bare are RocketMQ's metric constants as written, the names a
	// RocketMQ 5.0 to 5.1.3 broker serves: rocketmq_rpc_latency,
	// rocketmq_storage_size.
	Bare
)

// instrument is a metric's kind as the OpenTelemetry exporter types it,
// which matters to its naming: a counter's name gets "_total" unless it
// has it, a gauge of unit "1" gets "_ratio".
type instrument uint8

const (
	gauge instrument = iota
	counter
	histogram
)

// declaration is what RocketMQ declares for a metric: its instrument and
// the unit it passes to setUnit ("" when it sets none).
type declaration struct {
	kind instrument
	unit string
}

// declared are RocketMQ 5.3.3's declarations of the metrics rocketkv
// serves (BrokerMetricsManager, RemotingMetricsManager,
// DefaultStoreMetricsManager, PopMetricsManager, and the controller's
// ControllerMetricsManager, unchanged in 5.3.4). Note
// rocketmq_finish_message_latency: RocketMQ records seconds and declares
// "ms", so its suffixed name says milliseconds; and rocketmq_pop_revive_lag,
// a count of messages RocketMQ declares in "milliseconds", so its suffixed
// name says milliseconds too.
var declared = map[string]declaration{
	MessagesInTotal:       {counter, ""},
	MessagesOutTotal:      {counter, ""},
	ThroughputInTotal:     {counter, ""},
	ThroughputOutTotal:    {counter, ""},
	SendToDLQTotal:        {counter, ""},
	CommitMessagesTotal:   {counter, ""},
	RollbackMessagesTotal: {counter, ""},
	HalfMessages:          {gauge, ""},
	BrokerPermission:      {gauge, ""},
	TopicNumber:           {gauge, ""},
	ConsumerGroupNumber:   {gauge, ""},
	ProducerConnections:   {gauge, ""},
	ConsumerConnections:   {gauge, ""},
	StorageDispatchBehind: {gauge, "bytes"},
	StorageFlushBehind:    {gauge, "bytes"},
	StorageSize:           {gauge, "bytes"},
	StorageReserveTime:    {gauge, "milliseconds"},
	ConsumerLagMessages:   {gauge, ""},
	ConsumerLagLatency:    {gauge, "milliseconds"},
	ConsumerInflight:      {gauge, ""},
	ConsumerReady:         {gauge, ""},
	ConsumerQueueing:      {gauge, "milliseconds"},
	MessageSize:           {histogram, ""},
	FinishMessageLatency:  {histogram, "ms"},
	TopicCreateTime:       {histogram, "milliseconds"},
	GroupCreateTime:       {histogram, "milliseconds"},
	RPCLatency:            {histogram, "milliseconds"},
	TimerEnqueueTotal:     {counter, ""},
	TimerDequeueTotal:     {counter, ""},
	DelayMessageLatency:   {histogram, "seconds"},
	TimerEnqueueLag:       {gauge, ""},
	TimerEnqueueLatency:   {gauge, "milliseconds"},
	TimerDequeueLag:       {gauge, ""},
	TimerDequeueLatency:   {gauge, "milliseconds"},
	TimingMessages:        {gauge, ""},
	TimerMessageSnapshot:  {gauge, ""},
	PopReviveInTotal:      {counter, ""},
	PopReviveOutTotal:     {counter, ""},
	PopReviveRetryTotal:   {counter, ""},
	PopReviveLag:          {gauge, "milliseconds"},
	PopReviveLatency:      {gauge, "milliseconds"},
	// The controller's (ControllerMetricsManager): role is an up-down
	// counter, which the exporter types as a gauge.
	ControllerRole:           {gauge, ""},
	ControllerDiskUsage:      {gauge, "bytes"},
	ControllerActiveBrokers:  {gauge, ""},
	ControllerRequestTotal:   {counter, ""},
	ControllerRaftOpTotal:    {counter, ""},
	ControllerElectionTotal:  {counter, ""},
	ControllerRequestLatency: {histogram, "us"},
	ControllerRaftOpLatency:  {histogram, "us"},
}

// Name returns the name under which metric, one of this package's metric
// constants, is served; a histogram's series add _bucket, _sum and _count
// to it. An unknown name is returned as given.
func (n Naming) Name(metric string) string {
	d, ok := declared[metric]
	if !ok || n == Bare {
		return metric
	}
	return unitSuffixed(metric, d)
}

// unitSuffixed is the name the OpenTelemetry Java Prometheus exporter
// (1.27 to 1.29) gives a metric of this declaration:
//
//   - the unit, converted by prometheusUnit, is appended after an
//     underscore unless it is empty or the name already contains it
//     anywhere (rocketmq_storage_flush_behind_bytes stays as it is);
//   - then a counter whose name does not contain "total" gets "_total";
//   - a gauge of unit "1" whose name does not contain "ratio" gets
//     "_ratio".
//
// The exporter also replaces the characters Prometheus does not allow in
// a name; RocketMQ's names have none.
func unitSuffixed(name string, d declaration) string {
	if u := prometheusUnit(d.unit); u != "" && !strings.Contains(name, u) {
		name += "_" + u
	}
	if d.kind == counter && !strings.Contains(name, "total") {
		name += "_total"
	}
	if d.kind == gauge && d.unit == "1" && !strings.Contains(name, "ratio") {
		name += "_ratio"
	}
	return name
}

// unitBraces matches an annotation in braces, "{messages}": UCUM's way to
// say what is counted, which the exporter drops.
var unitBraces = regexp.MustCompile(`\{.*?\}`)

// notAlphanumeric are the runs of characters the exporter turns into one
// underscore.
var notAlphanumeric = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// prometheusUnit converts an OpenTelemetry (UCUM) unit to the word the
// exporter appends: annotations in braces dropped, a rate "a/b" spelled
// "a_per_b", known abbreviations spelled out ("ms" milliseconds, "By"
// bytes, "1" nothing), any other unit kept as written; then every run of
// characters other than letters and digits becomes one underscore, and
// underscores at either end are trimmed.
func prometheusUnit(unit string) string {
	u := unitBraces.ReplaceAllString(unit, "")
	if per, of, ok := strings.Cut(u, "/"); ok && of != "" {
		u = unitWord(per) + "_per_" + perUnitWord(of)
	} else {
		u = unitWord(u)
	}
	return strings.Trim(notAlphanumeric.ReplaceAllString(u, "_"), "_")
}

// unitWords are the UCUM abbreviations the exporter spells out.
var unitWords = map[string]string{
	"d": "days", "h": "hours", "min": "minutes", "s": "seconds",
	"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds",
	"By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes", "TiBy": "tibibytes",
	"KBy": "kilobytes", "MBy": "megabytes", "GBy": "gigabytes", "TBy": "terabytes",
	"B": "bytes", "KB": "kilobytes", "MB": "megabytes", "GB": "gigabytes", "TB": "terabytes",
	"m": "meters", "V": "volts", "A": "amperes", "J": "joules", "W": "watts", "g": "grams",
	"Cel": "celsius", "Hz": "hertz", "1": "", "%": "percent", "$": "dollars",
}

// perUnitWords are the abbreviations spelled out after "per".
var perUnitWords = map[string]string{
	"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year",
}

func unitWord(u string) string {
	if w, ok := unitWords[u]; ok {
		return w
	}
	return u
}

func perUnitWord(u string) string {
	if w, ok := perUnitWords[u]; ok {
		return w
	}
	return u
}
