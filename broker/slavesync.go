package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
)

// A slave copies its master's metadata with Remoting requests, as
// RocketMQ 5.3's SlaveSynchronize does (the CommitLog itself comes over
// the HA port). Per table:
//
//	topics (21)          only when the master's dataVersion differs from
//	                     ours: replaced wholesale (topics the master no
//	                     longer has are deleted; their queues are not),
//	                     the master's dataVersion taken over
//	consumer offsets (43) every time: per topic@group the master's queue
//	                     offsets replace ours; pairs the master does not
//	                     have are kept
//	delay offsets (45)   every time: per delay level the master's offset
//	                     replaces ours; levels it does not have are kept.
//	                     The request names our CommitLog's end, and a
//	                     rocketkv master answers a level only as far as
//	                     we hold its deliveries (slaveDelayOffsets)
//	groups (201)         as topics
//	request modes (402)  every time: replaced wholesale
//	timer deliveries     every time, and every 3 s under timerWheelEnable
//	                     as RocketMQ's timer checkpoint (rocketkv's
//	                     GetTimerWatermark, not asked of a master that
//	                     does not answer it): the parked timer messages
//	                     the master delivered are forgotten once this
//	                     slave holds their copies
//	POP in-flight state  every time, after the consumer offsets
//	                     (rocketkv's GetPopState in pages, see
//	                     popcopy.go; not asked of a master that does not
//	                     answer it): replaced wholesale
//	timer metrics (61)   under timerWheelEnable, as topics: the copy
//	                     answers GET_TIMER_METRICS and
//	                     rocketmq_timing_messages on this slave
//
// With the POP state a promoted slave re-delivers what was in flight on
// its master when it last synced, once its invisible time is over, and
// keeps the locks of orderly batches. Without it (a master that does not
// answer GetPopState, or pages that stop coming) nothing popped is
// lost either, since a group's committed offset stays at its smallest
// message in flight; but every message from there on is popped again at
// once, acknowledged ones included, and orderly queues are free. The state
// comes after the offsets, so a message popped between the two copies is
// either past the copied offset (popped again) or has its checkpoint.
//
// A table that fails to come or to apply does not stop the others. The
// GET_ALL_* tables come compressed from a rocketkv master, and the topic
// and group tables only when their version changed (synccompress.go).

// masterCallTimeout bounds the connection to the master and each request
// on it (RocketMQ's BrokerOuterAPI waits 3 s for an answer).
const masterCallTimeout = 3 * time.Second

// slaveSyncLoop copies the master's metadata (syncFromMaster) every
// slaveSyncIntervalMillis (60 s by default) until ctx ends, the first time
// one interval after it starts (RocketMQ's broker looks every 3 s whether
// a minute has passed since its start or its last sync, which comes to
// the same). In between, a slave whose dispatcher meets new topics looks
// them up and copies the master's topic and group tables when it lacks
// one (slavetopics.go), at most once per topicSightingGap (less often
// while those copies fail: earlyCopyGap). masterAddr is
// asked before each sync; while it returns "" (no master known yet)
// nothing is sent, and new topics are looked at again each
// topicSightingGap. A failed sync is logged and tried again at the next
// interval. The caller owns the goroutine (Broker.goBackground) and stops
// it through ctx.
func (b *Broker) slaveSyncLoop(ctx context.Context, masterAddr func() string) {
	interval := b.cfg.SlaveSyncInterval
	if interval <= 0 {
		interval = time.Minute
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var kick <-chan struct{} // nil, never ready, on a master
	if b.repl.sightings != nil {
		kick = b.repl.sightings.kick
	}
	// look fires when the sightings are due to be looked at: at once
	// after a kick, or topicSightingGap after the last look (longer after
	// failed copies: earlyCopyGap).
	var look <-chan time.Time
	var lastLook time.Time
	failed := 0 // early copies failed in a row
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			addr := masterAddr()
			if addr == "" {
				continue
			}
			if err := b.syncFromMaster(ctx, addr); err != nil && ctx.Err() == nil {
				b.log.Warn().Err(err).Str("master", addr).Msg("copy the master's metadata")
			}
		case <-kick:
			if look == nil {
				look = time.After(time.Until(lastLook.Add(earlyCopyGap(failed, interval))))
			}
		case <-look:
			lastLook = time.Now()
			look = nil
			switch b.copyTablesForSightings(ctx, masterAddr()) {
			case earlyCopyNoMaster:
				look = time.After(topicSightingGap)
			case earlyCopyDone:
				failed = 0
			case earlyCopyFailed:
				failed++
			}
		}
	}
}

