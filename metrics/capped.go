package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// DefaultCardinalityLimit is the series a metric holds at most unless
// Sources.CardinalityLimit says otherwise: RocketMQ 5.3's default of
// metricsOtelCardinalityLimit.
const DefaultCardinalityLimit = 50_000

// OverflowValue is the value of every variable label of a metric's
// overflow series, which counts what the label sets past the metric's
// cardinality limit record (the package doc tells why this shape).
const OverflowValue = "otel_metric_overflow"

// maxCappedLabels is the most variable labels a capped metric has
// (rocketmq_messages_out_total's pop series: topic, consumer_group,
// is_system, is_retry).
const maxCappedLabels = 4

// seriesKey is one label set of a capped metric: its values in the order
// of its shape's label names, the rest empty. An array, not a joined
// string, so that finding the series of a label set allocates nothing.
type seriesKey struct {
	vals  [maxCappedLabels]string
	shape uint8
}

// shape is one list of label names of a capped metric, and its vectors
// of those labels: every label set of the shape has a series in each.
// count is always there; bytes and hist may be nil.
type shape struct {
	labels []string
	count  *prometheus.CounterVec
	bytes  *prometheus.CounterVec
	hist   *prometheus.HistogramVec
}

// series are the series of one label set in its shape's vectors (nil
// where the shape has no vector).
type series struct {
	count, bytes prometheus.Counter
	hist         prometheus.Observer
}

// make returns the series of vals in the shape's vectors, creating them.
func (sh *shape) make(vals []string) *series {
	s := &series{count: sh.count.WithLabelValues(vals...)}
	if sh.bytes != nil {
		s.bytes = sh.bytes.WithLabelValues(vals...)
	}
	if sh.hist != nil {
		s.hist = sh.hist.WithLabelValues(vals...)
	}
	return s
}

// delete deletes from the shape's vectors the series whose label name
// has value.
func (sh *shape) delete(name, value string) {
	match := prometheus.Labels{name: value}
	sh.count.DeletePartialMatch(match)
	if sh.bytes != nil {
		sh.bytes.DeletePartialMatch(match)
	}
	if sh.hist != nil {
		sh.hist.DeletePartialMatch(match)
	}
}

// capped holds the series of a metric, or of the metrics one call feeds
// with the same labels (a send's messages, bytes and size), up to limit-1
// label sets: RocketMQ 5.3 caps each metric at metricsOtelCardinalityLimit
// series with OTel's cardinality limit, which keeps the last of them for
// its overflow series. A label set past the limit is recorded in the
// overflow series of its shape, whose labels all carry OverflowValue; the
// first one logs a warning. Deleting the series of a
// topic or group (drop) frees room for new label sets; the overflow
// series stays, its counts being cumulative.
//
// A metric of two shapes (rocketmq_messages_out_total: a pull's series
// lack is_retry, a pop's have it) counts the label sets of both against
// the one limit, as RocketMQ's one instrument does.
//
// The label sets held are kept in sets beside the vectors, and the
// vectors change only under mu, so the two agree: finding an existing
// series costs a read lock and one map lookup (no hashing of label
// values by the vector, no allocation; BenchmarkIn), and counting the
// series is len(sets).
type capped struct {
	shapes []shape
	limit  int
	names  []string // the metrics, for the warning
	log    zerolog.Logger

	mu       sync.RWMutex
	sets     map[seriesKey]*series
	overflow []*series // by shape, made at its first overflow
	warned   bool
}

// newCapped returns the capped series of metrics (their names, for the
// warning) of the given shapes; limit <= 0 means DefaultCardinalityLimit.
func newCapped(limit int, log zerolog.Logger, names []string, shapes ...shape) *capped {
	if limit <= 0 {
		limit = DefaultCardinalityLimit
	}
	return &capped{shapes: shapes, limit: limit, names: names, log: log,
		sets: map[seriesKey]*series{}, overflow: make([]*series, len(shapes))}
}

// get returns the series of k: those kept, else new ones while the limit
// allows, else the overflow series of k's shape.
func (c *capped) get(k seriesKey) *series {
	c.mu.RLock()
	s, ok := c.sets[k]
	if !ok && len(c.sets) >= c.limit-1 {
		s = c.overflow[k.shape]
	}
	c.mu.RUnlock()
	if s != nil {
		return s
	}
	return c.add(k)
}

// add is get's slow path, under the write lock.
func (c *capped) add(k seriesKey) *series {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sets[k]; ok {
		return s
	}
	sh := &c.shapes[k.shape]
	if len(c.sets) < c.limit-1 {
		s := sh.make(k.vals[:len(sh.labels)])
		c.sets[k] = s
		return s
	}
	if !c.warned {
		c.warned = true
		for _, name := range c.names {
			c.log.Warn().Str("metric", name).Int("metricsOtelCardinalityLimit", c.limit).
				Msg("metric holds as many series as its cardinality limit: the label sets past it are counted in its series labelled " + OverflowValue)
		}
	}
	if c.overflow[k.shape] == nil {
		vals := make([]string, len(sh.labels))
		for i := range vals {
			vals[i] = OverflowValue
		}
		c.overflow[k.shape] = sh.make(vals)
	}
	return c.overflow[k.shape]
}

// drop deletes the series whose label name has value (a topic's or a
// group's), freeing their room under the limit.
func (c *capped) drop(name, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.shapes {
		sh := &c.shapes[i]
		at := slices.Index(sh.labels, name)
		if at < 0 {
			continue
		}
		for k := range c.sets {
			if int(k.shape) == i && k.vals[at] == value {
				delete(c.sets, k)
			}
		}
		sh.delete(name, value)
		if value == OverflowValue {
			// A topic or group of that very name: the overflow series
			// went with its own, and is made again when needed.
			c.overflow[i] = nil
		}
	}
}

// size returns how many label sets have series, the overflow series not
// counted.
func (c *capped) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.sets)
}
