package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/rocketkv/rocketkv/remoting"
)

// FirstBrokerID is the id the controller hands to the first broker of a
// group (RocketMQ's MixAll.FIRST_BROKER_CONTROLLER_ID); ids grow from it.
const FirstBrokerID int64 = 1

// Replica is one broker of a group as the controller knows it.
type Replica struct {
	// Addr is the broker's "ip:port" (the part of its registerCheckCode
	// before ';', then whatever CONTROLLER_REGISTER_BROKER reported).
	Addr string `json:"addr"`
	// CheckCode is the registerCheckCode the broker applied for its id
	// with ("addr;timestamp"); the same broker re-applying with it keeps
	// its id.
	CheckCode string `json:"checkCode"`
}

// Replicas is a broker group's membership: RocketMQ's BrokerReplicaInfo.
type Replicas struct {
	// Cluster is the cluster the group registered under.
	Cluster string `json:"cluster"`
	// BrokerName names the group.
	BrokerName string `json:"brokerName"`
	// NextBrokerID is the id CONTROLLER_GET_NEXT_BROKER_ID proposes; it
	// grows by one with every id applied.
	NextBrokerID int64 `json:"nextBrokerId"`
	// Brokers maps broker id to the broker.
	Brokers map[int64]Replica `json:"brokers"`
}

// SyncState is a broker group's master and in-sync replicas: RocketMQ's
// SyncStateInfo.
type SyncState struct {
	// Cluster is the cluster the group registered under.
	Cluster string `json:"cluster"`
	// BrokerName names the group.
	BrokerName string `json:"brokerName"`
	// MasterEpoch grows by one with every election, also one that left
	// the group without a master; 0 means no master was ever elected.
	MasterEpoch int32 `json:"masterEpoch"`
	// SyncStateSetEpoch grows by one with every change of SyncStateSet.
	SyncStateSetEpoch int32 `json:"syncStateSetEpoch"`
	// SyncStateSet holds the ids of the replicas in sync with the master
	// (the master included), ascending.
	SyncStateSet []int64 `json:"syncStateSet"`
	// HasMaster says whether MasterID names a master.
	HasMaster bool `json:"hasMaster"`
	// MasterID is the master's broker id when HasMaster.
	MasterID int64 `json:"masterId"`
}

// State is everything the controller replicates: per broker name (RocketMQ
// keys both tables by broker name alone) the membership and the sync state.
// The two tables can disagree after a CLEAN_BROKER_DATA of some ids, as in
// RocketMQ; a group counts as known only when it is in both.
type State struct {
	// Replicas maps broker name to its membership.
	Replicas map[string]*Replicas `json:"replicas"`
	// SyncStates maps broker name to its master and sync state set.
	SyncStates map[string]*SyncState `json:"syncStates"`
}

// NewState returns an empty State.
func NewState() *State {
	return &State{Replicas: map[string]*Replicas{}, SyncStates: map[string]*SyncState{}}
}

// known reports whether both tables hold brokerName (RocketMQ's
// isContainsBroker).
func (s *State) known(brokerName string) bool {
	_, r := s.Replicas[brokerName]
	_, ss := s.SyncStates[brokerName]
	return r && ss
}

// clone returns a deep copy of s.
func (s *State) clone() *State {
	out := NewState()
	for name, r := range s.Replicas {
		c := *r
		c.Brokers = maps.Clone(r.Brokers)
		out.Replicas[name] = &c
	}
	for name, ss := range s.SyncStates {
		c := *ss
		c.SyncStateSet = slices.Clone(ss.SyncStateSet)
		out.SyncStates[name] = &c
	}
	return out
}

// inSync reports whether id is in the group's sync state set.
func (ss *SyncState) inSync(id int64) bool { return slices.Contains(ss.SyncStateSet, id) }

// EventType names a state change.
type EventType string

