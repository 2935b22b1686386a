package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
	"github.com/rocketkv/rocketkv/txn"
)

// txnConfig is the transaction service's part of the broker config.
func txnConfig(cfg configs.Broker) txn.Config {
	return txn.Config{Timeout: cfg.TransactionTimeOut, CheckInterval: cfg.TransactionCheckInterval,
		CheckMax: cfg.TransactionCheckMax}
}

// timerConfig is the timer part of the broker config, with the precision
// rounded down to one RocketMQ accepts (100, 200, 500 or 1000 ms).
func timerConfig(cfg configs.Broker) timer.Config {
	p := 100 * time.Millisecond
	for _, c := range []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		if cfg.TimerPrecision >= c {
			p = c
		}
	}
	roll := time.Duration(cfg.TimerRollWindowSlot) * p
	return timer.Config{Enable: cfg.TimerWheelEnable, Precision: p, MaxDelay: cfg.TimerMaxDelay, RollWindow: roll}
}

// recordStore gives the transaction and timer services the broker's
// CommitLog. Its appends wait for the flush a send waits for: the ends of
// transactions and the timer's deletions of delivered entries are synced
// after them, so what they stored must be as durable.
type recordStore struct {
	b *Broker
}

// Put stores a committed, discarded, resumed or due message, or a
// transaction's op message. A committed message with a delay level or a
// timer property waits in the schedule or timer topic, as RocketMQ's put
// does for COMMIT records, without the TRAN_MSG a committed message
// otherwise keeps (txn.ParkedCommit). An op message is not waited for,
// as RocketMQ does not wait for its own (the end it follows is synced in
// the index).
func (s recordStore) Put(ctx context.Context, m *commitlog.Message) (commitlog.AppendResult, error) {
	final := false // a committed message, in its topic or parked
	switch m.Topic {
	case meta.TransCheckMaxTopic, meta.TransHalfTopic, meta.TransOpHalfTopic:
		if _, err := s.b.topics.ensureSystemTopic(m.Topic, 1, meta.PermRead|meta.PermWrite); err != nil {
			return commitlog.AppendResult{}, err
		}
		// RocketMQ puts these three (renewHalfMessageInner and its admin
		// resume, the give-up copy, the op message) with WAIT=false: a
		// rollback is answered SUCCESS with its op message stored, also
		// on a master whose sync state set is below minInSyncReplicas.
		if m.Topic == meta.TransOpHalfTopic {
			return s.b.putOwnRecords(ctx, []*commitlog.Message{m}, false)
		}
		return s.flushed(s.b.putOwnRecords(ctx, []*commitlog.Message{m}, true))
	default:
		final = true
		level := 0
		commit := commitlog.TransactionType(m.SysFlag) == commitlog.TransactionCommit
		if commit {
			level = delayLevelOf(m.Properties)
		}
		topic := m.Topic
		if err := s.b.park(m, level); err != nil {
			return commitlog.AppendResult{}, err
		}
		if commit && m.Topic != topic {
			m.Properties = txn.ParkedCommit(m.Properties)
		}
	}
	res, err := s.b.putMessages(ctx, []*commitlog.Message{m}, true)
	if err == nil && final {
		// A commit is a put of the topic it went to, in the statistics,
		// as RocketMQ's sendFinalMessage counts it.
		s.b.stats.Put(m.Topic, 1, res.WroteBytes)
	}
	return s.flushed(res, err)
}

