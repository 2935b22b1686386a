package controller

import (
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// BrokerIdentity names one broker: its cluster, group and id.
type BrokerIdentity struct {
	Cluster    string
	BrokerName string
	BrokerID   int64
}

// LiveInfo is what the controller knows of a broker from its heartbeats
// (RocketMQ's BrokerLiveInfo). It is local to each controller (brokers
// send heartbeats to every controller) and never replicated.
type LiveInfo struct {
	BrokerName string
	BrokerAddr string
	BrokerID   int64
	// LastUpdate is when the last heartbeat came.
	LastUpdate time.Time
	// Timeout is how long the broker counts as alive after a heartbeat.
	Timeout time.Duration
	// Epoch and MaxOffset are the last epoch and CommitLog end the broker
	// reported; they only move forward (a newer epoch, or a larger offset
	// in the same epoch), ConfirmOffset with them.
	Epoch         int32
	MaxOffset     int64
	ConfirmOffset int64
	// ElectionPriority: lower is preferred among equals.
	ElectionPriority int32
	// conn is the connection the heartbeats came on; closing it makes the
	// broker inactive at once.
	conn *remoting.Conn
}

// alive reports whether the broker's last heartbeat is recent enough at now.
func (l *LiveInfo) alive(now time.Time) bool { return !now.After(l.LastUpdate.Add(l.Timeout)) }

// heartbeats is the broker live table (RocketMQ's
// DefaultBrokerHeartbeatManager). Safe for concurrent use.
type heartbeats struct {
	now func() time.Time
	mu  sync.Mutex
	// live is guarded by mu.
	live map[BrokerIdentity]*LiveInfo
}

func newHeartbeats(now func() time.Time) *heartbeats {
	return &heartbeats{now: now, live: map[BrokerIdentity]*LiveInfo{}}
}

// onHeartbeat records a heartbeat; it reports whether the broker was new
// to the table (conn then needs its close hook).
func (h *heartbeats) onHeartbeat(hb HeartbeatHeader, conn *remoting.Conn) bool {
	id := BrokerIdentity{Cluster: hb.ClusterName, BrokerName: hb.BrokerName, BrokerID: hb.BrokerID}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, ok := h.live[id]
	if !ok {
		h.live[id] = &LiveInfo{
			BrokerName: hb.BrokerName, BrokerAddr: hb.BrokerAddr, BrokerID: hb.BrokerID,
			LastUpdate: now, Timeout: hb.HeartbeatTimeout, Epoch: hb.Epoch, MaxOffset: hb.MaxOffset,
			ConfirmOffset: hb.ConfirmOffset, ElectionPriority: hb.ElectionPriority, conn: conn,
		}
		return true
	}
	prev.LastUpdate = now
	prev.Timeout = hb.HeartbeatTimeout
	prev.ElectionPriority = hb.ElectionPriority
	if hb.Epoch > prev.Epoch || hb.Epoch == prev.Epoch && hb.MaxOffset > prev.MaxOffset {
		prev.Epoch, prev.MaxOffset, prev.ConfirmOffset = hb.Epoch, hb.MaxOffset, hb.ConfirmOffset
	}
	if prev.conn != conn {
		prev.conn = conn
		return true
	}
	return false
}

// isActive reports whether the broker's heartbeats are current.
func (h *heartbeats) isActive(cluster, brokerName string, id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.live[BrokerIdentity{cluster, brokerName, id}]
	return ok && l.alive(h.now())
}

// get returns a copy of the broker's live info.
func (h *heartbeats) get(cluster, brokerName string, id int64) (LiveInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.live[BrokerIdentity{cluster, brokerName, id}]
	if !ok {
		return LiveInfo{}, false
	}
	return *l, true
}

// expire removes the brokers whose heartbeats stopped and returns them,
// with their connections for the caller to close.
func (h *heartbeats) expire() ([]BrokerIdentity, []*remoting.Conn) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var gone []BrokerIdentity
	var conns []*remoting.Conn
	for id, l := range h.live {
		if !l.alive(now) {
			delete(h.live, id)
			gone = append(gone, id)
			if l.conn != nil {
				conns = append(conns, l.conn)
			}
		}
	}
	return gone, conns
}

// connClosed removes the brokers whose heartbeats came on conn and
// returns them.
func (h *heartbeats) connClosed(conn *remoting.Conn) []BrokerIdentity {
	h.mu.Lock()
	defer h.mu.Unlock()
	var gone []BrokerIdentity
	for id, l := range h.live {
		if l.conn == conn {
			delete(h.live, id)
			gone = append(gone, id)
		}
	}
	return gone
}