// The state changes, RocketMQ's EventType values.
const (
	// EventAlterSyncStateSet replaces a group's sync state set and bumps
	// its epoch.
	EventAlterSyncStateSet EventType = "ALTER_SYNC_STATE_SET_EVENT"
	// EventApplyBrokerID adds a broker id to a group, creating the group
	// on its first id.
	EventApplyBrokerID EventType = "APPLY_BROKER_ID_EVENT"
	// EventElectMaster records a new master (the sync state set becomes
	// just it) or, with NewMasterElected false, that the group lost its
	// master; either bumps the master epoch.
	EventElectMaster EventType = "ELECT_MASTER_EVENT"
	// EventCleanBrokerData forgets a group, or some of its ids.
	EventCleanBrokerData EventType = "CLEAN_BROKER_DATA_EVENT"
	// EventUpdateBrokerAddress changes the address of a known broker id.
	EventUpdateBrokerAddress EventType = "UPDATE_BROKER_ADDRESS"
)

// Event is one state change, as it travels in the replicated log (JSON).
// Which fields count depends on Type.
type Event struct {
	// Type says which change this is.
	Type EventType `json:"type"`
	// Cluster is the group's cluster (apply and address update).
	Cluster string `json:"cluster,omitempty"`
	// BrokerName names the group; every event has one.
	BrokerName string `json:"brokerName"`
	// BrokerID is the id applied for, elected or readdressed.
	BrokerID int64 `json:"brokerId,omitempty"`
	// Addr is the broker address of an apply or an address update.
	Addr string `json:"addr,omitempty"`
	// CheckCode is the registerCheckCode of an apply.
	CheckCode string `json:"checkCode,omitempty"`
	// NewMasterElected is false for an election that found no master.
	NewMasterElected bool `json:"newMasterElected,omitempty"`
	// SyncStateSet is the new set of an alter.
	SyncStateSet []int64 `json:"syncStateSet,omitempty"`
	// BrokerIDs are the ids a clean removes; empty removes the group.
	BrokerIDs []int64 `json:"brokerIds,omitempty"`
	// Expect is the group as an alter or an election was checked against
	// (nil in log entries written before it was recorded): Apply refuses
	// the event when the group moved on meanwhile.
	Expect *Expect `json:"expect,omitempty"`
}

// Expect is what an alter or an election expects of its group when it is
// applied. An alter: the master, master epoch and sync state set epoch of
// its request. An election: the master and sync state set epochs it ran
// against.
type Expect struct {
	// MasterID is the master an alter was asked by.
	MasterID int64 `json:"masterId,omitempty"`
	// MasterEpoch is the group's master epoch.
	MasterEpoch int32 `json:"masterEpoch"`
	// SyncStateSetEpoch is the group's sync state set epoch.
	SyncStateSetEpoch int32 `json:"syncStateSetEpoch"`
}

// encodeEvent returns the log entry of e.
func encodeEvent(e *Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	return b, nil
}

// decodeEvent reads a log entry written by encodeEvent.
func decodeEvent(data []byte) (*Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decode controller event: %w", err)
	}
	if e.BrokerName == "" {
		return nil, fmt.Errorf("decode controller event %s: no broker name", e.Type)
	}
	return &e, nil
}

// Rejection is an event State.Apply refused because the state it lands on
// is not the one its request was checked against: the event changes
// nothing, and the request is answered with Code and Remark, what
// RocketMQ's check answers against that state. The checks and the log are
// serialized on the leader, so this happens only when an event committed
// after its request had been answered with a failure (a raft apply that
// timed out, say) and a later request was checked without it.
type Rejection struct {
	// Code is the response code (RocketMQ's ResponseCode).
	Code int32
	// Remark is the response remark.
	Remark string
}

// Error describes the refusal.
func (r *Rejection) Error() string {
	return fmt.Sprintf("event refused (code %d): %s", r.Code, r.Remark)
}

func reject(code int32, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Remark: fmt.Sprintf(format, args...)}
}