// PutBatch stores due timer messages of one queue in one append. They
// carry TIMER_OUT_MS and are not parked again. A flush slower than
// syncFlushTimeout is waited out, not reported, even past the start of
// the broker's stop (flushAfterStop): the timer would deliver the
// messages again, and they are in the log already.
func (s recordStore) PutBatch(ctx context.Context, msgs []*commitlog.Message) error {
	if s.b.isSlave() {
		// Only an acting master's timer runs on a slave, whose CommitLog
		// is its master's copy: its messages escape to another group's
		// master (RocketMQ's TimerMessageStore puts them through its
		// escapeBridgeHook), one a request (timer.Options.OneByOne).
		return s.escape(ctx, msgs)
	}
	// RocketMQ's convertMessage sets WAIT=false once the properties
	// string is written, for a delivery and a roll alike: a sync state set
	// below minInSyncReplicas refuses neither, and the put waits for no
	// slave. The flush is still waited for before the timer records its
	// progress past them; a slave forgets the parked messages the master
	// delivered only once it holds their copies (applyMasterTimerWatermark).
	res, err := s.b.putOwnRecords(ctx, msgs, false)
	if err != nil {
		return err
	}
	// A delivery is a put of the topic, in the statistics, as RocketMQ's
	// timer counts it.
	s.b.stats.Put(msgs[0].Topic, len(msgs), res.WroteBytes)
	if s.b.cfg.FlushDiskType != configs.SyncFlush {
		return nil
	}
	// Also when the broker's stop cancelled ctx: the timer keeps the
	// entries of messages it could not confirm, and would deliver them
	// again at the next start.
	wctx, release := flushAfterStop(ctx, s.b.cfg.SyncFlushTimeout)
	err = s.b.clog.WaitDurable(wctx, res.PhyOffset+res.WroteBytes)
	release()
	return err
}

// escape sends an acting master's due timer messages to other groups'
// masters, each alone, up to the first that fails, without REAL_TOPIC
// and REAL_QID: RocketMQ's timer clears them from the message's property
// map, which a remote send carries, and keeps them only in the
// properties string its own store writes. A delivery is a put of its
// topic in the statistics, as RocketMQ's timer counts a put it escaped
// (without its size, which the other broker knows).
func (s recordStore) escape(ctx context.Context, msgs []*commitlog.Message) error {
	for _, m := range msgs {
		out := *m
		if out.Topic != meta.TimerTopic { // a roll keeps them, as RocketMQ's
			out.Properties = commitlog.RewriteProperties(m.Properties, []string{commitlog.PropertyRealTopic, commitlog.PropertyRealQueueID})
		}
		if err := s.b.escape.put(ctx, &out); err != nil {
			return fmt.Errorf("deliver a timer message of %s: %w", m.Topic, err)
		}
		s.b.stats.Put(m.Topic, 1, 0)
	}
	return nil
}

// flushed turns an append that SYNC_FLUSH did not confirm in time into an
// error wrapping txn.ErrNotDurable: the transaction service records a
// transaction's end only once what it stored is durable, and does not
// store it again meanwhile.
func (s recordStore) flushed(res commitlog.AppendResult, err error) (commitlog.AppendResult, error) {
	if err == nil && res.Status == commitlog.FlushDiskTimeout {
		err = fmt.Errorf("stored at %d but not flushed within syncFlushTimeout: %w", res.PhyOffset, txn.ErrNotDurable)
	}
	return res, err
}

// WaitDurable reports whether the CommitLog is durable up to end, waiting
// for its flush at most syncFlushTimeout (at once under ASYNC_FLUSH, whose
// appends count as stored).
func (s recordStore) WaitDurable(ctx context.Context, end int64) bool {
	return s.b.clog.WaitFlushed(ctx, end)
}

// Read returns the record at a CommitLog offset.
func (s recordStore) Read(phy int64) (commitlog.Message, bool, error) {
	_, m, ok, err := s.b.readRecord(phy)
	return m, ok, err
}

// askTransaction sends CHECK_TRANSACTION_STATE, oneway, to one connected
// producer of the group, as RocketMQ's Broker2Client does.
func (b *Broker) askTransaction(c txn.Check) bool {
	conn := b.clients.producerConn(c.ProducerGroup)
	if conn == nil {
		return false
	}
	h := remoting.Header{}
	h.SetInt64("tranStateTableOffset", c.TranStateTableOffset)
	h.SetInt64("commitLogOffset", c.CommitLogOffset)
	h.Set("msgId", c.MsgID)
	h.Set("transactionId", c.TransactionID)
	h.Set("offsetMsgId", commitlog.MessageID(b.storeHost, c.CommitLogOffset))
	h.Set("topic", c.Topic)
	h.Set("bname", b.cfg.BrokerName)
	if err := conn.Oneway(remoting.NewRequest(remoting.CheckTransactionState, h, c.Body)); err != nil {
		b.log.Warn().Err(err).Stringer("conn", conn).Str("group", c.ProducerGroup).Msg("send transaction check")
		return false
	}
	return true
}

