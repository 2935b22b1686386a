package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/remoting"
)

// ctlLink is what a controller-mode Broker shares with the Supervisor that
// runs it (nil on a broker outside controller mode). The Supervisor sets it
// between New and Start.
type ctlLink struct {
	// id is the broker id the controller gave the broker (the one it
	// registers with the name servers is 0 on a master).
	id int64
	// epochs is the broker's epoch file.
	epochs *autoswitch.EpochCache
	// notify takes the role a controller announced
	// (NOTIFY_BROKER_ROLE_CHANGED); it must not block.
	notify func(replicaState)
	// storesOpen is called by Start once the stores are open and
	// recovered, before the broker accepts a request: a new master notes
	// its epoch's start there.
	storesOpen func(b *Broker) error
	// syncSetSize is the size of the master's sync state set, itself
	// included (0 before the first): with allAckInSyncStateSet a send
	// waits for as many copies.
	syncSetSize atomic.Int32
}

// epochEntryCacheJSON is RocketMQ's EpochEntryCache (GET_BROKER_EPOCH_CACHE's
// body).
type epochEntryCacheJSON struct {
	ClusterName string                  `json:"clusterName"`
	BrokerName  string                  `json:"brokerName"`
	BrokerID    int64                   `json:"brokerId"`
	EpochList   []autoswitch.EpochEntry `json:"epochList"`
	MaxOffset   int64                   `json:"maxOffset"`
}

// processEpochCache answers GET_BROKER_EPOCH_CACHE as RocketMQ's
// AdminBrokerProcessor: the broker's epochs (each entry's end is the next
// one's start, the last one's Long.MAX_VALUE as RocketMQ leaves it) and
// its CommitLog's end; SYSTEM_ERROR outside controller mode.
func (b *Broker) processEpochCache(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.ctl == nil {
		return remoting.NewResponse(req, remoting.SystemError, "this request only for controllerMode ")
	}
	list := b.ctl.epochs.Entries()
	for i := range list {
		list[i].EndOffset = autoswitch.NoEnd
		if i+1 < len(list) {
			list[i].EndOffset = list[i+1].StartOffset
		}
	}
	body, err := json.Marshal(epochEntryCacheJSON{ClusterName: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName,
		BrokerID: b.cfg.BrokerID, EpochList: list, MaxOffset: b.clog.MaxOffset()})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("encode the epoch cache: %v", err))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// processRoleChanged takes NOTIFY_BROKER_ROLE_CHANGED from a controller:
// the group's master (id, address, epoch) and sync state set. The
// Supervisor applies it after the answer (a change of role restarts the
// broker). Outside controller mode the notice is answered and ignored, as
// RocketMQ's broker without a ReplicasManager does.
func (b *Broker) processRoleChanged(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.ctl == nil {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	st := replicaFromHeader(remoting.Header(req.ExtFields))
	if len(req.Body) > 0 {
		var body syncStateSetBody
		if err := json.Unmarshal(req.Body, &body); err != nil {
			b.log.Warn().Err(err).Stringer("conn", conn).Msg("role change notice: the sync state set does not parse")
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("decode the sync state set: %v", err))
		}
		st.SyncStateSet = body.SyncStateSet
		if body.SyncStateSetEpoch != 0 {
			st.SyncEpoch = body.SyncStateSetEpoch
		}
	}
	b.log.Info().Stringer("conn", conn).Int64("masterBrokerId", st.MasterID).Str("masterAddress", st.MasterAddr).
		Int32("masterEpoch", st.MasterEpoch).Ints64("syncStateSet", st.SyncStateSet).Msg("controller: role change notice")
	b.ctl.notify(st)
	return remoting.NewResponse(req, remoting.Success, "")
}

// processExchangeHAInfo answers EXCHANGE_BROKER_HA_INFO as RocketMQ's
// AdminBrokerProcessor: a request that names a master's HA address makes a
// slave follow it (and its Remoting address); one that does not is asked
// of a master (brokerId 0), which answers its HA address, its CommitLog's
// end at start (masterFlushOffset) and its address.
func (b *Broker) processExchangeHAInfo(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	resp := remoting.NewResponse(req, remoting.Success, "")
	if ha := h.OptString("masterHaAddress", ""); h.Has("masterHaAddress") {
		if b.isSlave() {
			b.repl.masterHA.Store(&ha)
			if a := h.OptString("masterAddress", ""); a != "" {
				b.repl.masterAddr.Store(&a)
			}
			b.log.Info().Stringer("conn", conn).Str("masterHA", ha).Msg("master's HA address from EXCHANGE_BROKER_HA_INFO")
		}
		return resp
	}
	if b.cfg.BrokerID == 0 {
		resp.ExtFields = map[string]string{
			"masterHaAddress":   b.haServerAddr(),
			"masterFlushOffset": strconv.FormatInt(b.initMaxOffset, 10),
			"masterAddress":     b.Addr(),
		}
	}
	return resp
}