// Apply changes s by e, as RocketMQ's ReplicasInfoManager.applyEvent does,
// after checking e against s again as its request was checked (the checks
// that depend on the state alone; liveness is not in the state). An event
// the state no longer admits changes nothing and comes back as a
// *Rejection; so does an event about a group s does not know. Events that
// carry no Expect (log entries written before it was recorded) are checked
// only by what they carry themselves.
func (s *State) Apply(e *Event) *Rejection {
	switch e.Type {
	case EventAlterSyncStateSet:
		if e.Expect != nil {
			set := SyncStateSetBody{SyncStateSet: e.SyncStateSet, SyncStateSetEpoch: e.Expect.SyncStateSetEpoch}
			if r := alterRefusal(s, e.BrokerName, e.Expect.MasterID, e.Expect.MasterEpoch, set, nil); r != nil {
				return r
			}
		} else if !s.known(e.BrokerName) {
			return reject(remoting.ControllerAlterSyncStateSetFailed, "Broker metadata is not existed")
		}
		ss := s.SyncStates[e.BrokerName]
		ss.SyncStateSet = sortedIDs(e.SyncStateSet)
		ss.SyncStateSetEpoch++
	case EventApplyBrokerID:
		if r := applyIDRefusal(s, e.BrokerName, e.BrokerID, e.CheckCode); r != nil {
			return r
		}
		if s.known(e.BrokerName) {
			r := s.Replicas[e.BrokerName]
			if _, ok := r.Brokers[e.BrokerID]; !ok {
				r.Brokers[e.BrokerID] = Replica{Addr: e.Addr, CheckCode: e.CheckCode}
				r.NextBrokerID++
			}
			return nil
		}
		s.Replicas[e.BrokerName] = &Replicas{
			Cluster:      e.Cluster,
			BrokerName:   e.BrokerName,
			NextBrokerID: FirstBrokerID + 1,
			Brokers:      map[int64]Replica{e.BrokerID: {Addr: e.Addr, CheckCode: e.CheckCode}},
		}
		s.SyncStates[e.BrokerName] = &SyncState{Cluster: e.Cluster, BrokerName: e.BrokerName, SyncStateSet: []int64{}}
	case EventElectMaster:
		if !s.known(e.BrokerName) {
			return reject(remoting.ControllerBrokerNeedToBeRegistered, "Broker hasn't been registered")
		}
		ss := s.SyncStates[e.BrokerName]
		if x := e.Expect; x != nil && (ss.MasterEpoch != x.MasterEpoch || ss.SyncStateSetEpoch != x.SyncStateSetEpoch) {
			return reject(remoting.ControllerElectMasterFailed,
				"Failed to elect a new master: the election ran at master epoch %d, sync state set epoch %d; the group is at %d, %d",
				x.MasterEpoch, x.SyncStateSetEpoch, ss.MasterEpoch, ss.SyncStateSetEpoch)
		}
		ss.MasterEpoch++
		if e.NewMasterElected {
			ss.HasMaster, ss.MasterID = true, e.BrokerID
			ss.SyncStateSet = []int64{e.BrokerID}
			ss.SyncStateSetEpoch++
		} else {
			ss.HasMaster, ss.MasterID = false, 0
		}
	case EventCleanBrokerData:
		if !s.known(e.BrokerName) {
			return reject(remoting.ControllerInvalidCleanBrokerMetadata, "Broker %s is not existed,clean broker data failure.", e.BrokerName)
		}
		if len(e.BrokerIDs) == 0 {
			delete(s.Replicas, e.BrokerName)
			delete(s.SyncStates, e.BrokerName)
			return nil
		}
		r, ss := s.Replicas[e.BrokerName], s.SyncStates[e.BrokerName]
		for _, id := range e.BrokerIDs {
			delete(r.Brokers, id)
			ss.SyncStateSet = slices.DeleteFunc(ss.SyncStateSet, func(x int64) bool { return x == id })
		}
		if len(r.Brokers) == 0 {
			delete(s.Replicas, e.BrokerName)
		}
		if len(ss.SyncStateSet) == 0 {
			delete(s.SyncStates, e.BrokerName)
		}
	case EventUpdateBrokerAddress:
		if r := registerRefusal(s, e.BrokerName, e.BrokerID); r != nil {
			return r
		}
		r := s.Replicas[e.BrokerName]
		b := r.Brokers[e.BrokerID]
		b.Addr = e.Addr
		r.Brokers[e.BrokerID] = b
	default:
		return reject(remoting.SystemError, "unknown controller event type %q", e.Type)
	}
	return nil
}

// sortedIDs returns a sorted copy of ids without duplicates.
func sortedIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// memberAddrs returns the group's broker id -> address table.
func (r *Replicas) memberAddrs() map[int64]string {
	m := make(map[int64]string, len(r.Brokers))
	for id, b := range r.Brokers {
		m[id] = b.Addr
	}
	return m
}

// addr returns the address of broker id, "" when unknown.
func (r *Replicas) addr(id int64) string { return r.Brokers[id].Addr }
