package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// maxDurableWaitBytes bounds the memory of the stored sends whose answers
// wait for the group commit or the slaves on goroutines of their own: each
// counts its request body plus durableWaitOverhead. Past it a send waits on
// its worker, as every send did before, which slows the producers down
// instead of holding more requests in memory.
const (
	maxDurableWaitBytes = 64 << 20
	durableWaitOverhead = 1 << 10
)

// flushAfterStop returns a context for the wait of a background task
// (the delay levels' scheduler, the timer) for the flush of records it
// has appended: it ends grace after ctx ends, not when ctx ends. The
// broker's stop cancels ctx and closes the CommitLog only once the task
// has returned, so the flush of what the task appended still runs: waiting
// for it lets the task record its progress past those records, which a
// wait cut short by the stop would not, and the next start would put the
// same messages a second time. release frees the context.
func flushAfterStop(ctx context.Context, grace time.Duration) (wctx context.Context, release func()) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-out.Done():
		case <-t.C:
			cancel()
		}
	})
	return out, func() {
		stop()
		cancel()
	}
}

// sendsWaitDurable reports whether a send's answer waits after its append:
// for the group commit under SYNC_FLUSH, for the slaves on a SYNC_MASTER
// with inSyncReplicas >= 2.
func (b *Broker) sendsWaitDurable() bool {
	return b.cfg.FlushDiskType == configs.SyncFlush || b.slaveAcks() > 0
}

// answerDurable answers a send whose records are in the CommitLog
// (appended without waiting): at once when the producer did not ask to
// wait (WAIT=false) or nothing is to be waited for, else once the records
// are flushed and replicated as the broker's roles require, with
// FLUSH_DISK_TIMEOUT or FLUSH_SLAVE_TIMEOUT when they are not in time,
// as RocketMQ's put does. answer builds the response from the final
// result. The wait runs off the worker (see offWorker). began is when the
// append began (appendMessages): the put latency counts from it to the
// end of the wait.
//
// limit, when positive, bounds the whole wait below the flush and slave
// timeouts: the answer then comes with the status of what was confirmed
// by then.
func (b *Broker) answerDurable(conn *remoting.Conn, req *remoting.Command, res commitlog.AppendResult, waitFlush bool,
	limit time.Duration, began time.Time, answer func(commitlog.AppendResult) *remoting.Command) *remoting.Command {
	if !waitFlush || !b.sendsWaitDurable() {
		b.stats.PutTook(time.Since(began), false)
		return answer(res)
	}
	return b.offWorker(conn, req, func(ctx context.Context) *remoting.Command {
		if limit > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		res := b.durable(ctx, res)
		b.stats.PutTook(time.Since(began), false)
		return answer(res)
	})
}

// offWorker runs serve, a request's processing that waits for a group
// commit, for slaves or for a registration with the name servers
// (answerRegistered), on a goroutine of its own and returns nil (the
// answer comes later); when the waiting requests already hold
// maxDurableWaitBytes, or the broker is shutting down, it runs serve on
// the calling worker and returns its answer.
//
// A worker blocked for a group commit is one the other requests cannot
// use: with a wait of about a millisecond the worker pool (16 on two
// cores) capped a SYNC_FLUSH broker at about sixteen sends per flush
// whatever the producers had in flight, and pulls, heartbeats and offset
// commits queued behind them. The goroutines belong to the broker's wait
// group and are started by workers only, which have all returned before
// Shutdown waits for it (as admitted's).
func (b *Broker) offWorker(conn *remoting.Conn, req *remoting.Command, serve func(ctx context.Context) *remoting.Command) *remoting.Command {
	if b.shutdown.Load() {
		return serve(conn.Context())
	}
	weight := int64(len(req.Body) + durableWaitOverhead)
	if !b.durableWaits.TryAcquire(weight) {
		return serve(conn.Context())
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer b.durableWaits.Release(weight)
		conn.ServeFunc(req, func() *remoting.Command { return serve(conn.Context()) })
	}()
	return nil
}

// durable waits until the records of res are flushed (SYNC_FLUSH) and
// held by enough slaves (SYNC_MASTER), setting the status a put that
// waited would have: FLUSH_DISK_TIMEOUT when the flush is late,
// FLUSH_SLAVE_TIMEOUT when the slaves are (whatever the flush did).
//
// Both timeouts count from the call, as RocketMQ's put starts the flush
// and the replication waits together and combines them: the answer comes
// within the longer of syncFlushTimeout and slaveTimeout, not their sum,
// and slaves that take the records only after slaveTimeout are late even
// when the flush took longer. The slaves' wait comes first: it ends when
// they acknowledge or at its deadline, and the flush's wait that follows
// keeps the deadline it had at the call.
func (b *Broker) durable(ctx context.Context, res commitlog.AppendResult) commitlog.AppendResult {
	end := res.PhyOffset + res.WroteBytes
	fctx := ctx
	if b.slaveAcks() > 0 && b.cfg.FlushDiskType == configs.SyncFlush {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, b.cfg.SyncFlushTimeout)
		defer cancel()
	}
	replicated := b.replicated(ctx, end)
	if !b.clog.WaitFlushed(fctx, end) {
		res.Status = commitlog.FlushDiskTimeout
	}
	if !replicated {
		res.Status = commitlog.FlushSlaveTimeout
	}
	return res
}

// maxClientWaits is how many requests may wait on a client's answer at
// once (waitsOnClient); more are answered SYSTEM_BUSY.
const maxClientWaits = 1024

// waitsOnClient runs a handler that waits on a client's answer (relays
// of GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY to a
// consumer, the consumer status asked of a group, a reply pushed to its
// requester) off the worker that received the request. Such a wait lasts
// up to 10 s when the client hangs or pauses: on the workers, a dashboard
// polling a hung consumer's running info took them all, and every send,
// pull and heartbeat of every other client waited behind it. RocketMQ
// runs these on its admin and reply thread pools, apart from sends and
// pulls. Beyond maxClientWaits the request is answered SYSTEM_BUSY. The
// goroutines belong to the broker's wait group, started by workers only
// (as offWorker's).
func (b *Broker) waitsOnClient(process remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		if b.shutdown.Load() {
			return process(ctx, conn, req)
		}
		select {
		case b.clientWaits <- struct{}{}:
		default:
			b.busyLog.Warn().Int32("code", req.Code).Msg("request refused: too many requests wait on clients (sampled, at most one line a second)")
			return remoting.NewResponse(req, remoting.SystemBusy,
				fmt.Sprintf("[OVERLOAD] broker busy: %d requests already wait on clients' answers; retry", maxClientWaits))
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.clientWaits }()
			conn.ServeFunc(req, func() *remoting.Command { return process(conn.Context(), conn, req) })
		}()
		return nil
	}
}
