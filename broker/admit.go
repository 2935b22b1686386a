package broker

import (
	"context"
	"fmt"

	"github.com/rocketkv/rocketkv/remoting"
)

// maxAdmitWaiters bounds the sends waiting for dispatch at once; past it a
// send is answered SYSTEM_BUSY without waiting.
const maxAdmitWaiters = 4096

// admitted wraps a processor that appends a client's messages (sends,
// consumer send-back) with flow control. While the index is within
// maxDispatchLagBytes of the CommitLog the processor runs on the worker as
// before. When it is further behind, the request waits for dispatch on a
// goroutine of its own, for at most waitTimeMillsInSendQueue, and is then
// processed or answered SYSTEM_BUSY (nothing stored): a waiting send never
// holds one of the workers that pulls, heartbeats and offset commits share.
// Internal writers (revive, timer delivery) are not wrapped.
//
// The goroutines belong to the broker's wait group: they are started by
// workers only, which have all returned before Shutdown waits for it.
func (b *Broker) admitted(process remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		if !b.disp.Behind() {
			return process(ctx, conn, req)
		}
		if b.shutdown.Load() {
			// No new goroutines once Shutdown may be waiting for them.
			return remoting.NewResponse(req, remoting.ServiceNotAvailable, "the broker is shutting down")
		}
		select {
		case b.admitSlots <- struct{}{}:
		default:
			b.busyLog.Warn().Int32("code", req.Code).Int64("lag", b.disp.Lag()).Msg("send refused: flow control, too many sends waiting (sampled, at most one line a second)")
			return remoting.NewResponse(req, remoting.SystemBusy,
				fmt.Sprintf("[DISPATCH_BEHIND] broker busy: %d sends already wait for the index; retry", cap(b.admitSlots)))
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.admitSlots }()
			conn.ServeFunc(req, func() *remoting.Command {
				if err := b.disp.Admit(conn.Context(), b.cfg.WaitTimeMillsInSendQueue); err != nil {
					b.busyLog.Warn().Err(err).Int32("code", req.Code).Msg("send refused: flow control (sampled, at most one line a second)")
					return remoting.NewResponse(req, appendErrorCode(err), "[DISPATCH_BEHIND] broker busy: "+err.Error()+"; retry")
				}
				return process(conn.Context(), conn, req)
			})
		}()
		return nil
	}
}
