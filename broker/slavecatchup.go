package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/remoting"
)

// slaveCatchUp reports a slave's indexing of a long stretch of its
// master's CommitLog, as catchUpDispatch reports a start's: a slave that
// was disconnected from its master for long (or started long after it)
// receives the master's tail over the HA port and indexes it while it
// serves, and without a word from it an operator cannot tell it from a
// slave that is stuck, nor say when it will have caught up.
//
// The classic HA protocol does not carry the master's end, so once per HA
// connection the slave asks its master for it (commitLogMaxOffset of
// GET_BROKER_RUNTIME_INFO, which Apache RocketMQ's masters answer too);
// the AutoSwitch one's handshake does (a controller-mode slave).
// When it is more than catchUpReportFrom past the replica's end when the
// connection opened, the slave logs that it began, then every
// catchUpLogEvery how much of that stretch it has indexed, the share,
// the rate since the connection opened and the time left at that rate,
// and once its dispatcher reaches the master's end as asked, that it
// ended. The stretch is the one asked at the start: what the master
// appends meanwhile is not counted, as the start's report counts the
// tail the log had when it began.
//
// Goroutines: run's caller owns the one goroutine (Broker.goBackground)
// and stops it through its context; step is only called from it.
type slaveCatchUp struct {
	// from is the stretch past which a catch-up is reported.
	from int64
	// status is the HA client's, dispatched the dispatcher's progress,
	// minOffset the replica's first offset.
	status     func() ha.ClientStatus
	dispatched func() int64
	minOffset  func() int64
	// masterEnd asks the master for the end of its CommitLog.
	masterEnd func(ctx context.Context) (int64, error)
	log       zerolog.Logger

	// asked is the ConnectedAt of the connection the master's end was
	// asked for; active is the catch-up under way (nil when none).
	asked  time.Time
	active *dispatchProgress
}

// run calls step every interval until ctx ends.
func (c *slaveCatchUp) run(ctx context.Context, every time.Duration) {
	periodic.Run(ctx, every, func(ctx context.Context) { c.step(ctx, time.Now()) })
}

// step looks at the slave at now: it asks the master's end once per new
// HA connection, begins a report when the stretch to index is long, and
// logs the progress of the one under way, or its end.
func (c *slaveCatchUp) step(ctx context.Context, now time.Time) {
	if c.active == nil {
		st := c.status()
		if !st.Connected || st.ConnectedAt.IsZero() || st.ConnectedAt.Equal(c.asked) {
			return
		}
		from := st.ConnectedFrom
		if from == 0 {
			// An empty replica: the master starts it at its newest
			// segment, which the replica's first offset says once
			// something came.
			if c.dispatched() == 0 {
				return
			}
			from = c.minOffset()
		}
		end, err := c.masterEnd(ctx)
		if err != nil {
			c.log.Debug().Err(err).Msg("ask the master for its CommitLog end (tried again in a while)")
			return
		}
		c.asked = st.ConnectedAt
		if end-from <= c.from {
			return
		}
		c.active = &dispatchProgress{from: from, to: end, began: st.ConnectedAt}
		c.log.Info().Int64("tailBytes", end-from).Int64("from", from).Int64("masterEnd", end).
			Msg("indexing the master's CommitLog tail while serving")
	}
	p := *c.active
	d := c.dispatched()
	if d >= p.to {
		p.event(c.log.Info(), d, now).Msg("indexed the master's CommitLog tail")
		c.active = nil
		return
	}
	p.event(c.log.Info(), d, now).Msg("indexing the master's CommitLog tail")
}

// startSlaveCatchUp starts a slave's catch-up reports (slaveCatchUp)
// from the status of its HA client, the classic protocol's or
// (autoSwitchStatus) the AutoSwitch one's, asking the master's end with
// masterEnd.
func (b *Broker) startSlaveCatchUp(status func() ha.ClientStatus, masterEnd func(context.Context) (int64, error)) {
	from := int64(catchUpReportFrom)
	if b.catchUpFrom > 0 {
		from = b.catchUpFrom
	}
	every := catchUpLogEvery
	if b.catchUpEvery > 0 {
		every = b.catchUpEvery
	}
	c := &slaveCatchUp{
		from:       from,
		status:     status,
		dispatched: b.disp.Dispatched,
		minOffset:  b.clog.MinOffset,
		masterEnd:  masterEnd,
		log:        b.log,
	}
	b.goBackground("slave-catch-up", func(ctx context.Context) { c.run(ctx, every) })
}

// autoSwitchStatus is an AutoSwitch client's status as the catch-up
// report reads a classic one's: connected once the handshake is done
// (the transfers begin at the replica's end then, after any cut of the
// epoch file), from the replica's end at that moment.
func autoSwitchStatus(c *autoswitch.Client) func() ha.ClientStatus {
	return func() ha.ClientStatus {
		st := c.Status()
		return ha.ClientStatus{Master: st.Master, Connected: st.State == autoswitch.StateTransfer,
			LastRead: st.LastRead, LastWrite: st.LastWrite, BytesPerSecond: st.BytesPerSecond,
			ConnectedAt: st.TransferAt, ConnectedFrom: st.TransferFrom}
	}
}

// autoSwitchMasterEnd is the master's CommitLog end an AutoSwitch
// client's last handshake told: the protocol carries it, so the master
// is not asked.
func autoSwitchMasterEnd(c *autoswitch.Client) func(context.Context) (int64, error) {
	return func(context.Context) (int64, error) { return c.Status().MasterEnd, nil }
}

// askMasterEnd asks the master for the end of its CommitLog
// (commitLogMaxOffset of GET_BROKER_RUNTIME_INFO).
func (b *Broker) askMasterEnd(ctx context.Context) (int64, error) {
	addr := b.masterAddr()
	if addr == "" {
		return 0, fmt.Errorf("no master known")
	}
	c, err := b.masterConn(ctx, addr)
	if err != nil {
		return 0, err
	}
	resp, err := invokeMaster(ctx, c, remoting.GetBrokerRuntimeInfo, nil)
	if err != nil {
		return 0, fmt.Errorf("runtime info of master %s: %w", addr, err)
	}
	table, err := adminbody.DecodeKVTable(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("runtime info of master %s: %w", addr, err)
	}
	end, err := strconv.ParseInt(table["commitLogMaxOffset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("runtime info of master %s: commitLogMaxOffset: %w", addr, err)
	}
	return end, nil
}