// processResumeCheckHalf answers RESUME_CHECK_HALF_MESSAGE (mqadmin
// resumeCheckHalfMessage): the half message its msgId names, usually one
// given up after transactionCheckMax checks, is checked again.
func (b *Broker) processResumeCheckHalf(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	id, phy, bad := offsetMsgID(req)
	if bad != nil {
		return bad
	}
	if err := b.txns.Resume(ctx, phy); err != nil {
		b.log.Warn().Err(err).Str("msgId", id).Msg("RESUME_CHECK_HALF_MESSAGE failed")
		return remoting.NewResponse(req, remoting.SystemError, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed: "+err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// processEndTransaction answers END_TRANSACTION: commit (8) stores the
// half's message in its real topic, rollback (12) drops it, unknown (0)
// leaves it to the checker. Go and Java producers send it oneway; the
// answer is for the others and for tests.
func (b *Broker) processEndTransaction(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.cfg.BrokerRole == "SLAVE" {
		return remoting.NewResponse(req, remoting.SlaveNotAvailable, "Slave is not allowed to end transactions")
	}
	h := remoting.Header(req.ExtFields)
	var er txn.EndRequest
	var err error
	bad := func(err error) *remoting.Command {
		b.log.Warn().Err(err).Stringer("conn", conn).Msg("END_TRANSACTION refused: bad header")
		return remoting.NewResponse(req, remoting.SystemError, "bad END_TRANSACTION header: "+err.Error())
	}
	if er.ProducerGroup, err = h.String("producerGroup"); err != nil {
		return bad(err)
	}
	if er.TranStateTableOffset, err = h.Int64("tranStateTableOffset"); err != nil {
		return bad(err)
	}
	if er.CommitLogOffset, err = h.Int64("commitLogOffset"); err != nil {
		return bad(err)
	}
	state, err := h.Int32("commitOrRollback")
	if err != nil {
		return bad(err)
	}
	er.FromTransactionCheck = h.OptBool("fromTransactionCheck", false)
	er.MsgID = h.OptString("msgId", "")
	switch state {
	case 0: // TRANSACTION_NOT_TYPE: the producer does not know yet
		return remoting.NewResponse(req, remoting.Success, "")
	case int32(kvindex.TxnCommit), int32(kvindex.TxnRollback):
		er.State = kvindex.TxnState(state)
	default:
		return bad(errors.New("commitOrRollback must be 0, 8 or 12"))
	}
	end := func(ctx context.Context) *remoting.Command {
		err := b.txns.End(ctx, er)
		if errors.Is(err, txn.ErrNotDurable) {
			// The committed message is stored, not yet flushed: RocketMQ
			// answers such a commit (FLUSH_DISK_TIMEOUT of its put)
			// SUCCESS, and the transaction ends once it is durable.
			b.log.Warn().Err(err).Str("group", er.ProducerGroup).Str("msgId", er.MsgID).
				Int64("commitLogOffset", er.CommitLogOffset).Msg("END_TRANSACTION commit stored, its flush still pending")
			err = nil
		}
		if errors.Is(err, errInSyncReplicasNotEnough) {
			// RocketMQ's remark, with its code (SYSTEM_ERROR).
			b.log.Warn().Err(err).Str("group", er.ProducerGroup).Str("msgId", er.MsgID).Msg("END_TRANSACTION refused: in-sync replicas not enough")
			return remoting.NewResponse(req, remoting.SystemError, inSyncReplicasRemark)
		}
		if err != nil {
			code := remoting.SystemError
			if errors.Is(err, txn.ErrTooLate) {
				code = remoting.IllegalOperation
			}
			b.log.Warn().Err(err).Str("group", er.ProducerGroup).Str("msgId", er.MsgID).
				Int64("commitLogOffset", er.CommitLogOffset).Stringer("state", er.State).Msg("END_TRANSACTION failed")
			return remoting.NewResponse(req, code, err.Error())
		}
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if b.sendsWaitDurable() {
		// The end stores the committed message (or the rollback's op
		// record) and waits for its flush and slaves: off the worker, as
		// a send's wait.
		return b.offWorker(conn, req, end)
	}
	return end(ctx)
}