// syncFromMaster copies the topics, subscription groups, consumer offsets,
// delay-level progress and POP request modes of the master at masterAddr
// into this broker's tables, the way RocketMQ 5.3's SlaveSynchronize
// applies them (see the table above). It does nothing when masterAddr is
// this broker's own address. The errors of the tables that failed are
// joined.
func (b *Broker) syncFromMaster(ctx context.Context, masterAddr string) error {
	if masterAddr == "" || masterAddr == b.Addr() {
		return nil
	}
	steps := []syncStep{
		{"delivered timer messages", remoting.GetTimerWatermark, b.applyMasterTimerWatermark, true, nil},
		b.topicsStep(),
		{"consumer offsets", remoting.GetAllConsumerOffset, b.applyMasterOffsets, false, nil},
		{"delay offsets", remoting.GetAllDelayOffset, b.applyMasterDelayOffsets, false, b.askDelayOffsets},
		b.groupsStep(),
		{"request modes", remoting.GetAllMessageRequestMode, b.applyMasterRequestModes, false, nil},
		// After the consumer offsets (see above).
		{"POP in-flight state", remoting.GetPopState, b.applyMasterPopState, true, askMasterPopState},
	}
	if b.cfg.TimerWheelEnable {
		// As RocketMQ's syncAll, which asks it only under timerWheelEnable.
		steps = append(steps, syncStep{"timer metrics", remoting.GetTimerMetrics, b.applyMasterTimerMetrics, false, nil})
	}
	return b.runSyncSteps(ctx, masterAddr, steps)
}

// topicsStep copies the master's topic table when its version changed.
// Once the slave's table is the master's (copied, or unchanged), it
// covers every topic with a record below the log end before the ask,
// which the slave records (kvindex.DB.SlaveTopicsAt).
func (b *Broker) topicsStep() syncStep {
	var seen masterSeen
	ask := askIfChanged(remoting.GetAllTopicConfig, b.topics.table.Version)
	return syncStep{"topics", remoting.GetAllTopicConfig,
		func(body []byte) error { return b.applyMasterTopics(body, seen) }, false,
		func(ctx context.Context, c masterClient) ([]byte, error) {
			seen = masterSeen{logEnd: b.clog.MaxOffset(), maxOffset: func(topic string, queueID int32) (int64, error) {
				return askMasterMaxOffset(ctx, c, topic, queueID)
			}}
			body, err := ask(ctx, c)
			if err == nil && body == nil {
				err = b.slaveTopicsCopied(seen.logEnd) // unchanged
			}
			return body, err
		}}
}

// groupsStep copies the master's subscription groups when their version
// changed.
func (b *Broker) groupsStep() syncStep {
	return syncStep{"subscription groups", remoting.GetAllSubscriptionGroupConfig, b.applyMasterGroups, false, askIfChanged(remoting.GetAllSubscriptionGroupConfig, b.groups.Version)}
}

