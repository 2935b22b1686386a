package broker

import (
	"context"
	"sync"

	"github.com/rocketkv/rocketkv/migrate/cqcompare"
	"github.com/rocketkv/rocketkv/remoting"
)

// CheckRocksdbCqWriteResult's checkStatus values (RocketMQ's CheckStatus).
const (
	cqCheckOK         = 0
	cqCheckNotOK      = 1
	cqCheckInProgress = 2
	cqCheckError      = 3
)

// cqCheckWaitField is a request field of rocketkv's own: "true" makes the
// broker answer CHECK_ROCKSDB_CQ_WRITE_PROGRESS with the check's result
// instead of IN_PROGRESS. RocketMQ's mqadmin does not send it, and gets
// RocketMQ's answer.
const cqCheckWaitField = "rocketkvWait"

// cqCheckResult is RocketMQ's CheckRocksdbCqWriteResult body.
type cqCheckResult struct {
	CheckResult string `json:"checkResult"`
	CheckStatus int    `json:"checkStatus"`
}

// cqChecks lets one layout comparison run at a time.
type cqChecks struct {
	mu   sync.Mutex
	busy bool
}

// begin reports whether a check may start now, marking it running.
func (c *cqChecks) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy {
		return false
	}
	c.busy = true
	return true
}

// running reports whether a check is running.
func (c *cqChecks) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

func (c *cqChecks) end() {
	c.mu.Lock()
	c.busy = false
	c.mu.Unlock()
}

// processCheckCQWriteProgress answers CHECK_ROCKSDB_CQ_WRITE_PROGRESS
// (354, mqadmin checkRocksdbCqWriteProgress): under double-write it
// compares the two ConsumeQueue layouts, every queue (or the header's
// topic) from checkStoreTime on. As RocketMQ, the answer is IN_PROGRESS and
// the result goes to the log; with rocketkvWait=true the answer is the
// result. Only one check runs at a time.
func (b *Broker) processCheckCQWriteProgress(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	from, err := h.OptInt64("checkStoreTime", 0)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	opts := cqcompare.Options{Topic: h.OptString("topic", ""), FromTime: from, Bounds: b.disp.QuiescedMinima}
	if b.cqMirror == nil {
		// One layout, nothing to compare it with: CHECK_OK whichever it
		// is, as RocketMQ answers since its CombineConsumeQueueStore
		// (apache/rocketmq#9254; 5.3.3 answered CHECK_NOT_OK for its file
		// layout alone).
		return jsonResponse(req, cqCheckResult{"only the " + b.cfg.StoreType + " ConsumeQueue is written (rocksdbCQDoubleWriteEnable=false), no need check", cqCheckOK})
	}
	if !b.cqCheck.begin() {
		return jsonResponse(req, cqCheckResult{"a check is already running; its result goes to the log", cqCheckInProgress})
	}
	if h.OptBool(cqCheckWaitField, false) {
		defer b.cqCheck.end()
		return jsonResponse(req, b.checkLayouts(ctx, opts))
	}
	b.goBackground("cq-check", func(ctx context.Context) {
		defer b.cqCheck.end()
		b.checkLayouts(ctx, opts)
	})
	return jsonResponse(req, cqCheckResult{"check started; its result goes to the log", cqCheckInProgress})
}

// checkLayouts compares the Pebble and the file ConsumeQueue and logs
// the outcome.
func (b *Broker) checkLayouts(ctx context.Context, opts cqcompare.Options) cqCheckResult {
	log := b.component("cq-check")
	r, err := cqcompare.Compare(ctx, b.kvCQ, b.fileCQ, [2]string{"kv", "file"}, opts)
	if err != nil {
		log.Error().Err(err).Str("topic", opts.Topic).Msg("ConsumeQueue layout check failed")
		return cqCheckResult{err.Error(), cqCheckError}
	}
	if !r.OK() {
		log.Warn().Str("topic", opts.Topic).Str("result", r.String()).Msg("ConsumeQueue layouts differ")
		return cqCheckResult{r.String(), cqCheckNotOK}
	}
	log.Info().Str("topic", opts.Topic).Str("result", r.String()).Msg("ConsumeQueue layouts agree")
	return cqCheckResult{r.String(), cqCheckOK}
}
