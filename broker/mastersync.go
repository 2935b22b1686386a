package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
)

// The answers a master gives the slaves that copy its metadata (RocketMQ's
// SlaveSynchronize, every 60 s): GET_ALL_TOPIC_CONFIG (21),
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and GET_ALL_MESSAGE_REQUEST_MODE
// (402) are answered in admin.go and assignment.go; the two offset tables
// are here. Their bodies are the config files' JSON, so they are written by
// the encoders kvdump export-rocketmq writes the files with.

// processGetAllConsumerOffset answers GET_ALL_CONSUMER_OFFSET with
// RocketMQ's ConsumerOffsetManager JSON:
// {"offsetTable":{"<topic>@<group>":{<queueId>:<offset>}},"dataVersion":{...}},
// queue ids unquoted as fastjson writes them. The scheduler's progress is
// not in it (GET_ALL_DELAY_OFFSET has it); the transaction checker's is
// set past every ended transaction, as export-rocketmq writes it.
func (b *Broker) processGetAllConsumerOffset(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	offsets, err := b.rocketMQOffsets(ctx)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	body, err := rmqconfig.EncodeOffsets(offsets, answerVersion())
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "encode the consumer offsets: "+err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// rocketMQOffsets returns the committed consumer offsets as RocketMQ's
// ConsumerOffsetManager holds them (rmqconfig.StoreOffsets), the
// transaction checker's set past every ended transaction: what
// GET_ALL_CONSUMER_OFFSET answers and EXPORT_ROCKSDB_CONFIG_TO_JSON
// writes.
func (b *Broker) rocketMQOffsets(ctx context.Context) ([]rmqconfig.Offset, error) {
	_, firstOpen, err := rmqconfig.OpenTransactions(b.db)
	if err != nil {
		return nil, err
	}
	return rmqconfig.StoreOffsets(ctx, b.db, b.cqs, firstOpen)
}

// processGetAllDelayOffset answers GET_ALL_DELAY_OFFSET with the text of
// RocketMQ's delayOffset.json: {"offsetTable":{<level>:<offset>},"dataVersion":{...}},
// the scheduler's next SCHEDULE_TOPIC_XXXX offset per delay level, as far
// as the asking slave holds the deliveries it passed (slaveDelayOffsets).
// A RocketMQ slave writes it to its delayOffset.json as it comes, and
// keeps its own offset of a level the answer leaves out.
func (b *Broker) processGetAllDelayOffset(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	held, err := b.askerHolds(req)
	if err != nil {
		b.log.Warn().Err(err).Stringer("caller", conn.RemoteAddr()).Msg("GET_ALL_DELAY_OFFSET refused")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	levels, err := b.slaveDelayOffsets(ctx, held)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	body, err := rmqconfig.EncodeDelayOffsets(levels, answerVersion())
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "encode the delay offsets: "+err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// syncFieldCommitLogEnd names, in a rocketkv slave's GET_ALL_DELAY_OFFSET,
// the end of the CommitLog it holds (rocketkv's own field; RocketMQ's
// request has none).
const syncFieldCommitLogEnd = "rkvCommitLogEnd"

// askerHolds returns how far the CommitLog of the slave that sent req
// reaches: the end it names (syncFieldCommitLogEnd), or, from a slave
// that names none (Apache RocketMQ's), the lowest end any slave connected
// to the HA port acknowledged (-1 with none connected); with no HA port
// at all no slave follows this broker, and everything counts as held.
func (b *Broker) askerHolds(req *remoting.Command) (int64, error) {
	if v, ok := req.ExtFields[syncFieldCommitLogEnd]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s %q: not a CommitLog offset", syncFieldCommitLogEnd, v)
		}
		return n, nil
	}
	var acks []int64
	switch {
	case b.repl.auto != nil:
		for _, s := range b.repl.auto.Slaves() {
			acks = append(acks, s.AckOffset)
		}
	case b.repl.server != nil:
		for _, s := range b.repl.server.Slaves(b.clog.MaxOffset()) {
			acks = append(acks, s.AckOffset)
		}
	default:
		return math.MaxInt64, nil
	}
	if len(acks) == 0 {
		return -1, nil
	}
	return slices.Min(acks), nil
}

// slaveDelayOffsets returns each delay level's progress as far as a slave
// whose CommitLog reaches held may copy it: the stored progress when held
// covers the whole CommitLog, else the latest progress the scheduler
// recorded whose deliveries lie below held (delayMarks), no later than
// the stored one. A level with none is left out, and the slave keeps its
// own. Promoted, a slave would skip the messages below its copied
// progress, so it must hold their deliveries.
func (b *Broker) slaveDelayOffsets(ctx context.Context, held int64) (map[int]int64, error) {
	levels, err := rmqconfig.StoreDelayOffsets(ctx, b.db)
	if err != nil {
		return nil, err
	}
	// After the progress: the deliveries it passed were stored before it.
	if held >= b.clog.MaxOffset() {
		return levels, nil
	}
	for level, off := range levels {
		if m, ok := b.delayMarks.heldBy(level, held); ok {
			levels[level] = min(off, m)
		} else {
			delete(levels, level)
		}
	}
	return levels, nil
}

// processGetTimerCheckPoint answers GET_TIMER_CHECK_POINT (60), which a
// RocketMQ 5 slave with timerWheelEnable asks every 3 s: RocketMQ's
// TimerCheckpoint, with the time before which this broker delivered its
// timer messages as lastReadTimeMs (the slave's timer resumes there when
// it is promoted; no later than the asking slave holds the deliveries
// before it, slaveTimerReadTime) and the timer topic's end as the queue
// offsets (the
// slave takes every parked message in), or, under timerStopEnqueue, the
// queue offset of the first message held back (RocketMQ's timer had
// taken in those before it alone). A slave that copied its master's
// checkpoint answers the master's read time, queue offset and version,
// with its own queue offset bounded by the master's, as RocketMQ's slave
// answers the checkpoint its sync set (the timer log's flush position,
// which rocketkv has no timer log for, is 0). With timerWheelEnable false it
// is refused, as RocketMQ's broker, which then has no timer checkpoint,
// refuses it.
func (b *Broker) processGetTimerCheckPoint(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !b.cfg.TimerWheelEnable {
		b.log.Warn().Stringer("caller", conn.RemoteAddr()).Msg("GET_TIMER_CHECK_POINT refused: timerWheelEnable is false")
		return remoting.NewResponse(req, remoting.SystemError, "The checkpoint is null")
	}
	// The queue's end first: a parked message past it, not taken in for
	// the slave, may be due before the time read after it.
	end, err := b.cqs.MaxOffset(meta.TimerTopic, 0)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if held, ok := b.timers.HeldFrom(); ok {
		end = min(end, held)
	}
	if ck, ok := b.slaveTimerCheckpoint(); ok {
		// RocketMQ's slave answers its checkpoint, whose read time,
		// master's queue offset and version are its master's as last
		// copied, and whose own queue offset does not pass the master's.
		ck.QueueOffset = min(end, ck.MasterQueueOffset)
		ck.FlushPos = 0
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = ck.Encode()
		return resp
	}
	held, err := b.askerHolds(req)
	if err != nil {
		b.log.Warn().Err(err).Stringer("caller", conn.RemoteAddr()).Msg("GET_TIMER_CHECK_POINT refused")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	readMs, err := b.timers.DeliveredBefore(time.Now())
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	readMs = b.slaveTimerReadTime(readMs, held)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = rmqconfig.EncodeTimerCheckpoint(readMs, end, answerVersion())
	return resp
}

// processGetTimerMetrics answers GET_TIMER_METRICS (61), which a RocketMQ
// 5 slave asks with each sync: RocketMQ's TimerMetricsSerializeWrapper,
// the timer messages waiting by REAL_TOPIC (the count the timer service
// keeps from its index, see timer.Service.Table), its data version moving
// with every change to the count (a slave copies the table when the
// version differs from its own). Every topic's timeStamp is the last
// change to the count (RocketMQ's is the last to that topic's); topics
// with nothing waiting are left out (RocketMQ keeps them at 0). Until the
// count is done after a start the table is empty, versioned by the
// broker's start. A slave that copied its master's table answers the
// copy, version and all, as RocketMQ's slave answers the TimerMetrics its
// syncTimerMetrics replaced (see applyMasterTimerMetrics). With
// timerWheelEnable false it is refused, as RocketMQ's broker, which then
// has no timer store, refuses it.
func (b *Broker) processGetTimerMetrics(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !b.cfg.TimerWheelEnable {
		b.log.Warn().Stringer("caller", conn.RemoteAddr()).Msg("GET_TIMER_METRICS refused: timerWheelEnable is false")
		return remoting.NewResponse(req, remoting.SystemError, "The timer message store is null")
	}
	body, copied := b.slaveTimerMetrics()
	if !copied {
		body.DataVersion.Timestamp = b.started.UnixMilli()
		body.TimingCount = map[string]timerMetric{}
		if table, ok := b.timerTable(); ok {
			if table.Changes > 0 {
				body.DataVersion = meta.DataVersion{Counter: table.Changes, Timestamp: table.ChangedMs}
			}
			for _, t := range table.Topics {
				body.TimingCount[t.Topic] = timerMetric{Count: t.Messages, TimeStamp: body.DataVersion.Timestamp}
			}
		}
	}
	out, err := json.Marshal(body)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "encode the timer metrics: "+err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = out
	return resp
}

// timerTable is the timer service's count of waiting messages, if it has
// one.
func (b *Broker) timerTable() (timer.WaitingTable, bool) {
	if b.timers == nil {
		return timer.WaitingTable{}, false
	}
	return b.timers.Table()
}

// answerVersion is the dataVersion of an offset table's answer. rocketkv
// keeps no version for its offsets (they change on every commit, and
// RocketMQ's slaves copy them whatever their version says); a slave
// stores the one it gets, so it is a fresh DataVersion, as RocketMQ's
// is at a start.
func answerVersion() meta.DataVersion {
	return meta.DataVersion{Timestamp: time.Now().UnixMilli()}
}