// runSyncSteps asks the master at masterAddr for each step's table and
// applies it, in order; a step that fails does not stop the next. A
// master that does not answer one of rocketkv's own requests skips that
// step. The errors of the steps that failed are joined.
func (b *Broker) runSyncSteps(ctx context.Context, masterAddr string, steps []syncStep) error {
	c, err := b.masterConn(ctx, masterAddr)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range steps {
		var body []byte
		var err error
		if b.repl.restarts != nil {
			b.repl.restarts.take() // dropped already, before the step's fetch
		}
		if s.ask != nil {
			body, err = s.ask(ctx, c)
		} else {
			body, err = askMaster(ctx, c, s.code)
		}
		if errors.Is(err, errNotSupported) && s.own {
			continue
		}
		if err == nil && body != nil {
			err = s.apply(body)
			if err == nil {
				err = b.dropRestartedAgain()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("copy the %s of master %s: %w", s.what, masterAddr, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// syncStep is one table of syncFromMaster.
type syncStep struct {
	what  string
	code  int32
	apply func([]byte) error
	// own marks rocketkv's own requests, which an Apache RocketMQ
	// master does not answer: skipped then.
	own bool
	// ask fetches the body when one request does not (askMaster).
	ask func(context.Context, masterClient) ([]byte, error)
}

// masterClient is a slave's connection to the master at one address,
// taken from the broker's masterLink: a master that answers GO_AWAY
// (stopping with enableShutdownGracefully) gets the request once more on
// a new connection, as RocketMQ's BrokerOuterAPI client does with
// enableReconnectForGoAway, and the later requests go there.
type masterClient struct {
	pool *remoting.ClientPool
	addr string
}

// Invoke sends cmd to the master and waits for its answer until ctx
// ends, on the kept connection (dialled again when it broke).
func (c masterClient) Invoke(ctx context.Context, cmd *remoting.Command) (*remoting.Command, error) {
	return c.pool.Invoke(ctx, c.addr, cmd)
}

// masterLink keeps a slave's connection to its master's Remoting
// address, which its metadata syncs, its timer checkpoint copies (every
// 3 s) and its catch-up reports share, as RocketMQ's slave sends them
// all through its BrokerOuterAPI's one remoting client, which keeps a
// channel per address. That client sends the topic table, timer
// checkpoint and timer metrics requests to the master's fast port
// (listenPort-2) and the others to its registered port; rocketkv's slave
// sends all to the registered port, which an Apache RocketMQ master
// answers the same, and which a rocketkv master serves whatever its
// fastListenPort (see fastPortMismatch). The connection is made at the first request and
// kept; one that broke, whose master stayed silent through a request's
// timeout, or whose master answered GO_AWAY, is dialled again by the
// next request. It is closed when the name servers name another master
// (noteRegistration) and when the broker stops (stopReplication).
type masterLink struct {
	mu     sync.Mutex           // guards pool and closed
	pool   *remoting.ClientPool // nil until the first request
	closed bool
}

// errMasterLinkClosed fails a request to the master once the broker
// stopped its replication.
var errMasterLinkClosed = errors.New("the connection to the master is closed: the broker is stopping")

// get returns the link's pool, made with newPool at the first call.
func (l *masterLink) get(newPool func() *remoting.ClientPool) (*remoting.ClientPool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errMasterLinkClosed
	}
	if l.pool == nil {
		l.pool = newPool()
	}
	return l.pool, nil
}

// forget closes the connection to the master at addr, one the name
// servers no longer name.
func (l *masterLink) forget(addr string) {
	l.mu.Lock()
	pool := l.pool
	l.mu.Unlock()
	if pool != nil {
		pool.CloseAddr(addr)
	}
}

// close closes the connections and makes later requests fail.
func (l *masterLink) close() error {
	l.mu.Lock()
	pool := l.pool
	l.closed = true
	l.mu.Unlock()
	if pool == nil {
		return nil
	}
	return pool.Close()
}

// reconnectForGoAway reports enableReconnectForGoAway as in force now:
// the broker's clients ask it at each GO_AWAY, as RocketMQ's
// NettyRemotingClient reads the broker's NettyClientConfig, which
// UPDATE_BROKER_CONFIG changes in place.
func (b *Broker) reconnectForGoAway() bool { return b.current().ReconnectForGoAway }

// newMasterPool makes the pool of a slave's masterLink.
func (b *Broker) newMasterPool() *remoting.ClientPool {
	return remoting.NewClientPool(remoting.ClientOptions{
		Log: b.component("master-client"),
		// RocketMQ's broker reaches its master with the client it
		// reaches the name servers with, tls.enable and the inner
		// credentials of ACL 2.0 (innerClientAuthenticationCredentials)
		// and all.
		TLS:                b.namesrvClientTLS(),
		BeforeRequest:      b.innerSigner(),
		ReconnectForGoAway: b.reconnectForGoAway,
	})
}

// masterConn returns the kept connection to the master at masterAddr
// (masterLink), connected: a master that cannot be reached fails here,
// within masterCallTimeout.
func (b *Broker) masterConn(ctx context.Context, masterAddr string) (masterClient, error) {
	pool, err := b.repl.master.get(b.newMasterPool)
	if err != nil {
		return masterClient{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, masterCallTimeout)
	defer cancel()
	if _, err := pool.Get(dctx, masterAddr); err != nil {
		return masterClient{}, fmt.Errorf("connect to master %s: %w", masterAddr, err)
	}
	return masterClient{pool: pool, addr: masterAddr}, nil
}

// slaveTimerSyncInterval is how often a slave with timerWheelEnable
// copies which timer messages its master delivered (GetTimerWatermark):
// RocketMQ's slave syncs its timer checkpoint every 3 s, apart from the
// minute of its other tables, because a promoted slave delivers again
// what its master delivered after the last copy.
const slaveTimerSyncInterval = 3 * time.Second

// slaveTimerSyncLoop copies its master's timer checkpoint (its read
// time, as RocketMQ's slave copies it every 3 s with
// GET_TIMER_CHECK_POINT) and which timer messages the master delivered
// every interval (slaveTimerSyncInterval) until ctx ends (the full sync
// copies the latter too). masterAddr is asked before each copy; nothing
// is sent while it returns "", nor is the delivered messages' request
// sent again to a master that did not know it (an Apache RocketMQ master
// logs an error for each request it does not know). The caller owns the
// goroutine and stops it through ctx.
func (b *Broker) slaveTimerSyncLoop(ctx context.Context, interval time.Duration, masterAddr func() string) {
	var unsupported string // the last master that did not know GetTimerWatermark
	periodic.Run(ctx, interval, func(ctx context.Context) {
		addr := masterAddr()
		if addr == "" || addr == b.Addr() {
			return
		}
		noWatermark, err := b.syncTimerFromMaster(ctx, addr, addr != unsupported)
		if noWatermark {
			unsupported = addr
		}
		if err != nil && ctx.Err() == nil {
			b.log.Warn().Err(err).Str("master", addr).Msg("copy the master's timer checkpoint or which timer messages it delivered")
		}
	})
}

// syncTimerFromMaster copies the timer checkpoint of the master at
// masterAddr (applyMasterTimerCheckpoint) and, with watermark, asks it
// which timer messages it delivered and forgets them
// (applyMasterTimerWatermark). noWatermark reports a master that does not
// know the second request (not an error); the errors of the two are
// joined.
func (b *Broker) syncTimerFromMaster(ctx context.Context, masterAddr string, watermark bool) (noWatermark bool, err error) {
	c, err := b.masterConn(ctx, masterAddr)
	if err != nil {
		return false, err
	}
	var errs []error
	// Naming our CommitLog's end: a rocketkv master answers a read time
	// whose deliveries we hold (slaveTimerReadTime).
	resp, err := invokeMaster(ctx, c, remoting.GetTimerCheckPoint, map[string]string{syncFieldCommitLogEnd: strconv.FormatInt(b.clog.MaxOffset(), 10)})
	if err == nil {
		err = b.applyMasterTimerCheckpoint(resp.Body)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("copy the timer checkpoint of master %s: %w", masterAddr, err))
	}
	if watermark {
		body, err := askMaster(ctx, c, remoting.GetTimerWatermark)
		if err == nil {
			err = b.applyMasterTimerWatermark(body)
		}
		switch {
		case errors.Is(err, errNotSupported):
			noWatermark = true
		case err != nil:
			errs = append(errs, fmt.Errorf("copy the delivered timer messages of master %s: %w", masterAddr, err))
		}
	}
	return noWatermark, errors.Join(errs...)
}

// applyMasterTimerCheckpoint takes over the read time, timer queue
// offset and data version of the master's timer checkpoint, as
// RocketMQ's SlaveSynchronize.syncTimerCheckPoint sets them on its
// slave's TimerCheckpoint, from which the slave's timer takes its read
// time while it does not deliver (syncLastReadTimeMs).
func (b *Broker) applyMasterTimerCheckpoint(body []byte) error {
	ck, err := rmqconfig.DecodeTimerCheckpoint(body)
	if err != nil {
		return err
	}
	prev := b.repl.masterTimer.Swap(&ck)
	if prev == nil || prev.ReadMs != ck.ReadMs {
		// For the slave's next start, as RocketMQ's slave flushes its
		// checkpoint with the copied read time.
		if err := b.db.SetTimerReadTime(ck.ReadMs); err != nil {
			return err
		}
	}
	return nil
}

// slaveTimerCheckpoint returns the master's timer checkpoint as this
// slave last copied it; ok is false on a master, or before the first
// copy (the slave's own timer answers for itself then).
func (b *Broker) slaveTimerCheckpoint() (rmqconfig.TimerCheckpoint, bool) {
	if !b.isSlave() {
		return rmqconfig.TimerCheckpoint{}, false
	}
	ck := b.repl.masterTimer.Load()
	if ck == nil {
		return rmqconfig.TimerCheckpoint{}, false
	}
	return *ck, true
}

// askMaster sends one bodiless GET_ALL_* request and returns the body of
// a successful answer.
func askMaster(ctx context.Context, c masterClient, code int32) ([]byte, error) {
	return askMasterWith(ctx, c, code, map[string]string{syncFieldAccept: syncEncodingZstd})
}

// askIfChanged asks for a table whose data version the slave names: a
// nil body, and nothing to apply, when the master's is the same
// (unlessUnchanged); the table otherwise, or from a master that does not
// know the field.
func askIfChanged(code int32, version func() meta.DataVersion) func(context.Context, masterClient) ([]byte, error) {
	return func(ctx context.Context, c masterClient) ([]byte, error) {
		return askMasterWith(ctx, c, code, map[string]string{syncFieldAccept: syncEncodingZstd, syncFieldHaveVersion: versionField(version())})
	}
}

// askMasterWith sends one bodiless request with ext and returns the
// answer's body, decompressed: nil (nothing to apply) when the master
// says the table did not change, empty for an empty answer (the apply's
// to judge).
func askMasterWith(ctx context.Context, c masterClient, code int32, ext map[string]string) ([]byte, error) {
	resp, err := invokeMaster(ctx, c, code, ext)
	if err != nil {
		return nil, err
	}
	if resp.ExtFields[syncFieldNotModified] == "true" {
		return nil, nil
	}
	body, err := syncBody(resp)
	if err != nil {
		return nil, fmt.Errorf("request %d: %w", code, err)
	}
	if body == nil {
		body = []byte{}
	}
	return body, nil
}

// invokeMaster sends one bodiless request and returns a successful
// answer.
func invokeMaster(ctx context.Context, c masterClient, code int32, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, masterCallTimeout)
	defer cancel()
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, nil))
	if err != nil {
		return nil, fmt.Errorf("request %d: %w", code, err)
	}
	if resp.Code == remoting.RequestCodeNotSupported {
		return nil, fmt.Errorf("request %d: %w", code, errNotSupported)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("request %d: answer %d %s", code, resp.Code, resp.Remark)
	}
	return resp, nil
}

// errNotSupported is a master's REQUEST_CODE_NOT_SUPPORTED.
var errNotSupported = errors.New("the master does not support the request")

// timerWatermark is the body of GetTimerWatermark.
type timerWatermark struct {
	timer.Watermark
	CopiesEnd int64 `json:"copiesEnd"`
}

// parseTimerWatermark decodes a GetTimerWatermark answer.
func parseTimerWatermark(body []byte) (timerWatermark, error) {
	var w timerWatermark
	if err := json.Unmarshal(body, &w); err != nil {
		return w, fmt.Errorf("decode the timer watermark: %w", err)
	}
	if w.CopiesEnd < 0 || w.CursorMs < 0 || w.CursorPhy < 0 || w.BelowPhy < 0 {
		return w, fmt.Errorf("timer watermark with a negative field: %+v", w)
	}
	return w, nil
}

// processTimerWatermark answers GetTimerWatermark: which parked timer
// messages this broker delivered, for its slaves.
func (b *Broker) processTimerWatermark(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	w := timerWatermark{Watermark: b.timers.Watermark()}
	w.CopiesEnd = b.clog.MaxOffset() // after the watermark: its rounds' copies lie below
	body, err := json.Marshal(w)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("encode the timer watermark: %v", err))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// maxPopStateCopy bounds a copy of the POP in-flight state asked for in
// one answer (by a slave of an earlier version; see popcopy.go for the
// pages): some 100,000 checkpoints. A master with more answers an error,
// and its slave keeps the last copy it took.
const maxPopStateCopy = 15 << 20

// processPopState answers GetPopState: a copy of this broker's POP
// in-flight state, for its slaves.
func (b *Broker) processPopState(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if req.ExtFields[popCopyFieldPaged] == "true" {
		return b.processPopStatePage(req)
	}
	body, n, err := b.db.AppendPopState(nil, b.popCopyMax)
	if err != nil {
		b.log.Warn().Err(err).Int("keys", n).Msg("POP state not copied for a slave: promoted, it would pop every message again from each queue's committed offset")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// applyMasterPopState replaces this slave's POP in-flight state with its
// master's copy.
func (b *Broker) applyMasterPopState(body []byte) error {
	n, written, err := b.db.ReplacePopState(body)
	if err != nil {
		return err
	}
	b.log.Debug().Int("keys", n).Int("written", written).Msg("POP in-flight state copied from the master")
	return nil
}

// applyMasterTimerWatermark forgets the parked timer messages the master
// delivered, once this slave holds and has indexed their copies (else
// the next sync tries again): promoted, it must not deliver them again.
func (b *Broker) applyMasterTimerWatermark(body []byte) error {
	w, err := parseTimerWatermark(body)
	if err != nil {
		return err
	}
	// The master keeps writing, so the slave is usually a little behind
	// the end it read: wait for it a while.
	ctx, cancel := context.WithTimeout(b.ctx, masterCallTimeout)
	defer cancel()
	if err := b.disp.WaitFor(ctx, w.CopiesEnd); err != nil {
		return nil // not replicated and indexed that far yet: the next sync
	}
	n, err := b.timers.ForgetDelivered(w.Watermark)
	if err != nil {
		return err
	}
	if n > 0 {
		b.log.Debug().Int("forgotten", n).Int64("cursorMs", w.CursorMs).Msg("timer messages the master delivered")
	}
	return nil
}

// sameVersion compares data versions as RocketMQ's DataVersion.equals,
// but for stateVersion, which the tables do not keep.
func sameVersion(a, b meta.DataVersion) bool {
	return a.Counter == b.Counter && a.Timestamp == b.Timestamp
}

// applyMasterTopics replaces the topic table with the master's when the
// master's dataVersion differs from ours, first dropping the queues of
// the topics the master deleted (dropMasterDeletedTopics; seen is what
// the step saw of the master when it asked). A slave records, with the
// table, that it covers the log below seen.logEnd (uncopiedtopics.go).
func (b *Broker) applyMasterTopics(body []byte, seen masterSeen) error {
	topics, version, err := rmqconfig.ParseTopics(body)
	if err != nil {
		return err
	}
	if err := b.applyMasterMappings(body); err != nil {
		return err
	}
	if sameVersion(b.topics.table.Version(), version) {
		return b.slaveTopicsCopied(seen.logEnd)
	}
	// Before the table, as the compaction's backfill below: a crash in
	// between finds the topics to drop again at the next sync.
	if err := b.dropMasterDeletedTopics(topics, seen); err != nil {
		return err
	}
	// Before the table: a crash between the two leaves the topic
	// uncompacted in the table, so the next sync copies its records again
	// (the copies are idempotent) rather than never.
	for _, tc := range b.compactionTopicsChanged(topics) {
		if err := b.backfillCompaction(tc); err != nil {
			b.compaction.TopicChanged(tc.TopicName, false) // the next sync tries again
			return err
		}
	}
	removed, err := b.topics.table.Replace(topics, version, b.slaveTopicsCopiedWrite(seen.logEnd)...)
	if err != nil {
		return err
	}
	if len(removed) > 0 && b.compaction != nil {
		// Quiesced, as deleteTopic: no batch of the dispatcher copies a
		// record of a topic after its copies are deleted.
		if err := b.disp.Quiesced(func() error {
			for _, topic := range removed {
				if err := b.dropCompactedTopic(topic); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("drop the copies of the master's deleted topics: %w", err)
		}
	}
	// The series a slave's reads fed go with the topics, as the
	// master's went with its deletions.
	for _, topic := range removed {
		b.earlyMetrics.Load().TopicDeleted(topic)
	}
	b.register.trigger()
	b.log.Info().Int("topics", len(topics)).Strs("removed", removed).Msg("took over the master's topics")
	return nil
}

// applyMasterGroups replaces the subscription group table with the
// master's when the master's dataVersion differs from ours.
func (b *Broker) applyMasterGroups(body []byte) error {
	groups, version, err := rmqconfig.ParseGroups(body)
	if err != nil {
		return err
	}
	if sameVersion(b.groups.Version(), version) {
		return nil
	}
	removed, err := b.groups.Replace(groups, version)
	if err != nil {
		return err
	}
	for _, group := range removed {
		b.earlyMetrics.Load().GroupDeleted(group)
	}
	b.log.Info().Int("groups", len(groups)).Strs("removed", removed).Msg("took over the master's subscription groups")
	return nil
}

// groupTopic names one topic@group pair of the offset table.
type groupTopic struct{ group, topic string }

// applyMasterOffsets takes over the master's consumer offsets
// (ConcurrentMap.putAll of RocketMQ's slave): each topic@group pair the
// master has gets exactly the master's queue offsets; the pairs it does
// not have keep ours. The scheduler's own group is left alone (delay
// offsets come with GET_ALL_DELAY_OFFSET).
func (b *Broker) applyMasterOffsets(body []byte) error {
	offsets, err := rmqconfig.ParseOffsets(body)
	if err != nil {
		return err
	}
	theirs := map[groupTopic]map[int32]int64{}
	for _, o := range offsets {
		if o.Group == scheduleOffsetGroup {
			continue
		}
		k := groupTopic{o.Group, o.Topic}
		if theirs[k] == nil {
			theirs[k] = map[int32]int64{}
		}
		theirs[k][o.QueueID] = o.Offset
	}
	// A pair with queues the master does not list loses them: the master's
	// map replaces ours whole. Offsets we hold already are not written
	// again (at a million queues most stay the same between syncs).
	stale := map[groupTopic]bool{}
	same := map[groupTopic]map[int32]bool{}
	if err := b.offsets.Each("", func(u kvindex.OffsetUpdate) bool {
		k := groupTopic{u.Group, u.Topic}
		q, ok := theirs[k]
		if !ok {
			return true
		}
		off, listed := q[u.QueueID]
		switch {
		case !listed:
			stale[k] = true
		case off == u.Offset:
			if same[k] == nil {
				same[k] = map[int32]bool{}
			}
			same[k][u.QueueID] = true
		}
		return true
	}); err != nil {
		return fmt.Errorf("read our consumer offsets: %w", err)
	}
	for k := range stale {
		if err := b.offsets.DeleteGroupTopic(k.group, k.topic); err != nil {
			return err
		}
	}
	var updates []kvindex.OffsetUpdate
	for k, q := range theirs {
		for qid, off := range q {
			if !stale[k] && same[k][qid] {
				continue
			}
			updates = append(updates, kvindex.OffsetUpdate{Group: k.group, Topic: k.topic, QueueID: qid, Offset: off})
		}
	}
	if len(updates) > 0 {
		if err := b.offsets.SetMany(updates, true); err != nil {
			return err
		}
	}
	// The master's pairs replace what this slave's own pops committed of
	// them (RocketMQ's putAll over its slave's table).
	if svc := b.popSvc; svc != nil {
		return svc.OffsetsCopied(func(group, topic string) bool {
			_, ok := theirs[groupTopic{group, topic}]
			return ok
		})
	}
	return nil
}

// askDelayOffsets asks the master for its delay-level progress, naming
// the end of this slave's CommitLog (syncFieldCommitLogEnd): a rocketkv
// master answers each level only as far as this slave holds the
// deliveries it passed, so a promotion skips none this slave lacks.
func (b *Broker) askDelayOffsets(ctx context.Context, c masterClient) ([]byte, error) {
	return askMasterWith(ctx, c, remoting.GetAllDelayOffset, map[string]string{
		syncFieldAccept:       syncEncodingZstd,
		syncFieldCommitLogEnd: strconv.FormatInt(b.clog.MaxOffset(), 10),
	})
}

// applyMasterDelayOffsets takes over the master's delay-level progress
// level by level (RocketMQ's slave writes the master's delayOffset.json and
// loads it over its table with putAll): levels the master does not list
// keep ours.
func (b *Broker) applyMasterDelayOffsets(body []byte) error {
	levels, err := rmqconfig.ParseDelayOffsets(body)
	if err != nil {
		return err
	}
	updates := make([]kvindex.OffsetUpdate, 0, len(levels))
	for level, off := range levels {
		if level > math.MaxInt32 {
			return fmt.Errorf("delay level %d: no queue of %s has its number", level, meta.ScheduleTopic)
		}
		updates = append(updates, kvindex.OffsetUpdate{Group: scheduleOffsetGroup, Topic: meta.ScheduleTopic, QueueID: int32(level - 1), Offset: off})
	}
	return b.offsets.SetMany(updates, true)
}

// applyMasterRequestModes replaces our request modes with the master's:
// the pairs it does not have go back to PULL, the ones that differ are
// rewritten.
func (b *Broker) applyMasterRequestModes(body []byte) error {
	modes, err := rmqconfig.ParseRequestModes(body)
	if err != nil {
		return err
	}
	want := make(map[groupTopic]requestModeBody, len(modes))
	for _, m := range modes {
		want[groupTopic{m.ConsumerGroup, m.Topic}] = requestModeBody{Topic: m.Topic, ConsumerGroup: m.ConsumerGroup, Mode: m.Mode, PopShareQueueNum: m.PopShareQueueNum}
	}
	pop := b.db.Pop()
	have := map[groupTopic]requestModeBody{}
	var gone []groupTopic
	if err := pop.EachRequestMode(func(m kvindex.RequestMode) bool {
		k := groupTopic{m.Group, m.Topic}
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
			return true
		}
		var cur requestModeBody
		if json.Unmarshal(m.JSON, &cur) == nil {
			have[k] = cur
		}
		return true
	}); err != nil {
		return fmt.Errorf("read our request modes: %w", err)
	}
	for _, k := range gone {
		if err := pop.DeleteRequestMode(k.topic, k.group); err != nil {
			return err
		}
	}
	for k, m := range want {
		if cur, ok := have[k]; ok && cur == normalRequestMode(m) {
			continue
		}
		if err := setRequestMode(b.db, m); err != nil {
			return err
		}
	}
	return nil
}
